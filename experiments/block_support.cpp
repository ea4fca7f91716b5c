#include "experiments/block_support.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/synth_source.h"
#include "engine/pipeline/checkpoint_weights.h"
#include "engine/pipeline/trajectory.h"
#include "engine/sha256.h"

namespace psi::exp {

std::shared_ptr<const ckpt::WeightSource> block_weight_source(const Options& o, const model::ModelConfig& c,
                                                              std::uint64_t seed) {
  if (!o.checkpoint.empty())
    return std::make_shared<ckpt::SafetensorsFile>(o.checkpoint, "model.diffusion_model.");
  std::map<std::string, Shape, std::less<>> tensors;
  for (int b = 0; b < int(c.layers); ++b)
    for (auto& w : model::block_weight_specs(c, b)) tensors[w.name] = w.shape;
  return std::make_shared<ckpt::SynthSource>(seed, std::move(tensors));
}

FirstBlock first_block(const Options& o) {
  FirstBlock fb;
  fb.config = model::model_config(o.model, o.profile);
  fb.weights = block_weight_source(o, fb.config, o.seed);
  std::unique_ptr<model::WeightSource> host;
  if (o.checkpoint.empty())
    host = std::make_unique<model::SynthInitSource>(o.seed);
  else
    host = std::make_unique<pipeline::CheckpointWeights>(fb.weights);
  pipeline::TrajectoryCase tc{"first_block", "first_block", 1, o.seed, o.seed};
  fb.inputs = pipeline::first_block_inputs(fb.config, *host, tc, kFirstBlockStage);
  fb.description = "block 0 at the first stage-" + std::to_string(kFirstBlockStage) + " invocation of " + fb.config.name + " (" +
                   std::to_string(fb.inputs.video.x.dim(1)) + " video, " + std::to_string(fb.inputs.audio.x.dim(1)) +
                   " audio tokens, one-token context), weights " + (o.checkpoint.empty() ? "SynthInit" : o.checkpoint);
  return fb;
}

std::map<std::string, std::string> probe_hashes(const model::BlockProbes& p) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : p.named()) out[name] = sha256_hex(*t);
  return out;
}

}  // namespace psi::exp
