// Regression tests for bad-input and non-finite handling bugs that the reliability work found in
// code outside it. Each test states the contract and names the code at fault; those marked
// "Open" fail until the bug is fixed. docs/reliability/bugs-found.md lists them with their reproductions.
#include <sys/stat.h>

#include <cstring>
#include <functional>

#include <hdf5.h>

#include "engine/backend/backend_factory.h"
#include "hdf5/h5.h"
#include "tests/test_bad_input_checkpoint.h"
#include "tests/hashed.h"
#include "tests/test_bad_input_support.h"

namespace hdf5 = psi::hdf5;
using namespace psi::badinput;
using psi::Exit;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("found bugs"));
  return true;
}();

fs::path f32_file(const fs::path& p, const std::vector<float>& v, const hdf5::Attrs& attrs = {}) {
  auto f = hdf5::File::create(p);
  f.write_f32("/x", psi::F32Tensor({std::int64_t(v.size())}, v), attrs);
  f.commit();
  return p;
}

}  // namespace

// hdf5/schema.cpp parse_stored: the axis of stored='rows_<a>_to_<b>_of_axis_<k>' is parsed
// as int64 and cast to int. k = 2^31 becomes negative and passes every range check: psi compare
// indexes full_shape[-2^31] and dies of SIGSEGV; k = 2^32 silently becomes axis 0.
// Fixed in a56322d.
TEST(FoundBug, StoredAxisBeyondIntIsRefusedNotCrashing) {
  const fs::path dir = fresh_dir("kb_axis");
  for (const std::string axis : {"2147483648", "3000000000", "4294967296"}) {
    const fs::path p = f32_file(dir / ("axis_" + axis + ".h5"), {1, 2, 3, 4},
                                {{"full_shape", std::string("[4]")},
                                 {"stored", "rows_0_to_3_of_axis_" + axis}});
    const std::vector<std::string> args{"compare", p.string(), p.string()};
    expect_rejected(run_psi(args), args, Exit::bad_input, {p.string() + ":/x", "axis_" + axis});
  }
}

