#pragma once
// Named experiments, one per table of the PSI study, each one file of experiments/ (its unit):
// its case record, its own options, its settle rule, its driver, its tables, its section of the
// device check's summary and its registration. Each driver runs its cases and records one typed
// record per case in its Report; the tables are a pure function of those cases (`tabulate`), so
// `psi report` re-renders them from a file and `psi merge` re-tabulates the union of shard
// reports (docs/experiments.md).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/backend_factory.h"
#include "engine/model/variant.h"
#include "engine/official/kernel_config.h"
#include "experiments/record_fields.h"
#include "report/figures.h"
#include "report/table.h"

namespace psi::exp {

// The experiments write what a user reads with the report layer's tables, figures and statistics
// (report/): its names are theirs.
using namespace psi::report;

class Report;

struct Options {
  std::string model = "tiny";
  std::string profile = "ltx25";
  rt::BackendKind backend = rt::BackendKind::cpu;  // resolved: `psi run --backend auto` is cpu or cuda here
  std::uint64_t seed = 0;
  bool seed_given = false;        // --seed was passed (else a recording's seed may be used)
  bool model_given = false;       // --model was passed (else an experiment on recordings uses theirs)
  std::filesystem::path out;      // the report; default out/<experiment>.h5
  std::string checkpoint;         // a safetensors file; empty: SynthInit weights
  std::filesystem::path reference_dir;  // recordings; default <shared>/reference
  int shard_index = 0, shard_count = 1;
  bool quick = false;             // a reduced size for tests: fewer cases or cycles
  std::uint64_t chaos_seed = 0;   // CPU backend chaos delays when non-zero
  // --kernel-config: the file, and the per-shape kernel choices it holds
  // (experiments/kernel_config_file.h), which every variant of the run carries (variant_of);
  // recorded as its "products" list. Null: the recorded choices.
  std::filesystem::path kernel_config_file;
  official::KernelConfigRef kernels;

  // The experiments' own options that were set (own_options), flat by their recorded keys; the
  // others are at their defaults (Experiment::own_defaults).
  nlohmann::json own = nlohmann::json::object();

