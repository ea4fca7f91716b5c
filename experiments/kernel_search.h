#pragma once
// The search for the tiny model's kernel configurations (issue: the official trajectory bit for
// bit). The block recordings fixed the H200's kernels for the block shapes; the tiny model's
// products are smaller (rows 1, 18, 72, 288; K 128 to 1,024) and cuBLAS(Lt) may pick other
// kernels for them, split-K first. Jointly over every product shape the tiny forward makes
// (official::ShapeUse), a coordinate descent changes one shape's kernel at a time (its K split, or a
// tensor-core shape as FP32 FMA chains) and keeps a change
// when the teacher-forced step `step` of the recorded one-token trajectory differs in fewer
// elements (video + audio) from the recorded state; sweeps repeat from the best until one changes
// nothing. The configuration found is then confirmed on every state of both recorded
// trajectories (one-token and 1,024-row contexts; teacher-forced and free-running): a
// configuration found on one step and confirmed on the others is evidence; one tuned state by
// state would not be.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/variant.h"
#include "engine/official/kernel_config.h"
#include "engine/pipeline/trajectory.h"

namespace psi::exp {

// The recorded tiny trajectories the search runs on (the folder's probe_attn_traj.h5 and
// trajectory_ctx1024.h5).
struct TinyRecordings;

struct StepDifference {
  std::int64_t video = 0, audio = 0;
  std::int64_t sum() const { return video + audio; }
};

// One recorded trajectory with its weights, contexts and the official-h200 variant, ready to
// run steps under the kernel configuration each call names.
class TinyTrajectory {
 public:
  // context_rows 1: probe_attn_traj.h5's trajectory_tiny; 1024: trajectory_ctx1024.h5's.
  TinyTrajectory(const std::filesystem::path& reference_dir, std::int64_t context_rows);
  ~TinyTrajectory();
  TinyTrajectory(TinyTrajectory&&) noexcept;
  std::string label() const;  // "one-token", "ctx1024"
  std::uint64_t seed() const;  // the recording's SynthInit seed (weights, noise, contexts)
  std::string state_name(int index) const;  // the recording's, "00_stage1_initial" … "12_stage2_step3"
  // The state `step` (1..8, 10..12) teacher-forced from the recorded state before it, against
  // the recorded state `step`.
  StepDifference forced_step(int step, const official::KernelConfig& kernels) const;
  // The state `step` teacher-forced (as forced_step) and the recorded state `step`.
  std::pair<pipeline::SavedState, pipeline::SavedState> forced_state(int step, const official::KernelConfig& kernels) const;
  // Every state of the free-running run against the recording (index 0..12).
  std::vector<StepDifference> free_running(const official::KernelConfig& kernels) const;
  // The distinct products of step `step` (the shape log).
  std::vector<official::ShapeUse> shapes(int step, const official::KernelConfig& kernels) const;
  // The variant its steps run: official-h200 with the kernel choices `kernels`.
  model::NumericsVariant variant(const official::KernelConfig& kernels) const;
  static const std::vector<int>& steps();  // 1..8, 10..12

 private:
  std::unique_ptr<TinyRecordings> r_;
};

struct KernelTrial {
  official::ShapeKey key;
  official::KernelChoice choice;
  std::int64_t objective = 0;
  bool kept = false;
};

struct KernelSearchOptions {
  int step = 1;         // the objective's teacher-forced step
  int max_sweeps = 4;
  std::vector<int> splits{1, 2, 3, 4, 6, 8, 16};
  std::vector<int> granules{16, 32, 64};
  bool fma_chains = true;  // also try each tensor-core shape as float32 FMA chains
};

struct KernelSearchResult {
  std::vector<official::ShapeUse> shapes;
  official::KernelConfig best;
  std::int64_t start_objective = 0, best_objective = 0;
  int sweeps = 0;
  std::vector<KernelTrial> trials;
};

// Starts from `start` (its overrides kept as the first point); `on_trial` sees every trial.
KernelSearchResult search_kernels(const TinyTrajectory& t, const official::KernelConfig& start,
                                  const KernelSearchOptions& o,
                                  const std::function<void(const KernelTrial&, std::size_t done, std::size_t total)>&
                                      on_trial = {});

// Per state of one trajectory under one configuration: teacher-forced step differences (the
// 11 steps) and free-running differences (13 states).
struct Confirmation {
  std::string context;
  std::vector<std::string> states;                  // 13 names
  std::vector<std::optional<StepDifference>> forced;  // per state; none for 00 and 09
  std::vector<StepDifference> free;
};
Confirmation confirm(const TinyTrajectory& t, const official::KernelConfig& c);

nlohmann::json to_json(const KernelSearchResult& r);

}  // namespace psi::exp
