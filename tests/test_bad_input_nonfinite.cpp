// NaN and Inf in inputs are reported where they arrive, never turned silently into finite
// numbers: psi-h5/1 files count them (nonfinite_count) and keep them out of the sums; psi compare
// counts a NaN or an Inf difference by its kind and keeps it out of max ULP and relative L2,
// which stay those of the finite pairs; the oracle refuses a non-finite
// operand (it has no exact value); a checkpoint's F32 NaN is refused and its F32 Inf kept as BF16
// Inf; a NaN weight carried through psi run shows as "all finite: NO" and in the saved states'
// counts.
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/bf16.h"
#include "engine/checkpoint/safetensors.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "tests/test_bad_input_checkpoint.h"
#include "tests/hashed.h"
#include "tests/test_bad_input_support.h"

namespace ck = psi::ckpt;
namespace hdf5 = psi::hdf5;
namespace rp = psi::hdf5;
using namespace psi::badinput;
using psi::Bf16;
using psi::Exit;

namespace {

const bool kCounted = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CountPrinter("non-finite"));
  return true;
}();

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

rp::RunInfo run_info() {
  rp::RunInfo r;
  r.experiment = "nonfinite";
  r.model_config = "tiny/ltx25";
  r.backend = "cpu";
  r.device_name = "test";
  return r;
}

fs::path f32_file(const fs::path& p, std::vector<float> v) {
  auto f = hdf5::File::create(p);
  const psi::Shape shape{std::int64_t(v.size())};
  psi::F32Tensor t(shape, std::move(v));
  f.write_f32("/x", t, {});
  f.commit();
  return p;
}

}  // namespace

TEST(NonFinite, StateFilesCountNonFiniteValuesAndKeepThemOutOfTheSums) {
  const fs::path dir = fresh_dir("nf_state");
  const fs::path p = dir / "s.h5";
  {
    rp::StateWriter w(p, run_info());
    psi::Bf16Tensor b({2, 3});
    const float vb[6] = {1.0f, kNaN, -kInf, 2.0f, kInf, -3.0f};
    for (int i = 0; i < 6; ++i) b.data[std::size_t(i)] = psi::bf16_rne(vb[i]);
    w.write("/bf16", b, {"input", "[2, 3] test", "", {}});
    w.write("/f32", psi::F32Tensor({4}, {kNaN, kNaN, 0.5f, -0.25f}), {"input", "[4] test", "", {}});
    w.write("/f64", psi::F64Tensor({3}, {std::numeric_limits<double>::infinity(), 1.0, 2.0}), {"input", "[3] test", "", {}});
    w.write("/finite", psi::F32Tensor({2}, {1.0f, 2.0f}), {"input", "[2] test", "", {}});
    w.commit();
  }
  rp::StateReader r(p);
  struct Expect {
    std::string ds;
    std::int64_t nonfinite;
    double sum, sumsq, absmax;
  };
  for (const Expect& e : std::vector<Expect>{{"/bf16", 3, 0.0, 14.0, 3.0},
                                             {"/f32", 2, 0.25, 0.3125, 0.5},
                                             {"/f64", 1, 3.0, 5.0, 2.0},
                                             {"/finite", 0, 3.0, 5.0, 2.0}}) {
    const rp::TensorRecord rec = r.record(e.ds);
    ASSERT_TRUE(rec.has_stats) << e.ds;
    EXPECT_EQ(rec.stats.nonfinite_count, e.nonfinite) << e.ds;
    EXPECT_EQ(rec.stats.sum_f64, e.sum) << e.ds;
    EXPECT_EQ(rec.stats.sumsq_f64, e.sumsq) << e.ds;
    EXPECT_EQ(rec.stats.absmax, e.absmax) << e.ds;
  }
  // The values themselves survive bit for bit.
  EXPECT_TRUE(r.read_bf16("/bf16").data[1].is_nan());
  EXPECT_TRUE(std::isnan(r.read_f32("/f32").data[0]));
}

