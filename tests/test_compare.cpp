// psi compare, library level: bitwise equality, differing counts, first difference, ULP
// distances, relative L2, stored-row slices, dtype/shape mismatches and the recordings.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "compare/compare.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "report/compare_table.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;
using namespace psi::hdf5;
using namespace psi::compare;

namespace {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("psi_test_compare_" + std::string(info->name()) + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  fs::path dir_;
};

const fs::path kRef = psi::test::reference_dir();

Bf16Tensor ramp_bf16(Shape s) {
  Bf16Tensor t(std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = bf16_rne(float(i % 97) * 0.0625f - 2.5f);
  return t;
}

F32Tensor ramp_f32(Shape s) {
  F32Tensor t(std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = float(i) / 3.0f - 1.0f;
  return t;
}

F64Tensor ramp_f64(Shape s) {
  F64Tensor t(std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = std::sin(double(i));
  return t;
}

struct Contents {
  Bf16Tensor b = ramp_bf16({2, 3, 5});
  F32Tensor f = ramp_f32({4, 4});
  F64Tensor d = ramp_f64({9});
  std::string text = R"({"weights": [1, 2, 3]})";
  bool json = true;  // the text is written as declared JSON (StateWriter::write_json)
  std::optional<std::string> time_fields;        // the text's attribute time_fields, when set
  std::optional<std::string> provenance_fields;  // and its provenance_fields
};

void write_psi(const fs::path& p, const Contents& c) {
  StateWriter w(p, RunInfo{});
  w.write("g/bf", c.b, {"modified", "[2, 3, 5]", "", {}});
  w.write("g/f32", c.f, {"modified", "[4, 4]", "", {}});
  w.write("g/f64", c.d, {"dense", "[9]", "", {}});
  if (c.json) w.write_json("g/weights_json", c.text);
  else w.write_text("g/weights_json", c.text);
  if (c.time_fields) w.set_attrs("g/weights_json", {{"time_fields", *c.time_fields}});
  if (c.provenance_fields) w.set_attrs("g/weights_json", {{"provenance_fields", *c.provenance_fields}});
  w.commit();
}

const DatasetComparison& row(const CompareReport& r, const std::string& path) {
  for (const auto& d : r.datasets)
    if (d.path_a == path || (d.path_a.empty() && d.path_b == path)) return d;
  throw std::runtime_error("no row for " + path);
}

// ||a-b|| / ||b|| when a and b differ in element k only, as engine/distance.h computes it.
double single_rel_l2(double ak, double bk, const std::vector<double>& b) {
  double ref = 0;
  for (double v : b) ref += v * v;
  return std::sqrt((ak - bk) * (ak - bk) / ref);
}

}  // namespace

TEST(Compare, IdenticalFilesAreBitwiseEqual) {
  TempDir dir;
  Contents c;
  write_psi(dir / "a.h5", c);
  write_psi(dir / "b.h5", c);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  ASSERT_EQ(r.datasets.size(), 4u);
  for (const auto& d : r.datasets) {
    EXPECT_EQ(d.status, CompareStatus::equal) << d.path_a;
    EXPECT_EQ(d.differing, 0);
    EXPECT_FALSE(d.first);
  }
  EXPECT_EQ(row(r, "/g/bf").compared, 30);
  EXPECT_EQ(row(r, "/g/bf").distance->max_ulp_same_sign, 0);
  EXPECT_EQ(row(r, "/g/bf").distance->rel_l2, 0.0);
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.format_a, "psi-h5/1");
}

TEST(Compare, OneFlippedBitPerDtype) {
  TempDir dir;
  Contents a, b;
  // bf16: flat 17 = [1, 0, 2]; mantissa bit 2 -> 4 BF16 steps (same sign, same binade or next).
  b.b.data[17].bits ^= 0x0004;
  // float32: flat 6 = [1, 2]; mantissa bit 0 -> 1 float32 ULP.
  b.f.data[6] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(b.f.data[6]) ^ 1u);
  // float64: flat 4; mantissa bit 3 -> 8 float64 ULPs.
  b.d.data[4] = std::bit_cast<double>(std::bit_cast<std::uint64_t>(b.d.data[4]) ^ 8u);
  // Text that is not JSON is compared byte by byte.
  a.json = b.json = false;
  a.text = b.text = "weights: 1, 2, 3";
  b.text[3] = 'G';
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(r.exit_code(), 1);

  const auto& bf = row(r, "/g/bf");
  EXPECT_EQ(bf.status, CompareStatus::differs);
  EXPECT_EQ(bf.differing, 1);
  EXPECT_EQ(bf.compared, 30);
  ASSERT_TRUE(bf.first);
  EXPECT_EQ(bf.first->flat_index, 17);
  EXPECT_EQ(bf.first->index, (Shape{1, 0, 2}));
  EXPECT_EQ(bf.distance->max_ulp_same_sign, 4);
  std::vector<double> ref_b;
  for (auto v : b.b.data) ref_b.push_back(v.to_float());
  EXPECT_EQ(bf.distance->rel_l2, single_rel_l2(a.b.data[17].to_float(), b.b.data[17].to_float(), ref_b));
  char hex[16];
  std::snprintf(hex, sizeof hex, "(0x%04x)", unsigned(a.b.data[17].bits));
  EXPECT_NE(bf.first->a_value.find(hex), std::string::npos) << bf.first->a_value;

  const auto& f = row(r, "/g/f32");
  EXPECT_EQ(f.differing, 1);
  EXPECT_EQ(f.first->flat_index, 6);
  EXPECT_EQ(f.first->index, (Shape{1, 2}));
  EXPECT_EQ(f.distance->max_ulp_same_sign, 1);

  const auto& d = row(r, "/g/f64");
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.first->flat_index, 4);
  EXPECT_EQ(d.distance->max_ulp_same_sign, 8);
  std::vector<double> ref_d(b.d.data.begin(), b.d.data.end());
  EXPECT_EQ(d.distance->rel_l2, single_rel_l2(a.d.data[4], b.d.data[4], ref_d));

