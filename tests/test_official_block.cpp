// The official block as the H200 computed it (official-h200): every probe of the recorded small
// blocks bitwise, the RMS-norm kernel's pieces (sum order, MUFU.RSQ model) against independent
// references, and the attribution of --explain-differences.
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/official/norm_stats.h"
#include "engine/official/nv_rsqrt.h"
#include "engine/ops/norm.h"
#include "engine/pipeline/positions.h"
#include "engine/sha256.h"
#include "hdf5/h5.h"
#include "engine/distance.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"
#include "tests/recordings.h"

using namespace psi;

namespace {

const probes::TensorResult& find(const probes::ProbeReport& r, const std::string& variant, const std::string& tensor,
                                 const std::string& backend) {
  for (const auto& t : r.results)
    if (t.variant == variant && t.tensor == tensor && t.backend == backend) return t;
  throw std::runtime_error("no result " + variant + "/" + tensor + "/" + backend);
}

std::filesystem::path reference(const std::string& f) {
  return psi::test::reference_file(f);
}

float ulp_distance(float a, float b) {
  return float(std::abs(std::int64_t(std::bit_cast<std::uint32_t>(a)) - std::int64_t(std::bit_cast<std::uint32_t>(b))));
}

}  // namespace

// All ten probes of every recorded small block, bitwise the MATH recording: the tensor-core
// projections, the attention core and the norms' kernel together. Before the norms were
// modelled, block_small differed in 2,828 (attn1) … 12,155 (ff) elements.
TEST(OfficialBlock, EverySmallBlockProbeIsBitwiseTheRecording) {
  for (const char* c : {"block-small", "block-small-alt", "block-small-ctx1024"}) {
    probes::ProbeOptions o;
    o.variants = {"official-h200"};
    const auto r = probes::run_probe(c, o);
    int seen = 0;
    for (const auto& t : r.results) {
      if (t.backend != "math") continue;
      ASSERT_TRUE(t.distance) << c << " " << t.tensor;
      EXPECT_EQ(t.distance->differing, 0) << c << " " << t.tensor;
      EXPECT_EQ(t.rows, "all") << c << " " << t.tensor;
      ++seen;
    }
    EXPECT_EQ(seen, 10) << c;
  }
}

