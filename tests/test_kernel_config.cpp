// The kernel configuration (engine/official/kernel_config.h) and its file
// (experiments/kernel_config_file.h): the K slices, the recorded default, overrides reaching the
// tensor-core Linear and SDPA MATH's two FP32 products bit for bit, a run's variants carrying its
// configuration, the shape log and its sites, and every malformed configuration file refused
// with its name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <unistd.h>
#include <vector>

#include "engine/error.h"
#include "engine/official/attention_math.h"
#include "engine/official/kernel_config.h"
#include "engine/official/tensor_core.h"
#include "engine/model/variant.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "experiments/experiment.h"
#include "experiments/kernel_config_file.h"

namespace {

namespace fs = std::filesystem;
using psi::Bf16;
using namespace psi;
using namespace psi::official;
using namespace psi::ops;

std::vector<Bf16> random_bf16(std::mt19937& g, std::size_t n) {
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<Bf16> v(n);
  for (auto& x : v) x = psi::bf16_rne(d(g));
  return v;
}

using Slices = std::vector<std::pair<std::int64_t, std::int64_t>>;

TEST(KernelConfig, KSlicesRoundEachSliceUpToTheGranule) {
  EXPECT_EQ(k_slices(128, {1, 16}), (Slices{{0, 128}}));
  EXPECT_EQ(k_slices(4096, {2, 16}), (Slices{{0, 2048}, {2048, 4096}}));
  EXPECT_EQ(k_slices(128, {3, 16}), (Slices{{0, 48}, {48, 96}, {96, 128}}));
  // 1,024 in 6: ceil 171, rounded up to 176: five of 176 and the rest.
  EXPECT_EQ(k_slices(1024, {6, 16}).size(), 6u);
  EXPECT_EQ(k_slices(1024, {6, 16}).back(), (std::pair<std::int64_t, std::int64_t>{880, 1024}));
  // A split wider than K's granules gives fewer slices; a granule past K one slice.
  EXPECT_EQ(k_slices(64, {16, 16}), (Slices{{0, 16}, {16, 32}, {32, 48}, {48, 64}}));
  EXPECT_EQ(k_slices(18, {4, 64}), (Slices{{0, 18}}));
  EXPECT_EQ(k_slices(7, {3, 1}), (Slices{{0, 3}, {3, 6}, {6, 7}}));
}

TEST(KernelConfig, RecordedChoiceSplitsOnlyTheOneRowProductOver4096) {
  EXPECT_EQ(recorded_choice(ChainKind::tensor_core, {1, 4096, 4096}).split_k, 2);
  EXPECT_EQ(recorded_choice(ChainKind::tensor_core, {1, 2048, 2048}).split_k, 1);
  EXPECT_EQ(recorded_choice(ChainKind::tensor_core, {2, 4096, 4096}).split_k, 1);
  EXPECT_EQ(recorded_choice(ChainKind::f32_values, {1, 64, 4096}).split_k, 1);
  KernelConfig c;
  EXPECT_EQ(c.choice(ChainKind::tensor_core, {1, 8, 4096}).split_k, 2);
  c.set({ChainKind::tensor_core, {1, 8, 4096}}, {1, 16});
  EXPECT_EQ(c.choice(ChainKind::tensor_core, {1, 8, 4096}).split_k, 1);
  EXPECT_EQ(c.choice(ChainKind::f32_scores, {1, 8, 4096}).split_k, 1);
  EXPECT_THROW(c.set({ChainKind::tensor_core, {1, 8, 64}}, {0, 16}), psi::Error);
  EXPECT_THROW(c.set({ChainKind::tensor_core, {1, 8, 64}}, {kMaxSplitK + 1, 16}), psi::Error);
  EXPECT_THROW(c.set({ChainKind::tensor_core, {1, 8, 64}}, {2, 0}), psi::Error);
}

// Inputs whose K slices 0 and 1 cancel exactly when each is its own chain (slice 1 is slice 0
// negated) but leave a rounding residue in one chain (large terms): a split and a single chain
// then differ, so the tests below tell them apart.
std::vector<Bf16> cancelling(std::mt19937& g, std::int64_t rows, std::int64_t K, float big, bool negate) {
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  const std::int64_t w = K / 3;
  std::vector<Bf16> v(std::size_t(rows * K));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < w; ++k) {
      const Bf16 x = psi::bf16_rne(d(g) * big);
      v[std::size_t(r * K + k)] = x;
      v[std::size_t(r * K + w + k)] = negate ? psi::bf16_rne(-x.to_float()) : x;
      v[std::size_t(r * K + 2 * w + k)] = psi::bf16_rne(d(g));
    }
  return v;
}

