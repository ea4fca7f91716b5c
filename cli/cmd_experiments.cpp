// psi list / psi run <experiment> / psi report FILE / psi merge: the named experiments.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/interrupt.h"
#include "engine/progress.h"
#include "experiments/experiment.h"
#include "experiments/kernel_config_file.h"
#include "experiments/partial_report.h"
#include "experiments/report.h"
#include "report/table.h"

namespace psi::cli {
namespace {

psi::cli::Registrar list_reg("list", "list the experiments (one per table of the PSI study)", [](CLI::App&) {
  return [] {
    // Padded by display width: "§" and "Δ" are one column but two bytes.
    std::size_t name_w = 0, what_w = 0;
    for (const exp::Experiment& e : exp::experiments()) {
      name_w = std::max(name_w, report::display_width(e.name));
      what_w = std::max(what_w, report::display_width(e.reproduces));
    }
    for (const exp::Experiment& e : exp::experiments())
      std::cout << report::pad_right(e.name, name_w) << "  " << report::pad_right(e.reproduces, what_w) << "  " << e.summary
                << "\n";
    return 0;
  };
});

// An option of one experiment alone (exp::Experiment::options) as given on the command line.
struct OwnOption {
  const exp::Experiment* owner;
  const exp::ExperimentOption* option;
  std::string value;
  bool flag = false;
  // Given: a flag set, or a non-empty value.
  bool given() const { return option->takes_value ? !value.empty() : flag; }
};

struct RunOpts {
  std::string name;
  exp::Options o;
  std::string backend = "cpu";  // the request; Options::backend is what it resolves to
  std::string shard;
  std::string out;
  std::string reference;
  std::string kernel_config;
  std::vector<OwnOption> own;  // stable: CLI11 binds to its elements
};

void parse_shard(const std::string& s, exp::Options& o) {
  const std::size_t slash = s.find('/');
  const auto max = std::uint64_t(std::numeric_limits<int>::max());
  const auto i = slash == std::string::npos ? std::nullopt : parse_whole(std::string_view(s).substr(0, slash), 0, max);
  const auto n = slash == std::string::npos ? std::nullopt : parse_whole(std::string_view(s).substr(slash + 1), 1, max);
  if (!i || !n || *i >= *n)
    throw Error("--shard '" + s + "': expected i/n, whole numbers with 0 <= i < n <= " + std::to_string(max));
  o.shard_index = int(*i);
  o.shard_count = int(*n);
}

psi::cli::Registrar run_reg("run", "run one named experiment, write its HDF5 report and print its table",
                            [](CLI::App& sub) {
  auto r = std::make_shared<RunOpts>();
  sub.add_option("experiment", r->name, "experiment name (psi list)")->required();
  auto* model = sub.add_option("--model", r->o.model,
                               "model config: tiny (default), small, ltx2-22b; the experiments on recordings "
                               "(block-controls, probes, projection-oracle) run at the recorded config and refuse another");
  sub.add_option("--profile", r->o.profile, "feature profile: ltx25 (default), ltx2");
  sub.add_option("--backend", r->backend, "cpu (default), cuda, auto");
  auto* seed = sub.add_option("--seed", r->o.seed,
                              "SynthInit global seed (default: the recording's, else 0); the experiments on "
                              "recordings refuse a seed other than the recording's")
                  ->transform(psi::cli::whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  sub.add_option("--out", r->out, "report file (default out/<experiment>.h5)")->check(output_path());
  add_force_flag(sub);
  sub.add_option("--checkpoint", r->o.checkpoint, "a safetensors checkpoint instead of SynthInit weights")
      ->check(psi::cli::non_empty());
  sub.add_option("--reference", r->reference,
                 "FOLDER of recordings (default <shared>/reference); psi probe's --reference is one recording file")
      ->check(psi::cli::non_empty());
  sub.add_option("--kernel-config", r->kernel_config,
                 "a kernel-config FILE (psi-kernel-config/1, psi kernels search): official-h200's K split per "
                 "product shape instead of the recorded choices; recorded in the report's options")
      ->check(psi::cli::non_empty());
  sub.add_option("--shard", r->shard, "run only shard i of n of the cases (i/n)")->check(psi::cli::non_empty());
  add_allow_links_option(sub);
  add_allow_unverified_flag(sub);
  sub.add_flag("--quick", r->o.quick, "reduced size (fewer cases or cycles), as the tests run it");
  sub.add_option("--chaos", r->o.chaos_seed, "CPU backend chaos mode with this seed (random stream delays)")
      ->transform(psi::cli::whole_number(0, std::numeric_limits<std::uint64_t>::max()));
  // Every experiment's own options, from the registry; only their owner accepts them.
  for (const exp::Experiment& e : exp::experiments())
    for (const exp::ExperimentOption& opt : e.options) r->own.push_back({&e, &opt, "", false});
  for (OwnOption& own : r->own) {
    if (own.option->takes_value)
      sub.add_option(own.option->flag, own.value, own.option->help)->check(psi::cli::non_empty());
    else
      sub.add_flag(own.option->flag, own.flag, own.option->help);
  }
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi run: 1 when a bitwise claim the experiment makes fails (the report is still written and the "
             "failure named); distances to the recordings (probes, block-controls, one-token) are measurements, "
             "exit 0.");
  return [r, seed, model] {
    const exp::Experiment& e = exp::find_experiment(r->name);
    r->o.seed_given = seed->count() > 0;
    r->o.model_given = model->count() > 0;
    r->o.out = r->out;
    r->o.reference_dir = r->reference;
    if (!r->reference.empty())
      if (const std::string why = input_folder_problem(r->reference); !why.empty())
        throw Error("--reference " + r->reference + ": " + why +
                    "; psi run takes the folder of recordings, psi probe one recording file");
    if (!r->shard.empty()) parse_shard(r->shard, r->o);
    if (!r->kernel_config.empty()) {
      r->o.kernel_config_file = r->kernel_config;
      r->o.kernels = std::make_shared<const official::KernelConfig>(exp::read_kernel_config(r->kernel_config));
    }
    for (const OwnOption& own : r->own) {
      if (!own.given()) continue;
      if (own.owner != &e)
        throw Error(own.option->flag + " applies only to " + own.owner->name + " (not " + e.name + ")");
      own.option->apply(own.value, r->o);
    }
    if (r->o.shard_count > 1 && !e.shardable)
      throw Error("experiment '" + e.name + "' cannot be sharded (its cases depend on each other)");
    // The config and seed the run computes with, decided before the report records them.
    exp::settle_options(e, r->o);
    r->o.backend = exp::resolve_backend(r->backend, r->o.chaos_seed != 0);
    // The report, and where an interrupt would leave its cases, obey the output rule before the run.
    exp::Report report(e, r->o, exp::device_name(r->o.backend), exp::run_inputs(r->o));
    const std::filesystem::path partial = report.partial_path();
    // One progress line for the whole run: the drivers' own progress are parts of it.
    Progress overall(e.name, 0);
    try {
      e.run(r->o, report);
      // A signal that arrived after the last check point still leaves a partial report.
      check_interrupt("the end of the run");
    } catch (const Error& err) {
      if (!is_interrupted(err.code())) throw;
      report.abandon(partial);
      throw Error(std::string(err.what()) + "; no report written under " + report.path().string() +
                      "; the cases finished so far are in " + partial.string(),
                  err.code());
    }
    overall.finish();  // the line goes before the tables are printed
    auto tables = report.commit();
    std::cout << report::render(tables, report::Format::markdown);
    std::cout << "\nreport: " << one_line(report.path().string()) << "\n";
    for (const auto& fig : report.figure_files()) std::cout << "figure: " << one_line(fig.string()) << "\n";
    for (const auto& f : report.failures()) {
      std::cerr << "psi: error: " << one_line(f.message) << "\n";
      for (const auto& w : f.where) std::cerr << "  " << one_line(w) << "\n";
    }
    if (!report.failures().empty()) return int(Exit::differs);
    return 0;
  };
});

struct ReportOpts {
  std::string file;
  std::string format = "markdown";
};

psi::cli::Registrar report_reg("report", "re-render an experiment report's tables from the file alone",
                               [](CLI::App& sub) {
  auto r = std::make_shared<ReportOpts>();
  sub.add_option("file", r->file,
                 "report written by psi run, or an interrupted run's <report>.partial.h5 (its tables made from the "
                 "cases it finished, each title marked PARTIAL)")
      ->required()
      ->check(psi::cli::non_empty());
  sub.add_option("--format", r->format, "markdown (default), csv, json");
  add_allow_links_option(sub);
  return [r] {
    const report::Format f = report::parse_format(r->format);
    // An interrupted run's partial report holds cases but no tables: tabulated from its cases.
    if (const auto partial = exp::read_partial_tables(r->file)) {
      std::cout << report::render(partial->tables, f);
      return 0;
    }
    std::cout << report::render(exp::read_tables(r->file), f);
    return 0;
  };
});

struct MergeOpts {
  std::vector<std::string> shards;
  std::string out;
  bool allow_partial = false;
};

psi::cli::Registrar merge_reg("merge", "join the shard reports of one experiment into the report one run would write",
                              [](CLI::App& sub) {
  auto m = std::make_shared<MergeOpts>();
  sub.add_option("shards", m->shards, "shard reports (psi run ... --shard i/n)")->required()->check(psi::cli::non_empty());
  sub.add_option("--out", m->out, "merged report")->required()->check(output_path());
  add_force_flag(sub);
  add_allow_links_option(sub);
  sub.add_flag("--allow-partial", m->allow_partial,
               "merge partial shards (an interrupted run's <report>.partial.h5) too; the merged report is marked partial");
  add_allow_unverified_flag(sub);
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi merge: 2 a shard of another run (psi version, git revision, experiment, model config, backend, "
             "seed or an option differs: named with both values), a state whose data does not match its sha256_full "
             "or has none, a shard count outside 1 to 2^31 - 1, a missing or repeated shard; 3 the merged report "
             "could not be written (a full disk, a file-size limit: nothing is left).");
  return [m] {
    std::vector<std::filesystem::path> paths(m->shards.begin(), m->shards.end());
    const auto partial = exp::merge_reports(paths, m->out, m->allow_partial);
    std::cout << report::render(exp::read_tables(m->out), report::Format::markdown) << "\nreport: " << one_line(m->out) << "\n";
    for (const auto& p : partial)
      std::cout << "partial: " << one_line(p.string()) << " is a partial shard; the merged report is marked partial and lacks "
                << "the cases it did not finish\n";
    return 0;
  };
});

}  // namespace
}  // namespace psi::cli
