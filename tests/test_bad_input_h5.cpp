// Bad HDF5 input to the commands that read it (psi compare, psi report, psi oracle
// certify/explain) and to hdf5::StateReader: files that are not HDF5, truncated or missing,
// files that lack the datasets a command needs, carry another schema version, or hold
// datasets of the wrong shape or type. Each is refused with exit 2 and one stderr line naming
// the file and the thing.
#include <hdf5.h>
#include <sys/stat.h>

#include "engine/bf16.h"
#include "engine/sha256.h"
#include "experiments/trajectory_support.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "probes/recording.h"
#include "tests/recordings.h"
#include "tests/test_bad_input_support.h"

namespace hdf5 = psi::hdf5;
namespace rp = psi::hdf5;
using namespace psi::badinput;
using psi::Exit;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("hdf5"));
  return true;
}();

psi::Bf16Tensor bf16_tensor(const psi::Shape& s, float base) {
  psi::Bf16Tensor t(s);
  for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = psi::bf16_rne(base + float(i % 7) * 0.25f);
  return t;
}

psi::F32Tensor f32_tensor(const psi::Shape& s) {
  psi::F32Tensor t(s);
  for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = float(i) * 0.5f;
  return t;
}

rp::RunInfo run_info() {
  rp::RunInfo r;
  r.experiment = "one-token";
  r.model_config = "tiny/ltx25";
  r.backend = "cpu";
  r.device_name = "test";
  return r;
}

// A psi-h5/1 experiment report holding one tensor and `tables` as /report/tables.
fs::path report_file(const fs::path& p, const std::string& tables) {
  rp::StateWriter w(p, run_info());
  w.write("/states/x", bf16_tensor({2, 4}, 1.0f), {"dense", "[2, 4] test", "", {}});
  w.write_text("/report/tables", tables);
  w.commit();
  return p;
}

const std::string kGoodTables =
    R"([{"title":"t","columns":["a","b"],"rows":[["1","2"]],"notes":[]}])";

// A plain HDF5 file written through hdf5::File, filled by `fill`, with root attributes `root`.
fs::path plain_file(const fs::path& p, const std::function<void(hdf5::File&)>& fill, const hdf5::Attrs& root = {}) {
  auto f = hdf5::File::create(p);
  if (fill) fill(f);
  if (!root.empty()) f.set_attrs("/", root);
  f.commit();
  return p;
}

// A dataset of a type psi does not read (int32), written with the C API.
void write_i32(hdf5::File& f, const std::string& path, hsize_t n) {
  std::vector<std::int32_t> v(n, 7);
  hdf5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  hdf5::Handle d(H5Dcreate2(f.id(), path.c_str(), H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Dclose);
  H5Dwrite(d.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
}

// Files that are not (usable) HDF5 at all, each with the words its refusal must contain.
struct NotH5 {
  fs::path path;
  std::string mention;
  bool compare_reads = false;  // a file of another format psi compare and the oracle's operands read (safetensors)
};

std::vector<NotH5> not_hdf5_files(const fs::path& dir) {
  std::vector<NotH5> out;
  auto add = [&](const std::string& name, const std::string& bytes, const std::string& mention) {
    write_bytes(dir / name, bytes);
    out.push_back({dir / name, mention});
  };
  // psi compare's refusal names the other formats it reads too: "not an HDF5, NumPy .npy or ...".
  add("empty.h5", "", "not an HDF5");
  add("text.h5", "this is a text file, not HDF5\n", "not an HDF5");
  add("safetensors.h5", std::string("\x10\0\0\0\0\0\0\0{}              ", 24), "not an HDF5");
  out.back().compare_reads = true;
  add("signature_only.h5", "\x89HDF\r\n\x1a\n", "HDF5");
  const std::string good = slurp(report_file(dir / "good_for_cuts.h5", kGoodTables));
  for (std::size_t cut : {std::size_t(8), std::size_t(96), good.size() / 2, good.size() - 1})
    add("cut_" + std::to_string(cut) + ".h5", good.substr(0, cut), "HDF5");
  std::string garbage = "\x89HDF\r\n\x1a\n";
  for (int i = 0; i < 2000; ++i) garbage += char((i * 37 + 11) & 0xff);
  add("signature_then_garbage.h5", garbage, "HDF5");
  fs::remove(dir / "good_for_cuts.h5");
  out.push_back({dir / "missing.h5", "no such file"});
  fs::create_directories(dir / "a_directory.h5");
  out.push_back({dir / "a_directory.h5", "not a regular file"});
  // A fifo: nothing ever writes to it, so opening it for reading would block forever.
  if (::mkfifo((dir / "a_fifo.h5").c_str(), 0600) == 0) out.push_back({dir / "a_fifo.h5", "not a regular file"});
  return out;
}

}  // namespace

// StateReader and every reading command on every file that is not HDF5.
TEST(BadHdf5, NotHdf5IsRefusedEverywhere) {
  const fs::path dir = fresh_dir("h5_not");
  const fs::path good = report_file(dir / "good.h5", kGoodTables);
  for (const NotH5& f : not_hdf5_files(dir)) {
    const std::string p = f.path.string();
    expect_error([&] { rp::StateReader r(f.path); }, Exit::bad_input, {p + ": ", f.mention}, "StateReader " + p);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"report", p},
             {"compare", p, good.string()},
             {"compare", good.string(), p},
             {"oracle", "certify", "--file", p, "--x", "x", "--w", "w", "--y", "y"},
             {"oracle", "explain", "--file", p, "--probe", "probe_q", "--row", "0", "--col", "0"}})
      if (!f.compare_reads || args[0] == "report" || std::find(args.begin(), args.end(), "--probe") != args.end())
        expect_rejected(run_psi(args), args, Exit::bad_input, {p + ": ", f.mention});
      else if (args[0] == "oracle")  // read as the safetensors file it is, which holds no tensor x
        expect_rejected(run_psi(args), args, Exit::bad_input, {p + ":/x: no such tensor for x (the file's tensors: none)"});
  }
}