  // Whether case `i` of this experiment belongs to this shard (i mod n == index).
  bool in_shard(std::int64_t i) const { return i % shard_count == shard_index; }
  // The report's record of the options (/report/options): the shared ones and every
  // experiment's own, flat, at their defaults where the experiment has none of its own.
  nlohmann::json to_json() const;
  // Back from that record (a nlohmann::json::exception on a malformed one, an Error naming a key
  // psi does not write). Keys later than the first reports (the experiments' own, the shard)
  // default when absent; out, reference_dir and the *_given flags and kernel_config_file are not
  // recorded.
  static Options from_json(const nlohmann::json& j);
};

// An integer option as psi writes it, in [lo, hi]: nlohmann would turn 1.0, "1" or true into one and
// wrap -1 into 2^64 - 1. psi::Error naming the key and the value otherwise.
std::int64_t integer_option(const nlohmann::json& o, const char* key, std::int64_t lo, std::int64_t hi);

// The same for an option psi writes as an unsigned 64-bit integer (a seed).
std::uint64_t unsigned_option(const nlohmann::json& o, const char* key);

// The numerics variant `name` as this run computes it: with the run's kernel choices.
model::NumericsVariant variant_of(const Options& o, std::string_view name);

// One experiment's own options, a record (experiments/record_fields.h) of its file whose fields
// are all field_if_present: those set in `o`, the others at their defaults.
template <Record T>
T own_options(const Options& o) {
  T v;
  read_fields(o.own, v);
  return v;
}
template <Record T>
void set_own_options(Options& o, const T& v) {
  write_fields(o.own, v);
}

// The config a report's recorded options name, for the tables' titles ("?" when there is none).
std::string recorded_model(const nlohmann::json& options);

// An option of one experiment alone (`psi run --pool`): the CLI declares every experiment's, and
// only the experiment that declares it accepts it.
struct ExperimentOption {
  std::string flag;         // "--pool"
  std::string help;
  bool takes_value = true;  // false: a flag, given or not
  // Sets the experiment's own options from the value ("" for a flag); psi::Error on a bad one.
  std::function<void(const std::string& value, Options& o)> apply;
};

// What the device check's summary (device_check/summary.cpp) gives an experiment's section: its
// report and the copy rates measured on the machine.
struct DeviceSummaryInput {
  nlohmann::json cases, options;
  std::string backend, device_name;  // the report's attributes
  struct Copy {
    double mib = 0, h2d_gbps = 0;  // a pinned copy's size and host-to-device rate
  };
  // The measured copy whose size is nearest `page_bytes`; nullopt when none was measured.
  std::function<std::optional<Copy>(double page_bytes)> copy_for_page;
};

// Every member has an initializer, so that a registration names only the fields it has
// (designated initializers) without -Wmissing-field-initializers.
struct Experiment {
  std::string name{};
  std::string reproduces{};  // "Table IV", "Fig. 2, §IV-A", ...
  std::string summary{};     // one line for `psi list`
  std::function<void(const Options&, Report&)> run{};
  // The tables from the cases (the records of the experiment's file) and the recorded
  // options (Options::to_json).
  std::function<std::vector<Table>(const nlohmann::json& cases, const nlohmann::json& options)> tabulate{};
  bool shardable = false;
  // Figures drawn from the cases (may be empty).
  std::function<std::vector<Figure>(const nlohmann::json& cases)> figures{};
  // Run before the report is made: refuses (psi::Error) a --model, --profile, --seed or
  // --checkpoint the experiment cannot honour and sets the options to the config and seed it
  // will compute with, which the report then records. Empty: every config and seed apply.
  std::function<void(Options&)> settle{};
  // The options of this experiment alone: the flags, and their record at its defaults
  // (nlohmann::json(TheOptions{}), recorded flat in /report/options; null: none).
  std::vector<ExperimentOption> options{};
  nlohmann::json own_defaults{};
  // A recorded case read through the experiment's record and written again (reread_as): the
  // record's field list applied to a report's case.
  std::function<nlohmann::json(const nlohmann::json& recorded)> reread{};
  // The keys of its cases that measure time (time_keys_of its record), which the report declares
  // beside them: psi compare counts those apart.
  std::function<std::vector<std::string>()> time_fields{};
  // The keys of its cases that name a path (provenance_keys_of its record), declared the same way:
  // psi compare shows their differences and does not count them.
  std::function<std::vector<std::string>()> provenance_fields{};
  // Its section of the device check's summary (`psi device summary`) from its report, in
  // Markdown; empty: the summary shows none.
  std::function<std::string(const DeviceSummaryInput&)> device_summary{};
};

// Registers an experiment at static initialisation, one in each experiment's file; `order` is its
// place in `psi list`, the study's table order (experiments/registry.cpp).
struct Registration {
  Registration(int order, Experiment e);
};

// In the order of the study's tables; the names are the user interface.
const std::vector<Experiment>& experiments();
// An unknown name is a psi::Error listing the valid ones.
const Experiment& find_experiment(std::string_view name);
// Checks the model config name and profile (psi::Error naming the valid ones), then applies the
// experiment's settle.
void settle_options(const Experiment& e, Options& o);

// "cpu" or "cuda" for a requested "cpu" | "cuda" | "auto" (auto: CUDA only with a device,
// else the CPU with a one-line note on stderr); an unknown name or "cuda" without a device is a
// psi::Error.
rt::BackendKind resolve_backend(const std::string& requested, bool chaos);
// The device a report names: the CPU model with the vector level and the tensor-core product's
// lane kernels psi ran at on it (engine/cpu_features.h), or the CUDA device.
std::string device_name(rt::BackendKind backend);

// The recordings: --reference, else <shared>/reference (probes::shared_dir: PSI_SHARED, else the
// build-time default).
std::filesystem::path reference_dir(const Options& o);

// The files a run may read, which its report and the files beside it must not be
// (outputs/output_path.h): every entry of the reference folder, and the checkpoint.
std::vector<std::filesystem::path> run_inputs(const Options& o);

}  // namespace psi::exp
