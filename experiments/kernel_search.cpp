#include "experiments/kernel_search.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/error.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/pipeline/trajectory.h"
#include "experiments/trajectory_support.h"
#include "probes/probe_cases.h"

namespace psi::exp {

namespace {

// The recording's weights drawn (and checked against its manifest) once: a search runs the same
// forward hundreds of times.
class CachedSource : public model::TensorSource {
 public:
  explicit CachedSource(std::unique_ptr<model::TensorSource> inner) : inner_(std::move(inner)) {}
  Bf16Tensor load(const std::string& name, const Shape& shape) override {
    auto it = cache_.find(name);
    if (it == cache_.end() || it->second.shape != shape) it = cache_.insert_or_assign(name, inner_->load(name, shape)).first;
    return it->second;
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<model::TensorSource> inner_;
  std::map<std::string, Bf16Tensor> cache_;
};

StepDifference difference(const pipeline::SavedState& ours, const pipeline::SavedState& ref) {
  const auto rows = compare_states({ours}, {ref});
  return {rows.at(0).video_differing, rows.at(0).audio_differing};
}

}  // namespace

struct TinyRecordings {
  model::ModelConfig config;
  RecordedTrajectory recording;
  std::unique_ptr<model::TensorSource> weights;  // a CachedSource
  pipeline::TrajectoryCase tc;
  model::NumericsVariant variant;
  std::string label;

