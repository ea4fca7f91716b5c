// psi-h5/1 files: writer/reader round trip, the computed check values, atomic commit, schema
// version checks, and reading the official recordings as they are.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/sha256.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "psi_version.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;
using namespace psi::hdf5;

namespace {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("psi_test_reports_" + std::string(info->name()) + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path operator/(const std::string& name) const { return dir_ / name; }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

RunInfo sample_run() {
  RunInfo r;
  r.experiment = "unit_test";
  r.model_config = "tiny";
  r.backend = "cpu";
  r.device_name = "test-cpu";
  r.seed = 42;
  return r;
}

Bf16Tensor sample_bf16() {
  Bf16Tensor t({2, 3, 4});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = bf16_rne(float(i) * 0.37f - 3.1f);
  return t;
}

F32Tensor sample_f32() {
  F32Tensor t({5, 2});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = std::ldexp(float(i) + 0.1f, int(i) - 4);
  return t;
}

F64Tensor sample_f64() {
  F64Tensor t({7});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = std::sqrt(double(i) + 0.5) * (i % 2 ? -1 : 1);
  return t;
}

template <class T>
void expect_bitwise(const Tensor<T>& a, const Tensor<T>& b) {
  ASSERT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(std::memcmp(a.ptr(), b.ptr(), a.bytes()), 0);
}

template <class T>
void expect_record(const TensorRecord& r, const Tensor<T>& t, const std::string& variant) {
  EXPECT_EQ(r.full_shape, t.shape);
  EXPECT_EQ(r.stored.kind, StoredRegion::Kind::full);
  EXPECT_EQ(r.variant, variant);
  ASSERT_TRUE(r.has_stats);
  TensorStats s = tensor_stats(t);
  EXPECT_EQ(r.stats.sha256_full, sha256_hex(t));
  EXPECT_EQ(r.stats.sha256_full, s.sha256_full);
  EXPECT_EQ(r.stats.sum_f64, s.sum_f64);
  EXPECT_EQ(r.stats.sumsq_f64, s.sumsq_f64);
  EXPECT_EQ(r.stats.absmax, s.absmax);
  EXPECT_EQ(r.stats.nonfinite_count, s.nonfinite_count);
}

}  // namespace

TEST(Reports, RoundTripEveryDtypeAndAttribute) {
  TempDir dir;
  const auto path = dir / "state.h5";
  const auto b = sample_bf16();
  const auto f = sample_f32();
  const auto d = sample_f64();
  {
    StateWriter w(path, sample_run());
    w.write("block/modified/attn1", b,
            {"modified", "[2, tokens, channels] test tensor", "input.test.x", {{"spec_probe_name", std::string("b0.attn1")}}});
    w.write("block/inputs/positions", f, {"input", "[5, 2] float32 positions", "", {}});
    w.write("block/dense/energy", d, {"dense", "[7] float64 values", "", {}});
    w.write_text("block/config_json", R"({"a": 1})");
    w.set_attrs("/block", {{"dims", std::string(R"({"d": 512})")}});
    w.commit();
  }
  ASSERT_TRUE(fs::exists(path));

  StateReader r(path);
  EXPECT_EQ(r.kind(), FileKind::psi);
  EXPECT_EQ(r.format(), "psi-h5/1");
  expect_bitwise(r.read_bf16("/block/modified/attn1"), b);
  expect_bitwise(r.read_f32("/block/inputs/positions"), f);
  expect_bitwise(r.read_f64("/block/dense/energy"), d);
  EXPECT_EQ(r.read_text("/block/config_json"), R"({"a": 1})");

  auto rb = r.record("/block/modified/attn1");
  EXPECT_EQ(rb.info.kind, hdf5::ElemKind::bf16);
  EXPECT_EQ(rb.shape_semantics, "[2, tokens, channels] test tensor");
  EXPECT_EQ(rb.synthinit_name, "input.test.x");
  EXPECT_EQ(r.file().attr_string("/block/modified/attn1", "spec_probe_name"), "b0.attn1");
  EXPECT_EQ(r.file().attr_string("/block/modified/attn1", "dtype"), "bfloat16");
  EXPECT_EQ(r.file().attr_string("/block/modified/attn1", "full_shape"), "[2, 3, 4]");
  expect_record(rb, b, "modified");
  auto rf = r.record("/block/inputs/positions");
  EXPECT_EQ(rf.info.kind, hdf5::ElemKind::f32);
  EXPECT_EQ(rf.synthinit_name, "");
  expect_record(rf, f, "input");
  auto rd = r.record("/block/dense/energy");
  EXPECT_EQ(rd.info.kind, hdf5::ElemKind::f64);
  expect_record(rd, d, "dense");
  EXPECT_EQ(r.file().attr_string("/block", "dims"), R"({"d": 512})");
}

TEST(Reports, RootAttributesDescribeTheRun) {
  TempDir dir;
  const auto path = dir / "run.h5";
  {
    StateWriter w(path, sample_run());
    w.write("x", sample_f32(), {"input", "x", "", {}});
    w.commit();
  }
  StateReader r(path);
  RunInfo run = r.run_info();
  EXPECT_EQ(run.experiment, "unit_test");
  EXPECT_EQ(run.model_config, "tiny");
  EXPECT_EQ(run.backend, "cpu");
  EXPECT_EQ(run.device_name, "test-cpu");
  EXPECT_EQ(run.seed, 42u);
  EXPECT_EQ(run.psi_version, PSI_VERSION);
  EXPECT_EQ(run.psi_git_revision, PSI_GIT_REVISION);
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  EXPECT_TRUE(std::regex_match(run.start_time_utc, iso)) << run.start_time_utc;
  EXPECT_TRUE(std::regex_match(run.end_time_utc, iso)) << run.end_time_utc;
  EXPECT_LE(run.start_time_utc, run.end_time_utc);  // ISO-8601 UTC sorts as time
  // The command line starts with this program (named as the kernel knows it).
  const std::string exe = fs::read_symlink("/proc/self/exe").filename().string();
  const std::string first = run.command_line.substr(0, run.command_line.find(' '));
  EXPECT_EQ(fs::path(first).filename().string(), exe) << run.command_line;
  EXPECT_EQ(r.file().attr_string("/", "schema"), "psi-h5/1");
}

TEST(Reports, Sha256AttributeIsTheEngineHashOfTheBytes) {
  TempDir dir;
  const auto path = dir / "hash.h5";
  Bf16Tensor t({3});
  t.data = {Bf16::from_bits(0x3f80), Bf16::from_bits(0xbf80), Bf16::from_bits(0x0001)};
  {
    StateWriter w(path, sample_run());
    w.write("t", t, {"dense", "three values", "", {}});
    w.commit();
  }
  // The same bytes spelled out little-endian, hashed without the tensor type.
  const unsigned char bytes[] = {0x80, 0x3f, 0x80, 0xbf, 0x01, 0x00};
  StateReader r(path);
  EXPECT_EQ(r.record("/t").stats.sha256_full, sha256_hex(bytes, sizeof bytes));
}

TEST(Reports, NonfiniteCountAndFiniteSums) {
  const float inf = std::numeric_limits<float>::infinity();
  F32Tensor t({6}, {1.5f, std::nanf(""), -inf, 2.0f, inf, -4.0f});
  TensorStats s = tensor_stats(t);
  EXPECT_EQ(s.nonfinite_count, 3);
  EXPECT_EQ(s.sum_f64, 1.5 + 2.0 - 4.0);
  EXPECT_EQ(s.sumsq_f64, 2.25 + 4.0 + 16.0);
  EXPECT_EQ(s.absmax, 4.0);

  Bf16Tensor b({4}, {Bf16::from_bits(0x7fc0), Bf16::from_bits(0xff80), Bf16::from_bits(0x3f80), Bf16::from_bits(0x7f81)});
  EXPECT_EQ(tensor_stats(b).nonfinite_count, 3);  // quiet NaN, -Inf, signalling NaN
  EXPECT_EQ(tensor_stats(b).sum_f64, 1.0);

  TempDir dir;
  {
    StateWriter w(dir / "nf.h5", sample_run());
    w.write("t", t, {"dense", "with non-finite values", "", {}});
    w.commit();
  }
  StateReader r(dir / "nf.h5");
  EXPECT_EQ(r.record("/t").stats.nonfinite_count, 3);
}

TEST(Reports, InterruptedWriteLeavesNothing) {
  TempDir dir;
  const auto path = dir / "interrupted.h5";
  try {
    StateWriter w(path, sample_run());
    w.write("t", sample_bf16(), {"dense", "x", "", {}});
    ASSERT_TRUE(fs::exists(w.temp_path()));  // the data went somewhere...
    throw std::runtime_error("simulated failure mid-run");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));  // ...and that temporary file is gone
}

