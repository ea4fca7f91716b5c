// The probes on a runtime backend (ProbeOptions::backend): on the CPU backend the block through
// the PSI executor and the projections as one whole product give the host path's bits for
// every variant, so on CUDA any difference from the host is the device's arithmetic alone.
#include <gtest/gtest.h>

#include <random>

#include "engine/model/variant.h"
#include "engine/ops/gemm.h"
#include "engine/runtime/whole_linear.h"
#include "probes/probe_cases.h"

namespace {

using namespace psi;

Bf16Tensor random_bf16(const Shape& s, std::uint64_t seed) {
  Bf16Tensor t(s);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& v : t.data) v = bf16_rne(n(g));
  return t;
}

void expect_same_outputs(const probes::ProbeReport& a, const probes::ProbeReport& b) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (std::size_t v = 0; v < a.outputs.size(); ++v) {
    ASSERT_EQ(a.outputs[v].first, b.outputs[v].first);
    ASSERT_EQ(a.outputs[v].second.size(), b.outputs[v].second.size());
    for (std::size_t t = 0; t < a.outputs[v].second.size(); ++t) {
      const auto& [name, x] = a.outputs[v].second[t];
      ASSERT_GT(x.numel(), 0) << name;
      EXPECT_EQ(x.shape, b.outputs[v].second[t].second.shape) << a.outputs[v].first << " " << name;
      EXPECT_TRUE(x.data == b.outputs[v].second[t].second.data) << a.outputs[v].first << " " << name << " differs";
    }
  }
}

TEST(WholeLinear, CpuBackendIsOpsLinearForBothBiasRules) {
  const Bf16Tensor x = random_bf16({3, 5, 96}, 1), w = random_bf16({40, 96}, 2), b = random_bf16({40}, 3);
  for (const psi::BiasRule rule : {psi::BiasRule::fused_f32, psi::BiasRule::after_bf16}) {
    const rt::WholeLinear r = rt::whole_linear("cpu", x, w, &b, rule);
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.y.shape, (Shape{3, 5, 40}));
    EXPECT_TRUE(r.y.data == ops::linear(x, w, &b, rule).data);
  }
  EXPECT_TRUE(rt::whole_linear("cpu", x, w, nullptr, psi::BiasRule::fused_f32).y.data ==
              ops::linear(x, w, nullptr, psi::BiasRule::fused_f32).data);
}

TEST(WholeLinear, ShapesThatDoNotFitAreRefused) {
  const Bf16Tensor x = random_bf16({4, 8}, 1), w = random_bf16({6, 7}, 2), b = random_bf16({5}, 3);
  try {
    rt::whole_linear("cpu", x, w, nullptr, psi::BiasRule::fused_f32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "whole linear: weight [6, 7] does not fit input [4, 8]");
  }
  const Bf16Tensor w8 = random_bf16({6, 8}, 4);
  try {
    rt::whole_linear("cpu", x, w8, &b, psi::BiasRule::fused_f32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "whole linear: bias [5] for a weight [6, 8]");
  }
}

TEST(ProbeBackends, ProjectionsOnTheCpuBackendAreTheHostBits) {
  for (const char* name : {"audio-ff-up", "video-q-proj"}) {
    probes::ProbeOptions host, cpu;
    cpu.runtime = rt::BackendKind::cpu;
    expect_same_outputs(probes::run_probe(name, cpu), probes::run_probe(name, host));
  }
}

TEST(ProbeBackends, SmallBlockThroughTheExecutorIsTheHostBlockForEveryVariant) {
  probes::ProbeOptions host, cpu;
  cpu.runtime = rt::BackendKind::cpu;
  const probes::ProbeReport on_cpu = probes::run_probe("block-small", cpu);
  expect_same_outputs(on_cpu, probes::run_probe("block-small", host));
  int executor_notes = 0;
  for (const auto& n : on_cpu.notes) executor_notes += n.find(": PSI executor on cpu, ") != std::string::npos;
  EXPECT_EQ(executor_notes, int(model::numerics_variant_names().size()));
}

}  // namespace