// A Linear's operands on which a K split changes the bits: A [M, K] and W [N, K] as
// cancelling makes them (W's large terms cancel), and a bias of N.
struct Operands {
  std::vector<Bf16> A, W, b;
};
Operands split_sensitive(std::mt19937& g, std::int64_t M, std::int64_t N, std::int64_t K) {
  Operands o;
  o.A = cancelling(g, M, K, 1.0f, false);
  o.W = cancelling(g, N, K, 65536.0f, true);
  o.b = random_bf16(g, N);
  return o;
}

// A configured split reaches tc::linear: each slice a chain from +0 (tc::dot, the definition),
// the partial sums added in FP32 in order, then the bias epilogue. A one-row product inside
// RowsAsIf takes the choice of the row count it stands for.
TEST(KernelConfig, TensorCoreLinearFollowsTheConfiguredSplit) {
  std::mt19937 g(11);
  const std::int64_t K = 96, N = 8;
  for (const std::int64_t M : {6, 1}) {
    const auto [A, W, b] = split_sensitive(g, M, N, K);
    KernelConfig c;
    c.set({ChainKind::tensor_core, {M == 1 ? 72 : M, N, K}}, {3, 16});
    std::vector<Bf16> split(std::size_t(M * N)), whole(std::size_t(M * N));
    {
      const RowsAsIf as_if(72);
      tc::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {split.data(), M, N, N}, &c);
    }
    tc::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {whole.data(), M, N, N}, nullptr);
    std::int64_t apart = 0;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        const auto x = std::span<const Bf16>(A).subspan(std::size_t(m * K), std::size_t(K));
        const auto w = std::span<const Bf16>(W).subspan(std::size_t(n * K), std::size_t(K));
        float acc = tc::dot(x.subspan(0, 32), w.subspan(0, 32));
        acc += tc::dot(x.subspan(32, 32), w.subspan(32, 32));
        acc += tc::dot(x.subspan(64, 32), w.subspan(64, 32));
        const float bias = b[std::size_t(n)].to_float();
        EXPECT_EQ(split[std::size_t(m * N + n)].bits, psi::bf16_rne(acc + bias).bits) << M << ": " << m << "," << n;
        EXPECT_EQ(whole[std::size_t(m * N + n)].bits, psi::bf16_rne(tc::dot(x, w) + bias).bits) << M << ": " << m << "," << n;
        apart += split[std::size_t(m * N + n)].bits != whole[std::size_t(m * N + n)].bits;
      }
    EXPECT_GT(apart, 0) << "the inputs do not tell a split from one chain (M " << M << ")";
  }
}