  pipeline::TrajectoryHooks teacher() const {
    pipeline::TrajectoryHooks h;
    h.teacher = [this](int k) { return &recording.states.at(std::size_t(k - 1)); };
    return h;
  }
};

TinyTrajectory::TinyTrajectory(const std::filesystem::path& reference_dir, std::int64_t context_rows)
    : r_(std::make_unique<TinyRecordings>()) {
  const probes::TrajectoryRecording& recorded = probes::trajectory_recording(context_rows);
  const std::string& group = recorded.group;
  r_->config = model::model_config("tiny", "ltx25");
  r_->recording = read_recorded_trajectory(reference_dir / recorded.file, group);
  if (r_->recording.states.size() != 13)
    throw Error(r_->recording.file.string() + ": " + group + " holds " + std::to_string(r_->recording.states.size()) +
                " states, not 13");
  r_->weights = std::make_unique<CachedSource>(recorded_weights(r_->recording));
  r_->tc = {group, group, context_rows, r_->recording.seed, r_->recording.seed};
  r_->variant = model::numerics_variant("official-h200");
  r_->label = recorded.label;
}

TinyTrajectory::~TinyTrajectory() = default;
TinyTrajectory::TinyTrajectory(TinyTrajectory&&) noexcept = default;
std::string TinyTrajectory::label() const { return r_->label; }
std::uint64_t TinyTrajectory::seed() const { return r_->recording.seed; }
std::string TinyTrajectory::state_name(int index) const { return r_->recording.states.at(std::size_t(index)).name; }

const std::vector<int>& TinyTrajectory::steps() {
  static const std::vector<int> s{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12};
  return s;
}

std::pair<pipeline::SavedState, pipeline::SavedState> TinyTrajectory::forced_state(int step,
                                                                                 const official::KernelConfig& kernels) const {
  if (std::find(steps().begin(), steps().end(), step) == steps().end())
    throw Error("tiny trajectory: step " + std::to_string(step) + " is not a model step (1..8, 10..12)");
  pipeline::TrajectoryHooks h = r_->teacher();
  h.only_step = step;
  auto result = pipeline::run_trajectory(r_->config, *r_->weights, r_->tc, variant(kernels), h);
  return {std::move(result.states.at(0)), r_->recording.states.at(std::size_t(step))};
}

model::NumericsVariant TinyTrajectory::variant(const official::KernelConfig& kernels) const {
  return r_->variant.with_kernels(std::make_shared<const official::KernelConfig>(kernels));
}

StepDifference TinyTrajectory::forced_step(int step, const official::KernelConfig& kernels) const {
  const auto [ours, recorded] = forced_state(step, kernels);
  return difference(ours, recorded);
}

std::vector<StepDifference> TinyTrajectory::free_running(const official::KernelConfig& kernels) const {
  const auto result = pipeline::run_trajectory(r_->config, *r_->weights, r_->tc, variant(kernels));
  std::vector<StepDifference> out;
  for (std::size_t i = 0; i < result.states.size(); ++i) out.push_back(difference(result.states[i], r_->recording.states.at(i)));
  return out;
}

std::vector<official::ShapeUse> TinyTrajectory::shapes(int step, const official::KernelConfig& kernels) const {
  official::start_shape_log();
  try {
    forced_step(step, kernels);
  } catch (...) {
    official::stop_shape_log();
    throw;
  }
  return official::stop_shape_log();
}

namespace {

// The candidate choices for one shape, one per distinct slicing of its K.
std::vector<official::KernelChoice> candidates(const official::ShapeKey& k, const KernelSearchOptions& o) {
  std::vector<official::KernelChoice> out;
  std::set<std::pair<std::vector<std::pair<std::int64_t, std::int64_t>>, bool>> seen;
  for (bool fma : {false, true}) {
    if (fma && (k.kind != official::ChainKind::tensor_core || !o.fma_chains)) continue;
    for (int split : o.splits)
      for (int granule : o.granules) {
        const official::KernelChoice c{split, granule, fma};
        if (seen.insert({official::k_slices(k.shape.depth, c), fma}).second) out.push_back(c);
      }
  }
  return out;
}

}  // namespace

KernelSearchResult search_kernels(const TinyTrajectory& t, const official::KernelConfig& start, const KernelSearchOptions& o,
                                  const std::function<void(const KernelTrial&, std::size_t, std::size_t)>& on_trial) {
  KernelSearchResult r;
  r.shapes = t.shapes(o.step, start);
  r.best = start;
  r.start_objective = r.best_objective = t.forced_step(o.step, start).sum();
  std::size_t per_sweep = 0;
  for (const auto& use : r.shapes) per_sweep += candidates(use.key, o).size() - 1;
  for (r.sweeps = 1; r.sweeps <= o.max_sweeps; ++r.sweeps) {
    bool improved = false;
    std::size_t done = 0;
    for (const auto& use : r.shapes) {
      const official::KernelChoice current = r.best.choice(use.key.kind, use.key.shape);
      const auto current_slices = official::k_slices(use.key.shape.depth, current);
      for (const official::KernelChoice c : candidates(use.key, o)) {
        if (official::k_slices(use.key.shape.depth, c) == current_slices && c.fma_chain == current.fma_chain) continue;
        official::KernelConfig trial = r.best;
        trial.set(use.key, c);
        KernelTrial tr{use.key, c, t.forced_step(o.step, trial).sum(), false};
        if (tr.objective < r.best_objective) {
          tr.kept = true;
          improved = true;
          r.best = trial;
          r.best_objective = tr.objective;
        }
        r.trials.push_back(tr);
        if (on_trial) on_trial(tr, ++done, per_sweep);
        if (tr.kept) break;  // the shape's slicing changed: its remaining candidates next sweep
      }
    }
    if (!improved) break;
  }
  r.sweeps = std::min(r.sweeps, o.max_sweeps);  // the loop counts one past a last sweep that still improved
  // Overrides equal to the recorded choice say nothing: drop them.
  official::KernelConfig clean;
  for (const auto& [k, c] : r.best.overrides())
    if (c.fma_chain || official::k_slices(k.shape.depth, c) != official::k_slices(k.shape.depth, official::recorded_choice(k.kind, k.shape)))
      clean.set(k, c);
  r.best = clean;
  return r;
}

Confirmation confirm(const TinyTrajectory& t, const official::KernelConfig& c) {
  Confirmation out;
  out.context = t.label();
  out.free = t.free_running(c);
  const std::set<int> forced(TinyTrajectory::steps().begin(), TinyTrajectory::steps().end());
  for (int i = 0; i < 13; ++i) {
    out.states.push_back(t.state_name(i));
    out.forced.push_back(forced.count(i) ? std::optional(t.forced_step(i, c)) : std::nullopt);
  }
  return out;
}

nlohmann::json to_json(const KernelSearchResult& r) {
  nlohmann::json shapes = nlohmann::json::array(), trials = nlohmann::json::array();
  for (const auto& u : r.shapes)
    shapes.push_back({{"chain", official::chain_kind_name(u.key.kind)},
                      {"shape", {u.key.shape.rows, u.key.shape.cols, u.key.shape.depth}},
                      {"sites", u.sites},
                      {"calls", u.calls}});
  for (const auto& tr : r.trials)
    trials.push_back({{"chain", official::chain_kind_name(tr.key.kind)},
                      {"shape", {tr.key.shape.rows, tr.key.shape.cols, tr.key.shape.depth}},
                      {"split_k", tr.choice.split_k},
                      {"granule", tr.choice.granule},
                      {"fma_chain", tr.choice.fma_chain},
                      {"objective", tr.objective},
                      {"kept", tr.kept}});
  return {{"start_objective", r.start_objective}, {"best_objective", r.best_objective}, {"sweeps", r.sweeps},
          {"shapes", shapes}, {"trials", trials}};
}

}  // namespace psi::exp