TEST(Reports, MissingVariantIsRefused) {
  TempDir dir;
  StateWriter w(dir / "v.h5", sample_run());
  EXPECT_THROW(w.write("t", sample_f32(), {"", "x", "", {}}), Error);
}

TEST(Reports, WrongSchemaVersionIsRejectedNamingTheFile) {
  TempDir dir;
  const auto path = dir / "future.h5";
  {
    auto f = hdf5::File::create(path);
    f.write_f32("t", sample_f32());
    f.set_attr("/", "schema", std::string("psi-h5/2"));
    f.commit();
  }
  try {
    StateReader r(path);
    FAIL() << "a psi-h5/2 file was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_NE(m.find("psi-h5/2"), std::string::npos) << m;
    EXPECT_NE(m.find("psi-h5/1"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
    EXPECT_EQ(e.code(), Exit::bad_input);
  }
}

TEST(Reports, FileWithoutSchemaIsRejected) {
  TempDir dir;
  const auto path = dir / "plain.h5";
  {
    auto f = hdf5::File::create(path);
    f.write_f32("t", sample_f32());
    f.commit();
  }
  try {
    StateReader r(path);
    FAIL() << "a file without schema was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_NE(m.find("no root attribute 'schema'"), std::string::npos) << m;
  }
}

TEST(Reports, NotHdf5AndMissingFilesAreBadInput) {
  TempDir dir;
  const auto text = dir / "notes.h5";
  { std::ofstream(text) << "not hdf5\n"; }
  try {
    StateReader r(text);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an HDF5 file"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), Exit::bad_input);
  }
  EXPECT_THROW(StateReader(dir / "absent.h5"), Error);
}

TEST(Reports, WriteRowsStoresASliceWithFullTensorCheckValues) {
  TempDir dir;
  const auto path = dir / "rows.h5";
  Bf16Tensor full({2, 10, 3});
  for (std::int64_t i = 0; i < full.numel(); ++i) full.data[i] = bf16_rne(float(i));
  {
    StateWriter w(path, sample_run());
    w.write_rows("t", full, 1, 4, 6, {"modified", "[2, rows, 3]", "", {}});
    EXPECT_THROW(w.write_rows("u", full, 1, 4, 10, {"modified", "x", "", {}}), Error);
    w.commit();
  }
  StateReader r(path);
  auto rec = r.record("/t");
  EXPECT_EQ(rec.full_shape, (Shape{2, 10, 3}));
  EXPECT_EQ(rec.info.shape, (Shape{2, 3, 3}));
  EXPECT_EQ(r.file().attr_string("/t", "stored"), "rows_4_to_6_of_axis_1");
  EXPECT_EQ(rec.stats.sha256_full, sha256_hex(full));
  auto stored = r.read_bf16("/t");
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t row = 0; row < 3; ++row)
      for (std::int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(stored.data[(b * 3 + row) * 3 + c], full.data[(b * 10 + row + 4) * 3 + c]);
}

TEST(Reports, StoredAttributeForms) {
  EXPECT_EQ(parse_stored("full", "x").kind, StoredRegion::Kind::full);
  EXPECT_EQ(parse_stored("", "x").kind, StoredRegion::Kind::full);
  EXPECT_EQ(parse_stored("none", "x").kind, StoredRegion::Kind::none);
  auto r = parse_stored("rows_0_to_255_of_axis_1", "x");
  EXPECT_EQ(r.kind, StoredRegion::Kind::rows);
  EXPECT_EQ(r.first, 0);
  EXPECT_EQ(r.last, 255);
  EXPECT_EQ(r.axis, 1);
  EXPECT_EQ(stored_name(r), "rows_0_to_255_of_axis_1");
  EXPECT_EQ(stored_shape({1, 4928, 4096}, r), (Shape{1, 256, 4096}));
  for (const char* bad : {"rows_5_to_2_of_axis_1", "rows_a_to_2_of_axis_1", "rows_0_to_2", "some"})
    EXPECT_THROW(parse_stored(bad, "x"), Error) << bad;
  EXPECT_EQ(parse_shape_json("[1, 616, 512]", "x"), (Shape{1, 616, 512}));
  EXPECT_THROW(parse_shape_json("[1, -2]", "x"), Error);
  EXPECT_THROW(parse_shape_json("{", "x"), Error);
}

// Every recording opens as a record_official/1 file; every dataset's description is
// consistent, and each fully stored tensor hashes to its recorded sha256_full.
TEST(Reports, ReadsEveryReferenceRecording) {
  const fs::path ref = psi::test::reference_dir();
  int files = 0, hashed = 0;
  for (const auto& entry : fs::directory_iterator(ref)) {
    if (entry.path().extension() != ".h5") continue;
    ++files;
    StateReader r(entry.path());
    EXPECT_EQ(r.kind(), FileKind::recording) << entry.path();
    EXPECT_EQ(r.format(), "record_official/1");
    EXPECT_THROW(r.run_info(), Error);
    for (const auto& di : r.datasets()) {
      SCOPED_TRACE(entry.path().string() + ":" + di.path);
      TensorRecord rec = r.record(di.path);
      if (di.kind == hdf5::ElemKind::u8) {
        EXPECT_TRUE(nlohmann::json::accept(r.read_text(di.path)));
        continue;
      }
      ASSERT_TRUE(rec.has_stats);
      ASSERT_TRUE(di.kind == hdf5::ElemKind::bf16 || di.kind == hdf5::ElemKind::f32) << hdf5::kind_name(di.kind);
      if (rec.stored.kind == StoredRegion::Kind::none) {
        EXPECT_EQ(numel(di.shape), 0);
        continue;
      }
      TensorStats s = di.kind == hdf5::ElemKind::bf16 ? tensor_stats(r.read_bf16(di.path))
                                                    : tensor_stats(r.read_f32(di.path));
      if (rec.stored.kind != StoredRegion::Kind::full) continue;  // the hash is of rows not stored
      EXPECT_EQ(s.sha256_full, rec.stats.sha256_full);
      EXPECT_EQ(s.nonfinite_count, rec.stats.nonfinite_count);
      EXPECT_EQ(s.absmax, rec.stats.absmax);  // exact: a maximum needs no summation order
      ++hashed;
    }
  }
  EXPECT_EQ(files, 9);
  EXPECT_EQ(hashed, 274);  // the fully stored bf16/float32 tensors of the nine files
}