  const auto& t = row(r, "/g/weights_json");  // bytewise
  EXPECT_EQ(t.status, CompareStatus::differs);
  EXPECT_EQ(t.dtype, "uint8");
  EXPECT_EQ(t.differing, 1);
  EXPECT_EQ(t.first->flat_index, 3);
  EXPECT_FALSE(t.distance);
}

// Text datasets holding JSON (a report's cases and tables) are compared field by field, naming
// the first differing field; fields that measure time differ from run to run and are counted
// apart, compared only with timing. A field is a time because both files say so (the text's
// attribute time_fields, a table's time_columns), never because of its name's words.
TEST(Compare, JsonTextIsComparedFieldByFieldWithTimingApart) {
  TempDir dir;
  Contents a, b;
  a.text = R"J({"cases": [{"rel_l2": 0.5, "wall_mean_s": 1.25}], "tables": [{"columns": ["case", "wall (ms)", "ok"],
              "time_columns": ["wall (ms)"], "rows": [["x", "12.5", "yes"]]}]})J";
  b.text = R"J({"cases": [{"rel_l2": 0.5, "wall_mean_s": 1.5}], "tables": [{"columns": ["case", "wall (ms)", "ok"],
              "time_columns": ["wall (ms)"], "rows": [["x", "13.0", "yes"]]}]})J";
  a.time_fields = b.time_fields = R"(["wall_mean_s"])";
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  const auto& t = row(r, "/g/weights_json");
  EXPECT_EQ(t.status, CompareStatus::equal_as_json) << t.note;
  EXPECT_EQ(t.compared, 9);
  EXPECT_NE(t.note.find("2 timing fields not compared (2 differ; --timing compares them)"), std::string::npos) << t.note;
  EXPECT_EQ(r.exit_code(), 0);

  CompareOptions timed;
  timed.timing = true;
  r = compare_files(dir / "a.h5", dir / "b.h5", timed);
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::differs);
  EXPECT_EQ(row(r, "/g/weights_json").differing, 2);
  EXPECT_NE(row(r, "/g/weights_json").note.find("first differing field cases[0].wall_mean_s: A=1.25 B=1.5"),
            std::string::npos)
      << row(r, "/g/weights_json").note;
  EXPECT_EQ(r.exit_code(), 1);

  // A result field that differs is a difference, named, whatever the option.
  b.text = R"({"cases": [{"rel_l2": 0.25, "wall_mean_s": 1.25}], "tables": []})";
  write_psi(dir / "b.h5", b);
  r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::differs);
  EXPECT_NE(row(r, "/g/weights_json").note.find("first differing field cases[0].rel_l2: A=0.5 B=0.25"), std::string::npos)
      << row(r, "/g/weights_json").note;
}