// The full block's video text cross-attention on its first recorded rows, and the audio
// stream's self and text cross-attention in full, with every module's output teacher-forced from
// the recording of the path the variant claims: the video rows are independent of each other up
// to attn2, so eight of the 4,928 stand for all, and the audio stream up to audio_attn2 does not
// see the video. The one-token context makes to_k and to_v one-row products over K = 4,096,
// which the H200 splits in two (official::recorded_choice); as one chain they differ in 21,888 of the
// 1,048,576 elements the MATH recording stores (rows 0-255), in every row. Under FLASH the audio
// self-attention (32 heads x 64, 126 keys) is the plain kernel's one 128-key tile and the
// one-key text cross-attentions mask 127 of their tile's keys.
namespace {

void expect_full_block_rows_bitwise(const std::string& variant, const std::string& path) {
  constexpr std::int64_t R = 8;
  probes::Recording rec(reference("block_full_math.h5"), "block_full_first");
  probes::Recording probes_rec(reference(path == "flash" ? "block_full_flash.h5" : "block_full_math.h5"),
                               "block_full_first");
  const model::ModelConfig c = model::model_config("ltx2-22b", rec.attr_json("", "dims").at("profile").get<std::string>());
  ASSERT_EQ(c.video_dim(), 4096);
  model::SynthInitSource src(rec.seed());
  const model::BlockWeights w = model::load_block_weights(src, c, 0);
  auto first_rows = [&](const Bf16Tensor& t) {
    if (t.dim(1) == 1) return t;
    Bf16Tensor r({1, R, t.dim(2)});
    std::copy(t.data.begin(), t.data.begin() + R * t.dim(2), r.data.begin());
    return r;
  };
  auto stream = [&](const std::string& s, bool rows) {
    model::StreamInputs in;
    auto get = [&](const std::string& f) {
      const Bf16Tensor t = rec.input_bf16("inputs/" + s + "." + f);
      return rows ? first_rows(t) : t;
    };
    in.x = get("x");
    in.timesteps = get("timesteps");
    in.context = rec.input_bf16("inputs/" + s + ".context");
    if (rec.has("inputs/" + s + ".prompt_timestep")) in.prompt_timestep = rec.input_bf16("inputs/" + s + ".prompt_timestep");
    in.cross_scale_shift_timestep = get("cross_scale_shift_timestep");
    in.cross_gate_timestep = rec.input_bf16("inputs/" + s + ".cross_gate_timestep");
    return in;
  };
  model::BlockInputs in{stream("video", true), stream("audio", false)};
  ASSERT_EQ(in.video.context.dim(1), 1);
  const F32Tensor all = rec.input_f32("inputs/video.positions");
  F32Tensor vp({1, 3, R, 2});
  for (std::int64_t a = 0; a < 3; ++a)
    std::copy_n(all.data.begin() + a * all.dim(2) * 2, R * 2, vp.data.begin() + a * R * 2);
  const model::BlockRope t = model::block_rope(c, vp, rec.input_f32("inputs/audio.positions"), official::F32Math::cuda);
  in.video.pe = t.video;
  in.video.cross_pe = t.video_cross;
  in.audio.pe = t.audio;
  in.audio.cross_pe = t.audio_cross;

  // Teacher forcing replaces every module's output: attn1's reaches attn2, audio_attn1's
  // audio_attn2; the others are zeros nothing checked reads.
  const std::int64_t Na = in.audio.x.dim(1);
  auto recorded = [&](const char* probe) { return probes_rec.stored_bf16(path + "/" + probe).data; };
  model::BlockTaps forced;
  forced.attn1 = first_rows(recorded("attn1"));
  forced.audio_attn1 = recorded("audio_attn1");
  for (Bf16Tensor* p : {&forced.attn2, &forced.audio_to_video_attn, &forced.ff, &forced.video_out})
    *p = Bf16Tensor({1, R, c.video_dim()});
  for (Bf16Tensor* p : {&forced.audio_attn2, &forced.video_to_audio_attn, &forced.audio_ff, &forced.audio_out})
    *p = Bf16Tensor({1, Na, c.audio_dim()});
  const model::BlockTaps p = model::block_forward(c, w, in, model::numerics_variant(variant), &forced);
  const Bf16Tensor attn2 = first_rows(recorded("attn2"));
  ASSERT_EQ(p.attn2.shape, attn2.shape);
  EXPECT_EQ(psi::distance(p.attn2.data, attn2.data).differing, 0) << variant;
  EXPECT_EQ(psi::distance(p.audio_attn1.data, recorded("audio_attn1").data).differing, 0) << variant;
  EXPECT_EQ(psi::distance(p.audio_attn2.data, recorded("audio_attn2").data).differing, 0) << variant;
}

}  // namespace

TEST(OfficialBlock, FullBlockTextCrossAttentionRowsAreBitwise) { expect_full_block_rows_bitwise("official-h200", "math"); }

TEST(OfficialBlock, FullBlockRowsAreBitwiseTheFlashRecording) {
  expect_full_block_rows_bitwise("official-h200-flash", "flash");
}

