// The float64 reference block (engine/model/block_f64.h): within the dense path's BF16 error of
// it, and that bound catches a misplaced operand; deterministic; no BF16 value written inside;
// correctly rounded to BF16; `psi probe --variant float64` compares and writes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <utility>

#include "engine/bf16_f64.h"
#include "engine/error.h"
#include "engine/model/block_f64.h"
#include "engine/pipeline/positions.h"
#include "hdf5/h5.h"
#include "engine/distance.h"
#include "probes/probe_cases.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
namespace model = psi::model;
using psi::Bf16;

namespace {

// Relative L2 of a BF16 tensor to a float64 one, in double (engine/distance.h).
double rel_l2(const psi::Bf16Tensor& ours, const psi::F64Tensor& ref) {
  return psi::distance(ours.span(), std::span<const double>(ref.data)).rel_l2;
}

// The dense path writes BF16 at every operator boundary (docs/block.md): one rounding is a
// relative error of up to 2^-8, about 1.6e-3 relative L2 over a tensor, and a probe sits behind
// four to eight such roundings (AdaLN input, q/k/v, norms, RoPE, SDPA, gate, projection, FFN
// hidden), which add in quadrature to 3–5e-3. Measured: tiny block 2.6e-3 to 5.7e-3 (ltx25 and
// ltx2), block_small 3.4e-3 to 5.5e-3 (the recorded MATH block alike). 1e-2 leaves room; a
// misplaced operand is far above it (2.9e-1 below).
constexpr double kDenseBound = 1e-2;

struct Tiny {
  model::ModelConfig c;
  model::BlockWeights w;
  model::BlockInputs in;
};

Tiny tiny(const char* profile) {
  Tiny t{model::model_config("tiny", profile), {}, {}};
  model::SynthInitSource src(0);
  t.w = model::load_block_weights(src, t.c, 1);
  t.in = model::synthetic_block_inputs(t.c, psi::pipeline::video_positions(3, 4, 6, 24.0f),
                                       psi::pipeline::audio_positions(18), 5, 0);
  return t;
}

}  // namespace

TEST(BlockF64, DenseIsWithinItsBf16ErrorOfTheFloat64Block) {
  for (const char* profile : {"ltx25", "ltx2"}) {
    const Tiny t = tiny(profile);
    const model::BlockTaps dense = model::block_forward(t.c, t.w, t.in, model::numerics_variant("dense"));
    const model::BlockTapsF64 ref = model::block_forward_f64(t.c, t.w, t.in);
    const auto d = dense.named();
    const auto r = ref.named();
    ASSERT_EQ(r.size(), d.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      ASSERT_EQ(r[i].first, d[i].first);
      ASSERT_EQ(r[i].second->shape, d[i].second->shape) << r[i].first;
      const double e = rel_l2(*d[i].second, *r[i].second);
      EXPECT_LT(e, kDenseBound) << profile << " " << r[i].first;
      EXPECT_GT(e, 0.0) << profile << " " << r[i].first;
    }
  }
}

// The bound's power: shift and scale of the self-attention AdaLN swapped (an operand mix-up the
// float64 block must not make) puts attn1 an order of magnitude beyond it.
TEST(BlockF64, TheBoundCatchesAMisplacedOperand) {
  Tiny t = tiny("ltx25");
  const model::BlockTaps dense = model::block_forward(t.c, t.w, t.in, model::numerics_variant("dense"));
  const std::int64_t D = t.w.scale_shift_table.dim(1);
  for (std::int64_t c = 0; c < D; ++c) std::swap(t.w.scale_shift_table.data[c], t.w.scale_shift_table.data[D + c]);
  const model::BlockTapsF64 wrong = model::block_forward_f64(t.c, t.w, t.in);
  EXPECT_GT(rel_l2(dense.attn1, wrong.attn1), 10 * kDenseBound);
}