// experiments/one_token.cpp tabulate_one_token: "max video rel L2 over states" is
// std::max(worst, rel_l2), which drops NaN; a run whose every state is NaN shows 0.00e+00 there
// (beside "nan" in the final-state columns and "all finite: NO").
// Fixed in a56322d.
TEST(FoundBug, MaxRelL2OverStatesDoesNotHideNaN) {
  const fs::path dir = fresh_dir("kb_maxnan");
  const fs::path ckpt = tiny_checkpoint(dir / "nan.safetensors", "transformer_blocks.0.ff.net.0.proj.weight",
                                        [](psi::ckpt::SafetensorsTensor& t) {
                                          const std::uint16_t nan = 0x7fc0;
                                          std::memcpy(t.bytes.data(), &nan, 2);
                                        });
  const PsiRun r = run_psi({"run", "one-token", "--quick", "--checkpoint", ckpt.string(), "--out", (dir / "r.h5").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string path : {"| dense ", "| baseline ", "| modified "}) {
    const auto begin = r.out.find(path);
    ASSERT_NE(begin, std::string::npos) << r.out;
    const std::string row = r.out.substr(begin, r.out.find('\n', begin) - begin);
    EXPECT_EQ(row.find("0.00e+00"), std::string::npos) << "a NaN run shows a zero error: " << row;
  }
}

// hdf5/compare.cpp compare_box: rel_l2 = ||a-b|| / ||b|| with ||b|| = Inf when the reference
// holds an Inf anywhere (even where A equals it), so a dataset that differs elsewhere is reported
// with relative L2 0.
// Fixed in a56322d.
TEST(FoundBug, CompareRelL2IsNotZeroWhenElementsDiffer) {
  const fs::path dir = fresh_dir("kb_inf");
  const float inf = std::numeric_limits<float>::infinity();
  const fs::path a = f32_file(dir / "a.h5", {1.0f, 2.5f, 3.0f, inf});
  const fs::path b = f32_file(dir / "b.h5", {1.0f, 2.0f, 3.0f, inf});
  const PsiRun r = run_psi({"compare", "--json", a.string(), b.string()});
  ASSERT_EQ(r.status, 1) << r.err;
  const auto d = nlohmann::json::parse(r.out)["datasets"][0];
  EXPECT_EQ(d["differing"], 1);
  EXPECT_NE(d["rel_l2"], 0.0) << "one element differs but the relative L2 says 0: " << d.dump();
}

// cli/cmd_synthinit.cpp: a negative --shape entry reaches std::vector and ends as
// "psi: internal error: cannot create std::vector larger than max_size()", exit 3.
// Fixed in a56322d.
TEST(FoundBug, SynthinitRefusesANegativeShape) {
  const std::vector<std::string> args{"synthinit", "transformer_blocks.0.attn1.to_q.weight", "--shape", "-2", "4"};
  expect_rejected(run_psi(args), args, Exit::bad_input, {"-2"});
}

// cli/cmd_experiments.cpp: --backend is checked against {cpu, cuda, auto} and then ignored: on a
// machine without CUDA, `--backend cuda` runs on the CPU, exits 0 and writes root attribute
// backend='cuda' into the report. The runtime (rt::make_backend) refuses the same request.
// Fixed in a56322d / 7ea105e.
TEST(FoundBug, RunWithBackendCudaWithoutCudaIsRefusedOrRecordedTruthfully) {
  try {
    psi::rt::make_backend("cuda", {});
    GTEST_SKIP() << "this machine has a CUDA device";
  } catch (const psi::Error&) {
  }
  const fs::path dir = fresh_dir("kb_cuda");
  const fs::path out = dir / "r.h5";
  const PsiRun r = run_psi({"run", "one-token", "--quick", "--backend", "cuda", "--out", out.string()});
  if (r.status == 0) {
    auto f = hdf5::File::open_read(out);
    EXPECT_NE(f.attr_string("/", "backend"), "cuda") << "the CPU ran it";
  } else {
    EXPECT_EQ(r.status, int(Exit::bad_input)) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// experiments/one_token.cpp matching_recording: an explicit --reference folder that does not
// exist is treated like "no recording" and the run compares with the dense path, exit 0.
// Fixed in a56322d.
TEST(FoundBug, RunRefusesAMissingReferenceFolder) {
  const fs::path dir = fresh_dir("kb_ref");
  const std::vector<std::string> args{"run", "one-token", "--quick", "--reference", (dir / "no_such_folder").string(), "--out",
                                      (dir / "r.h5").string()};
  expect_rejected(run_psi(args), args, Exit::bad_input, {"no_such_folder"});
  EXPECT_FALSE(fs::exists(dir / "r.h5"));
}

// experiments/one_token.cpp matching_recording: a --reference folder that exists but lacks the
// recorded trajectory ran without the official column and exited 0.
TEST(FoundBug, RunRefusesAReferenceFolderWithoutTheRecording) {
  const fs::path dir = fresh_dir("kb_ref_empty");
  fs::create_directories(dir / "empty_reference");
  const std::vector<std::string> args{"run", "one-token", "--quick", "--reference", (dir / "empty_reference").string(),
                                      "--out", (dir / "r.h5").string()};
  expect_rejected(run_psi(args), args, Exit::bad_input,
                  {(dir / "empty_reference" / "probe_attn_traj.h5").string() + ": no such recording"});
  EXPECT_FALSE(fs::exists(dir / "r.h5"));
}

// cli/main.cpp: an unknown subcommand is reported by CLI11 as "A subcommand is required",
// without the name that was typed.
// Fixed in a56322d.
TEST(FoundBug, UnknownSubcommandIsNamed) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"no-such-command"}, {"oracle", "frobnicate"}})
    expect_rejected(run_psi(args), args, Exit::bad_input, {args.back()});
}

// report/table.cpp Table::from_json: a /report/tables entry of the wrong structure is
// refused as "report table: malformed JSON: ..." without the file's name.
// Fixed in a56322d.
TEST(FoundBug, ReportNamesTheFileOfAMalformedTable) {
  const fs::path dir = fresh_dir("kb_table");
  const fs::path p = dir / "r.h5";
  {
    auto f = hdf5::File::create(p);
    f.write_text("/report/tables", R"([{"title":"t","columns":"not a list","rows":[]}])", {});
    f.set_attr("/", "schema", std::string("psi-h5/1"));
    f.commit();
  }
  const std::vector<std::string> args{"report", p.string()};
  expect_rejected(run_psi(args), args, Exit::bad_input, {p.string(), "/report/tables"});
}