// The attribution: dense's differences are named (attn1 departs on its own, the residual sums
// only inherit, and every differing element is accounted for); official-h200 has none left
// against MATH, official-h200-flash none against FLASH (the path it claims), and the
// math-to-flash-5 step (MATH with BF16 P) is attributed against MATH as its own attention.
TEST(OfficialBlock, ExplainDifferencesAttributesEveryElement) {
  probes::ProbeOptions o;
  o.variants = {"dense", "official-h200", "official-h200-flash", "math-to-flash-5"};
  o.explain = true;
  const auto r = probes::run_probe("block-small", o);
  ASSERT_EQ(r.attributions.size(), 40u);
  for (const auto& a : r.attributions) {
    std::int64_t inherited = 0;
    for (const auto& [name, n] : a.inherited) inherited += n;
    EXPECT_EQ(a.own + inherited, a.differing) << a.variant << " " << a.tensor;
    EXPECT_EQ(a.against, a.variant == "official-h200-flash" ? "flash" : "math") << a.variant;
    EXPECT_EQ(a.differing, find(r, a.variant, a.tensor, a.against).distance->differing) << a.variant << " " << a.tensor;
    EXPECT_LE(a.own, a.module_alone) << a.variant << " " << a.tensor;
    if (a.variant == "official-h200" || a.variant == "official-h200-flash") {
      EXPECT_EQ(a.differing + a.module_alone, 0) << a.variant << " " << a.tensor;
    }
    if (a.variant == "math-to-flash-5" && a.tensor == "audio_attn1") {
      EXPECT_EQ(a.own, a.differing);
      EXPECT_GT(a.own, 0);
    }
    if (a.variant != "dense") continue;
    if (a.tensor == "attn1") {
      EXPECT_EQ(a.own, a.differing);
      EXPECT_GT(a.own, 0);
    }
    if (a.tensor == "video_out" || a.tensor == "audio_out") {
      EXPECT_EQ(a.module_alone, 0) << a.tensor;  // the residual arithmetic itself is the official one
      EXPECT_GT(a.differing, 0) << a.tensor;
    }
  }
}

TEST(OfficialBlock, ExplainIsForBlockCasesOnly) {
  probes::ProbeOptions o;
  o.variants = {"official-h200"};
  o.explain = true;
  EXPECT_THROW(probes::run_probe("audio-ff-up", o), Error);
}