// HDF5 files psi does not accept as reports: no or another schema, no tables, tables that are
// not what psi writes.
TEST(BadHdf5, ReportRefusesFilesThatAreNotItsReports) {
  const fs::path dir = fresh_dir("h5_report");
  struct Bad {
    fs::path path;
    std::vector<std::string> mentions;
  };
  std::vector<Bad> bad;
  auto x = [](hdf5::File& f) { f.write_f32("/x", f32_tensor({4}), {}); };
  bad.push_back({plain_file(dir / "no_schema.h5", x), {"not a psi file: no root attribute 'schema'"}});
  bad.push_back({plain_file(dir / "schema_v2.h5", x, {{"schema", std::string("psi-h5/2")}}),
                 {"schema 'psi-h5/2' is not supported", "psi-h5/1"}});
  bad.push_back({plain_file(dir / "schema_v0.h5", x, {{"schema", std::string("psi-h5/0")}}), {"schema 'psi-h5/0'"}});
  bad.push_back({plain_file(dir / "schema_int.h5", x, {{"schema", std::int64_t(1)}}), {"(not a string)"}});
  bad.push_back({plain_file(dir / "recording_v2.h5", x, {{"format", std::string("record_official/2")}}),
                 {"recording format 'record_official/2' is not supported"}});
  bad.push_back({plain_file(dir / "no_tables.h5", x, {{"schema", std::string("psi-h5/1")}}),
                 {"not a psi experiment report (no /report/tables)"}});
  bad.push_back({plain_file(dir / "tables_f32.h5",
                            [](hdf5::File& f) { f.write_f32("/report/tables", f32_tensor({4}), {}); },
                            {{"schema", std::string("psi-h5/1")}}),
                 {"/report/tables", "expected uint8, found float32"}});
  bad.push_back({plain_file(dir / "tables_group.h5", [](hdf5::File& f) { f.ensure_group("/report/tables/inner"); },
                            {{"schema", std::string("psi-h5/1")}}),
                 {"/report/tables", "not a dataset"}});
  bad.push_back({report_file(dir / "tables_not_json.h5", "[{\"title\": "), {"/report/tables: malformed JSON"}});
  bad.push_back({report_file(dir / "tables_binary.h5", std::string("\0\xff\xfe", 3)), {"/report/tables: malformed JSON"}});
  // An object's values would pass for tables one by one.
  bad.push_back({report_file(dir / "tables_object.h5", R"({"t": )" + kGoodTables.substr(1, kGoodTables.size() - 2) + "}"),
                 {"/report/tables: a JSON object, not the list of tables psi writes"}});
  for (const Bad& b : bad) {
    std::vector<std::string> m = b.mentions;
    m.push_back(b.path.string() + ":");
    const std::vector<std::string> args{"report", b.path.string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, m);
  }
  // The control: the same writer with well-formed tables renders.
  const fs::path good = report_file(dir / "good.h5", kGoodTables);
  const PsiRun r = run_psi({"report", good.string(), "--format", "csv"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("a,b\n1,2\n"), std::string::npos) << r.out;
  const std::vector<std::string> args{"report", good.string(), "--format", "yaml"};
  expect_rejected(run_psi(args), args, Exit::bad_input, {"unknown format 'yaml'"});
}

// psi compare on files that disagree about a dataset: each bad pair gives exit 2 and one
// stderr line naming both files, the dataset and the reason (the table still goes to stdout).
TEST(BadHdf5, CompareRefusesInconsistentDatasets) {
  const fs::path dir = fresh_dir("h5_compare");
  const fs::path a = plain_file(dir / "a.h5", [](hdf5::File& f) {
    f.write_f32("/x", f32_tensor({4}), {});
    f.write_bf16("/y", bf16_tensor({2, 3}, 0.5f), {});
  });
  struct Bad {
    std::string name;
    std::function<void(hdf5::File&)> fill;
    std::string mention;
  };
  const std::vector<Bad> bad = {
      {"dtype", [](hdf5::File& f) { f.write_f64("/x", psi::F64Tensor({4}), {}); }, "dtype_mismatch: dtype float32 in A vs float64"},
      {"bf16", [](hdf5::File& f) { f.write_bf16("/x", bf16_tensor({4}, 1.0f), {}); }, "dtype float32 in A vs bfloat16 in B"},
      {"int32", [](hdf5::File& f) { write_i32(f, "/x", 4); }, "unsupported: element type not supported"},
      {"full_shape_malformed", [](hdf5::File& f) { f.write_f32("/x", f32_tensor({4}), {{"full_shape", std::string("[4,")}}); },
       "full_shape"},
      {"stored_malformed", [](hdf5::File& f) { f.write_f32("/x", f32_tensor({4}), {{"stored", std::string("some rows")}}); },
       "stored"},
      {"stored_outside",
       [](hdf5::File& f) {
         f.write_f32("/x", f32_tensor({4}), {{"full_shape", std::string("[4]")}, {"stored", std::string("rows_2_to_5_of_axis_0")}});
       },
       "lies outside full_shape [4]"},
      {"stored_vs_dataset",
       [](hdf5::File& f) {
         f.write_f32("/x", f32_tensor({4}), {{"full_shape", std::string("[8]")}, {"stored", std::string("rows_0_to_1_of_axis_0")}});
       },
       "stored shape [4] does not match stored='rows_0_to_1_of_axis_0' of full_shape [8]"},
  };
  for (const Bad& b : bad) {
    const fs::path p = plain_file(dir / (b.name + ".h5"), b.fill);
    const std::vector<std::string> args{"compare", a.string(), p.string(), "--only", "^/x$"};
    expect_rejected(run_psi(args), args, Exit::bad_input, {a.string() + ":/x", p.string() + ":/x", b.mention});
  }
  for (const auto& args : std::vector<std::vector<std::string>>{{"compare", a.string(), a.string(), "--only", "(["},
                                                               {"compare", a.string(), a.string(), "--map", "nothing"},
                                                               {"compare", a.string(), a.string(), "--map", "=/x"}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {args.back()});
}

// psi oracle on operand files that lack a dataset, hold the wrong type or shapes, or name a
// probe group that is not there.
TEST(BadHdf5, OracleRefusesBadOperands) {
  const fs::path dir = fresh_dir("h5_oracle");
  auto operands = [&](const std::string& name, const psi::Shape& xs, const psi::Shape& ws, const psi::Shape& bs,
                      const psi::Shape& ys, bool x_as_f32 = false) {
    // Each with its sha256_full: the oracle refuses operands it cannot check.
    const auto hashed = [](const psi::Bf16Tensor& t) { return hdf5::Attrs{{"sha256_full", psi::sha256_hex(t)}}; };
    return plain_file(dir / name, [&](hdf5::File& f) {
      if (x_as_f32) {
        psi::F32Tensor x = f32_tensor(xs);
        for (float& v : x.data) v += 0x1p-10f;  // [0, 0] is a BF16 value, [0, 1] is not
        f.write_f32("/x", x, {{"sha256_full", psi::sha256_hex(x.ptr(), x.bytes())}});
      } else {
        f.write_bf16("/x", bf16_tensor(xs, 1.0f), hashed(bf16_tensor(xs, 1.0f)));
      }
      f.write_bf16("/w", bf16_tensor(ws, -0.5f), hashed(bf16_tensor(ws, -0.5f)));
      f.write_bf16("/b", bf16_tensor(bs, 0.25f), hashed(bf16_tensor(bs, 0.25f)));
      f.write_bf16("/y", bf16_tensor(ys, 2.0f), hashed(bf16_tensor(ys, 2.0f)));
    });
  };
  const std::string good = operands("good.h5", {2, 8}, {3, 8}, {3}, {2, 3}).string();
  struct Bad {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::string x_f32 = operands("x_f32.h5", {2, 8}, {3, 8}, {3}, {2, 3}, true).string();
  const std::string w_k = operands("w_k.h5", {2, 8}, {3, 7}, {3}, {2, 3}).string();
  const std::string b_n = operands("b_n.h5", {2, 8}, {3, 8}, {4}, {2, 3}).string();
  const std::string y_n = operands("y_n.h5", {2, 8}, {3, 8}, {3}, {2, 4}).string();
  const std::string x_k0 = operands("x_k0.h5", {2, 0}, {3, 0}, {3}, {2, 3}).string();
  const std::vector<Bad> bad = {
      {{"oracle", "certify", "--file", good, "--x", "nope", "--w", "w", "--y", "y"}, {good + ":/nope", "no such tensor for x (the file's tensors: /b, /w, /x, /y)"}},
      {{"oracle", "certify", "--file", good, "--x", "x", "--w", "w", "--y", "missing_y"}, {good + ":/missing_y"}},
      {{"oracle", "certify", "--file", x_f32, "--x", "x", "--w", "w", "--y", "y"}, {x_f32 + ":/x", "x element [0, 1] is 0.500976562 (float32 0x3f004000), not a BF16 value"}},
      {{"oracle", "certify", "--file", w_k, "--x", "x", "--w", "w", "--y", "y"}, {w_k, "W [3, 7] does not fit x [2, 8]"}},
      {{"oracle", "certify", "--file", b_n, "--x", "x", "--w", "w", "--b", "b", "--y", "y"}, {b_n, "bias [4]"}},
      {{"oracle", "certify", "--file", y_n, "--x", "x", "--w", "w", "--y", "y"}, {y_n + ":/y", "does not fit x"}},
      {{"oracle", "certify", "--file", x_k0, "--x", "x", "--w", "w", "--y", "y"}, {x_k0 + ":/x", "K >= 1"}},
      {{"oracle", "certify", "--file", good, "--x", "x", "--w", "w", "--y", "y", "--rows", "1:9"}, {"--rows 1:9"}},
      {{"oracle", "certify", "--file", good, "--x", "x", "--w", "w", "--y", "y", "--rows", "a:b"}, {"--rows 'a:b'"}},
      {{"oracle", "certify", "--file", good, "--probe", "no_such_probe"}, {good + ":", "no_such_probe", "no such probe group"}},
      {{"oracle", "certify", "--file", good, "--x", "x", "--w", "w"}, {"--y Y is required"}},
      {{"oracle", "explain", "--file", good, "--x", "x", "--w", "w", "--row", "0", "--col", "0", "--candidate", "gpu=3f80"},
       {"--candidate 'gpu=3f80'"}},
  };
  for (const Bad& b : bad) expect_rejected(run_psi(b.args), b.args, Exit::bad_input, b.mentions);
}

// Datasets that claim more elements than psi can hold. The first file is a fuzzer finding
// (fuzz_h5_report): a psi report whose contiguous /report/tables claims 8.4e14 bytes in a
// 12-kB file; psi report and psi compare allocated for it and ended in "psi: internal error:
// std::bad_alloc" (exit 3; AddressSanitizer: allocation-size-too-big). The second is valid HDF5
// (chunked, never written) whose element count overflows int64.
TEST(BadHdf5, ClaimedSizesBeyondTheFileAreRefused) {
  const fs::path dir = fresh_dir("h5_huge");
  // The finding's tensor carries no sha256_full (compare would refuse it too): given its hash in a
  // copy, so that the refusal tested is the claim's alone.
  const fs::path found = dir / "h5_tables_claims_huge_dims.h5";
  fs::copy_file(fs::path(PSI_TEST_DATA) / "bad_input" / "h5_tables_claims_huge_dims.h5", found);
  fs::permissions(found, fs::perms::owner_write, fs::perm_options::add);
  {
    hdf5::Handle f(H5Fopen(found.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    hdf5::Handle d(H5Dopen2(f.get(), "/states/dense/x", H5P_DEFAULT), H5Dclose);
    std::vector<std::uint16_t> x(8);  // [2, 4] uint16
    ASSERT_GE(H5Dread(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data()), 0);
    const std::string sha = psi::sha256_hex(x.data(), x.size() * 2);
    hdf5::Handle s(H5Screate(H5S_SCALAR), H5Sclose);
    hdf5::Handle ty(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(ty.get(), sha.size());
    hdf5::Handle a(H5Acreate2(d.get(), "sha256_full", ty.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    ASSERT_GE(H5Awrite(a.get(), ty.get(), sha.c_str()), 0);
  }
  for (const auto& args : std::vector<std::vector<std::string>>{{"report", found.string()},
                                                               {"compare", found.string(), found.string()}})
    expect_rejected(run_psi(args), args, Exit::bad_input,
                    {found.string() + ":/report/tables: claims 844424930132064 elements",
                     std::to_string(fs::file_size(found)) + "-byte file"});
  expect_error([&] { hdf5::File::open_read(found).read_text("/report/tables"); }, Exit::bad_input, {"claims"},
               "read_text of the fuzzer's file");

  const fs::path big = plain_file(dir / "chunked_2_64.h5", [](hdf5::File& f) {
    const hsize_t dims[2] = {hsize_t(1) << 62, 4}, chunk[2] = {1, 1};
    hdf5::Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 2, chunk);
    hdf5::Handle d(H5Dcreate2(f.id(), "/x", H5T_STD_U8LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(d);
  });
  const std::vector<std::string> args{"compare", big.string(), big.string()};
  expect_rejected(run_psi(args), args, Exit::bad_input, {big.string() + ":/x", "more than 2^63 - 1 elements"});

  // Chunked and never written, 2^50 bytes: it ended in std::bad_alloc (exit 3) before the memory
  // bound; now its elements are not in the file at all (they would read as fill values).
  const fs::path sparse = plain_file(dir / "chunked_2_50.h5", [](hdf5::File& f) {
    const hsize_t dims[1] = {hsize_t(1) << 50}, chunk[1] = {1 << 20};
    hdf5::Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 1, chunk);
    hdf5::Handle d(H5Dcreate2(f.id(), "/x", H5T_STD_U8LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(d);
  });
  expect_error([&] { hdf5::File::open_read(sparse).read_u8("/x"); }, Exit::bad_input,
               {sparse.string() + ":/x is a dataset whose elements were never written"},
               "read_u8 of a 2^50-byte chunked dataset");
}

// Elements that are not in the file in another way: chunks never written, or written only in
// part (HDF5 reads the rest as fill values, which psi would compare as data), and chunks that
// claim to expand more than deflate can (64 GiB from 1 KiB stored: a compression bomb, which
// psi would allocate for). Each refused by name before a byte is read.
TEST(BadHdf5, UnwrittenOrOverExpandedDataIsRefused) {
  const fs::path dir = fresh_dir("h5_unwritten");
  auto chunked = [](hdf5::File& f, hsize_t n, hsize_t chunk, bool deflate, hid_t type = H5T_STD_U8LE) {
    hdf5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    if (deflate) H5Pset_deflate(dcpl.get(), 6);
    return hdf5::Handle(H5Dcreate2(f.id(), "/x", type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
  };
  const fs::path never = plain_file(dir / "never.h5", [&](hdf5::File& f) { ASSERT_TRUE(chunked(f, 16, 8, false)); });
  const fs::path part = plain_file(dir / "part.h5", [&](hdf5::File& f) {
    hdf5::Handle d = chunked(f, 16, 8, false);
    ASSERT_TRUE(d);
    const hsize_t start = 0, count = 8;
    hdf5::Handle file_space(H5Dget_space(d.get()), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    hdf5::Handle mem(H5Screate_simple(1, &count, nullptr), H5Sclose);
    const std::vector<std::uint8_t> bytes(8, 7);
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT8, mem.get(), file_space.get(), H5P_DEFAULT, bytes.data()), 0);
  });
  // The same bomb of uint16 (BF16 bits as h5py keeps them, no dtype attribute) and of int64:
  // psi compare once read these kinds past the checks, and allocated what they claimed; psi
  // verify did not read them at all.
  auto bomb_of = [&](const std::string& name, hid_t type) {
    return plain_file(dir / name, [&](hdf5::File& f) {
      const hsize_t chunk = (hsize_t(1) << 30) / H5Tget_size(type);  // 1 GiB, 64 GiB in all
      hdf5::Handle d = chunked(f, hsize_t(64) * chunk, chunk, true, type);
      ASSERT_TRUE(d);
      const char payload[16] = {};
      for (hsize_t c = 0; c < 64; ++c) {
        const hsize_t offset = c * chunk;
        ASSERT_GE(H5Dwrite_chunk(d.get(), H5P_DEFAULT, 0, &offset, sizeof payload, payload), 0);
      }
    });
  };
  const std::vector<std::pair<fs::path, std::vector<std::string>>> cases{
      {never, {":/x is a dataset whose elements were never written", "fill values"}},
      {part, {":/x is a dataset whose elements were only partly written"}},
      {bomb_of("bomb.h5", H5T_STD_U8LE), {":/x: claims 68719476736 elements", "1,100-fold"}},
  };
  for (const auto& c : cases) {
    const fs::path& file = c.first;
    const std::vector<std::string>& mentions = c.second;
    for (const auto& args : std::vector<std::vector<std::string>>{{"compare", file.string(), file.string()},
                                                                 {"verify", file.string()}})
      expect_rejected(run_psi(args), args, Exit::bad_input, mentions);
    expect_error([&] { hdf5::File::open_read(file).read_u8("/x"); }, Exit::bad_input, mentions,
                 "read_u8 of " + file.string());
  }
  const fs::path bomb_u16 = bomb_of("bomb_u16.h5", H5T_STD_U16LE), bomb_i64 = bomb_of("bomb_i64.h5", H5T_STD_I64LE);
  const std::vector<std::string> u16_mentions{":/x: claims 34359738368 elements of 2 bytes", "1,100-fold"},
      i64_mentions{":/x: claims 8589934592 elements of 8 bytes", "1,100-fold"};
  for (const auto& [file, mentions] : {std::pair{bomb_u16, u16_mentions}, std::pair{bomb_i64, i64_mentions}}) {
    for (const auto& args : std::vector<std::vector<std::string>>{{"compare", file.string(), file.string()},
                                                                 {"verify", file.string()}})
      expect_rejected(run_psi(args), args, Exit::bad_input, mentions);
  }
  expect_error([&] { (void)hdf5::File::open_read(bomb_u16).read_u16("/x"); }, Exit::bad_input, u16_mentions, "read_u16");
  expect_error([&] { (void)hdf5::File::open_read(bomb_u16).read_bf16_bits("/x"); }, Exit::bad_input, u16_mentions,
               "read_bf16_bits");
  expect_error([&] { (void)hdf5::File::open_read(bomb_i64).read_i64("/x"); }, Exit::bad_input, i64_mentions, "read_i64");
}

// A dataset of one byte whose one chunk is 384 MiB (an extendible dataset may have chunks larger
// than itself): a 1.5 MB file for which libhdf5 inflates and fills 384 MiB on every read, which
// the size checks above (elements against storage) let through. The child measures what reading
// each dataset cost it and refuses the file past twice its size and 256 MiB.
TEST(BadHdf5, AChunkFarLargerThanItsDatasetIsRefused) {
  const fs::path dir = fresh_dir("h5_big_chunk");
  const fs::path file = plain_file(dir / "big_chunk.h5", [&](hdf5::File& f) {
    const hsize_t n = 1, unlimited = H5S_UNLIMITED, chunk = hsize_t(384) << 20;
    hdf5::Handle space(H5Screate_simple(1, &n, &unlimited), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    ASSERT_GE(H5Pset_chunk(dcpl.get(), 1, &chunk), 0);
    ASSERT_GE(H5Pset_deflate(dcpl.get(), 1), 0);
    hdf5::Handle d(H5Dcreate2(f.id(), "/x", H5T_STD_U8LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(d);
    const std::uint8_t one = 7;
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, &one), 0);
  });
  for (const auto& args : std::vector<std::vector<std::string>>{{"compare", file.string(), file.string()},
                                                               {"verify", file.string()}})
    expect_rejected(run_psi(args), args, Exit::bad_input,
                    {file.string() + ": libhdf5 needed ", " MiB to read the 1 bytes of /x (in a child process"});
}

// Recordings whose attributes are out of range: the stored rows outside full_shape (a heap read
// past the end when the input was regenerated and checked row by row), a full_shape that is not
// a list of sizes and a seed that is not a whole number (both escaped as "internal error", exit 3).
TEST(BadHdf5, RecordingAttributesOutOfRangeAreRefused) {
  const fs::path dir = fresh_dir("h5_recording_attrs");
  const auto recording = [&](const std::string& name, const hdf5::AttrValue& seed, const std::string& full_shape,
                             const std::string& stored) {
    const fs::path p = dir / name;
    auto f = hdf5::File::create(p);
    f.set_attr("/", "synthinit_global_seed", seed);
    psi::Bf16Tensor x({1, 2, 4});
    f.write_bf16("/g/inputs/x", x,
                 {{"full_shape", full_shape}, {"stored", stored}, {"synthinit_name", std::string("input.other.x")}});
    f.commit();
    return p;
  };
  struct Bad {
    fs::path file;
    std::vector<std::string> mentions;
  };
  const std::vector<Bad> bad = {
      {recording("rows_past_the_end.h5", std::int64_t(0), "[1, 8, 4]", "rows_10_to_11_of_axis_1"),
       {":/g/inputs/x: stored 'rows_10_to_11_of_axis_1' names rows outside full_shape [1, 8, 4]"}},
      {recording("rows_huge.h5", std::int64_t(0), "[1, 8, 4]", "rows_0_to_99999999999999999999_of_axis_1"),
       {"names rows outside full_shape"}},
      {recording("rows_backwards.h5", std::int64_t(0), "[1, 8, 4]", "rows_3_to_2_of_axis_1"), {"ends before it starts"}},
      // Malformed row ranges (the hand-written parser of probes/recording.cpp): not a row range.
      {recording("rows_empty.h5", std::int64_t(0), "[1, 8, 4]", "rows__to_1_of_axis_1"),
       {"unknown stored convention 'rows__to_1_of_axis_1'"}},
      {recording("rows_letter.h5", std::int64_t(0), "[1, 8, 4]", "rows_0_to_1x_of_axis_1"),
       {"unknown stored convention 'rows_0_to_1x_of_axis_1'"}},
      {recording("rows_twice.h5", std::int64_t(0), "[1, 8, 4]", "rows_0_to_1_to_2_of_axis_1"),
       {"unknown stored convention 'rows_0_to_1_to_2_of_axis_1'"}},
      {recording("rows_axis_2.h5", std::int64_t(0), "[1, 8, 4]", "rows_0_to_1_of_axis_2"),
       {"unknown stored convention 'rows_0_to_1_of_axis_2'"}},
      {recording("shape_text.h5", std::int64_t(0), "[1, \"8\", 4]", "rows_0_to_1_of_axis_1"),
       {"full_shape [1,\"8\",4] holds \"8\", not a size"}},
      {recording("shape_negative.h5", std::int64_t(0), "[1, -8, 4]", "rows_0_to_1_of_axis_1"), {"holds -8, not a size"}},
      {recording("shape_huge.h5", std::int64_t(0), "[1, 4294967296, 4294967296]", "rows_0_to_1_of_axis_1"),
       {"full_shape [1,4294967296,4294967296] has more elements than psi holds in memory"}},
      {recording("seed_negative.h5", std::int64_t(-3), "[1, 8, 4]", "rows_0_to_1_of_axis_1"),
       {"root attribute synthinit_global_seed is -3, not a seed"}},
      {recording("seed_fraction.h5", 0.5, "[1, 8, 4]", "rows_0_to_1_of_axis_1"), {"synthinit_global_seed is 0.5"}},
      {recording("seed_text.h5", std::string("seven"), "[1, 8, 4]", "rows_0_to_1_of_axis_1"),
       {"synthinit_global_seed is 'seven'"}},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> mentions{b.file.string()};
    mentions.insert(mentions.end(), b.mentions.begin(), b.mentions.end());
    expect_error([&] { psi::probes::Recording(b.file, "g").input_bf16("inputs/x"); }, Exit::bad_input, mentions,
                 b.file.filename().string());
  }
}

// A trajectory's text_context_len that is not a decimal row count (class 4: one integer parser)
// is refused naming the group; std::stoll let "abc" escape as an internal error and read "+8 rows"
// as 8.
TEST(BadHdf5, TrajectoryContextLengthMustBeARowCount) {
  const fs::path dir = fresh_dir("h5_context_len");
  for (const std::string bad : {"abc", "+8", "8 rows", "0", "-1", "99999999999999999999"}) {
    const fs::path p = dir / ("traj" + std::to_string(bad.size()) + bad.substr(0, 1) + ".h5");
    {
      auto f = hdf5::File::create(p);
      f.write_bf16("/t/inputs/x", psi::Bf16Tensor({1, 2, 4}), {});
      f.set_attr("/", "synthinit_global_seed", std::int64_t(0));  // a recording states its seed
      f.set_attr("/t", "text_context_len", bad);
      f.commit();
    }
    expect_error([&] { psi::exp::read_recorded_trajectory(p, "t"); }, Exit::bad_input,
                 {p.string(), "/t attribute text_context_len '" + bad + "' is not a row count"}, bad);
  }
}

// Datasets whose elements are not stored in the file psi opened (class 1 of the round-three
// trust issue): external raw storage pointing at any file on the machine (its bytes were read,
// compared and printed as a "first difference"), a virtual dataset whose source is missing (read
// as fill values and compared as data), an external link into another file, a soft link.
// psi refuses each, naming the dataset and what it points at, before reading a byte of it; the
// refusal holds in every reader (psi compare, psi report, the h5 layer, a merge's copy).
TEST(BadHdf5, DataStoredOutsideTheFileIsRefused) {
  const fs::path dir = fresh_dir("h5_elsewhere");
  const std::string secret_bytes = "SECRET-PASSWORD-0123456789abcdef";
  const fs::path secret = dir / "secret.bin";
  write_bytes(secret, secret_bytes);
  const fs::path other = plain_file(dir / "other.h5", [](hdf5::File& f) { f.write_bf16("/y", bf16_tensor({16}, 2.0f)); });
  auto bf16_dataset = [](hdf5::File& f, const char* name, hid_t dcpl) {
    const hsize_t n = 16;
    hdf5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    hdf5::Handle d(H5Dcreate2(f.id(), name, H5T_STD_U16LE, space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
    ASSERT_TRUE(d) << name;
    hdf5::Handle as(H5Screate(H5S_SCALAR), H5Sclose);
    hdf5::Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(t.get(), 8);
    hdf5::Handle a(H5Acreate2(d.get(), "dtype", t.get(), as.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    H5Awrite(a.get(), t.get(), "bfloat16");
  };
  const fs::path external = plain_file(dir / "external_storage.h5", [&](hdf5::File& f) {
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_external(dcpl.get(), secret.c_str(), 0, secret_bytes.size());
    bf16_dataset(f, "/x", dcpl.get());
  });
  const fs::path vds = plain_file(dir / "virtual.h5", [&](hdf5::File& f) {
    const hsize_t n = 16;
    hdf5::Handle src_space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_virtual(dcpl.get(), src_space.get(), (dir / "nowhere.h5").c_str(), "/y", src_space.get());
    bf16_dataset(f, "/x", dcpl.get());
  });
  const fs::path elink = plain_file(dir / "external_link.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/y", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const fs::path elink_group = plain_file(dir / "external_link_group.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/", f.id(), "/g", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const fs::path soft = plain_file(dir / "soft_link.h5", [&](hdf5::File& f) {
    f.write_bf16("/y", bf16_tensor({16}, 2.0f));
    ASSERT_GE(H5Lcreate_soft("/y", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const std::vector<std::pair<fs::path, std::vector<std::string>>> cases{
      {external, {":/x is a dataset with external storage", secret.string(), "stored in the file it opened"}},
      {vds, {":/x is a virtual dataset", "nowhere.h5"}},
      {elink, {":/x is an external link to " + other.string() + ":/y"}},
      {soft, {":/x is a soft link to /y"}},
  };
  for (const auto& c : cases) {
    // Named copies, not structured bindings: clang 14 lets no lambda capture those.
    const fs::path& file = c.first;
    const std::vector<std::string>& mentions = c.second;
    const std::vector<std::string> args{"compare", file.string(), file.string()};
    const PsiRun r = run_psi(args);
    expect_rejected(r, args, Exit::bad_input, mentions);
    EXPECT_EQ(r.out.find("SECRET"), std::string::npos) << r.out;
    expect_error([&] { hdf5::File::open_read(file).read_bf16("/x"); }, Exit::bad_input, mentions, "read_bf16 of " + file.string());
    expect_error([&] { hdf5::File::open_read(file).list_datasets(); }, Exit::bad_input, mentions, "list of " + file.string());
    auto out = hdf5::File::create(dir / "copy.h5");
    expect_error([&] { out.copy_from(hdf5::File::open_read(file), "/"); }, Exit::bad_input, mentions,
                 "copy of " + file.string());
  }
  // An external link in the middle of a path is refused before HDF5 follows it into the other file.
  expect_error([&] { (void)hdf5::File::open_read(elink_group).exists("/g/y"); }, Exit::bad_input,
               {":/g is an external link to " + other.string() + ":/"}, "a path through an external link");
  // psi report on a report whose tables are an external link.
  const fs::path report = report_file(dir / "r.h5", kGoodTables);
  {
    hdf5::Handle f(H5Fopen(report.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    ASSERT_GE(H5Ldelete(f.get(), "/report/tables", H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/y", f.get(), "/report/tables", H5P_DEFAULT, H5P_DEFAULT), 0);
  }
  const std::vector<std::string> args{"report", report.string()};
  expect_rejected(run_psi(args), args, Exit::bad_input, {":/report/tables is an external link"});
}

// --allow-link-to FILE: the one way an input's external link is followed, and only into a file
// the user named. Without it, or naming another file, the link is refused (exit 2, naming the link
// and the file it leads to); a relative link is resolved where libhdf5 looks first, the folder of
// the file holding it; a loop of allowed links ends; a named file is an input, so no output replaces it.
TEST(BadHdf5, ExternalLinksAreFollowedOnlyIntoFilesTheUserNames) {
  const fs::path dir = fresh_dir("h5_allow_links");
  const psi::Bf16Tensor y = bf16_tensor({16}, 2.0f);
  // Hashed: psi verify checks what the link leads to.
  const fs::path other = plain_file(dir / "other.h5", [&](hdf5::File& f) { f.write_bf16("/y", y, {{"sha256_full", psi::sha256_hex(y)}}); });
  const fs::path unrelated = plain_file(dir / "unrelated.h5", [&](hdf5::File& f) { f.write_bf16("/y", y); });
  const fs::path same = plain_file(dir / "same.h5", [&](hdf5::File& f) { f.write_bf16("/x", y); });
  const fs::path changed = plain_file(dir / "changed.h5", [&](hdf5::File& f) { f.write_bf16("/x", bf16_tensor({16}, 3.0f)); });
  const fs::path link = plain_file(dir / "link.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/y", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  // Named relative to the folder of the file that holds the link, as libhdf5 resolves it.
  const fs::path relative = plain_file(dir / "relative.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external("other.h5", "/y", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const fs::path loop_a = dir / "loop_a.h5", loop_b = dir / "loop_b.h5";
  plain_file(loop_a, [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(loop_b.c_str(), "/x", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  plain_file(loop_b, [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(loop_a.c_str(), "/x", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });

  // A chain: the link in the named file leads on to a file not named.
  const fs::path chain = plain_file(dir / "chain.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(link.c_str(), "/x", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });

  // Followed into the named file: the linked elements are the ones compared.
  for (const fs::path& f : {link, relative}) {
    const PsiRun equal = run_psi({"compare", f.string(), same.string(), "--allow-link-to", other.string()});
    EXPECT_EQ(equal.status, 0) << equal.err << equal.out;
    EXPECT_NE(equal.out.find("/x"), std::string::npos) << equal.out;
    const PsiRun differs = run_psi({"compare", f.string(), changed.string(), "--allow-link-to", other.string()});
    EXPECT_EQ(differs.status, 1) << differs.err << differs.out;
  }
  const PsiRun verified = run_psi({"verify", link.string(), "--allow-link-to", other.string()});
  EXPECT_EQ(verified.status, 0) << verified.err << verified.out;
  const PsiRun chained = run_psi({"compare", chain.string(), same.string(), "--allow-link-to", link.string(),
                                  "--allow-link-to", other.string()});
  EXPECT_EQ(chained.status, 0) << chained.err << chained.out;

  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> refused{
      {{"compare", link.string(), same.string()},
       {":/x is an external link to " + other.string() + ":/y", "--allow-link-to FILE follows links to FILE"}},
      {{"compare", link.string(), same.string(), "--allow-link-to", unrelated.string()},
       {":/x is an external link to " + other.string(), "--allow-link-to does not name that file"}},
      {{"verify", relative.string(), "--allow-link-to", unrelated.string()},
       {":/x is an external link to other.h5:/y (the file " + other.string() + ")"}},
      {{"compare", loop_a.string(), same.string(), "--allow-link-to", loop_a.string(), "--allow-link-to", loop_b.string()},
       {":/x: more than 8 external links on one path"}},
      {{"compare", chain.string(), same.string(), "--allow-link-to", link.string()},
       {link.string() + ":/x is an external link to " + other.string() + ":/y", "--allow-link-to does not name that file"}},
      {{"compare", link.string(), same.string(), "--allow-link-to", (dir / "missing.h5").string()},
       {(dir / "missing.h5").string(), "no such file"}},
      {{"probe", "audio-self-attn", "--out", other.string(), "--force", "--allow-link-to", other.string()},
       {other.string(), "is the input file"}},
  };
  for (const auto& c : refused) expect_rejected(run_psi(c.first), c.first, Exit::bad_input, c.second);
}

// A dataset whose filter libhdf5 does not have makes libhdf5 look for a plugin: it loads every
// lib*.so in HDF5_PLUGIN_PATH's folders, running their code. A file psi reads must never make it
// run code: psi turns plugin loading off, and refuses the dataset as unreadable.
TEST(BadHdf5, FilterPluginsAreNeverLoaded) {
  const fs::path dir = fresh_dir("h5_plugin");
  const fs::path plugins = dir / "plugins";
  fs::create_directories(plugins);
  fs::copy_file(PSI_MARKER_PLUGIN, plugins / "libpsi_test_marker_plugin.so");
  const fs::path file = dir / "unknown_filter.h5";
  {
    hdf5::Handle f(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    const hsize_t n = 64, chunk = 16;
    hdf5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    hdf5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), 1, &chunk);
    H5Pset_deflate(dcpl.get(), 6);
    hdf5::Handle d(H5Dcreate2(f.get(), "/x", H5T_STD_U16LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
    std::vector<std::uint16_t> v(n, 0x3f80);
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  }
  // The deflate filter's entry in the pipeline message (version 1: identifier, name length,
  // flags, value count, then the name) is given the identifier of a filter libhdf5 lacks (32004).
  std::string bytes = slurp(file);
  const std::size_t name = bytes.find(std::string("deflate\0", 8));
  ASSERT_NE(name, std::string::npos);
  ASSERT_GE(name, 8u);
  ASSERT_EQ(bytes[name - 8], '\x01');
  ASSERT_EQ(bytes[name - 7], '\x00');
  bytes[name - 8] = '\x04';
  bytes[name - 7] = '\x7d';
  write_bytes(file, bytes);

  const fs::path marker = dir / "plugin-ran";
  ::setenv("HDF5_PLUGIN_PATH", plugins.c_str(), 1);
  ::setenv("PSI_TEST_PLUGIN_MARKER", marker.c_str(), 1);
  const std::vector<std::string> args{"compare", file.string(), file.string()};
  const PsiRun r = run_psi(args);
  ::unsetenv("HDF5_PLUGIN_PATH");
  ::unsetenv("PSI_TEST_PLUGIN_MARKER");
  expect_rejected(r, args, Exit::bad_input, {file.string() + ":/x"});
  EXPECT_FALSE(fs::exists(marker)) << "psi loaded an HDF5 filter plugin reading " << file;
}

// Integrity attributes that a type could switch off (class 3 of the round-three trust issue):
// a sha256_full or stored attribute of an unexpected type or form used to read as "no hash" or
// "not whole", so edited data passed psi compare, psi probe and psi oracle. Present but
// malformed is now a refusal (exit 2) naming the attribute, by one reader (hdf5::read_integrity)
// in every command.
TEST(BadHdf5, MalformedIntegrityAttributesAreRefused) {
  const fs::path dir = fresh_dir("h5_integrity");
  const psi::Bf16Tensor t = bf16_tensor({2, 4}, 1.0f);
  auto with_attr = [&](const std::string& name, const std::function<void(hid_t)>& set) {
    return plain_file(dir / (name + ".h5"), [&](hdf5::File& f) {
      f.write_bf16("/g/x", t);
      hdf5::Handle d(H5Dopen2(f.id(), "/g/x", H5P_DEFAULT), H5Dclose);
      set(d.get());
    }, {{"synthinit_global_seed", std::int64_t(0)}});
  };
  auto scalar_int = [](const char* attr) {
    return [attr](hid_t d) {
      const std::int64_t v = 5;
      hdf5::Handle s(H5Screate(H5S_SCALAR), H5Sclose);
      hdf5::Handle a(H5Acreate2(d, attr, H5T_STD_I64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      H5Awrite(a.get(), H5T_NATIVE_INT64, &v);
    };
  };
  auto int_array = [](const char* attr) {
    return [attr](hid_t d) {
      const hsize_t n = 2;
      const std::int64_t v[2] = {1, 2};
      hdf5::Handle s(H5Screate_simple(1, &n, nullptr), H5Sclose);
      hdf5::Handle a(H5Acreate2(d, attr, H5T_STD_I64LE, s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      H5Awrite(a.get(), H5T_NATIVE_INT64, v);
    };
  };
  const std::vector<std::pair<fs::path, std::string>> cases{
      {with_attr("sha_int", scalar_int("sha256_full")), "sha256_full attribute is an integer"},
      {with_attr("sha_array", int_array("sha256_full")), "sha256_full attribute is not a scalar string"},
      {with_attr("sha_short", [](hid_t d) { hdf5::Handle s(H5Screate(H5S_SCALAR), H5Sclose);
         hdf5::Handle ty(H5Tcopy(H5T_C_S1), H5Tclose); H5Tset_size(ty.get(), 6);
         hdf5::Handle a(H5Acreate2(d, "sha256_full", ty.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
         H5Awrite(a.get(), ty.get(), "abcdef"); }), "sha256_full attribute is 'abcdef'"},
      {with_attr("stored_int", scalar_int("stored")), "stored attribute is an integer"},
      {with_attr("stored_array", int_array("stored")), "stored attribute is not a scalar string"},
  };
  for (const auto& c : cases) {
    const fs::path& file = c.first;  // not a structured binding: the lambdas below capture it
    const std::string& mention = c.second;
    const std::vector<std::string> args{"compare", file.string(), file.string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {file.string() + ":/g/x", mention});
    expect_error([&] { rp::read_integrity(hdf5::File::open_read(file), "/g/x"); }, Exit::bad_input, {mention},
                 "read_integrity of " + file.string());
    expect_error([&] { psi::probes::Recording(file, "g").stored_bf16("x"); }, Exit::bad_input, {mention},
                 "a recording's tensor in " + file.string());
  }
  // A well-formed hash still checks the data (any case), and no attribute still means none.
  const fs::path good = with_attr("good", [&](hid_t d) {
    std::string sha = psi::sha256_hex(t);
    for (char& c : sha) c = char(std::toupper(static_cast<unsigned char>(c)));
    hdf5::Handle s(H5Screate(H5S_SCALAR), H5Sclose);
    hdf5::Handle ty(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(ty.get(), 64);
    hdf5::Handle a(H5Acreate2(d, "sha256_full", ty.get(), s.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    H5Awrite(a.get(), ty.get(), sha.c_str());
  });
  EXPECT_EQ(rp::check_sha256_full(hdf5::File::open_read(good), "/g/x", t.ptr(), t.bytes()), rp::Sha256Check::match);
  const fs::path none = with_attr("none", [](hid_t) {});
  EXPECT_EQ(rp::check_sha256_full(hdf5::File::open_read(none), "/g/x", t.ptr(), t.bytes()), rp::Sha256Check::not_recorded);
}

// Still open from round two: a recording that lacks a tensor block-controls' table needs (here
// the MATH audio_out, kept in FLASH so that the probes themselves still compare) gave a table
// without its psi rows and exit 0. Refused, naming the dataset.
TEST(BadHdf5, BlockControlsRefusesARecordingWithoutItsTableTensors) {
  const fs::path dir = fresh_dir("h5_bc_missing");
  fs::copy_file(psi::test::reference_file("block_small.h5"), dir / "block_small.h5");
  fs::permissions(dir / "block_small.h5", fs::perms::owner_write, fs::perm_options::add);
  {
    hdf5::Handle f(H5Fopen((dir / "block_small.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    ASSERT_GE(H5Ldelete(f.get(), "/block_small/math/audio_out", H5P_DEFAULT), 0);
  }
  const std::vector<std::string> args{"run", "block-controls", "--reference", dir.string(), "--out",
                                      (dir / "bc.h5").string()};
  expect_rejected(run_psi(args), args, Exit::bad_input,
                  {(dir / "block_small.h5").string() + ":/block_small/math/audio_out", "no MATH audio_out"});
  EXPECT_FALSE(fs::exists(dir / "bc.h5"));
}

// psi verify (class 10): a file checked on its own. A recording and a psi report as written pass
// (exit 0); edited data under its sha256_full, a NaN its nonfinite_count does not count, another
// schema version and a partial file are each a named problem (exit 1); data stored outside the
// file and a malformed integrity attribute are refusals (exit 2), as in every other reader.
TEST(BadHdf5, VerifyChecksAFileOnItsOwn) {
  const fs::path dir = fresh_dir("h5_verify");
  const fs::path recording = psi::test::reference_file("block_small.h5");
  const fs::path report = report_file(dir / "report.h5", kGoodTables);
  PsiRun r = run_psi({"verify", recording.string(), report.string()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("psi verify " + recording.string() + ": OK (a recording"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sha256_full equal to the data"), std::string::npos) << r.out;

  // The report's tensor edited in place, its sha256_full left as it was.
  fs::copy_file(report, dir / "edited.h5");
  {
    hdf5::Handle f(H5Fopen((dir / "edited.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    hdf5::Handle d(H5Dopen2(f.get(), "/states/x", H5P_DEFAULT), H5Dclose);
    std::vector<std::uint16_t> v(8, 0x3f80);
    ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  }
  // A NaN the recorded nonfinite_count (0) does not count (its sha256_full is of the data as it is).
  const fs::path nan = plain_file(dir / "nan.h5", [](hdf5::File& f) {
    psi::Bf16Tensor t = bf16_tensor({4}, 1.0f);
    t.data[2] = psi::Bf16::from_bits(0x7fc0);
    f.write_bf16("/x", t, {{"nonfinite_count", std::int64_t(0)}, {"sha256_full", psi::sha256_hex(t)}});
  });
  const fs::path v2 = plain_file(dir / "v2.h5", [](hdf5::File& f) {
    const psi::Bf16Tensor t = bf16_tensor({4}, 1.0f);
    f.write_bf16("/x", t, {{"sha256_full", psi::sha256_hex(t)}});
  }, {{"schema", std::string("psi-h5/2")}});
  const std::vector<std::pair<fs::path, std::string>> problems{
      {dir / "edited.h5", ":/states/x: data does not match its sha256_full"},
      {nan, ":/x: 1 non-finite elements, its nonfinite_count says 0"},
      {v2, ": schema psi-h5/2; this psi reads psi-h5/1"}};
  for (const auto& [file, mention] : problems) {
    r = run_psi({"verify", file.string()});
    EXPECT_EQ(r.status, 1) << file << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("problem: " + file.string() + mention), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("psi verify " + file.string() + ": 1 problem"), std::string::npos) << r.out;
  }
  // Refusals, as every reader refuses them.
  const fs::path elink = plain_file(dir / "elink.h5", [&](hdf5::File& f) {
    ASSERT_GE(H5Lcreate_external(report.c_str(), "/states/x", f.id(), "/x", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  const fs::path bad_sha = plain_file(dir / "bad_sha.h5", [](hdf5::File& f) {
    f.write_bf16("/x", bf16_tensor({4}, 1.0f), {{"sha256_full", std::int64_t(5)}});
  });
  for (const auto& [file, mention] : std::vector<std::pair<fs::path, std::string>>{
           {elink, ":/x is an external link"}, {bad_sha, "sha256_full attribute is an integer"}}) {
    const std::vector<std::string> args{"verify", file.string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {file.string(), mention});
  }
}

namespace {
// One of the fuzzer's inputs in tests/data/hdf5_crash/ through every command that reads HDF5:
// exit 2, one line with `mentions`, well inside the deadline (a hang is killed at it and fails).
void expect_refused_by_every_reader(const std::string& name, const std::vector<std::string>& mentions) {
  const fs::path dir = fresh_dir("h5_crash");
  const fs::path f = dir / name;
  fs::copy_file(fs::path(PSI_TEST_DATA) / "hdf5_crash" / name, f, fs::copy_options::overwrite_existing);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"verify", f.string()}, {"compare", f.string(), f.string()}, {"report", f.string()}}) {
    const PsiRun r = run_psi(args, {}, std::chrono::seconds(120));
    ASSERT_EQ(r.signal, 0) << join(args) << ": psi died of signal " << r.signal << " (9: a hang, killed)";
    std::vector<std::string> all{f.string() + ": "};
    all.insert(all.end(), mentions.begin(), mentions.end());
    expect_rejected(r, args, Exit::bad_input, all);
  }
}
}  // namespace

// Files that crash libhdf5 1.10.8 itself (class 9; found by fuzz_h5_report,
// docs/reliability/bugs-found.md bug 16): a global-heap read past its buffer in H5HG_read, a SIGSEGV in H5A__close while
// attributes are iterated. psi used to die with them; libhdf5 now reads every file first in a
// child process (outputs/isolated.h), and psi refuses the file when the child does not come
// through. The second file's root also has an attribute list libhdf5 cannot read: the child
// refuses it for that (bug 46) or crashes first, depending on where the allocator put what
// libhdf5 frees and uses again (the GCC build refuses, the ASan build crashes); either is a refusal.
TEST(BadHdf5, FilesThatCrashLibhdf5AreRefused) {
  expect_refused_by_every_reader("global_heap_read.h5",
                                 {"libhdf5 crashed (", "reading the file in a child process; refused"});
  expect_refused_by_every_reader("attribute_close.h5",
                                 {"libhdf5 ", "in a child process", "; refused (a corrupt or hostile HDF5 file)"});
}

// A file libhdf5 1.10.8 hangs on in psi's own process although the child came through (found by
// fuzz_h5_report in CI): its root's attribute list cannot be read, so the child, which read the
// attributes it could list, never read `schema`; psi's readers ask for `schema` by name, and
// libhdf5 then loops for ever in its global heap (H5HG_read via H5T__conv_vlen). The child now
// refuses an object whose attributes libhdf5 cannot list.
TEST(BadHdf5, AnAttributeListLibhdf5CannotReadIsRefused) {
  expect_refused_by_every_reader("attribute_list_hang.h5",
                                 {"libhdf5 cannot list the attributes of / (in a child process reading it first); refused"});
}

// A 12 KB file whose root holds a variable-length string that libhdf5 1.10.8 allocates and fills
// 1.8 GiB for (H5T__conv_vlen; found by fuzz_h5_report, whose process passed its 2 GiB limit): the
// child came through, and psi then did the same in its own process, once for every reader. The
// child now measures what each object's attributes cost it and refuses the file past 64 MiB.
TEST(BadHdf5, AnAttributeLibhdf5FillsGigabytesForIsRefused) {
  expect_refused_by_every_reader("attribute_huge_string.h5",
                                 {"libhdf5 needed ", " MiB to read the attributes of / (in a child process reading it first); refused"});
}

// JSON nested 100,000 deep, wherever psi reads JSON from a file (issue 41.4): a report's tables,
// a recording's full_shape attribute, a JSON dataset psi compare compares field by field, a
// probe's weights_json. Each is refused naming where it was read, before a value is built
// (engine/json_read.h).
TEST(BadHdf5, DeeplyNestedJsonIsRefused) {
  const fs::path dir = fresh_dir("h5_deep_json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string tables = report_file(dir / "deep_tables.h5", deep).string();
  // Declared JSON (only such text is read as JSON, hdf5::is_json_text).
  const std::string text = plain_file(dir / "deep_text.h5", [&](hdf5::File& f) {
                             f.write_text("/j", deep, {{hdf5::attr::content, std::string(hdf5::kJsonContent)}});
                           }).string();
  const std::string shape = plain_file(dir / "deep_full_shape.h5", [&](hdf5::File& f) {
                              f.write_bf16("/g/x", bf16_tensor({2, 4}, 1.0f), {{"full_shape", deep}});
                            }, {{"synthinit_global_seed", std::int64_t(0)}}).string();
  const std::string probe = plain_file(dir / "deep_weights.h5", [&](hdf5::File& f) {
                              f.write_text("/g/weights_json", deep, {});
                              const psi::Bf16Tensor x = bf16_tensor({2, 4}, 1.0f);
             f.write_bf16("/g/x", x, {{"sha256_full", psi::sha256_hex(x)}});
                            }).string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"report", tables}, tables + ":/report/tables"},
      {{"compare", text, text}, text + ":/j"},
      {{"compare", shape, shape}, shape + ":/g/x"},
      {{"oracle", "certify", "--file", probe, "--probe", "g"}, probe + ":/g/weights_json"},
  };
  for (const auto& [args, where] : bad)
    expect_rejected(run_psi(args), args, Exit::bad_input, {where, "JSON nested deeper than 64 levels"});
  expect_error([&] { psi::probes::Recording(shape, "g").input_bf16("x"); }, Exit::bad_input,
               {shape + ":/g/x", "attribute 'full_shape'", "nested deeper than 64 levels"}, "a recording's full_shape");
}

// A size a file declares is checked against the machine's memory before anything is allocated
// (issue 41.7): a probe's weights_json entry of shape [2^40, 2^20] made psi allocate 2^61 bytes
// for its SynthInit weight (std::length_error, "internal error", exit 3); a negative size the same.
TEST(BadHdf5, ShapesFromAFileAreBoundedBeforeAllocation) {
  const fs::path dir = fresh_dir("h5_huge_shapes");
  const auto probe = [&](const std::string& name, const std::string& shape) {
    return plain_file(dir / name, [&](hdf5::File& f) {
             f.write_text("/g/weights_json", R"([{"name": "proj.weight", "shape": )" + shape + R"(, "sha256": "00"}])", {});
             const psi::Bf16Tensor x = bf16_tensor({2, 4}, 1.0f);
             f.write_bf16("/g/x", x, {{"sha256_full", psi::sha256_hex(x)}});
           }).string();
  };
  const std::string huge = probe("huge.h5", "[1099511627776, 1048576]"), negative = probe("negative.h5", "[-4, 4]");
  for (const auto& [file, why] : std::vector<std::pair<std::string, std::string>>{
           {huge, "of shape [1099511627776, 1048576]: more than this machine's memory"},
           {negative, "of shape [-4, 4]: a negative size"}}) {
    const std::vector<std::string> args{"oracle", "certify", "--file", file, "--probe", "g"};
    expect_rejected(run_psi(args), args, Exit::bad_input, {file + ":/g/weights_json", "SynthInit tensor 'proj.weight'", why});
  }
}

// Integrity is never optional by omission (class 2 of the round-four trust issue): a tensor with
// nothing to check it against (no sha256_full, stored whole, in rows or not at all) used to be
// trusted silently. Every reader refuses it, exit 2, one line naming file:dataset and why; a psi
// file's tensor without its hash (psi always writes one) is refused as an edited file; a plain
// HDF5 file, which records no hashes, is still compared as it is. --allow-unverified reads such
// data and marks the verdict UNVERIFIED, exit 4 (tests/test_integrity.cpp).
TEST(BadHdf5, TensorsWithNothingToCheckThemAgainstAreRefused) {
  const fs::path dir = fresh_dir("h5_unverifiable");
  const psi::Bf16Tensor full = bf16_tensor({1, 4, 2}, 1.0f);
  const fs::path rec = plain_file(dir / "rec.h5", [&](hdf5::File& f) {
    f.write_bf16("/g/ok", full, {{"sha256_full", psi::sha256_hex(full)}});
    f.write_bf16("/g/whole", full);
    f.write_bf16("/g/rows", bf16_tensor({1, 2, 2}, 1.0f),
                 {{"stored", std::string("rows_0_to_1_of_axis_1")}, {"full_shape", std::string("[1, 4, 2]")}});
    f.write_bf16("/g/none", psi::Bf16Tensor(psi::Shape{0}),
                 {{"stored", std::string("none")}, {"full_shape", std::string("[1, 4, 2]")}});
  }, {{"format", std::string("record_official/1")}, {"synthinit_global_seed", std::int64_t(0)}});
  const std::vector<std::pair<std::string, std::string>> tensors{
      {"whole", "no sha256_full: nothing to check its data against"},
      {"rows", "stores part of the tensor (stored='rows_0_to_1_of_axis_1') and no sha256_full"},
      {"none", "stored='none' and no sha256_full: nothing to check the tensor against"}};
  for (const auto& [name, why] : tensors)
    expect_error([&, n = name] { psi::probes::Recording(rec, "g").stored_bf16(n); }, Exit::bad_input,
                 {rec.string() + ":/g/" + name + ": " + why, "--allow-unverified"}, "the recording's " + name);
  EXPECT_NO_THROW(psi::probes::Recording(rec, "g").stored_bf16("ok"));
  // psi verify names every one of them and exits 2.
  const PsiRun v = run_psi({"verify", rec.string()});
  EXPECT_EQ(v.status, 2) << v.out << v.err;
  for (const auto& [name, why] : tensors)
    EXPECT_NE(v.out.find("problem: " + rec.string() + ":/g/" + name + ": " + why), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("psi verify " + rec.string() + ": 3 problems"), std::string::npos) << v.out;
  // Exit 2, so one psi: error: line on stderr says why (the problems themselves are on stdout).
  EXPECT_EQ(v.err, "psi: error: verify: " + rec.string() + ": 3 tensors with nothing to check them against (no "
                   "sha256_full); each is named above\n");
  const std::vector<std::string> cmp{"compare", rec.string(), rec.string(), "--only", "^/g/whole$"};
  expect_rejected(run_psi(cmp), cmp, Exit::bad_input, {rec.string() + ":/g/whole: no sha256_full"});
  // Under --allow-unverified each is read and marked, and the status is 4, never 0.
  const PsiRun va = run_psi({"verify", rec.string(), "--allow-unverified"});
  EXPECT_EQ(va.status, int(Exit::unverified)) << va.out << va.err;
  for (const auto& [name, why] : tensors)
    EXPECT_NE(va.out.find("note: UNVERIFIED: " + rec.string() + ":/g/" + name + ": " + why), std::string::npos) << va.out;
  EXPECT_NE(va.err.find("psi: warning: UNVERIFIED: 3 dataset(s)"), std::string::npos) << va.err;
  std::vector<std::string> cmp_allowed = cmp;
  cmp_allowed.insert(cmp_allowed.end(), {"--allow-unverified", "--json"});
  const PsiRun ca = run_psi(cmp_allowed);
  EXPECT_EQ(ca.status, int(Exit::unverified)) << ca.out << ca.err;
  EXPECT_NE(ca.out.find("\"unverified\": \"A: no sha256_full"), std::string::npos) << ca.out;
  EXPECT_NE(ca.out.find("\"exit_code\": 4"), std::string::npos) << ca.out;

  // A psi report whose tensor lost its sha256_full (and the same with the hash of the wrong
  // kind, which read_integrity refuses) is an edited file: refused by compare and verify.
  const fs::path report = report_file(dir / "report.h5", kGoodTables);
  fs::copy_file(report, dir / "no_hash.h5");
  {
    hdf5::Handle f(H5Fopen((dir / "no_hash.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    hdf5::Handle d(H5Dopen2(f.get(), "/states/x", H5P_DEFAULT), H5Dclose);
    ASSERT_GE(H5Adelete(d.get(), "sha256_full"), 0);
  }
  const fs::path edited = dir / "no_hash.h5";
  for (const std::vector<std::string>& args : {std::vector<std::string>{"compare", edited.string(), report.string()},
                                               {"compare", report.string(), edited.string(), "--json"}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {edited.string() + ":/states/x: no sha256_full"});
  const PsiRun ve = run_psi({"verify", edited.string(), report.string()});
  EXPECT_EQ(ve.status, 2) << ve.out << ve.err;
  EXPECT_EQ(ve.err, "psi: error: verify: " + edited.string() + ": 1 tensor with nothing to check it against (no "
                    "sha256_full); each is named above\n");
  EXPECT_NE(ve.out.find("psi verify " + report.string() + ": OK"), std::string::npos) << ve.out;
  EXPECT_NE(ve.out.find("problem: " + edited.string() + ":/states/x: no sha256_full"), std::string::npos) << ve.out;

  // A plain HDF5 file records no hashes: compared as it is, as before.
  const fs::path plain = plain_file(dir / "plain.h5", [&](hdf5::File& f) { f.write_bf16("/x", full); });
  const PsiRun p = run_psi({"compare", plain.string(), plain.string()});
  EXPECT_EQ(p.status, 0) << p.out << p.err;
}

// psi verify checks that a dataset's dtype label is its stored type: a 'bfloat16' label on
// float32 data, a 'float32' label on uint16, a label psi does not know are each a named problem.
TEST(BadHdf5, VerifyChecksTheDtypeLabelAgainstTheStoredType) {
  const fs::path dir = fresh_dir("h5_dtype_label");
  const psi::F32Tensor f = f32_tensor({4});
  const std::vector<std::uint16_t> u(4, 0x3f80);
  // Four elements of `data` as `file_type` with the label `label` and their hash.
  const auto labelled = [](hdf5::File& file, const char* path, hid_t file_type, hid_t mem_type, const void* data,
                           std::size_t bytes, const char* label) {
    const hsize_t n = 4;
    hdf5::Handle s(H5Screate_simple(1, &n, nullptr), H5Sclose);
    hdf5::Handle d(H5Dcreate2(file.id(), path, file_type, s.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    H5Dwrite(d.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    file.set_attrs(path, {{"dtype", std::string(label)}, {"sha256_full", psi::sha256_hex(data, bytes)}});
  };
  const auto f32 = [&](hdf5::File& file, const char* path, const char* label) {
    labelled(file, path, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, f.ptr(), f.bytes(), label);
  };
  const auto u16 = [&](hdf5::File& file, const char* path, const char* label) {
    labelled(file, path, H5T_STD_U16LE, H5T_NATIVE_UINT16, u.data(), u.size() * 2, label);
  };
  const std::vector<std::pair<fs::path, std::string>> cases{
      {plain_file(dir / "bf16_label_on_f32.h5", [&](hdf5::File& file) { f32(file, "/x", "bfloat16"); }),
       ":/x: its dtype attribute says 'bfloat16' but the data is stored as float32 (bfloat16 is stored as uint16)"},
      {plain_file(dir / "f32_label_on_u16.h5", [&](hdf5::File& file) { u16(file, "/x", "float32"); }),
       ":/x: its dtype attribute says 'float32' but the data is stored as uint16"},
      {plain_file(dir / "unknown_label.h5", [&](hdf5::File& file) { f32(file, "/x", "complex64"); }),
       ":/x: its dtype attribute 'complex64' names no element type psi knows"},
  };
  for (const auto& [file, mention] : cases) {
    const PsiRun r = run_psi({"verify", file.string()});
    EXPECT_EQ(r.status, 1) << file << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("problem: " + file.string() + mention), std::string::npos) << r.out;
    ++rejected_count();
  }
  // The labels psi writes, on the types it stores them with, pass.
  const fs::path good = plain_file(dir / "good.h5", [&](hdf5::File& file) {
    f32(file, "/f", "float32");
    u16(file, "/b", "bfloat16");
  });
  const PsiRun g = run_psi({"verify", good.string()});
  EXPECT_EQ(g.status, 0) << g.out << g.err;
}