TEST(NonFinite, CompareShowsNaNAndInfDifferencesAsSuch) {
  const fs::path dir = fresh_dir("nf_compare");
  const fs::path ref = f32_file(dir / "ref.h5", {1.0f, 2.0f, 3.0f, 4.0f});
  const fs::path nan = f32_file(dir / "nan.h5", {1.0f, 2.0f, kNaN, 4.0f});
  const fs::path inf = f32_file(dir / "inf.h5", {1.0f, kInf, 3.0f, 4.0f});
  auto json_of = [](const fs::path& a, const fs::path& b) {
    const PsiRun r = run_psi({"compare", "--json", a.string(), b.string()});
    EXPECT_EQ(r.status, 1) << r.err;
    return nlohmann::json::parse(r.out)["datasets"][0];
  };
  for (const auto& [a, b] : {std::pair{nan, ref}, std::pair{ref, nan}}) {
    const auto d = json_of(a, b);
    EXPECT_EQ(d["status"], "differs");
    EXPECT_EQ(d["differing"], 1);
    EXPECT_EQ(d["difference_kinds"]["nan_vs_number"], 1);
    EXPECT_EQ(d["non_finite"]["pairs"], 1);
    EXPECT_EQ(d["max_ulp"], 0);
    EXPECT_EQ(d["rel_l2"], 0.0);
    EXPECT_EQ(d["first_difference"]["flat_index"], 2);
  }
  const auto d = json_of(inf, ref);
  EXPECT_EQ(d["difference_kinds"]["inf"], 1);
  EXPECT_EQ(d["rel_l2"], 0.0);
  EXPECT_EQ(d["first_difference"]["a"], "inf (0x7f800000)");
  // The table says so too.
  const PsiRun t = run_psi({"compare", nan.string(), ref.string()});
  EXPECT_EQ(t.status, 1);
  EXPECT_NE(t.out.find("nan (0x7fc00000)"), std::string::npos) << t.out;
}

TEST(NonFinite, OracleRefusesNonFiniteOperands) {
  const fs::path dir = fresh_dir("nf_oracle");
  struct Bad {
    std::string name, dataset;
    std::uint16_t bits;
    std::string certify, explain;  // what each command's message says about the operand
  };
  for (const Bad& b : std::vector<Bad>{{"x_nan", "/x", 0x7fc0, "x 0x7fc0 is NaN", "/x row 0 [0] is NaN (0x7fc0)"},
                                       {"x_neg_nan", "/x", 0xffc1, "x 0xffc1 is NaN", "/x row 0 [0] is NaN (0xffc1)"},
                                       {"w_inf", "/w", 0x7f80, "is infinite", "/w row 0 [0] is Inf (0x7f80)"},
                                       {"b_ninf", "/b", 0xff80, "is infinite", "/b row 0 [0] is Inf (0xff80)"}}) {
    const fs::path p = dir / (b.name + ".h5");
    {
      auto f = hdf5::File::create(p);
      auto t = [](const psi::Shape& s) {
        psi::Bf16Tensor x(s);
        for (std::size_t i = 0; i < x.data.size(); ++i) x.data[i] = psi::bf16_rne(0.5f + float(i));
        return x;
      };
      psi::Bf16Tensor x = t({2, 4}), w = t({3, 4}), bias = t({3}), y = t({2, 3});
      psi::Bf16Tensor& spoiled = b.dataset == "/x" ? x : b.dataset == "/w" ? w : bias;
      spoiled.data[0] = Bf16::from_bits(b.bits);  // used by element (0, 0), which explain asks for
      f.write_bf16("/x", x, psi::test::hashed(x));
      f.write_bf16("/w", w, psi::test::hashed(w));
      f.write_bf16("/b", bias, psi::test::hashed(bias));
      f.write_bf16("/y", y, psi::test::hashed(y));
      f.commit();
    }
    for (const std::string cmd : {"certify", "explain"}) {
      std::vector<std::string> args{"oracle", cmd, "--file", p.string(), "--x", "x", "--w", "w", "--b", "b", "--y", "y"};
      if (cmd == "explain") args.insert(args.end(), {"--row", "0", "--col", "0"});
      expect_rejected(run_psi(args), args, Exit::bad_input, {cmd == "certify" ? b.certify : b.explain});
    }
  }
}