// A tensor-core shape configured as FP32 FMA chains: each slice a float32 FMA chain over k
// ascending from +0, the slices added in order, then the same epilogue.
TEST(KernelConfig, TensorCoreShapeAsFp32FmaChains) {
  std::mt19937 g(14);
  const std::int64_t M = 4, N = 6, K = 96;
  const auto [A, W, b] = split_sensitive(g, M, N, K);
  KernelConfig c;
  c.set({ChainKind::tensor_core, {M, N, K}}, {2, 16, true});
  std::vector<Bf16> y(std::size_t(M * N)), tensor(std::size_t(M * N));
  tc::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {y.data(), M, N, N}, &c);
  tc::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {tensor.data(), M, N, N}, nullptr);
  std::int64_t apart = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float part[2] = {0.0f, 0.0f};  // k 0-47, 48-95
      for (std::int64_t k = 0; k < K; ++k)
        part[k / 48] = std::fma(A[std::size_t(m * K + k)].to_float(), W[std::size_t(n * K + k)].to_float(), part[k / 48]);
      const std::size_t e = std::size_t(m * N + n);
      EXPECT_EQ(y[e].bits, psi::bf16_rne((part[0] + part[1]) + b[std::size_t(n)].to_float()).bits) << m << "," << n;
      apart += y[e].bits != tensor[e].bits;
    }
  // The large cancelling terms leave different residues in FMA chains and block FMAs.
  EXPECT_GT(apart, 0);
}

// The configuration a run was given (Options::kernels, psi run --kernel-config) is in every
// variant the run computes with: an official product through ops::linear takes its split, the
// MATH core's options carry it, and the report's record of the options gives it back.
TEST(KernelConfig, ARunsVariantsCarryItsConfiguration) {
  std::mt19937 g(15);
  const std::int64_t M = 4, N = 6, K = 96;
  const auto [A, W, b] = split_sensitive(g, M, N, K);
  KernelConfig c;
  c.set({ChainKind::tensor_core, {M, N, K}}, {3, 16});
  c.set({ChainKind::f32_scores, {8, 40, 48}}, {2, 16});
  psi::exp::Options o;
  o.kernels = std::make_shared<const KernelConfig>(c);
  const model::NumericsVariant v = psi::exp::variant_of(o, "official-h200");
  std::vector<Bf16> run(std::size_t(M * N)), want(std::size_t(M * N)), recorded(std::size_t(M * N));
  ops::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {run.data(), M, N, N}, v.product);
  tc::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {want.data(), M, N, N}, &c);
  ops::linear({A.data(), M, K, K}, {W.data(), N, K, K}, b.data(), BiasRule::fused_f32, {recorded.data(), M, N, N},
              model::numerics_variant("official-h200").product);
  std::int64_t apart = 0;
  for (std::size_t e = 0; e < run.size(); ++e) {
    EXPECT_EQ(run[e].bits, want[e].bits) << e;
    apart += run[e].bits != recorded[e].bits;
  }
  EXPECT_GT(apart, 0) << "the inputs do not tell the configured split from the recorded choice";
  EXPECT_EQ(v.sdpa(48).kernels.get(), o.kernels.get());
  EXPECT_EQ(model::numerics_variant("official-h200").sdpa(48).kernels, nullptr);
  const psi::exp::Options back = psi::exp::Options::from_json(o.to_json());
  ASSERT_NE(back.kernels, nullptr);
  EXPECT_EQ(back.kernels->overrides(), c.overrides());
  EXPECT_EQ(psi::exp::Options::from_json(psi::exp::Options{}.to_json()).kernels, nullptr);
}