// MUFU.RSQ as modelled: exact at powers of four, within the CUDA guide's 2 ulp of the correctly
// rounded 1/√x everywhere (checked against long double over whole binades and random inputs),
// the special values, and the parity split of the exponent (x and 4x differ by exactly 2^−1).
TEST(OfficialBlock, RsqrtModelIsWithinTwoUlpAndExactAtPowersOfFour) {
  for (int e = -60; e <= 60; e += 2) EXPECT_EQ(official::rsqrt_approx(std::ldexp(1.0f, e)), std::ldexp(1.0f, -e / 2)) << e;
  float worst = 0.0f;
  std::int64_t inexact = 0;
  auto check = [&](float x) {
    const float want = float(1.0L / std::sqrt(static_cast<long double>(x)));
    const float got = official::rsqrt_approx(x);
    worst = std::max(worst, ulp_distance(got, want));
    inexact += got != want;
    EXPECT_EQ(official::rsqrt_approx(4.0f * x), got * 0.5f) << x;
  };
  for (std::uint32_t b = 0x3f800000u; b < 0x40800000u; b += 7) check(std::bit_cast<float>(b));  // [1, 4)
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> expo(-40.0f, 40.0f);
  for (int i = 0; i < 200000; ++i) check(std::exp2(expo(rng)));
  EXPECT_LE(worst, 2.0f);
  EXPECT_GT(inexact, 0);  // an approximation, not a rounding: the model must not collapse into one
  EXPECT_EQ(official::rsqrt_approx(0.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(official::rsqrt_approx(-0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(official::rsqrt_approx(std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(official::rsqrt_approx(-1.0f)));
  EXPECT_TRUE(std::isnan(official::rsqrt_approx(std::numeric_limits<float>::quiet_NaN())));
}

// The kernel's sum of squares against a reference written as the block runs it: 128 threads
// summing their 4-element groups, then per warp the simultaneous shuffle-down steps (every lane
// at once, from a copy), then the shared-memory halving over the four warps.
TEST(OfficialBlock, SumOfSquaresFollowsTheKernelsThreadsAndTrees) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (std::int64_t n : {4, 256, 512, 516, 2048, 4096}) {
    std::vector<Bf16> x(n);
    for (auto& v : x) v = bf16_rne(std::ldexp(u(rng), int(u(rng) * 4.0f)));
    std::vector<float> thread(128, 0.0f);
    for (std::int64_t t = 0; t < 128; ++t)
      for (std::int64_t g = t; g < n / 4; g += 128)
        for (std::int64_t e = 0; e < 4; ++e) thread[t] = std::fma(x[4 * g + e].to_float(), x[4 * g + e].to_float(), thread[t]);
    std::vector<float> warps;
    for (int w = 0; w < 4; ++w) {
      std::vector<float> lane(thread.begin() + 32 * w, thread.begin() + 32 * (w + 1));
      for (int offset = 16; offset > 0; offset /= 2) {
        const std::vector<float> before = lane;
        for (int l = 0; l < 32; ++l) lane[l] = before[l] + (l + offset < 32 ? before[l + offset] : before[l]);
      }
      warps.push_back(lane[0]);
    }
    for (int offset = 2; offset > 0; offset /= 2)
      for (int w = 0; w < offset; ++w) warps[w] = warps[w] + warps[w + offset];
    EXPECT_EQ(std::bit_cast<std::uint32_t>(official::h200_sum_of_squares(x.data(), n)), std::bit_cast<std::uint32_t>(warps[0]))
        << n;
  }
  std::vector<Bf16> odd(6, bf16_rne(1.0f));
  EXPECT_THROW(official::h200_sum_of_squares(odd.data(), 6), Error);
}

// The h200 RMS norm: rstd from the kernel's sum and MUFU.RSQ, then (x · rstd) · w, one BF16
// write; the psi_f32 kernel is untouched (1/sqrt, reduce.h order).
TEST(OfficialBlock, RmsNormKernelsCombineTheirPieces) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const std::int64_t rows = 8, n = 512;
  Bf16Tensor x({rows, n}), w({n});
  for (auto& v : x.data) v = bf16_rne(u(rng));
  for (auto& v : w.data) v = bf16_rne(1.0f + 0.1f * u(rng));
  const Bf16Tensor y = ops::rms_norm(x, &w, 1e-6f, ops::NormKernel::h200);
  const Bf16Tensor y_psi = ops::rms_norm(x, &w, 1e-6f);
  std::int64_t differs = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float rstd = official::rsqrt_approx(official::h200_sum_of_squares(x.ptr() + r * n, n) / float(n) + 1e-6f);
    for (std::int64_t c = 0; c < n; ++c) {
      const float xv = x.data[r * n + c].to_float();
      EXPECT_EQ(y.data[r * n + c].bits, bf16_rne((xv * rstd) * w.data[c].to_float()).bits) << r << " " << c;
      differs += y.data[r * n + c].bits != y_psi.data[r * n + c].bits;
    }
  }
  EXPECT_LT(differs, rows * n / 10);  // the two kernels agree on most elements, not necessarily all
}

// The output head's LayerNorm kernel (rms_norm = false): every lane of the Welford shuffles
// simulated at once, mean, sigma2 and count handed down as three shuffles, against the model;
// the statistics near the float64 two-pass ones; the output rstd · (x − mean), one BF16 write.
TEST(OfficialBlock, LayerNormWelfordFollowsTheKernelsThreadsAndTrees) {
  struct W {
    float mean, sigma2, count;
  };
  auto online = [](W w, float x) {
    const float d = x - w.mean, c = w.count + 1.0f, m = std::fma(d, 1.0f / c, w.mean);
    return W{m, std::fma(d, x - m, w.sigma2), c};
  };
  auto combine = [](W b, W a) {  // cuWelfordCombine(dataB, dataA)
    const float c = a.count + b.count;
    if (c <= 0.0f) return W{0.0f, 0.0f, 0.0f};
    const float d = b.mean - a.mean, coef = 1.0f / c, na = a.count * coef, nb = b.count * coef;
    return W{std::fma(na, a.mean, nb * b.mean), std::fma(d * d * a.count, nb, a.sigma2 + b.sigma2), c};
  };
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (std::int64_t n : {4, 64, 256, 512, 516, 2048, 4096}) {
    std::vector<Bf16> x(n);
    for (auto& v : x) v = bf16_rne(0.7f + u(rng) * std::ldexp(1.0f, int(u(rng))));
    std::vector<W> thread(128, W{0.0f, 0.0f, 0.0f});
    for (std::int64_t t = 0; t < 128; ++t)
      for (std::int64_t g = t; g < n / 4; g += 128)
        for (std::int64_t e = 0; e < 4; ++e) thread[t] = online(thread[t], x[4 * g + e].to_float());
    std::vector<W> warps;
    for (int w = 0; w < 4; ++w) {
      std::vector<W> lane(thread.begin() + 32 * w, thread.begin() + 32 * (w + 1));
      for (int offset = 16; offset > 0; offset /= 2) {
        const std::vector<W> before = lane;
        for (int l = 0; l < 32; ++l) lane[l] = combine(before[l], l + offset < 32 ? before[l + offset] : before[l]);
      }
      warps.push_back(lane[0]);
    }
    for (int offset = 2; offset > 0; offset /= 2)
      for (int w = 0; w < offset; ++w) warps[w] = combine(warps[w], warps[w + offset]);
    const official::LayerNormStats st = official::h200_layer_norm_stats(x.data(), n);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(st.mean), std::bit_cast<std::uint32_t>(warps[0].mean)) << n;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(st.var), std::bit_cast<std::uint32_t>(warps[0].sigma2 / float(n))) << n;
    double mean = 0.0, var = 0.0;
    for (const Bf16 v : x) mean += v.to_float();
    mean /= double(n);
    for (const Bf16 v : x) var += (v.to_float() - mean) * (v.to_float() - mean);
    var /= double(n);
    EXPECT_NEAR(st.mean, mean, 1e-5 * (std::fabs(mean) + std::sqrt(var))) << n;
    EXPECT_NEAR(st.var, var, 1e-5 * var) << n;
  }
  std::vector<Bf16> same(512, bf16_rne(1.5f));  // constant rows: exact mean, zero variance
  EXPECT_EQ(official::h200_layer_norm_stats(same.data(), 512).mean, 1.5f);
  EXPECT_EQ(official::h200_layer_norm_stats(same.data(), 512).var, 0.0f);
  std::vector<Bf16> odd(6, bf16_rne(1.0f));
  EXPECT_THROW(official::h200_layer_norm_stats(odd.data(), 6), Error);

  Bf16Tensor m({3, 256});
  for (auto& v : m.data) v = bf16_rne(u(rng));
  Bf16Tensor y(m.shape);
  ops::layer_norm(psi::as_matrix(m), 1e-6f, psi::as_matrix(y), ops::NormKernel::h200);
  for (std::int64_t r = 0; r < 3; ++r) {
    const official::LayerNormStats st = official::h200_layer_norm_stats(m.ptr() + r * 256, 256);
    const float rstd = official::rsqrt_approx(st.var + 1e-6f);
    for (std::int64_t c = 0; c < 256; ++c)
      EXPECT_EQ(y.data[r * 256 + c].bits, bf16_rne(rstd * (m.data[r * 256 + c].to_float() - st.mean)).bits);
  }
}

