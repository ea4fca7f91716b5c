// psi compare counts every difference by kind (a value, the sign of zero, a NaN's payload or
// sign, a NaN against a number, an infinity), keeps its distances to the pairs of two finite
// elements (a NaN does not make max_ulp or rel_l2 `nan`; the non-finite pairs are counted apart),
// and with --by-value compares tensors of two element types by value, in ULPs of the coarser
// type (compare/by_value.h). Fixtures: tests/data/compare_kinds/make_fixtures.py, the safetensors
// package's writer, each element set by its bits; a few HDF5 files written here through psi.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compare/by_value.h"
#include "engine/distance.h"
#include "hdf5/h5.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;
using nlohmann::json;
using psi::testing::Outcome;
using psi::testing::run_psi_in;
using psi::testing::TempDir;

namespace {

const fs::path kData = fs::path(PSI_TEST_DATA) / "compare_kinds";

Outcome compare(const fs::path& a, const fs::path& b, const std::string& extra = "") {
  TempDir dir;
  return run_psi_in("compare " + a.string() + " " + b.string() + extra, dir.path());
}

json dataset(const json& report, const std::string& path) {
  for (const auto& d : report["datasets"])
    if (d["path_a"] == path) return d;
  ADD_FAILURE() << "no dataset " << path << " in " << report.dump();
  return json::object();
}

json kinds(std::int64_t value, std::int64_t sign_of_zero, std::int64_t nan_payload, std::int64_t nan_vs_number,
           std::int64_t inf) {
  return {{"value", value}, {"sign_of_zero", sign_of_zero}, {"nan_payload", nan_payload},
          {"nan_vs_number", nan_vs_number}, {"inf", inf}};
}

float f32_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// The fixture's float32 tensors (make_fixtures.py), for the expected relative L2.
const std::vector<std::uint32_t> kA = {0x3f800000, 0x00000000, 0x7fc00000, 0x40000000, 0x40400000, 0xff800000, 0x40a00000,
                                       0x7fc00000, 0x7f800000, 0x3fc00000, 0xc0200000, 0x3e800000, 0x7fc00000};
const std::vector<std::uint32_t> kB = {0x3f800001, 0x80000000, 0x7fc00001, 0x7fc00000, 0x7f800000, 0x7f800000, 0x40a00000,
                                       0x7fc00000, 0x7f800000, 0x3fc00000, 0xc0200000, 0x3e800003, 0xffc00000};

}  // namespace

// One ulp, +0/-0, a NaN's payload and sign, a NaN against a number, an infinity against a number
// and against the opposite one: each counted under its kind; a NaN and an Inf equal on both sides
// are pairs left out of the distance, matched; the distance over the six finite pairs stays finite.
TEST(CompareKinds, EveryDifferenceIsCountedByKind) {
  const Outcome r = compare(kData / "kinds_a.safetensors", kData / "kinds_b.safetensors", " --json");
  ASSERT_EQ(r.status, 1) << r.out << r.err;
  const json j = json::parse(r.out);
  const json f = dataset(j, "/f32");
  EXPECT_EQ(f["status"], "differs");
  EXPECT_EQ(f["compared"], 13);
  EXPECT_EQ(f["differing"], 8);
  EXPECT_EQ(f["difference_kinds"], kinds(2, 1, 2, 1, 2)) << f.dump();
  EXPECT_EQ(f["non_finite"], json({{"pairs", 7}, {"matched", 2}})) << f.dump();
  // The finite pairs: 1 ulp at [0], 3 ulps at [11], the sign of zero at [1]; no NaN in the summary.
  EXPECT_EQ(f["max_ulp"], 3) << f.dump();
  EXPECT_EQ(f["sign_flips"], 0);
  double num = 0, den = 0;
  for (std::size_t i : {0u, 1u, 6u, 9u, 10u, 11u}) {
    const double a = f32_bits(kA[i]), b = f32_bits(kB[i]);
    num += (a - b) * (a - b);
    den += b * b;
  }
  ASSERT_TRUE(f["rel_l2"].is_number()) << f.dump();
  EXPECT_DOUBLE_EQ(f["rel_l2"].get<double>(), std::sqrt(num / den));
  EXPECT_GT(f["rel_l2"].get<double>(), 0.0);
  // BF16: a NaN payload (0x7fc0 against 0x7fc1) and one BF16 ulp; -Inf on both sides matched.
  const json bf = dataset(j, "/bf");
  EXPECT_EQ(bf["difference_kinds"], kinds(1, 0, 1, 0, 0)) << bf.dump();
  EXPECT_EQ(bf["non_finite"], json({{"pairs", 2}, {"matched", 1}}));
  EXPECT_EQ(bf["max_ulp"], 1);
  ASSERT_TRUE(bf["rel_l2"].is_number()) << bf.dump();
  // float64 holding the same NaN on both sides: bitwise equal, its summary 0, not nan.
  const json d = dataset(j, "/d");
  EXPECT_EQ(d["status"], "equal");
  EXPECT_EQ(d["difference_kinds"], kinds(0, 0, 0, 0, 0));
  EXPECT_EQ(d["non_finite"], json({{"pairs", 1}, {"matched", 1}}));
  EXPECT_EQ(d["max_ulp"], 0);
  EXPECT_EQ(d["rel_l2"], 0.0);
}

