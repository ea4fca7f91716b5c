#pragma once
// Named experiments, one per table of the PSI study. Each driver runs its cases and records
// one JSON object per case in its Report; the tables are a pure function of those cases
// (`tabulate`), so `psi report` re-renders them from a file and `psi merge` re-tabulates the
// union of shard reports.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/measure/budget.h"
#include "experiments/figures.h"
#include "experiments/table.h"

namespace psi::exp {

class Report;

struct Options {
  std::string model = "tiny";
  std::string profile = "ltx25";
  std::string backend = "cpu";
  std::uint64_t seed = 0;
  bool seed_given = false;        // --seed was passed (else a recording's seed may be used)
  bool model_given = false;       // --model was passed (else an experiment on recordings uses theirs)
  std::filesystem::path out;      // the report; default out/<experiment>.h5
  std::string checkpoint;         // a safetensors file; empty: SynthInit weights
  std::filesystem::path reference_dir;  // recordings; default <shared>/reference
  int shard_index = 0, shard_count = 1;
  bool quick = false;             // a reduced size for tests: fewer cases or cycles
  std::uint64_t chaos_seed = 0;   // CPU backend chaos delays when non-zero
  bool zero_mask = false;         // full-prompt: an explicit all-zero context mask, checked and elided
  // fixed-budget: the free device pool a reservation leaves on CUDA; on the CPU backend the cap
  // on arena + pinned host buffers, scaled like the arena for smaller configs.
  std::uint64_t pool_bytes = rt::kDefaultPoolBytes;
  // scheduling: token rows per row tile; 0: the config's default; -1: the largest that fits the
  // arena under every schedule (exec::fitting_row_tile).
  std::int64_t row_tile = 0;

  // Whether case `i` of this experiment belongs to this shard (i mod n == index).
  bool in_shard(std::int64_t i) const { return i % shard_count == shard_index; }
  nlohmann::json to_json() const;
};

struct Experiment {
  std::string name;
  std::string reproduces;  // "Table IV", "Fig. 2, §IV-A", ...
  std::string summary;     // one line for `psi list`
  std::function<void(const Options&, Report&)> run;
  std::function<std::vector<Table>(const nlohmann::json& cases, const nlohmann::json& options)> tabulate;
  bool shardable = false;
  // Figures drawn from the cases (may be empty).
  std::function<std::vector<Figure>(const nlohmann::json& cases)> figures;
  // Run before the report is made: refuses (psi::Error) a --model, --profile, --seed or
  // --checkpoint the experiment cannot honour and sets the options to the config and seed it
  // will compute with, which the report then records. Empty: every config and seed apply.
  std::function<void(Options&)> settle;
};

const std::vector<Experiment>& experiments();
// An unknown name is a psi::Error listing the valid ones.
const Experiment& find_experiment(std::string_view name);
// Checks the model config name and profile (psi::Error naming the valid ones), then applies the
// experiment's settle.
void settle_options(const Experiment& e, Options& o);

// "cpu" or "cuda" for a requested "cpu" | "cuda" | "auto" (auto: CUDA only with a device,
// else the CPU with a one-line note on stderr); an unknown name or "cuda" without a device is a
// psi::Error.
std::string resolve_backend(const std::string& requested, bool chaos);
// The device a report names: the CPU model, or the CUDA device.
std::string device_name(const std::string& backend);

// The recordings: --reference, else <shared>/reference (probes::shared_dir: PSI_SHARED, else the
// build-time default).
std::filesystem::path reference_dir(const Options& o);

// The files a run may read, which its report and the files beside it must not be
// (reports/output_path.h): every entry of the reference folder, and the checkpoint.
std::vector<std::filesystem::path> run_inputs(const Options& o);

}  // namespace psi::exp