// SDPA MATH's two products follow their configured splits: the scores over the head width, P·V
// over the keys, each slice a float32 FMA chain from +0, added in slice order. Checked against
// the same computation written out here with the public softmax, on inputs where the splits
// change the result: q's and k's second 16 channels cancel their first (k large), and keys
// 16–31 repeat keys 0–15 with their values negated (values large).
TEST(KernelConfig, SdpaMathProductsFollowTheConfiguredSplits) {
  std::mt19937 g(12);
  const std::int64_t Nq = 8, Nk = 40, d = 48;
  const auto q = cancelling(g, Nq, d, 1.0f, false);
  auto k = cancelling(g, Nk, d, 64.0f, true);
  std::vector<Bf16> v(std::size_t(Nk * d));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (std::int64_t j = 0; j < Nk; ++j)
    for (std::int64_t ch = 0; ch < d; ++ch) {
      const bool pair = j >= 16 && j < 32;
      if (pair) k[std::size_t(j * d + ch)] = k[std::size_t((j - 16) * d + ch)];
      v[std::size_t(j * d + ch)] = pair ? psi::bf16_rne(-v[std::size_t((j - 16) * d + ch)].to_float())
                                        : psi::bf16_rne(u(g) * (j < 16 ? 65536.0f : 1.0f));
    }
  KernelConfig c;
  c.set({ChainKind::f32_scores, {Nq, Nk, d}}, {3, 16});
  c.set({ChainKind::f32_values, {Nq, d, Nk}}, {3, 16});
  std::vector<Bf16> split(std::size_t(Nq * d)), whole(std::size_t(Nq * d));
  sdpa_math_h200({q.data(), Nq, d, d}, {k.data(), Nk, d, d}, {v.data(), Nk, d, d}, 1, nullptr, 0, ExpModel::ex2_table,
                 {split.data(), Nq, d, d}, &c);
  sdpa_math_h200({q.data(), Nq, d, d}, {k.data(), Nk, d, d}, {v.data(), Nk, d, d}, 1, nullptr, 0, ExpModel::ex2_table,
                 {whole.data(), Nq, d, d}, nullptr);
  const float factor = sdpa_qk_factor(d);
  std::int64_t apart = 0;
  for (std::int64_t i = 0; i < Nq; ++i) {
    std::vector<float> s(static_cast<std::size_t>(Nk));
    for (std::int64_t j = 0; j < Nk; ++j) {
      float part[3] = {0.0f, 0.0f, 0.0f};
      for (std::int64_t ch = 0; ch < d; ++ch)
        part[ch / 16] = std::fma(q[std::size_t(i * d + ch)].to_float() * factor,
                                 k[std::size_t(j * d + ch)].to_float() * factor, part[ch / 16]);
      s[std::size_t(j)] = (part[0] + part[1]) + part[2];
    }
    h200_softmax_row(s.data(), Nk, ExpModel::ex2_table);
    for (std::int64_t ch = 0; ch < d; ++ch) {
      float part[3] = {0.0f, 0.0f, 0.0f};  // keys 0-15, 16-31, 32-39
      for (std::int64_t j = 0; j < Nk; ++j)
        part[j / 16] = std::fma(s[std::size_t(j)], v[std::size_t(j * d + ch)].to_float(), part[j / 16]);
      const std::size_t e = std::size_t(i * d + ch);
      EXPECT_EQ(split[e].bits, psi::bf16_rne((part[0] + part[1]) + part[2]).bits) << i << "," << ch;
      apart += split[e].bits != whole[e].bits;
    }
  }
  EXPECT_GT(apart, 0) << "the inputs do not tell the splits from single chains";
}

TEST(KernelConfig, ShapeLogListsEachShapeWithItsSites) {
  std::mt19937 g(13);
  const auto A = random_bf16(g, 2 * 32), W = random_bf16(g, 4 * 32);
  std::vector<Bf16> y(8);
  const auto run = [&] { tc::linear({A.data(), 2, 32, 32}, {W.data(), 4, 32, 32}, nullptr, BiasRule::fused_f32, {y.data(), 2, 4, 4}, nullptr); };
  run();  // before the log: not listed
  start_shape_log();
  {
    const ProductSite outer("video");
    {
      const ProductSite inner("attn1");
      EXPECT_EQ(current_product_site(), "video.attn1");
      run();
    }
    run();
  }
  EXPECT_EQ(current_product_site(), "");
  const auto uses = stop_shape_log();
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].key.kind, ChainKind::tensor_core);
  EXPECT_EQ(uses[0].key.shape, (ProductShape{2, 4, 32}));
  EXPECT_EQ(uses[0].calls, 2);
  EXPECT_EQ(uses[0].sites, (std::vector<std::string>{"video", "video.attn1"}));
  run();  // after: the log is off
  start_shape_log();
  EXPECT_TRUE(stop_shape_log().empty());
}

