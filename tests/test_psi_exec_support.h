#pragma once
// Shared by the PSI executor tests: a synthetic block case (config, SynthInit weights as a
// streamable source, inputs) and its host reference, model::block_forward on the same weights.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/exec/executor.h"
#include "engine/model/block.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/pipeline/checkpoint_weights.h"
#include "engine/pipeline/synthetic_block.h"

namespace psi_exec_test {

namespace exec = psi::exec;
namespace model = psi::model;
namespace pipeline = psi::pipeline;
namespace rt = psi::rt;

struct BlockCase {
  model::ModelConfig config;
  std::shared_ptr<psi::ckpt::SynthSource> weights;
  model::BlockInputs inputs;
  int index = 0;

  BlockCase(const std::string& name, const std::string& profile, const pipeline::SyntheticShape& shape, int block = 0,
            std::uint64_t seed = 7)
      : config(model::model_config(name, profile)),
        weights(std::make_shared<psi::ckpt::SynthSource>(pipeline::synthetic_weights(config, seed))),
        inputs(pipeline::synthetic_block_inputs(config, shape, seed + 1)),
        index(block) {}

  // The host block on the very weights the executor streams.
  model::BlockTaps reference(const model::NumericsVariant& v) const {
    pipeline::CheckpointWeights src(weights);
    return model::block_forward(config, model::load_block_weights(src, config, index), inputs, v);
  }
};

// Every probe bitwise equal (and non-trivial shapes).
inline void expect_bitwise(const model::BlockTaps& got, const model::BlockTaps& want, const std::string& where) {
  const auto g = got.named();
  const auto w = want.named();
  ASSERT_EQ(g.size(), 10u);
  for (std::size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g[i].second->shape, w[i].second->shape) << where << " probe " << g[i].first;
    ASSERT_GT(g[i].second->numel(), 0) << where << " probe " << g[i].first;
    EXPECT_TRUE(g[i].second->data == w[i].second->data) << where << " probe " << g[i].first << " differs";
  }
}

}  // namespace psi_exec_test
