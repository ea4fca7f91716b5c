#pragma once
// What the single-block runtime experiments (scheduling, capacity, memory-scopes) share: the
// first block's inputs, SHA-256 identities of the ten probes, and the host reference.
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/weight_source.h"
#include "engine/model/block.h"
#include "engine/model/config.h"
#include "experiments/experiment.h"

namespace psi::exp {

// The PSI variant the runtime experiments execute (the paper's schedules and capacity tables
// are about baseline PSI).
inline constexpr const char* kRuntimeVariant = "baseline";

struct FirstBlock {
  model::ModelConfig config;
  model::BlockInputs inputs;
  std::shared_ptr<const ckpt::WeightSource> weights;  // for the executor (pages)
  std::string description;                            // where the inputs come from
};

// The stage whose first invocation the single-block experiments run. Stage 1: the executor
// keeps whole-stream tensors in scratch (no token tiling yet, docs/psi-executor.md), so the
// scaled default arena holds a stage-1 block but not a stage-2 one.
inline constexpr int kFirstBlockStage = 2;

// Block 0 at the first invocation of kFirstBlockStage, SynthInit inputs
// named "input.first_block.*" with the options' seed, weights from SynthInit or the checkpoint.
FirstBlock first_block(const Options& o);

// The executor's weight source for every block of the config: SynthInit with `seed`, or the
// checkpoint file (official key prefix stripped).
std::shared_ptr<const ckpt::WeightSource> block_weight_source(const Options& o, const model::ModelConfig& c,
                                                              std::uint64_t seed);

// probe name -> SHA-256 of its BF16 bytes.
std::map<std::string, std::string> probe_hashes(const model::BlockTaps& p);
// Where two runs' block probes differ, for Report::fail: which probes, then the first differing
// elements of the first that does (probes::difference_lines). Empty when all are bitwise equal.
std::vector<std::string> probe_difference_lines(const model::BlockTaps& ours, const model::BlockTaps& ref,
                                                const std::string& ours_name, const std::string& ref_name);

}  // namespace psi::exp