// The listing names each element's kind; the text view adds one line of counts under a dataset
// that differs, and one of its non-finite pairs.
TEST(CompareKinds, TheViewsNameTheKinds) {
  const Outcome all = compare(kData / "kinds_a.safetensors", kData / "kinds_b.safetensors", " --only '^/f32$' --json --differences all");
  ASSERT_EQ(all.status, 1) << all.out << all.err;
  const json list = json::parse(all.out)["datasets"][0]["differences"];
  ASSERT_EQ(list.size(), 8u) << all.out;
  const std::vector<std::pair<int, std::string>> expect = {{0, "value"},         {1, "sign_of_zero"}, {2, "nan_payload"},
                                                           {3, "nan_vs_number"}, {4, "inf"},          {5, "inf"},
                                                           {11, "value"},        {12, "nan_payload"}};
  for (std::size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(list[i]["flat_index"], expect[i].first) << i;
    EXPECT_EQ(list[i]["kind"], expect[i].second) << i;
  }
  EXPECT_EQ(list[2]["b"], "nan (0x7fc00001)");
  EXPECT_EQ(list[7]["b"], "-nan (0xffc00000)");
  const Outcome text = compare(kData / "kinds_a.safetensors", kData / "kinds_b.safetensors", " --differences 3");
  ASSERT_EQ(text.status, 1) << text.out << text.err;
  EXPECT_NE(text.out.find("\n    differences: 2 values, 1 sign of zero, 2 NaN payloads, 1 NaN against a number, 2 infinities\n"
                          "    non-finite: 7 pairs hold a NaN or an infinity (2 bitwise equal), left out of sign_flips, max_ulp and rel_l2\n"
                          "    @0 [0]: A=1 (0x3f800000) B=1.00000012 (0x3f800001), 1 ulp\n"
                          "    @1 [1]: A=0 (0x00000000) B=-0 (0x80000000), the sign of zero\n"
                          "    @2 [2]: A=nan (0x7fc00000) B=nan (0x7fc00001), NaN payloads or signs differ\n"),
            std::string::npos)
      << text.out;
  // An equal tensor holding a NaN: no line of differences, the non-finite pair said.
  EXPECT_NE(text.out.find("/d\n    non-finite: 1 pair holds a NaN or an infinity (1 bitwise equal)"), std::string::npos)
      << text.out;
}