// A field names a path because both files say so (attribute provenance_fields), never because of
// its name: a user's JSON whose "file" differs differs (exit 1), and so it does when only one
// file declares it; declared by both, the difference is shown and not counted.
TEST(Compare, OnlyFieldsBothFilesDeclareAreProvenance) {
  TempDir dir;
  Contents a, b;
  a.text = R"J({"cases": [{"file": "/data/run1/x.h5", "rel_l2": 0.5}]})J";
  b.text = R"J({"cases": [{"file": "/data/run2/x.h5", "rel_l2": 0.5}]})J";
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::differs) << row(r, "/g/weights_json").note;
  EXPECT_NE(row(r, "/g/weights_json").note.find("first differing field cases[0].file"), std::string::npos)
      << row(r, "/g/weights_json").note;
  EXPECT_EQ(r.exit_code(), 1);

  // A declaration that is not a JSON list of names declares nothing.
  for (const char* bad : {R"("file")", R"(["file")", R"({"file": true})", R"([1, 2])"}) {
    a.provenance_fields = b.provenance_fields = bad;
    write_psi(dir / "a.h5", a);
    write_psi(dir / "b.h5", b);
    EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5").exit_code(), 1) << bad;
  }
  b.provenance_fields.reset();
  write_psi(dir / "b.h5", b);

  a.provenance_fields = R"(["file"])";
  write_psi(dir / "a.h5", a);
  r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::differs);
  EXPECT_NE(row(r, "/g/weights_json").note.find(R"(the files declare different provenance fields (A ["file"], B null))"),
            std::string::npos)
      << row(r, "/g/weights_json").note;
  EXPECT_EQ(r.exit_code(), 1);

  b.provenance_fields = R"(["file"])";
  write_psi(dir / "b.h5", b);
  r = compare_files(dir / "a.h5", dir / "b.h5");
  const auto& t = row(r, "/g/weights_json");
  EXPECT_EQ(t.status, CompareStatus::equal_as_json) << t.note;  // the bytes differ: not bitwise equal
  EXPECT_NE(t.note.find(R"(paths of inputs differ, not counted (provenance: cases[0].file: A="/data/run1/x.h5" B="/data/run2/x.h5"))"),
            std::string::npos)
      << t.note;
  EXPECT_EQ(r.exit_code(), 0);

  // What lies beside a declared key is compared as before.
  b.text = R"J({"cases": [{"file": "/data/run2/x.h5", "rel_l2": 0.25}]})J";
  write_psi(dir / "b.h5", b);
  EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5").exit_code(), 1);
}

// What neither file declares a time is compared, however it is named; what one file alone
// declares is compared too (a file cannot exempt a field of the other), and the note says so.
TEST(Compare, OnlyFieldsBothFilesDeclareAreTimes) {
  TempDir dir;
  Contents a, b;
  a.text = R"J({"cases": [{"wall_mean_s": 1.25, "block_s": 2}], "tables": [{"columns": ["case", "wall (ms)"],
              "rows": [["x", "12.5"]]}]})J";
  b.text = R"J({"cases": [{"wall_mean_s": 1.5, "block_s": 3}], "tables": [{"columns": ["case", "wall (ms)"],
              "time_columns": ["wall (ms)"], "rows": [["x", "13.0"]]}]})J";
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::differs);
  EXPECT_EQ(row(r, "/g/weights_json").differing, 4) << row(r, "/g/weights_json").note;  // b's time_columns too

  a.time_fields = R"(["wall_mean_s", "block_s"])";
  b.time_fields = R"(["wall_mean_s"])";
  a.text = R"J({"cases": [{"wall_mean_s": 1.25, "block_s": 2}]})J";
  b.text = R"J({"cases": [{"wall_mean_s": 1.5, "block_s": 3}]})J";
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  r = compare_files(dir / "a.h5", dir / "b.h5");
  const auto& t = row(r, "/g/weights_json");
  EXPECT_EQ(t.status, CompareStatus::differs);
  EXPECT_EQ(t.differing, 1);
  EXPECT_NE(t.note.find("first differing field cases[0].block_s: A=2 B=3"), std::string::npos) << t.note;
  EXPECT_NE(t.note.find("1 timing fields not compared (1 differ; --timing compares them)"), std::string::npos) << t.note;
  EXPECT_NE(t.note.find(R"(the files declare different time fields (A ["wall_mean_s","block_s"], B ["wall_mean_s"]))"),
            std::string::npos)
      << t.note;
}

