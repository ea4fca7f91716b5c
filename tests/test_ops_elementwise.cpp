// Norms, activations, AdaLN write boundaries and RoPE: hand-checked values, tiled = untiled,
// the recorded RoPE tables reproduced bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>
#include <filesystem>

#include "engine/ops/activation.h"
#include "engine/ops/adaln.h"
#include "engine/ops/norm.h"
#include "engine/ops/rope.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "tests/recordings.h"

namespace ops = psi::ops;
using psi::Bf16;
using psi::Bf16Tensor;
using psi::bf16_rne;

namespace {
std::filesystem::path reference(const char* f) { return psi::test::reference_file(f); }

Bf16Tensor from_floats(psi::Shape s, std::initializer_list<float> v) {
  Bf16Tensor t(std::move(s));
  std::size_t i = 0;
  for (float f : v) t.data[i++] = bf16_rne(f);
  return t;
}
}  // namespace

TEST(RmsNorm, HandChecked) {
  Bf16Tensor x = from_floats({1, 4}, {2, 2, 2, 2});
  Bf16Tensor w = from_floats({4}, {1.5f, 1, 1, 1});
  // ss = 16, mean 4, rstd = 1/sqrt(4 + 1e-6) just below 0.5: 2·rstd rounds to 1 in BF16.
  Bf16Tensor y = ops::rms_norm(x, nullptr);
  for (auto v : y.data) EXPECT_EQ(v.to_float(), 1.0f);
  Bf16Tensor yw = ops::rms_norm(x, &w);
  EXPECT_EQ(yw.data[0].to_float(), 1.5f);
}

TEST(RmsNorm, TiledEqualsUntiledBitwise) {
  const std::int64_t rows = 7, cols = 4096 + 13;  // crosses the 1,024 chunks of the statistic
  Bf16Tensor x = psi::synthinit::make("input.test.x", {rows, cols}, 3);
  Bf16Tensor w = psi::synthinit::make("t.q_norm.weight", {cols}, 3);
  for (const Bf16Tensor* weight : {static_cast<const Bf16Tensor*>(nullptr), static_cast<const Bf16Tensor*>(&w)}) {
    Bf16Tensor whole(x.shape);
    ops::rms_norm(psi::as_matrix(x), weight ? weight->ptr() : nullptr, ops::kNormEps, psi::as_matrix(whole));
    for (std::int64_t tile : {1, 7, 100, 1024, 3000, 10000}) {
      Bf16Tensor tiled(x.shape);
      ops::rms_norm_tiled(psi::as_matrix(x), weight ? weight->ptr() : nullptr, ops::kNormEps, tile, psi::as_matrix(tiled));
      EXPECT_EQ(tiled.data, whole.data) << "tile " << tile;
    }
  }
}

TEST(LayerNorm, SubtractsTheMean) {
  Bf16Tensor x = from_floats({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  Bf16Tensor y(x.shape);
  ops::layer_norm(psi::as_matrix(x), 1e-6f, psi::as_matrix(y));
  const float rstd = 1.0f / std::sqrt(1.25f + 1e-6f);
  EXPECT_EQ(y.data[0], bf16_rne(-1.5f * rstd));
  EXPECT_EQ(y.data[3], bf16_rne(1.5f * rstd));
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y.data[i].to_float(), 0.0f);  // a constant row
}

TEST(Activation, Values) {
  EXPECT_EQ(ops::gelu_tanh_f32(0.0f), 0.0f);
  EXPECT_EQ(ops::gelu_tanh_f32(20.0f), 20.0f);
  EXPECT_EQ(ops::sigmoid_f32(0.0f), 0.5f);
  EXPECT_EQ(ops::silu_f32(0.0f), 0.0f);
  // Against the tanh formula in float64: the BF16 results agree to one ulp. Below about −3 the
  // float32 formula (PyTorch's too) loses its digits in 1 + tanh(·) ≈ 0, so it is not checked there.
  for (float x = -3.0f; x <= 6.0f; x += 0.0625f) {
    const double g = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * double(x) * x * x)));
    Bf16 ours;
    Bf16 in = bf16_rne(x);
    ops::gelu_tanh(&in, &ours, 1);
    EXPECT_LE(psi::bf16_ulp_distance(ours, bf16_rne(float(g))), 1) << x;
  }
}