// oracle/exact_gmp.cpp and exact_boost.cpp: explain on a non-finite operand says "oracle:
// non-finite BF16 value has no exact rational value", naming neither the file nor the operand
// (certify names the operand: "oracle: x 0x7fc0 is NaN").
// Fixed in a56322d.
TEST(FoundBug, OracleExplainNamesTheNonFiniteOperand) {
  const fs::path dir = fresh_dir("kb_oracle");
  const fs::path p = dir / "o.h5";
  {
    auto f = hdf5::File::create(p);
    psi::Bf16Tensor x({1, 2}), w({1, 2});
    x.data = {psi::Bf16::from_bits(0x7fc0), psi::bf16_rne(1.0f)};
    w.data = {psi::bf16_rne(1.0f), psi::bf16_rne(1.0f)};
    f.write_bf16("/x", x, psi::test::hashed(x));
    f.write_bf16("/w", w, psi::test::hashed(w));
    f.commit();
  }
  const std::vector<std::string> args{"oracle", "explain", "--file", p.string(), "--x", "x", "--w", "w", "--row", "0", "--col", "0"};
  expect_rejected(run_psi(args), args, Exit::bad_input, {p.string(), "x", "NaN"});
}

// hdf5/state_file.cpp, hdf5/schema.cpp (and every message that quotes file content): a
// string read from a file is put into the message as it is, so an attribute holding a newline
// splits the one-line error and can forge a "psi: error:" line of its own. Found by
// fuzz_h5_attrs; control characters need escaping where file content is quoted.
// Open.
TEST(FoundBug, FileContentInAnErrorStaysOnOneLine) {
  const fs::path dir = fresh_dir("kb_newline");
  const fs::path schema = dir / "schema.h5";
  {
    auto f = hdf5::File::create(schema);
    f.write_f32("/x", psi::F32Tensor({1}, {1.0f}), {});
    f.set_attr("/", "schema", std::string("psi-h5/1\npsi: error: a forged line"));
    f.commit();
  }
  const std::vector<std::string> report{"report", schema.string()};
  expect_rejected(run_psi(report), report, Exit::bad_input, {schema.string(), "schema"});
  const fs::path stored = f32_file(dir / "stored.h5", {1, 2}, {{"stored", std::string("rows\nforged")}});
  const std::vector<std::string> compare{"compare", stored.string(), stored.string()};
  expect_rejected(run_psi(compare), compare, Exit::bad_input, {stored.string() + ":/x", "stored"});
}

// Round four (issue 41.4): JSON nested 100,000 deep in a file psi reads outside HDF5, a kernel
// config and a checkpoint's header, is refused naming the file (engine/json_read.h).
TEST(FoundBug, DeeplyNestedJsonOutsideHdf5IsRefused) {
  const fs::path dir = fresh_dir("kb_deep_json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  write_bytes(dir / "config.json", R"({"schema": "psi-kernel-config/1", "products": )" + deep + "}");
  std::string header = R"({"a": )" + deep + "}";
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[std::size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  write_bytes(dir / "deep.safetensors", st + header);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"run", "scheduling", "--quick", "--kernel-config", (dir / "config.json").string(), "--out", (dir / "r.h5").string()},
       (dir / "config.json").string()},
      {{"kernels", "confirm", "--config", (dir / "config.json").string()}, (dir / "config.json").string()},
      {{"run", "one-token", "--quick", "--checkpoint", (dir / "deep.safetensors").string(), "--out", (dir / "r.h5").string()},
       (dir / "deep.safetensors").string() + ": header"},
  };
  for (const auto& [args, where] : bad) {
    expect_rejected(run_psi(args), args, Exit::bad_input, {where, "JSON nested deeper than 64 levels"});
    EXPECT_FALSE(fs::exists(dir / "r.h5"));
  }
}