TEST(Compare, UlpDistanceAcrossZeroAndNaN) {
  TempDir dir;
  const float tiny = std::numeric_limits<float>::denorm_min();
  {
    auto f = hdf5::File::create(dir / "a.h5");
    f.write_f32("x", F32Tensor({3}, {1.0f, -0.0f, tiny}));
    f.write_f32("n", F32Tensor({2}, {1.0f, 2.0f}));
    f.commit();
  }
  {
    auto f = hdf5::File::create(dir / "b.h5");
    f.write_f32("x", F32Tensor({3}, {std::nextafter(1.0f, 2.0f), 0.0f, -tiny}));
    f.write_f32("n", F32Tensor({2}, {1.0f, std::nanf("")}));
    f.commit();
  }
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  const auto& x = row(r, "/x");
  EXPECT_EQ(x.differing, 3);  // -0 and +0 differ in bits, although 0 ULPs apart
  // +denorm_min against -denorm_min is a sign flip, counted apart (2 ULPs through zero before);
  // the ULP maximum is the 1.0 pair's.
  EXPECT_EQ(x.distance->sign_flips, 1);
  EXPECT_EQ(x.distance->max_ulp_same_sign, 1);
  // The NaN is a difference of its own kind, left out of the distance: the finite pair (1 and 1)
  // leaves max ULP and relative L2 at 0, not nan.
  const auto& n = row(r, "/n");
  EXPECT_EQ(n.differing, 1);
  ASSERT_TRUE(n.kinds);
  EXPECT_EQ(n.kinds->nan_vs_number, 1);
  EXPECT_EQ(n.non_finite.pairs, 1);
  EXPECT_EQ(n.non_finite.matched, 0);
  EXPECT_EQ(n.distance->max_ulp_same_sign, 0);
  EXPECT_EQ(n.distance->rel_l2, 0.0);
  EXPECT_NE(report::compare_table(r).find("differences: 1 NaN against a number"), std::string::npos) << report::compare_table(r);
  EXPECT_TRUE(nlohmann::json::accept(report::compare_json(r)));
}

// Two valid files whose tensors (or texts) differ in shape differ: exit 1, not bad input.
TEST(Compare, ShapeMismatchIsADifferenceNamingBothShapes) {
  TempDir dir;
  Contents a, b;
  b.f = ramp_f32({2, 8});
  a.json = b.json = false;
  a.text = "weights: 1, 2, 3";
  b.text = "weights: 1, 2, 3, 4";
  write_psi(dir / "a.h5", a);
  write_psi(dir / "b.h5", b);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/g/f32").status, CompareStatus::shape_mismatch);
  EXPECT_NE(row(r, "/g/f32").note.find("[4, 4] in A vs [2, 8] in B"), std::string::npos) << row(r, "/g/f32").note;
  EXPECT_EQ(row(r, "/g/weights_json").status, CompareStatus::shape_mismatch);
  EXPECT_EQ(row(r, "/g/bf").status, CompareStatus::equal);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_TRUE(r.errors().empty());
  const std::string table = report::compare_table(r);
  EXPECT_NE(table.find("2 differ in shape"), std::string::npos) << table;
  EXPECT_NE(table.find("-> exit 1"), std::string::npos) << table;
  EXPECT_EQ(nlohmann::json::parse(report::compare_json(r))["summary"]["shape_mismatch"], 2);
}

TEST(Compare, Float32AgainstBf16IsADtypeMismatch) {
  TempDir dir;
  {
    auto f = hdf5::File::create(dir / "a.h5");
    f.write_f32("x", ramp_f32({4}));
    f.commit();
  }
  {
    auto f = hdf5::File::create(dir / "b.h5");
    f.write_bf16("x", ramp_bf16({4}));
    f.commit();
  }
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/x").status, CompareStatus::dtype_mismatch);
  EXPECT_NE(row(r, "/x").note.find("float32 in A vs bfloat16 in B"), std::string::npos) << row(r, "/x").note;
  EXPECT_EQ(r.exit_code(), 2);
}

