#pragma once
// The case records of the experiments: what each driver writes per case into its report
// (/report/cases) and what its tables and figures are read back from. Each record has one
// to_json / from_json pair, beside its driver, so that every key is spelled once; recorded
// reports read back through the same from_json (`psi merge` re-tabulates shard files), so a key
// added later is optional there and read as today's tables read its absence. The record's
// "index" is the Report's (Report::add_case), not the driver's.
//
// Three parts stay JSON inside a record: "run" (the executor's run report, written by
// engine/runtime/run_report.cpp) and "explanation" (oracle/explain.cpp) are other layers'
// records, whose numbers the tables read as those layers write them; "per_invocation"
// (trajectory_support.cpp) is stored for the reader of the report and read by no table.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/diff_map.h"

namespace psi::exp {

// Reads `key` into `v` when the record has it. The keys no table reads are read so: a report
// written before one was recorded still tabulates, as it did when the tables read the JSON.
template <class T>
void read_if_present(const nlohmann::json& j, const char* key, T& v) {
  if (const auto it = j.find(key); it != j.end()) it->get_to(v);
}
// An optional key: absent stays std::nullopt.
template <class T>
void read_optional(const nlohmann::json& j, const char* key, std::optional<T>& v) {
  v.reset();
  if (const auto it = j.find(key); it != j.end()) v = it->get<T>();
}

// ---- shared by two experiments ----

// One saved state of a trajectory against a reference trajectory (compare_states): one-token's
// "states" / "states_f64", and full-prompt's endpoints.
struct StateDistance {
  std::string state;
  double video_rel_l2 = 0, audio_rel_l2 = 0;
  std::int64_t video_differing = 0, audio_differing = 0, video_total = 0, audio_total = 0;
  bool finite = true;
};
void to_json(nlohmann::json& j, const StateDistance& r);
void from_json(const nlohmann::json& j, StateDistance& r);

// One (variant, tensor, backend) of a psi probe run (probe_rows): probes' and block-controls'
// "rows". The distance is absent where the recording stores nothing to compare.
struct ProbeRow {
  std::string variant, tensor, backend, rows;
  struct Distance {  // probes::Distance
    std::int64_t differing = 0, total = 0;
    double rel_l2 = 0;
    // Absent in reports before sign flips were counted apart: their "max_ulp" was over every
    // differing element, sign flips included, which no table shows now.
    std::optional<std::int64_t> sign_flips, max_ulp_same_sign;
  };
  std::optional<Distance> distance;
  std::optional<bool> full_sha_equal;
};
void to_json(nlohmann::json& j, const ProbeRow& r);
void from_json(const nlohmann::json& j, ProbeRow& r);

// ---- one record per experiment, in the registry's order ----

// memory-scopes: one stage through every block.
struct MemoryScopesCase {
  int stage = 0;
  std::string outcome;                 // "result": {"outcome", "failure" when not complete}
  std::optional<std::string> failure;
  std::int64_t video_tokens = 0, audio_tokens = 0, blocks = 0;
  std::string arena, backend;
  double wall_s = 0;
  nlohmann::json run;
  std::string process_peak_kind;
  std::optional<std::uint64_t> process_peak_bytes;  // null: NVML did not list the process
};
void to_json(nlohmann::json& j, const MemoryScopesCase& r);
void from_json(const nlohmann::json& j, MemoryScopesCase& r);

// full-prompt: one (prompt, request seed) case, every path's endpoint against the dense path.
struct FullPromptPath {
  double wall_mean_s = 0, wall_sd_s = 0;
  nlohmann::json per_invocation, run;  // run: null for the dense path
  double endpoint_video_rel_l2 = 0, endpoint_audio_rel_l2 = 0;
  bool all_finite = true;
};
void to_json(nlohmann::json& j, const FullPromptPath& r);
void from_json(const nlohmann::json& j, FullPromptPath& r);
struct FullPromptCase {
  std::string prompt;
  std::optional<std::string> context_mask;  // --zero-mask: the elision check's verdict; else null
  int valid_tokens = 0;
  int run = 0;                              // request seed #1-#3
  std::string request_seed;                 // decimal: the seeds exceed a JSON double's integers
  std::map<std::string, FullPromptPath> paths;
  // The path's record; a psi::Error naming it when the case has none (a report of other paths).
  const FullPromptPath& path(const std::string& name) const;
};
void to_json(nlohmann::json& j, const FullPromptCase& r);
void from_json(const nlohmann::json& j, FullPromptCase& r);

// one-token: one row of the replay, of three kinds: a path's run (`result`), the recorded
// official states (`recorded`), the float64 states rounded to BF16 (`float64_wall`).
struct OneTokenResult {
  std::string reference;
  double wall_mean_s = 0, wall_sd_s = 0;
  std::uint64_t invocations = 0;
  std::vector<StateDistance> states;
  nlohmann::json per_invocation, run;  // run: null for the dense path
  std::string reference_file;          // the recording's path; empty for the dense path and in earlier reports
};
struct OneTokenCase {
  std::string context;
  std::int64_t context_rows = 0;
  std::string path, mode;
  std::uint64_t seed = 0;
  bool recorded = false;
  std::optional<std::pair<double, double>> float64_wall;  // mean, SD (s): the float64 run's own
  std::optional<OneTokenResult> result;
  std::optional<std::vector<StateDistance>> states_f64;  // absent in reports before the float64 run
};
void to_json(nlohmann::json& j, const OneTokenCase& r);
void from_json(const nlohmann::json& j, OneTokenCase& r);

// scheduling: one run of one schedule in one cycle (cycle 0: the warm-up).
struct SchedulingCase {
  std::string schedule;
  int cycle = 0;
  bool warmup = false;
  std::string arena;
  std::optional<std::int64_t> row_tile;  // absent in reports before --row-tile
  std::string outcome, failure;
  double wall_s = 0, preload_s = 0;
  std::optional<double> block_s;         // absent in reports before host-resident weights
  std::optional<std::string> weights;    // "host-resident" | "staged"; absent likewise
  std::uint64_t weight_bytes_streamed = 0;
  nlohmann::json run;
  std::string inputs;
  // A complete run's probes: their SHA-256, and how many equal the first run's and (CPU
  // backend) the host block's.
  std::optional<std::map<std::string, std::string>> probe_sha256;
  std::optional<int> probes_equal_first, probes_equal_host;
};
void to_json(nlohmann::json& j, const SchedulingCase& r);
void from_json(const nlohmann::json& j, SchedulingCase& r);

// capacity: the first block at one arena / page setting.
struct CapacityCase {
  std::string setting;
  std::int64_t arena_bytes = 0, page_bytes = 0, workspace_bytes = 0;
  std::string outcome, failure;
  double wall_s = 0, block_s = 0;
  std::string weights, schedule, inputs, reference;
  // A complete run's report and its probes' equality to the reference setting's.
  std::optional<nlohmann::json> run;
  std::optional<bool> bitwise_equal_to_reference;
};
void to_json(nlohmann::json& j, const CapacityCase& r);
void from_json(const nlohmann::json& j, CapacityCase& r);

// block-controls: the recorded block through every path.
struct BlockControlsCase {
  struct Distance {  // "official_flash_vs_math": FLASH against MATH of the recordings
    std::string tensor;
    double rel_l2 = 0;
    std::int64_t differing = 0, total = 0;
  };
  struct Float64Row {  // "float64_rows": a path's distance to the float64 block
    std::string path, tensor, rows;
    double rel_l2 = 0;
    std::int64_t differing = 0, total = 0;
  };
  // "flash_causes": one probe's elements where the recorded FLASH and MATH blocks differ, each
  // put down to the last step of engine/official/math_to_flash.h that changes it.
  struct FlashCause {
    std::string tensor, rows;
    std::int64_t total = 0, differing = 0;
    std::vector<std::int64_t> by_step;  // steps 1 … 7
    std::int64_t not_reproduced = 0;    // official-h200 or official-h200-flash not the recording there
  };
  // "ulp_figures": a differing cell of the main table (a path's video_out or audio_out against the
  // MATH recording) with the numbers its two figures draw (report/diff_figures.h).
  struct UlpFigure {
    std::string path, tensor;  // the table's row and column ("psi dense", "video_out")
    std::string figure;        // the figures' name stem: "dense.video_out.math"
    probes::DiffMap map;
  };
  std::string case_name;  // "case"
  std::string file;
  std::uint64_t seed = 0;
  std::vector<ProbeRow> rows;
  std::vector<Distance> official_flash_vs_math;
  std::optional<std::vector<Float64Row>> float64_rows;  // absent in reports before the float64 block
  std::optional<std::vector<FlashCause>> flash_causes;  // absent in reports before the FLASH core
  nlohmann::json official_timing_and_memory;            // the recording machine's, as recorded
  std::vector<std::string> notes;
  std::optional<std::vector<UlpFigure>> ulp_figures;  // absent in reports before the figures
};
void to_json(nlohmann::json& j, const BlockControlsCase::Distance& r);
void from_json(const nlohmann::json& j, BlockControlsCase::Distance& r);
void to_json(nlohmann::json& j, const BlockControlsCase::Float64Row& r);
void from_json(const nlohmann::json& j, BlockControlsCase::Float64Row& r);
// The keys are the members' names: one field list (nlohmann's macro), every key required.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BlockControlsCase::FlashCause, tensor, rows, total, differing, by_step,
                                   not_reproduced)