// float32 holding BF16 values against the same values as BF16: a dtype mismatch (exit 2, naming
// both dtypes and --by-value), equal by value with --by-value (a NaN of another payload is
// equal by value), and, against one BF16 ulp up, -0 and a NaN, those differences by kind in BF16
// ulps.
TEST(CompareByValue, Float32AgainstBf16) {
  const fs::path f32 = kData / "bv_f32.safetensors", bf16 = kData / "bv_bf16.safetensors";
  const Outcome refused = compare(f32, bf16, " --only '^/x$'");
  EXPECT_EQ(refused.status, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("psi: error: " + f32.string() + ":/x vs " + bf16.string() +
                             ":/x: dtype_mismatch: dtype float32 in A vs bfloat16 in B (--by-value compares them by value)"),
            std::string::npos)
      << refused.err;

  const Outcome equal = compare(f32, bf16, " --only '^/x$' --by-value --json");
  EXPECT_EQ(equal.status, 0) << equal.out << equal.err;
  const json e = dataset(json::parse(equal.out), "/x");
  EXPECT_EQ(e["status"], "equal");
  EXPECT_EQ(e["by_value"], json({{"dtype_a", "float32"}, {"dtype_b", "bfloat16"}, {"ulp_unit", "bfloat16"}}));
  EXPECT_EQ(e["non_finite"], json({{"pairs", 2}, {"matched", 2}}));
  EXPECT_EQ(e["difference_kinds"], kinds(0, 0, 0, 0, 0));
  EXPECT_NE(e["note"].get<std::string>().find("compared by value (--by-value): float32 in A vs bfloat16 in B, ULPs of bfloat16"),
            std::string::npos)
      << e.dump();

  const Outcome differ = compare(f32, kData / "bv_bf16_diff.safetensors", " --only '^/x$' --by-value --json --differences all");
  EXPECT_EQ(differ.status, 1) << differ.out << differ.err;
  const json d = dataset(json::parse(differ.out), "/x");
  EXPECT_EQ(d["status"], "differs");
  EXPECT_EQ(d["differing"], 3);
  EXPECT_EQ(d["difference_kinds"], kinds(1, 1, 0, 1, 0)) << d.dump();
  EXPECT_EQ(d["non_finite"], json({{"pairs", 3}, {"matched", 2}}));
  EXPECT_EQ(d["max_ulp"], 1);
  ASSERT_EQ(d["differences"].size(), 3u);
  EXPECT_EQ(d["differences"][0]["a"], "1 (0x3f800000)");  // each side shown in its own type
  EXPECT_EQ(d["differences"][0]["b"], "1.0078125 (0x3f81)");
  EXPECT_EQ(d["differences"][0]["ulp"], 1);
  EXPECT_EQ(d["differences"][1]["kind"], "sign_of_zero");
  EXPECT_EQ(d["differences"][2]["kind"], "nan_vs_number");
}

// float32 values that are no BF16 values against BF16: the distance in BF16 ulps counts the BF16
// steps across the smallest BF16 interval holding both, at least 1.
TEST(CompareByValue, ValuesBetweenBf16StepsCountTheStepsAcross) {
  const Outcome r = compare(kData / "bv_f32.safetensors", kData / "bv_bf16.safetensors", " --only '^/y$' --by-value --json --differences all");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const json y = dataset(json::parse(r.out), "/y");
  EXPECT_EQ(y["difference_kinds"], kinds(2, 0, 0, 0, 0));
  ASSERT_EQ(y["differences"].size(), 2u) << y.dump();
  EXPECT_EQ(y["differences"][0]["ulp"], 1);  // 1 + 2^-9 against 1: within [1, 1 + 2^-7]
  EXPECT_EQ(y["differences"][1]["ulp"], 2);  // 1 + 2^-7 + 2^-20 against 1: within [1, 1 + 2^-6]
  EXPECT_EQ(y["max_ulp"], 2);
}