TEST(Compare, MissingAndNonHdf5FilesAreBadInput) {
  TempDir dir;
  write_psi(dir / "a.h5", Contents{});
  { std::ofstream(dir / "text.h5") << "hello\n"; }
  for (const auto& bad : {dir / "text.h5", dir / "missing.h5"}) {
    try {
      compare_files(dir / "a.h5", bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Exit::bad_input);
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
    }
  }
}

TEST(Compare, OnlyFilterAndDatasetsInOneFile) {
  TempDir dir;
  Contents c, b;
  b.d.data[0] = 5.0;
  write_psi(dir / "a.h5", c);
  {
    StateWriter w(dir / "b.h5", RunInfo{});
    w.write("g/bf", b.b, {"modified", "", "", {}});
    w.write("g/f64", b.d, {"dense", "", "", {}});
    w.write("extra/only_b", b.f, {"dense", "", "", {}});
    w.commit();
  }
  auto all = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(all.count(CompareStatus::only_a), 2);  // g/f32, g/weights_json
  EXPECT_EQ(all.count(CompareStatus::only_b), 1);
  EXPECT_EQ(row(all, "/extra/only_b").status, CompareStatus::only_b);
  EXPECT_EQ(all.exit_code(), 1);  // g/f64 differs

  CompareOptions only_bf;
  only_bf.only = "^/g/bf$";
  auto r = compare_files(dir / "a.h5", dir / "b.h5", only_bf);
  ASSERT_EQ(r.datasets.size(), 1u);
  EXPECT_EQ(r.datasets[0].path_a, "/g/bf");
  EXPECT_EQ(r.exit_code(), 0);

  CompareOptions only_f;
  only_f.only = "f3|only";  // regex alternation, searched anywhere in the path
  auto r2 = compare_files(dir / "a.h5", dir / "b.h5", only_f);
  EXPECT_EQ(r2.datasets.size(), 2u);
  EXPECT_EQ(r2.exit_code(), 1);  // one-file datasets alone: nothing compared, never a pass
  EXPECT_NE(report::compare_table(r2).find("nothing was compared"), std::string::npos) << report::compare_table(r2);
  only_f.strict = true;
  EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5", only_f).exit_code(), 1);

  // Without a subset asked for, datasets in one file only fail a bitwise-equality check, and
  // nothing compared never passes.
  CompareOptions subset;
  subset.subset = true;
  subset.only = "^/g/bf$|only";
  EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5", subset).exit_code(), 0);
  CompareOptions none;
  none.only = "^/no/such$";
  EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5", none).exit_code(), 1);

  CompareOptions broken;
  broken.only = "([";
  EXPECT_THROW(compare_files(dir / "a.h5", dir / "b.h5", broken), Error);
}

// --map with '*' (issue 56): a '*' matches within one component, TO's '*'s take what FROM's
// matched in order, the rest of the path follows, and FROM still ends at a component boundary.
TEST(Compare, PathMapGlobs) {
  const PathMap m = parse_path_map("run/step_*/video=states/*/video_latent");
  EXPECT_EQ(m.from, "/run/step_*/video");
  EXPECT_EQ(m.to, "/states/*/video_latent");
  EXPECT_EQ(map_path(m, "/run/step_3/video"), "/states/3/video_latent");
  EXPECT_EQ(map_path(m, "/run/step_12/video/rows"), "/states/12/video_latent/rows");
  EXPECT_EQ(map_path(m, "/run/step_/video"), "/states//video_latent");  // '*' may match nothing
  EXPECT_EQ(map_path(m, "/run/step_3/videos"), std::nullopt);
  EXPECT_EQ(map_path(m, "/run/step_3/x/video"), std::nullopt);  // '*' never takes a '/'
  EXPECT_EQ(map_path(m, "/run/step_3"), std::nullopt);
  EXPECT_EQ(map_path({"/r*x*/s*", "/t/*/*/*"}, "/r1x2x3/s4"), "/t/1/2x3/4");  // the first '*' as short as it can
  EXPECT_EQ(map_path({"/a/*", "/b/*"}, "/a/x/y"), "/b/x/y");
  EXPECT_EQ(map_path({"/*/", "/*-"}, "/x/y"), "/x-y");
  EXPECT_THROW(parse_path_map("run/*/video=states/video"), Error);
  EXPECT_THROW(parse_path_map("=states"), Error);
  EXPECT_THROW(parse_path_map("/a" + std::string(kMaxMapText, '*') + "=/b"), Error);
  // A hostile file's long name costs nothing past the components the pattern has.
  EXPECT_EQ(map_path(m, "/run/step_1/video/" + std::string(1 << 20, 'x')), "/states/1/video_latent/" + std::string(1 << 20, 'x'));
}

