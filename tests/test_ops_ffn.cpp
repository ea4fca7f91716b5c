// The PSI FFN: 1,024-channel hidden tiles with recompute and reuse schedules are bitwise equal
// to each other and to the dense FFN with the same write boundaries.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/ops/ffn.h"
#include "engine/synthinit.h"

namespace ops = psi::ops;
using psi::Bf16Tensor;

namespace {

struct Weights {
  Bf16Tensor up_w, up_b, down_w, down_b;
  ops::FfnWeights view(bool bias) const {
    return {&up_w, bias ? &up_b : nullptr, &down_w, bias ? &down_b : nullptr};
  }
};

Weights make_weights(std::int64_t D, std::int64_t hidden, std::int64_t Dout) {
  return {psi::synthinit::make("t.ff.net.0.proj.weight", {hidden, D}, 2), psi::synthinit::make("t.ff.net.0.proj.bias", {hidden}, 2),
          psi::synthinit::make("t.ff.net.2.weight", {Dout, hidden}, 2), psi::synthinit::make("t.ff.net.2.bias", {Dout}, 2)};
}

}  // namespace

TEST(Ffn, TiledSchedulesEqualDenseBitwise) {
  const std::int64_t M = 40, D = 128, hidden = 3072, Dout = 96;
  const Bf16Tensor x = psi::synthinit::make("input.test.x", {1, M, D}, 2);
  const Weights w = make_weights(D, hidden, Dout);
  for (bool bias : {false, true})
    for (auto rule : {psi::BiasRule::fused_f32, psi::BiasRule::after_bf16}) {
      ops::FfnOptions dense;
      dense.up_bias = rule;
      const Bf16Tensor ref = ops::ffn(x, w.view(bias), dense);
      ASSERT_EQ(ref.shape, (psi::Shape{1, M, Dout}));
      for (auto schedule : {ops::FfnSchedule::recompute, ops::FfnSchedule::reuse})
        for (std::int64_t ht : {1024, 2048, 4096})
          for (std::int64_t ot : {1000, 64, 7, 96}) {
            ops::FfnOptions o = dense;
            o.schedule = schedule;
            o.hidden_tile = ht;
            o.out_tile = ot;
            EXPECT_EQ(ops::ffn(x, w.view(bias), o).data, ref.data)
                << "bias " << bias << " rule " << int(rule) << " schedule " << int(schedule) << " tiles " << ht << "/" << ot;
          }
    }
}

TEST(Ffn, SmallHiddenIsOneTile) {
  const Bf16Tensor x = psi::synthinit::make("input.test.x", {1, 9, 64}, 4);
  const Weights w = make_weights(64, 512, 64);
  ops::FfnOptions o;
  const Bf16Tensor ref = ops::ffn(x, w.view(true), o);
  o.schedule = ops::FfnSchedule::reuse;
  o.hidden_tile = 512;
  EXPECT_EQ(ops::ffn(x, w.view(true), o).data, ref.data);
}

TEST(Ffn, BiasRuleChangesTheHidden) {
  const Bf16Tensor x = psi::synthinit::make("input.test.x", {1, 30, 128}, 5);
  const Weights w = make_weights(128, 1024, 128);
  const Bf16Tensor a = ops::ffn_hidden(x, w.view(true), psi::BiasRule::fused_f32);
  const Bf16Tensor b = ops::ffn_hidden(x, w.view(true), psi::BiasRule::after_bf16);
  EXPECT_NE(a.data, b.data);
}

TEST(Ffn, BadTilesAreErrors) {
  const Bf16Tensor x = psi::synthinit::make("input.test.x", {1, 4, 128}, 6);
  const Weights w = make_weights(128, 3072, 128);
  ops::FfnOptions o;
  o.schedule = ops::FfnSchedule::reuse;
  o.hidden_tile = 1000;  // would split a 1,024-wide reduction chunk
  EXPECT_THROW(ops::ffn(x, w.view(false), o), psi::Error);
  o.hidden_tile = 1024;
  o.out_tile = 0;
  EXPECT_THROW(ops::ffn(x, w.view(false), o), psi::Error);
}