TEST(CompareByValue, UlpsOfTheCoarserType) {
  using psi::compare::UlpUnit;
  using psi::compare::ulps_in;
  EXPECT_EQ(psi::compare::coarser_unit(psi::hdf5::ElemKind::f32, psi::hdf5::ElemKind::bf16), UlpUnit::bf16);
  EXPECT_EQ(psi::compare::coarser_unit(psi::hdf5::ElemKind::f64, psi::hdf5::ElemKind::f32), UlpUnit::f32);
  EXPECT_EQ(psi::compare::coarser_unit(psi::hdf5::ElemKind::i64, psi::hdf5::ElemKind::f64), UlpUnit::f64);
  EXPECT_EQ(psi::compare::coarser_unit(psi::hdf5::ElemKind::u8, psi::hdf5::ElemKind::i64), UlpUnit::one);
  EXPECT_EQ(ulps_in(UlpUnit::bf16, 1.0, 1.0 + 0x1p-7), 1);
  EXPECT_EQ(ulps_in(UlpUnit::bf16, -1.0, -1.0 - 0x1p-9), 1);  // negative: outward is away from zero
  EXPECT_EQ(ulps_in(UlpUnit::bf16, 1.0 + 0x1p-9, 1.0 + 0x1p-8), 1);  // both inside one step
  EXPECT_EQ(ulps_in(UlpUnit::bf16, 1.0 - 0x1p-20, 1.0 + 0x1p-20), 2);  // straddling a BF16 value
  EXPECT_EQ(ulps_in(UlpUnit::f32, 1.0, 1.0 + 0x1p-30), 1);
  EXPECT_EQ(ulps_in(UlpUnit::f64, 1.0, 1.0 + 0x1p-51), 2);
  EXPECT_EQ(ulps_in(UlpUnit::one, 3.0, 10.0), 7);
  EXPECT_EQ(ulps_in(UlpUnit::bf16, 0.0, -0.0), 0);
  EXPECT_EQ(ulps_in(UlpUnit::bf16, 1.0, std::nan("")), psi::kUlpNaN);
  // Beyond BF16's largest finite value (0x7f7f) the next step up is +Inf.
  EXPECT_EQ(ulps_in(UlpUnit::bf16, double(f32_bits(0x7f7f0000)), double(std::numeric_limits<float>::max())), 1);
  EXPECT_TRUE(psi::compare::exact_in_double(std::int64_t(1) << 53));
  EXPECT_FALSE(psi::compare::exact_in_double((std::int64_t(1) << 53) + 1));
  EXPECT_FALSE(psi::compare::exact_in_double(std::numeric_limits<std::int64_t>::max()));
}

// Integer kinds by value: uint8 against float32 in float32 ulps; an int64 that no double holds is
// refused (exit 2, naming the element), not rounded.
TEST(CompareByValue, IntegersThatFitAndOneThatDoesNot) {
  TempDir dir;
  const std::vector<std::uint8_t> u8 = {0, 3, 255};
  const std::vector<float> f = {0.0f, 3.0f, std::nextafter(255.0f, 300.0f)};
  const std::vector<std::int64_t> big = {1, (std::int64_t(1) << 53) + 1};
  const std::vector<double> d = {1.0, 0x1p53};
  auto write = [&](const fs::path& p, psi::hdf5::ElemKind k, std::size_t n, const void* data) {
    psi::hdf5::File h = psi::hdf5::File::create(p);
    h.write_elements("/t", k, {std::int64_t(n)}, data, {});
    h.commit();
  };
  write(dir / "u8.h5", psi::hdf5::ElemKind::u8, u8.size(), u8.data());
  write(dir / "f.h5", psi::hdf5::ElemKind::f32, f.size(), f.data());
  write(dir / "big.h5", psi::hdf5::ElemKind::i64, big.size(), big.data());
  write(dir / "d.h5", psi::hdf5::ElemKind::f64, d.size(), d.data());
  const Outcome ok = compare(dir / "u8.h5", dir / "f.h5", " --by-value --json");
  EXPECT_EQ(ok.status, 1) << ok.out << ok.err;
  const json t = dataset(json::parse(ok.out), "/t");
  EXPECT_EQ(t["difference_kinds"], kinds(1, 0, 0, 0, 0));
  EXPECT_EQ(t["max_ulp"], 1);
  EXPECT_EQ(t["by_value"]["ulp_unit"], "float32");
  const Outcome bad = compare(dir / "big.h5", dir / "d.h5", " --by-value");
  EXPECT_EQ(bad.status, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("unsupported: " + (dir / "big.h5").string() +
                         ":/t: element 1 (9007199254740993) has no exact double value, so --by-value cannot compare it"),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << bad.err;
}