// --map matches whole path components (issue 43.2): /official-h200 names /official-h200/x and
// not /official-h200-flash/x, which a prefix of the name used to capture.
TEST(Compare, PathMapMatchesWholeComponents) {
  const PathMap m{"/official-h200", "/dense"};
  EXPECT_TRUE(maps_path(m, "/official-h200"));
  EXPECT_TRUE(maps_path(m, "/official-h200/attn1"));
  EXPECT_FALSE(maps_path(m, "/official-h200-flash/attn1"));
  EXPECT_FALSE(maps_path(m, "/official-h2"));
  EXPECT_TRUE(maps_path({"/official-h200/", "/dense/"}, "/official-h200/attn1"));
  EXPECT_FALSE(maps_path({"/official-h200/", "/dense/"}, "/official-h200"));

  TempDir dir;
  Contents c;
  {
    StateWriter w(dir / "a.h5", RunInfo{});
    w.write("official-h200/t", c.b, {"modified", "", "", {}});
    w.write("official-h200-flash/t", c.b, {"modified", "", "", {}});
    w.commit();
  }
  {
    StateWriter w(dir / "b.h5", RunInfo{});
    w.write("dense/t", c.b, {"modified", "", "", {}});
    w.write("official-h200-flash/t", c.b, {"modified", "", "", {}});
    w.commit();
  }
  CompareOptions o;
  o.map = {{"/official-h200", "/dense"}};
  const auto r = compare_files(dir / "a.h5", dir / "b.h5", o);
  EXPECT_EQ(row(r, "/official-h200/t").path_b, "/dense/t");
  EXPECT_EQ(row(r, "/official-h200-flash/t").path_b, "/official-h200-flash/t");
  EXPECT_EQ(r.exit_code(), 0) << report::compare_table(r);
}

// A psi bf16 tensor against the same bits a user stored with h5py (uint16 + dtype attr).
TEST(Compare, PsiBf16AgainstUserUint16Bf16) {
  TempDir dir;
  const fs::path user = fs::path(PSI_TEST_DATA) / "compare" / "user_a.h5";
  const auto latent = hdf5::File::open_read(user).read_bf16("/stage1/latent");
  {
    StateWriter w(dir / "psi.h5", RunInfo{});
    w.write("stage1/latent", latent, {"modified", "[4, 8]", "", {}});
    w.commit();
  }
  CompareOptions o;
  o.only = "latent";
  auto r = compare_files(dir / "psi.h5", user, o);
  ASSERT_EQ(r.datasets.size(), 1u);
  EXPECT_EQ(r.datasets[0].status, CompareStatus::equal);
  EXPECT_EQ(r.datasets[0].dtype, "bfloat16");
  EXPECT_EQ(r.datasets[0].compared, 32);
  EXPECT_EQ(r.format_b, "plain HDF5");
}