TEST(BlockF64, DeterministicAndWritesNoBf16Inside) {
  const Tiny t = tiny("ltx25");
  const model::BlockTapsF64 a = model::block_forward_f64(t.c, t.w, t.in);
  const model::BlockTapsF64 b = model::block_forward_f64(t.c, t.w, t.in);
  const auto na = a.named(), nb = b.named();
  for (std::size_t i = 0; i < na.size(); ++i) {
    EXPECT_EQ(na[i].second->data, nb[i].second->data) << na[i].first;
    // A value that went through a BF16 write last is BF16-representable; a float64 result almost
    // never is.
    std::int64_t representable = 0;
    for (double v : na[i].second->data) {
      ASSERT_TRUE(std::isfinite(v)) << na[i].first;
      representable += double(psi::bf16_of_f64(v).to_float()) == v ? 1 : 0;
    }
    EXPECT_LT(representable * 100, na[i].second->numel()) << na[i].first;
  }
}

TEST(BlockF64, RoundsToBf16Once) {
  // 1 + 2^-8 is the midpoint of BF16 1 (0x3f80) and 1 + 2^-7 (0x3f81); float(v) lands on it for
  // v within 2^-24 of it, where rounding through float would tie to even.
  const double mid = 1.0 + std::ldexp(1.0, -8);
  EXPECT_EQ(psi::bf16_of_f64(mid).bits, 0x3f80);
  EXPECT_EQ(psi::bf16_of_f64(mid + std::ldexp(1.0, -40)).bits, 0x3f81);
  EXPECT_EQ(psi::bf16_of_f64(mid - std::ldexp(1.0, -40)).bits, 0x3f80);
  EXPECT_EQ(psi::bf16_of_f64(-(mid + std::ldexp(1.0, -40))).bits, 0xbf81);
  const double odd_mid = 1.0 + 3 * std::ldexp(1.0, -8);  // between 0x3f81 and 0x3f82: ties go up
  EXPECT_EQ(psi::bf16_of_f64(odd_mid).bits, 0x3f82);
  EXPECT_EQ(psi::bf16_of_f64(odd_mid - std::ldexp(1.0, -40)).bits, 0x3f81);
  EXPECT_EQ(model::round_to_bf16(psi::F64Tensor({2}, {0.5, -3.0})).data, (std::vector<Bf16>{Bf16{0x3f00}, Bf16{0xc040}}));
}

// psi probe's float64 variant: MATH and FLASH measured against it, kept and written in float64;
// the recorded MATH block is as far from it as the dense path is.
TEST(BlockF64, ProbeComparesAndWritesTheFloat64Block) {
  psi::probes::ProbeOptions o;
  o.reference = psi::test::reference_file("block_small.h5");
  o.variants = {std::string(psi::probes::kFloat64Variant)};
  const psi::probes::ProbeReport r = psi::probes::run_probe("block-small", o);
  ASSERT_EQ(r.results.size(), 20u);  // ten probes x (math, flash)
  EXPECT_TRUE(r.outputs.empty());
  ASSERT_EQ(r.float64_outputs.size(), 10u);
  auto rec = psi::hdf5::File::open_read(o.reference);
  for (const auto& [name, t] : r.float64_outputs) {
    const psi::Bf16Tensor math = rec.read_bf16("/block_small/math/" + name);
    ASSERT_EQ(math.shape, t.shape) << name;
    EXPECT_LT(rel_l2(math, t), kDenseBound) << name;
  }
  for (const auto& res : r.results) EXPECT_EQ(res.variant, "float64");

  const fs::path out = fs::temp_directory_path() / ("psi_block_f64_" + std::to_string(::getpid()) + ".h5");
  psi::probes::write_probe_outputs(r, out, "CPU");
  auto f = psi::hdf5::File::open_read(out);
  for (const auto& [name, t] : r.float64_outputs) EXPECT_EQ(f.read_f64("/block_small/float64/" + name).data, t.data) << name;
  fs::remove(out);

  o.reference = psi::test::reference_file("probes_linear.h5");
  EXPECT_THROW(psi::probes::run_probe("audio-ff-up", o), psi::Error);
}