// The BF16 activations are tables (activation.cpp): on every one of the 65,536 BF16 inputs, NaNs
// and infinities included, each gives the bits of its float32 formula rounded once.
TEST(Activation, EveryBf16InputIsTheFormulaRounded) {
  std::vector<Bf16> in(65536), out(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) in[b] = Bf16::from_bits(std::uint16_t(b));
  const struct {
    const char* name;
    void (*apply)(const Bf16*, Bf16*, std::int64_t);
    float (*formula)(float);
  } activations[] = {{"gelu_tanh", ops::gelu_tanh, ops::gelu_tanh_f32},
                     {"sigmoid", ops::sigmoid, ops::sigmoid_f32},
                     {"silu", ops::silu, ops::silu_f32}};
  for (const auto& a : activations) {
    a.apply(in.data(), out.data(), std::int64_t(in.size()));
    int off = 0;
    for (std::uint32_t b = 0; b < 65536; ++b)
      if (out[b].bits != bf16_rne(a.formula(in[b].to_float())).bits && off++ < 3)
        ADD_FAILURE() << a.name << " at BF16 bits 0x" << std::hex << b;
    EXPECT_EQ(off, 0) << a.name;
  }
}

TEST(AdaLn, WriteBoundaries) {
  // One AdaLN row: bf(T[r] + S[r]) exactly.
  Bf16Tensor table = from_floats({2, 2}, {1.0f, 2.0f, 0.25f, -0.5f});
  Bf16Tensor ts = from_floats({1, 1, 4}, {0.5f, 0.5f, 1.0f, 3.0f});
  Bf16Tensor v = ops::ada_value(table, ts, 1);
  EXPECT_EQ(v.data[0].to_float(), 1.25f);
  EXPECT_EQ(v.data[1].to_float(), 2.5f);
  // modulate rounds the product before the shift: x·(1+s) = 1 + 2^-6 + 2^-14 -> 1 + 2^-6, then
  // + 2^-8 is a tie that rounds to even (1 + 2^-6); one rounding would give 1 + 2^-6 + 2^-7.
  const float x = 1.0f + 0x1p-7f;
  Bf16Tensor xs = from_floats({1, 1}, {x}), scale = from_floats({1, 1}, {0x1p-7f}), shift = from_floats({1, 1}, {0x1p-8f});
  Bf16Tensor y = ops::modulate(xs, scale, shift);
  EXPECT_EQ(y.data[0].to_float(), 1.0f + 0x1p-6f);
  EXPECT_NE(y.data[0], bf16_rne(x * (1.0f + 0x1p-7f) + 0x1p-8f));
  // gated_residual: bf(x + bf(y·g)) with the same two roundings.
  Bf16Tensor g = from_floats({1, 1}, {1.0f + 0x1p-7f});
  Bf16Tensor r = ops::gated_residual(shift, xs, g);
  EXPECT_EQ(r.data[0].to_float(), 1.0f + 0x1p-6f);
}

TEST(Rope, HandCheckedRotation) {
  // One head of width 4: pairs (x[0], x[2]) and (x[1], x[3]).
  Bf16Tensor x = from_floats({1, 4}, {1, 2, 3, 4});
  ops::RopeTables t{from_floats({1, 1, 1, 2}, {0.5f, 1.0f}), from_floats({1, 1, 1, 2}, {0.5f, 0.0f})};
  ops::apply_split_rope(psi::as_matrix(x), t);
  EXPECT_EQ(x.data[0].to_float(), 0.5f - 1.5f);  // x1·cos − sin·x2
  EXPECT_EQ(x.data[2].to_float(), 1.5f + 0.5f);  // x2·cos + sin·x1
  EXPECT_EQ(x.data[1].to_float(), 2.0f);
  EXPECT_EQ(x.data[3].to_float(), 4.0f);
}

