#pragma once
// What the trajectory experiments (one-token, full-prompt, transport-control, fixed-budget)
// share: running one path with progress, reading a recorded trajectory, comparing two
// trajectories state by state, and saving states into a report.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/pipeline/trajectory.h"
#include "experiments/process_peak.h"
#include "experiments/records.h"
#include "experiments/report.h"
#include "probes/provenance.h"

namespace psi::exp {

// The recorded states of group `group` of `file` (13 states, video_latent / audio_latent),
// the file's SynthInit seed and what the group declares of its provenance (its weights and
// SynthInit inputs; the inputs are checked against psi's regeneration when it is read).
struct RecordedTrajectory {
  std::filesystem::path file;
  std::string group;
  std::uint64_t seed = 0;
  probes::Manifest manifest;
  std::int64_t context_len = 1;
  std::vector<pipeline::SavedState> states;
};
RecordedTrajectory read_recorded_trajectory(const std::filesystem::path& file, const std::string& group);

// Per-state distance of `ours` to `ref` (same state names): relative L2 (float64), differing
// BF16 elements, all-finite; one row per state.
std::vector<StateDistance> compare_states(const std::vector<pipeline::SavedState>& ours,
                                          const std::vector<pipeline::SavedState>& ref);
// The same rows against a float64 trajectory: relative L2 in double to the float64 states,
// differing elements against the float64 states rounded to BF16.
std::vector<StateDistance> compare_states(const std::vector<pipeline::SavedState>& ours,
                                          const std::vector<pipeline::SavedStateF64>& ref);

// How many of the states' latents (video and audio counted apart) hold a NaN or an Inf: bitwise
// equality of such states says nothing about the arithmetic.
int nonfinite_latents(const std::vector<pipeline::SavedState>& states);
// Where two runs' saved states (the same names, in order) differ, for Report::fail: how many of
// the latents differ and which, then the first differing elements of the first that does
// (probes::difference_lines, `ours_name` against `ref_name`). Empty when all are bitwise equal.
std::vector<std::string> state_difference_lines(const std::vector<pipeline::SavedState>& ours,
                                                const std::vector<pipeline::SavedState>& ref,
                                                const std::string& ours_name, const std::string& ref_name);
// The table cell's remark for `n` such latents: empty for none, else " (n NOT FINITE)".
std::string nonfinite_note(int n);

// Writes every state of a run under `prefix` (e.g. "/states/dense/free").
void save_states(Report& r, const std::string& prefix, const std::vector<pipeline::SavedState>& states,
                 const std::string& variant);
void save_states(Report& r, const std::string& prefix, const std::vector<pipeline::SavedStateF64>& states,
                 const std::string& variant);

// Runs one trajectory with a progress line ("<label> stage s step k block b/B").
pipeline::TrajectoryResult run_with_progress(const model::ModelConfig& c, model::TensorSource& w,
                                             const pipeline::TrajectoryCase& tc,
                                             const model::NumericsVariant& v, const std::string& label,
                                             const pipeline::TrajectoryHooks& extra = {});
// The float64 reference trajectory (pipeline::run_trajectory_f64) with a progress line.
pipeline::TrajectoryResultF64 run_f64_with_progress(const model::ModelConfig& c, model::TensorSource& w,
                                                    const pipeline::TrajectoryCase& tc, const std::string& label,
                                                    const pipeline::TrajectoryHooks& extra = {});

// One path of a trajectory experiment. The PSI variants (baseline, modified) run their blocks
// through the PSI executor in the config's default arena (schedule reuse+prefetch), one arena for
// the whole run, and record per invocation the managed peak, scratch high-water and bytes moved;
// dense runs on whole host tensors (no arena). States are bitwise the same either way for the
// PSI variants (the executor's tests), so the executor only adds the resource numbers. Every path
// has its process peak over its own run (experiments/process_peak.h).
struct PathRun {
  pipeline::TrajectoryResult result;
  nlohmann::json invocations = nlohmann::json::array();  // per invocation: stage, step, wall, arena numbers
  nlohmann::json run = nullptr;                           // the executor's run report (PSI paths)
  ProcessPeak process_peak;
};
PathRun run_path(const Options& o, const model::ModelConfig& c, model::TensorSource& host,
                 const pipeline::TrajectoryCase& tc, const std::string& variant, const std::string& label,
                 pipeline::TrajectoryHooks hooks = {});

// Mean and sample standard deviation of invocation wall times, in seconds.
std::pair<double, double> wall_mean_sd(const std::vector<pipeline::Invocation>& inv);

// The weights a recorded trajectory was made with: SynthInit with its seed, each checked against
// its manifest as it loads.
std::unique_ptr<model::TensorSource> recorded_weights(const RecordedTrajectory& r);
// The weights of a run: SynthInit with the options' seed, or the checkpoint file.
std::unique_ptr<model::TensorSource> make_weights(const Options& o, std::uint64_t seed);

}  // namespace psi::exp