// Every recorded RoPE table, from the recorded positions with libdevice's cos/sin (official-h200):
// all four tables of the three small blocks, the audio attention probe's, and the full block's,
// whose recording keeps only their SHA-256. With the host's cosf the full block's video self cos table differs in 308
// entries, each one BF16 ULP (the angle f32 −1128.7789 among them, test_nv_trig.cpp).
TEST(OfficialBlock, RopeTablesWithLibdeviceCosSinHashEqualToEveryRecording) {
  struct Case {
    const char* file;
    const char* group;
    const char* config;
    const char* profile;
  };
  for (const Case& k : {Case{"block_small.h5", "block_small", "small", "ltx25"},
                        Case{"block_small_alt.h5", "block_small_alt", "small", "ltx2"},
                        Case{"block_small_ctx1024.h5", "block_small_ctx1024", "small", "ltx25"},
                        Case{"block_full_math.h5", "block_full_first", "ltx2-22b", "ltx25"}}) {
    auto f = hdf5::File::open_read(reference(k.file));
    const std::string in = std::string("/") + k.group + "/inputs/";
    const model::ModelConfig c = model::model_config(k.config, k.profile);
    const F32Tensor vp = f.read_f32(in + "video.positions"), ap = f.read_f32(in + "audio.positions");
    const model::BlockRope cuda = model::block_rope(c, vp, ap, official::F32Math::cuda);
    const model::BlockRope host = model::block_rope(c, vp, ap, official::F32Math::host);
    const std::pair<const char*, const ops::RopeTables*> tables[] = {
        {"video.pe", &cuda.video}, {"audio.pe", &cuda.audio}, {"video.cross_pe", &cuda.video_cross},
        {"audio.cross_pe", &cuda.audio_cross}};
    for (const auto& [name, t] : tables) {
      EXPECT_EQ(sha256_hex(t->cos), f.attr_string(in + name + "_cos", "sha256_full")) << k.group << " " << name;
      EXPECT_EQ(sha256_hex(t->sin), f.attr_string(in + name + "_sin", "sha256_full")) << k.group << " " << name;
    }
    std::int64_t differ = 0, wider = 0;
    for (std::size_t i = 0; i < host.video.cos.data.size(); ++i) {
      const int d = std::abs(int(host.video.cos.data[i].bits) - int(cuda.video.cos.data[i].bits));
      differ += d != 0;
      wider += d > 1;
    }
    EXPECT_EQ(differ, std::string(k.group) == "block_full_first" ? 308 : 0) << k.group;
    EXPECT_EQ(wider, 0) << k.group;
    EXPECT_EQ(host.video.sin.data, cuda.video.sin.data) << k.group;
  }
  auto g = hdf5::File::open_read(reference("probe_attn_traj.h5"));
  const ops::RopeTables p = ops::rope_tables(g.read_f32("/probe_audio_self_attn/inputs/positions"), {20}, 2048, 32,
                                             10000.0, official::F32Math::cuda);
  EXPECT_EQ(sha256_hex(p.cos), g.attr_string("/probe_audio_self_attn/inputs/pe_cos", "sha256_full"));
  EXPECT_EQ(sha256_hex(p.sin), g.attr_string("/probe_audio_self_attn/inputs/pe_sin", "sha256_full"));
}

// The official code divides the positions' time axis on the GPU by a scalar, which PyTorch runs as
// a product with the float32 reciprocal: that recipe gives block_small's recorded positions
// exactly (the IEEE division differs in 462 video and 140 audio values, test_pipeline.cpp).
TEST(OfficialBlock, PositionsWithReciprocalProductsAreTheRecordedOnes) {
  auto f = hdf5::File::open_read(reference("block_small.h5"));
  EXPECT_EQ(pipeline::video_positions(4, 11, 14, 24.0f, official::F32Math::cuda).data,
            f.read_f32("/block_small/inputs/video.positions").data);
  EXPECT_EQ(pipeline::audio_positions(126, official::F32Math::cuda).data,
            f.read_f32("/block_small/inputs/audio.positions").data);
  auto g = hdf5::File::open_read(reference("block_full_math.h5"));
  EXPECT_EQ(pipeline::video_positions(16, 14, 22, 24.0f, official::F32Math::cuda).data,
            g.read_f32("/block_full_first/inputs/video.positions").data);
  EXPECT_EQ(pipeline::audio_positions(126, official::F32Math::cuda).data,
            g.read_f32("/block_full_first/inputs/audio.positions").data);
}