TEST(Rope, TwoWriteBoundaries) {
  // Random q and tables: every element follows bf(bf(x1·cos) + (−sin)·x2) and
  // bf(bf(x2·cos) + sin·x1); the data is rich enough that one rounding would differ somewhere.
  const std::int64_t T = 50, H = 2, half = 32;
  Bf16Tensor x = psi::synthinit::make("input.test.q", {T, H * 2 * half}, 1);
  ops::RopeTables t{psi::synthinit::make("input.test.cos", {1, H, T, half}, 1),
                    psi::synthinit::make("input.test.sin", {1, H, T, half}, 1)};
  Bf16Tensor y = x;
  ops::apply_split_rope(psi::as_matrix(y), t);
  int single_rounding_differs = 0;
  for (std::int64_t tok = 0; tok < T; ++tok)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t i1 = tok * H * 2 * half + h * 2 * half + j, i2 = i1 + half;
        const float a = x.data[i1].to_float(), b = x.data[i2].to_float();
        const float c = t.cos.data[(h * T + tok) * half + j].to_float(), s = t.sin.data[(h * T + tok) * half + j].to_float();
        EXPECT_EQ(y.data[i1], bf16_rne(psi::bf(a * c) + (-s) * b));
        EXPECT_EQ(y.data[i2], bf16_rne(psi::bf(b * c) + s * a));
        single_rounding_differs += y.data[i1] != bf16_rne(float(double(a) * c - double(s) * b));
      }
  EXPECT_GT(single_rounding_differs, 0);
}

TEST(Rope, FrequencyGrid) {
  auto w = ops::rope_frequencies_f64(2048, 1, 10000.0);
  ASSERT_EQ(w.size(), 1024u);
  EXPECT_EQ(w.front(), float(M_PI / 2));
  EXPECT_EQ(w.back(), float(10000.0 * M_PI / 2));
  EXPECT_EQ(ops::rope_frequencies_f64(512, 3, 10000.0).size(), 85u);
}

TEST(Rope, TablesReproduceTheRecording) {
  auto f = psi::hdf5::File::open_read(reference("block_small.h5"));
  auto vp = f.read_f32("/block_small/inputs/video.positions");
  auto ap = f.read_f32("/block_small/inputs/audio.positions");
  auto v = ops::rope_tables(vp, {20, 2048, 2048}, 512, 4, 10000.0);
  EXPECT_EQ(v.cos.data, f.read_bf16("/block_small/inputs/video.pe_cos").data);
  EXPECT_EQ(v.sin.data, f.read_bf16("/block_small/inputs/video.pe_sin").data);
  EXPECT_EQ(v.cos.data[0].to_float(), 1.0f);  // one padding entry in front (256 − 3·85)
  EXPECT_EQ(v.sin.data[0].to_float(), 0.0f);
  auto a = ops::rope_tables(ap, {20}, 256, 4, 10000.0);
  EXPECT_EQ(a.cos.data, f.read_bf16("/block_small/inputs/audio.pe_cos").data);
  EXPECT_EQ(a.sin.data, f.read_bf16("/block_small/inputs/audio.pe_sin").data);
  // Full width (32 heads x 64): the probe file stores the audio tables in full.
  auto g = psi::hdf5::File::open_read(reference("probe_attn_traj.h5"));
  auto p = ops::rope_tables(g.read_f32("/probe_audio_self_attn/inputs/positions"), {20}, 2048, 32, 10000.0);
  EXPECT_EQ(psi::sha256_hex(p.cos), g.attr_string("/probe_audio_self_attn/inputs/pe_cos", "sha256_full"));
  EXPECT_EQ(psi::sha256_hex(p.sin), g.attr_string("/probe_audio_self_attn/inputs/pe_sin", "sha256_full"));
}