void to_json(nlohmann::json& j, const BlockControlsCase::UlpFigure& r);
void from_json(const nlohmann::json& j, BlockControlsCase::UlpFigure& r);
void to_json(nlohmann::json& j, const BlockControlsCase& r);
void from_json(const nlohmann::json& j, BlockControlsCase& r);

// fixed-budget: the capped run against the uncapped one.
struct FixedBudgetCase {
  std::int64_t cap_bytes = 0;
  std::optional<std::string> cap_scope;  // absent in reports before CUDA's pool
  std::string arena;
  std::uint64_t held_bytes = 0;
  bool fits = false;
  nlohmann::json run;
  double capped_wall_mean_s = 0, capped_wall_sd_s = 0, uncapped_wall_mean_s = 0, uncapped_wall_sd_s = 0;
  std::int64_t states_equal = 0, states_total = 0;
  std::optional<int> states_nonfinite;   // absent in reports before the check
};
void to_json(nlohmann::json& j, const FixedBudgetCase& r);
void from_json(const nlohmann::json& j, FixedBudgetCase& r);

// transport-control: one schedule's run, compared with the reference run's file (compared_to;
// the run's own file when it is the reference, which compares nothing).
struct TransportControlCase {
  std::string schedule, file;
  double wall_mean_s = 0, wall_sd_s = 0;
  nlohmann::json run;
  std::uint64_t chaos_seed = 0;
  std::string compared_to;
  // What the reference run is; absent in reports before the host reference, whose reference was
  // the first schedule's run (compared with itself).
  std::optional<std::string> reference;
  std::int64_t datasets_compared = 0, datasets_equal = 0;
  int compare_exit = 0;
  std::optional<int> states_nonfinite;   // absent in reports before the check
};
void to_json(nlohmann::json& j, const TransportControlCase& r);
void from_json(const nlohmann::json& j, TransportControlCase& r);

// probes: one operator probe case.
struct ProbesCase {
  std::string case_name;  // "case"
  std::string file;
  std::uint64_t seed = 0;
  double seconds = 0;
  std::vector<std::string> notes;
  std::vector<ProbeRow> rows;
};
void to_json(nlohmann::json& j, const ProbesCase& r);
void from_json(const nlohmann::json& j, ProbesCase& r);

// projection-oracle: the first disagreement, explained when there is one.
struct ProjectionOracleCase {
  std::string file, probe, output;
  std::optional<std::uint64_t> seed;  // the recording's SynthInit seed; absent in earlier reports
  std::int64_t elements = 0, differing = 0;
  struct First {
    std::int64_t row = 0, col = 0;
    nlohmann::json explanation;  // oracle::to_json
    std::string explanation_text;
  };
  std::optional<First> first;
};
void to_json(nlohmann::json& j, const ProjectionOracleCase& r);
void from_json(const nlohmann::json& j, ProjectionOracleCase& r);

}  // namespace psi::exp