class KernelConfigFile : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("psi_kernel_config_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  // The message of the refusal, or "" when the file was read.
  std::string refusal(const std::string& text) {
    try {
      psi::exp::read_kernel_config(write("c.json", text));
    } catch (const psi::Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(KernelConfigFile, WrittenFilesReadBackAndAreRecognizedAsPsis) {
  KernelConfig c;
  c.set({ChainKind::tensor_core, {288, 256, 1024}}, {6, 16});
  c.set({ChainKind::f32_values, {288, 128, 288}}, {3, 32});
  c.set({ChainKind::tensor_core, {18, 2, 128}}, {1, 16, true});
  const fs::path p = write("found.json", psi::exp::kernel_config_text(c, {{"objective", 3}}));
  const KernelConfig back = psi::exp::read_kernel_config(p);
  EXPECT_EQ(back.overrides(), c.overrides());
  EXPECT_TRUE(psi::exp::is_kernel_config_file()(p));
  EXPECT_FALSE(psi::exp::is_kernel_config_file()(write("other.json", "{\"products\": []}\n")));
  EXPECT_TRUE(psi::exp::read_kernel_config(write("empty.json", "{\"schema\": \"psi-kernel-config/1\"}")).overrides().empty());
}

TEST_F(KernelConfigFile, MalformedFilesAreRefusedNamingTheEntry) {
  const std::string head = "{\"schema\": \"psi-kernel-config/1\", \"products\": [";
  const std::string ok = "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": 2}";
  EXPECT_EQ(refusal(head + ok + "]}"), "");
  EXPECT_NE(refusal("{").find("not JSON"), std::string::npos);
  EXPECT_NE(refusal("{\"schema\": \"psi-h5/1\"}").find("not a kernel config"), std::string::npos);
  EXPECT_NE(refusal("[1]").find("not a kernel config"), std::string::npos);
  EXPECT_NE(refusal("{\"schema\": \"psi-kernel-config/1\", \"extra\": 1}").find("unknown key \"extra\""), std::string::npos);
  EXPECT_NE(refusal("{\"schema\": \"psi-kernel-config/1\", \"products\": {}}").find("products is not a list"), std::string::npos);
  EXPECT_NE(refusal(head + "3]}").find("products[0] is not an object"), std::string::npos);
  EXPECT_NE(refusal(head + ok + ", {\"chain\": \"tensor-core\", \"shape\": [1, 2], \"split_k\": 2}]}").find("products[1]: shape"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor\", \"shape\": [1, 2, 3], \"split_k\": 2}]}").find("chain"), std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [0, 2, 3], \"split_k\": 2}]}").find("shape[0]"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3.5], \"split_k\": 2}]}").find("not a whole number"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 18446744073709551615], \"split_k\": 2}]}")
                .find("shape[2]"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": 65}]}").find("split_k"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": -1}]}").find("split_k"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": 2, \"granule\": 0}]}").find("granule"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3]}]}").find("no split_k"), std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": 2, \"x\": 1}]}").find("unknown key"),
            std::string::npos);
  EXPECT_NE(refusal(head + ok + ", " + ok + "]}").find("listed twice"), std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"tensor-core\", \"shape\": [1, 2, 3], \"split_k\": 1, \"fma_chain\": 1}]}")
                .find("fma_chain is not true or false"),
            std::string::npos);
  EXPECT_NE(refusal(head + "{\"chain\": \"f32-values\", \"shape\": [1, 2, 3], \"split_k\": 1, \"fma_chain\": true}]}")
                .find("tensor-core products only"),
            std::string::npos);
  EXPECT_NE(refusal(std::string(std::size_t(1) << 20, ' ') + "{}").find("larger than 1 MiB"), std::string::npos);
  try {
    psi::exp::read_kernel_config(dir_);
    ADD_FAILURE() << "a folder was read";
  } catch (const psi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos);
  }
}

}  // namespace
