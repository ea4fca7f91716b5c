#pragma once
// The scheduling experiment's reading of its report for the device check's summary (its
// Experiment::device_summary, experiments/scheduling.cpp): per schedule, the measured block times
// and the probes' equality, set against the transfer floor of one block's weights.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/config.h"

namespace psi::exp {

// Bytes of one block's BF16 weights (block 0 of the config: every block has the same tensors).
std::uint64_t block_weight_bytes(const model::ModelConfig& c);

// Seconds to move `bytes` at `gbps` (1e9 bytes per second).
inline double transfer_seconds(double bytes, double gbps) { return bytes / (gbps * 1e9); }

struct ScheduleRow {
  std::string name;
  std::string outcome = "complete";  // the first failure's outcome, if any run failed
  int runs = 0;                      // completed runs (warm-up included)
  std::vector<double> walls_s;       // the measured (non-warm-up) completed runs: whole run
  std::vector<double> blocks_s;      // the same runs' block time, where the report has it
  bool resident = false;             // weights host-resident: block_s excludes producing them
  int probes_equal_first_min = -1;   // fewest of the ten probes equal to the first run's (-1: not recorded)
  int probes_equal_host_min = -1;    // fewest equal to the CPU host block (-1: not checked)
  nlohmann::json run;                // the last completed run's runtime report
  // The times the transfer floor bounds: the block's own when recorded, else the whole run's.
  const std::vector<double>& block_times() const { return blocks_s.empty() ? walls_s : blocks_s; }
};

struct SchedulingSummary {
  std::vector<ScheduleRow> schedules;  // in the report's order
  int probe_names = 0;                 // distinct probes hashed
  int probes_equal_across = 0;         // probes whose SHA-256 is the same in every completed run
  int completed_runs = 0;
  std::string arena, inputs;
};

// From the scheduling report's cases, read through its record.
SchedulingSummary summarize_scheduling(const nlohmann::json& cases);

}  // namespace psi::exp