TEST(Compare, StoredRowsAreComparedOnTheCommonRows) {
  TempDir dir;
  Bf16Tensor full = ramp_bf16({2, 10, 4});
  Bf16Tensor changed_outside = full, changed_inside = full;
  changed_outside.data[(1 * 10 + 7) * 4 + 0].bits ^= 1;  // row 7: not stored in B
  changed_inside.data[(1 * 10 + 3) * 4 + 2].bits ^= 1;   // row 3: stored in B
  auto write = [&](const fs::path& p, const Bf16Tensor& t, bool rows) {
    StateWriter w(p, RunInfo{});
    if (rows) w.write_rows("t", t, 1, 2, 5, {"modified", "", "", {}});
    else w.write("t", t, {"modified", "", "", {}});
    w.commit();
  };
  write(dir / "rows.h5", full, true);
  write(dir / "outside.h5", changed_outside, false);
  write(dir / "inside.h5", changed_inside, false);

  // The stored rows agree, but the whole tensors do not (issue 57): their hashes say so.
  auto r = compare_files(dir / "outside.h5", dir / "rows.h5");
  const auto& d = row(r, "/t");
  EXPECT_EQ(d.status, CompareStatus::differs);
  EXPECT_EQ(d.compared, 2 * 4 * 4);
  EXPECT_EQ(d.differing, 0);
  EXPECT_NE(d.note.find("rows 2..5 of axis 1"), std::string::npos) << d.note;
  EXPECT_NE(d.note.find("the stored elements are equal but the whole tensors differ"), std::string::npos) << d.note;
  write(dir / "same.h5", full, false);
  const auto same_report = compare_files(dir / "same.h5", dir / "rows.h5");
  const auto& same = row(same_report, "/t");
  EXPECT_EQ(same.status, CompareStatus::equal) << same.note;

  auto r2 = compare_files(dir / "inside.h5", dir / "rows.h5");
  const auto& d2 = row(r2, "/t");
  EXPECT_EQ(d2.status, CompareStatus::differs);
  EXPECT_EQ(d2.differing, 1);
  EXPECT_EQ(d2.first->index, (Shape{1, 3, 2}));   // full-tensor coordinates
  EXPECT_EQ(d2.first->flat_index, 1 * 40 + 3 * 4 + 2);
  EXPECT_EQ(d2.distance->max_ulp_same_sign, 1);
}

// Equal where both files hold a dataset, but one holds more: not everything was compared, so a
// plain compare fails (exit 1) and says why; asking for a subset passes.
TEST(Compare, DatasetsInOneFileFailUnlessASubsetIsAskedFor) {
  TempDir dir;
  Contents c;
  write_psi(dir / "a.h5", c);
  {
    StateWriter w(dir / "b.h5", RunInfo{});
    w.write("g/bf", c.b, {"modified", "", "", {}});
    w.commit();
  }
  const auto whole = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(whole.count(CompareStatus::equal), 1);
  EXPECT_EQ(whole.exit_code(), 1);
  EXPECT_NE(report::compare_table(whole).find("not everything was compared"), std::string::npos) << report::compare_table(whole);
  CompareOptions subset;
  subset.subset = true;
  EXPECT_EQ(compare_files(dir / "a.h5", dir / "b.h5", subset).exit_code(), 0);
}

TEST(Compare, StoredNoneIsListedAsNotStored) {
  TempDir dir;
  auto none = [](const fs::path& p, bool stored) {
    auto f = hdf5::File::create(p);
    if (stored) f.write_bf16("t", ramp_bf16({1, 3, 4}), {{"full_shape", std::string("[1, 3, 4]")}});
    else f.write_bf16("t", Bf16Tensor({0}), {{"full_shape", std::string("[1, 3, 4]")}, {"stored", std::string("none")}});
    f.commit();
  };
  none(dir / "a.h5", true);
  none(dir / "b.h5", false);
  auto r = compare_files(dir / "a.h5", dir / "b.h5");
  EXPECT_EQ(row(r, "/t").status, CompareStatus::not_stored);
  EXPECT_NE(row(r, "/t").note.find("stored='none' in B"), std::string::npos);
  EXPECT_EQ(r.exit_code(), 1);  // nothing was compared: not a pass
}

TEST(Compare, InconsistentStoredAttributeIsBadInput) {
  TempDir dir;
  {
    auto f = hdf5::File::create(dir / "a.h5");
    f.write_bf16("t", ramp_bf16({1, 3, 4}),
                 {{"full_shape", std::string("[1, 9, 4]")}, {"stored", std::string("rows_0_to_5_of_axis_1")}});
    f.commit();
  }
  auto r = compare_files(dir / "a.h5", dir / "a.h5");
  EXPECT_EQ(row(r, "/t").status, CompareStatus::unsupported);
  EXPECT_EQ(r.exit_code(), 2);
}

TEST(Compare, RecordingAgainstItselfIsEqual) {
  auto r = compare_files(kRef / "block_small.h5", kRef / "block_small.h5");
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.count(CompareStatus::equal), 43);  // 40 bf16, 2 float32, weights_json
  EXPECT_EQ(r.format_a, "record_official/1");
}