// Round four (issue 41.6): psi device summary prints what it reads, and followed a symbolic link
// in the check folder to any file on the machine (a `ceilings.jsonl` leading to a secret came
// out in its error line, a `context.tsv` in the summary). Only the folder's own regular files are
// read: a link (to a file, to a folder as `tests`, dangling) or a fifo among them is refused and
// nothing of its target printed. Round four (41.4) too: steps.tsv's numbers are decimal and in
// range, and its ceilings lines bounded JSON.
TEST(FoundBug, DeviceSummaryReadsOnlyTheFolderItself) {
  const fs::path dir = fresh_dir("kb_device_summary");
  write_bytes(dir / "secret.txt", "device\tTOP-SECRET-VALUE\n");
  fs::create_directories(dir / "elsewhere");
  write_bytes(dir / "elsewhere" / "t.json", R"({"testsuites": []})");
  const auto folder = [&](const std::string& name, const std::function<void(const fs::path&)>& fill) {
    const fs::path f = dir / name;
    fs::create_directories(f);
    write_bytes(f / "steps.tsv", "scheduling\t0\t3.0\t\n");
    fill(f);
    return f.string();
  };
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::pair<std::string, std::string>> bad = {
      {folder("context_link", [&](const fs::path& f) { fs::create_symlink(dir / "secret.txt", f / "context.tsv"); }),
       "context.tsv: a symbolic link"},
      {folder("ceilings_link", [&](const fs::path& f) { fs::create_symlink(dir / "secret.txt", f / "ceilings.jsonl"); }),
       "ceilings.jsonl: a symbolic link"},
      {folder("steps_link", [&](const fs::path& f) {
         fs::remove(f / "steps.tsv");
         fs::create_symlink(dir / "secret.txt", f / "steps.tsv");
       }),
       "steps.tsv: a symbolic link"},
      {folder("dangling_link", [&](const fs::path& f) { fs::create_symlink(dir / "missing", f / "context.tsv"); }),
       "context.tsv: a symbolic link"},
      {folder("torch_link", [&](const fs::path& f) { fs::create_symlink(dir / "secret.txt", f / "torch-linear.json"); }),
       "torch-linear.json: a symbolic link"},
      {folder("report_link", [&](const fs::path& f) { fs::create_symlink(dir / "secret.txt", f / "capacity.h5"); }),
       "capacity.h5: a symbolic link"},
      {folder("tests_link", [&](const fs::path& f) { fs::create_symlink(dir / "elsewhere", f / "tests"); }),
       "tests: a symbolic link"},
      {folder("test_json_link", [&](const fs::path& f) {
         fs::create_directories(f / "tests");
         fs::create_symlink(dir / "elsewhere" / "t.json", f / "tests" / "t.json");
       }),
       "t.json: a symbolic link"},
      {folder("context_fifo", [&](const fs::path& f) { ASSERT_EQ(::mkfifo((f / "context.tsv").c_str(), 0600), 0); }),
       "context.tsv: not a regular file"},
      {folder("test_json_fifo", [&](const fs::path& f) {
         fs::create_directories(f / "tests");
         ASSERT_EQ(::mkfifo((f / "tests" / "t.json").c_str(), 0600), 0);
       }),
       "t.json: not a regular file"},
      {folder("seconds_huge", [&](const fs::path& f) { write_bytes(f / "steps.tsv", "scheduling\t0\t1e999\t\n"); }),
       "exit code (0 to 255) and seconds"},
      {folder("seconds_nan", [&](const fs::path& f) { write_bytes(f / "steps.tsv", "scheduling\t0\tnan\t\n"); }),
       "exit code (0 to 255) and seconds"},
      {folder("exit_code_hex", [&](const fs::path& f) { write_bytes(f / "steps.tsv", "scheduling\t0x7\t1.0\t\n"); }),
       "exit code (0 to 255) and seconds"},
      {folder("exit_code_huge", [&](const fs::path& f) { write_bytes(f / "steps.tsv", "scheduling\t99999999999\t1.0\t\n"); }),
       "exit code (0 to 255) and seconds"},
      {folder("ceilings_deep", [&](const fs::path& f) { write_bytes(f / "ceilings.jsonl", deep + "\n"); }),
       "ceilings.jsonl:1: JSON nested deeper than 64 levels"},
  };
  for (const auto& [f, mention] : bad) {
    const std::vector<std::string> args{"device", "summary", f};
    const PsiRun r = run_psi(args);
    expect_rejected(r, args, Exit::bad_input, {f, mention});
    EXPECT_EQ(r.out.find("TOP-SECRET-VALUE"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("TOP-SECRET-VALUE"), std::string::npos) << r.err;
  }
}