TEST(NonFinite, CheckpointF32NaNIsRefusedAndInfKept) {
  const fs::path dir = fresh_dir("nf_ckpt");
  const fs::path p = dir / "f32.safetensors";
  const float v[4] = {kNaN, kInf, -kInf, 1.0f};
  std::vector<std::byte> bytes(sizeof v);
  std::memcpy(bytes.data(), v, sizeof v);
  ck::write_safetensors(p, {{"t", "F32", {4}, bytes}});
  ck::SafetensorsFile f(p);
  std::vector<Bf16> out(3);
  f.read("t", {1, 4, 0, 1}, out);
  EXPECT_EQ(out[0].bits, 0x7f80);
  EXPECT_EQ(out[1].bits, 0xff80);
  EXPECT_EQ(out[2].to_float(), 1.0f);
  std::vector<Bf16> one(1);
  expect_error([&] { f.read("t", {0, 1, 0, 1}, one); }, Exit::bad_input, {p.string(), "tensor t element 0", "nan"},
               "F32 NaN");
}

namespace {

// The complete tiny checkpoint with a BF16 NaN as the first weight of block 0's FFN.
fs::path nan_weight_checkpoint(const fs::path& dir) {
  return tiny_checkpoint(dir / "nan.safetensors", "transformer_blocks.0.ff.net.0.proj.weight",
                         [](ck::SafetensorsTensor& t) {
                           const std::uint16_t nan = 0x7fc0;
                           std::memcpy(t.bytes.data(), &nan, 2);
                         });
}

}  // namespace

// A NaN weight reaches every state of every path; the run says so in its table and in the
// saved states' nonfinite_count.
TEST(NonFinite, RunWithANaNWeightReportsNonFiniteStates) {
  const fs::path dir = fresh_dir("nf_run");
  const fs::path ckpt = nan_weight_checkpoint(dir);
  const fs::path report = dir / "r.h5";
  const PsiRun r = run_psi({"run", "one-token", "--quick", "--checkpoint", ckpt.string(), "--out", report.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  int rows_not_finite = 0;
  for (std::size_t pos = 0; (pos = r.out.find("| NO ", pos)) != std::string::npos; ++pos) ++rows_not_finite;
  EXPECT_EQ(rows_not_finite, 4) << r.out;  // dense, official-h200, baseline, modified (free-running)
  rp::StateReader s(report);
  const rp::TensorRecord last = s.record("/states/one-token/dense/free_running/12_stage2_step3/video_latent");
  ASSERT_TRUE(last.has_stats);
  EXPECT_GT(last.stats.nonfinite_count, 0);
  const rp::TensorRecord first = s.record("/states/one-token/dense/free_running/00_stage1_initial/video_latent");
  EXPECT_EQ(first.stats.nonfinite_count, 0);  // the initial noise does not depend on weights
}

// fixed-budget's claim is bitwise equality of the capped and uncapped states; with a NaN weight
// every state is NaN in both runs and "26 / 26 equal" would hold without saying anything. The run
// fails (exit 1), says how many states are not finite, and the table shows it.
TEST(NonFinite, BitwiseClaimsOnNonFiniteStatesFail) {
  const fs::path dir = fresh_dir("nf_fixed_budget");
  const fs::path ckpt = nan_weight_checkpoint(dir);
  const fs::path report = dir / "r.h5";
  const PsiRun r = run_psi({"run", "fixed-budget", "--checkpoint", ckpt.string(), "--out", report.string()});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("psi: error: fixed-budget: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" of 26 capped states hold NaN or Inf; their bitwise equality proves nothing"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("NOT FINITE)"), std::string::npos) << r.out;
  const auto cases = nlohmann::json::parse(hdf5::File::open_read(report).read_text("/report/cases"));
  EXPECT_GT(cases[0]["states_nonfinite"].get<int>(), 0);
  EXPECT_EQ(cases[0]["states_equal"], cases[0]["states_total"]);
}