// The recorder measured FLASH against MATH on block_small (reference README): attn1 differs
// in 81,747 of 315,392 BF16 elements, video_out in 63,496, audio_out in 7,725 of 32,256, with
// relative L2 1.68e-3, 1.96e-3, 2.31e-3 (given to three digits there).
TEST(Compare, BlockSmallFlashAgainstMathMatchesTheRecorder) {
  const auto f = hdf5::File::open_read(kRef / "block_small.h5");
  struct Case {
    const char* probe;
    std::int64_t differing, total;
    double rel_l2;
  };
  for (const Case& c : {Case{"attn1", 81747, 315392, 1.68e-3}, Case{"video_out", 63496, 315392, 1.96e-3},
                        Case{"audio_out", 7725, 32256, 2.31e-3}}) {
    auto d = compare_datasets(f, std::string("/block_small/flash/") + c.probe, f,
                              std::string("/block_small/math/") + c.probe);
    EXPECT_EQ(d.status, CompareStatus::differs) << c.probe;
    EXPECT_EQ(d.differing, c.differing) << c.probe;
    EXPECT_EQ(d.compared, c.total) << c.probe;
    EXPECT_NEAR(d.distance->rel_l2, c.rel_l2, 0.005e-3) << c.probe;  // half a unit of the README's last digit
  }
}

// The full first block stores video rows 0..255 only; the README's counts are over exactly
// those rows (attn1 232,893 / 1,048,576, video_out 265,480, audio_out 43,174 / 258,048).
TEST(Compare, BlockFullFlashAgainstMathViaPathMap) {
  CompareOptions o;
  o.map = {{"/block_full_first/flash/", "/block_full_first/math/"}};
  o.only = "^/block_full_first/flash/(attn1|video_out|audio_out)$";
  auto r = compare_files(kRef / "block_full_flash.h5", kRef / "block_full_math.h5", o);
  const auto& attn1 = row(r, "/block_full_first/flash/attn1");
  EXPECT_EQ(attn1.path_b, "/block_full_first/math/attn1");
  EXPECT_EQ(attn1.differing, 232893);
  EXPECT_EQ(attn1.compared, 1048576);
  EXPECT_NEAR(attn1.distance->rel_l2, 1.46e-3, 0.005e-3);
  EXPECT_EQ(row(r, "/block_full_first/flash/video_out").differing, 265480);
  EXPECT_EQ(row(r, "/block_full_first/flash/audio_out").differing, 43174);
  EXPECT_EQ(row(r, "/block_full_first/flash/audio_out").compared, 258048);
  EXPECT_EQ(r.exit_code(), 1);
}

// A psi file holding a full-size tensor against a recording that stores rows 0..255 of it.
TEST(Compare, FullTensorAgainstRecordedRows) {
  TempDir dir;
  const auto rec = hdf5::File::open_read(kRef / "block_full_math.h5");
  const auto rows = rec.read_bf16("/block_full_first/math/audio_to_video_attn");
  ASSERT_EQ(rows.shape, (Shape{1, 256, 4096}));
  Bf16Tensor full({1, 4928, 4096});
  std::copy(rows.data.begin(), rows.data.end(), full.data.begin());
  full.data[300 * 4096 + 5] = bf16_rne(1.0f);  // beyond the recorded rows: not compared, but not the recorded tensor
  {
    StateWriter w(dir / "psi.h5", RunInfo{});
    w.write("block_full_first/math/audio_to_video_attn", full, {"modified", "", "", {}});
    w.commit();
  }
  CompareOptions o;
  o.only = "audio_to_video_attn";
  auto r = compare_files(dir / "psi.h5", kRef / "block_full_math.h5", o);
  ASSERT_EQ(r.datasets.size(), 1u);
  // Every stored row is equal; the whole tensors' hashes differ, and so do the tensors.
  EXPECT_EQ(r.datasets[0].status, CompareStatus::differs);
  EXPECT_EQ(r.datasets[0].compared, 256 * 4096);
  EXPECT_EQ(r.datasets[0].differing, 0);
  EXPECT_NE(r.datasets[0].note.find("rows 0..255 of axis 1"), std::string::npos) << r.datasets[0].note;
  EXPECT_NE(r.datasets[0].note.find("the whole tensors differ: sha256_full A "), std::string::npos) << r.datasets[0].note;
}
