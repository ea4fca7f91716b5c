#include "experiments/block_support.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/synth_source.h"
#include "engine/pipeline/checkpoint_weights.h"
#include "engine/pipeline/trajectory.h"
#include "engine/sha256.h"
#include "probes/element_differences.h"

namespace psi::exp {

std::shared_ptr<const ckpt::WeightSource> block_weight_source(const Options& o, const model::ModelConfig& c,
                                                              std::uint64_t seed) {
  if (!o.checkpoint.empty()) return ckpt::open_official_checkpoint(o.checkpoint);
  std::map<std::string, Shape, std::less<>> tensors;
  for (int b = 0; b < int(c.layers); ++b)
    for (auto& w : model::block_weight_specs(c, b)) tensors[w.name] = w.shape;
  return std::make_shared<ckpt::SynthSource>(seed, std::move(tensors));
}

FirstBlock first_block(const Options& o) {
  FirstBlock fb;
  fb.config = model::model_config(o.model, o.profile);
  fb.weights = block_weight_source(o, fb.config, o.seed);
  std::unique_ptr<model::TensorSource> host;
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

std::map<std::string, std::string> probe_hashes(const model::BlockTaps& p) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : p.named()) out[name] = sha256_hex(*t);
  return out;
}

std::vector<std::string> probe_difference_lines(const model::BlockTaps& ours, const model::BlockTaps& ref,
                                                const std::string& ours_name, const std::string& ref_name) {
  const auto a = ours.named(), b = ref.named();
  std::vector<std::string> differing, first;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].second->shape == b[i].second->shape && a[i].second->data == b[i].second->data) continue;
    differing.push_back(a[i].first);
    if (first.empty())
      first = a[i].second->shape != b[i].second->shape
                  ? std::vector<std::string>{a[i].first + ": shape " + shape_str(a[i].second->shape) + " against " +
                                             shape_str(b[i].second->shape)}
                  : probes::difference_lines(a[i].first, *a[i].second, *b[i].second, ours_name, ref_name);
  }
  if (differing.empty()) return {};
  std::string list;
  for (const auto& d : differing) list += (list.empty() ? "" : ", ") + d;
  std::vector<std::string> lines{std::to_string(differing.size()) + " of " + std::to_string(a.size()) +
                                 " probes differ: " + list};
  lines.insert(lines.end(), first.begin(), first.end());
  return lines;
}

}  // namespace psi::exp
