// psi probe: re-run one recorded official computation on its recorded inputs through psi's
// numerics variants and compare every output with the recording (MATH, and FLASH where
// recorded). The distances are a measurement: exit 0 when it ran (as `psi run probes`). Each
// variant that claims a recorded path (official-h200: MATH, official-h200-flash: FLASH) has its
// claim checked and printed; --require-bitwise makes a failed claim exit 1.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "cli/command.h"
#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/model/variant.h"
#include "engine/official/math_to_flash.h"
#include "engine/parallel.h"
#include "experiments/experiment.h"
#include "experiments/trajectory_ops.h"
#include "hdf5/schema.h"
#include "outputs/output_path.h"
#include "probes/metrics.h"
#include "probes/probe_cases.h"
#include "report/diff_figures.h"

namespace {

struct ProbeOpts {
  std::string name;
  std::string reference;
  std::string flash_reference;
  std::vector<std::string> variants{"all"};
  std::string out;
  std::string figures;
  int threads = 0;
  std::string backend = "host";
  bool explain = false;
  bool log_counts = false;
  bool require_bitwise = false;
  int step = 0;
  std::int64_t differences = psi::probes::kShownDifferences;
};

// The per-operator replay's case name: not a recorded probe case, but a capture of one
// teacher-forced step of the tiny trajectory (experiments/trajectory_ops.h).
constexpr const char* kTrajectoryStep = "trajectory-step";

void print_step_replay(const psi::exp::StepReplay& r) {
  std::printf("psi probe %s: %s %s (state %s, %s context): %zu operators, official-h200 on each one's recorded "
              "inputs\n",
              kTrajectoryStep, psi::one_line(r.file.string()).c_str(), r.group.c_str(), r.state_name.c_str(),
              r.context.c_str(), r.ops.size());
  std::printf("replay: psi's operator on the recorded inputs against the recorded output (differing elements, by "
              "BF16 ulps 1/2/3/4/5-8/9+); inputs: the recorded inputs against psi's own forward of the step, "
              "teacher-forced from the recorded state before it; departs: the operator's own; inherited: it "
              "reproduces its recorded output from inputs that already differ\n");
  std::printf("%-44s %-26s %5s %-22s %-34s %-18s %s\n", "operator (forward order)", "shape", "K", "replay differs",
              "ulps", "inputs differ", "verdict");
  for (const auto& op : r.ops) {
    std::string ulps;
    for (std::size_t i = 0; i < op.ulps.size(); ++i) {
      if (i) ulps += '/';
      ulps += std::to_string(op.ulps[i]);
    }
    std::printf("%-44s %-26s %5lld %-22s %-34s %-18s %s%s\n", op.site.c_str(), op.shape.c_str(), (long long)op.k,
                (std::to_string(op.differing) + "/" + std::to_string(op.elements)).c_str(), ulps.c_str(),
                (std::to_string(op.inputs_differing) + "/" + std::to_string(op.inputs)).c_str(),
                op.departs() ? "departs" : op.inherited() ? "inherited" : "equal",
                op.kernel.empty() ? "" : ("  [" + op.kernel + "]").c_str());
  }
  if (r.unrecorded_first())
    std::printf("first departing operator: one outside the recorded ones, before %s (its recorded inputs differ "
                "from psi's forward, and no recorded operator before it departs)\n",
                r.ops[std::size_t(r.first_inputs_differing)].site.c_str());
  else if (r.first_departing >= 0)
    std::printf("first departing operator: %s\n", r.ops[std::size_t(r.first_departing)].site.c_str());
  else
    std::printf("no operator departs\n");
}

// psi probe trajectory-step --reference FILE --step N: exit 0 when no operator departs, 1 when
// one does.
int run_step_replay(const ProbeOpts& o, const CLI::App& sub) {
  for (const char* opt : {"--flash-reference", "--variant", "--out", "--figures", "--backend", "--require-bitwise",
                          "--explain-differences", "--differences", "--log-counts"})
    if (sub.count(opt))
      throw psi::Error(std::string("probe ") + kTrajectoryStep + ": " + opt + " does not apply (the replay runs "
                       "official-h200 on a per-operator capture and prints where it departs)");
  if (o.reference.empty())
    throw psi::Error(std::string("probe ") + kTrajectoryStep + ": --reference FILE (the per-operator capture) is required");
  if (const std::string why = psi::input_file_problem(o.reference); !why.empty())
    throw psi::Error("--reference " + o.reference + ": " + why + " (the per-operator capture)");
  if (o.step == 0) throw psi::Error(std::string("probe ") + kTrajectoryStep + ": --step N (1..8, 10..12) is required");
  if (o.step == 9) throw psi::Error("--step 9: the inter-stage state is not a model step (1..8, 10..12)");
  if (o.threads > 0) psi::set_thread_count(o.threads);
  const psi::exp::StepReplay r =
      psi::exp::replay_step(o.reference, o.step, psi::probes::shared_dir() / "reference");
  print_step_replay(r);
  return int(r.any_departs() ? psi::Exit::differs : psi::Exit::ok);
}

void print_report(const psi::probes::ProbeReport& r) {
  std::printf("psi probe %s: %s group /%s, seed %llu\n", r.case_name.c_str(), psi::one_line(r.file.string()).c_str(),
              r.group.c_str(), (unsigned long long)r.seed);
  if (!r.flash_file.empty()) std::printf("  FLASH probes from %s\n", psi::one_line(r.flash_file.string()).c_str());
  for (const auto& n : r.notes) std::printf("  %s\n", n.c_str());
  for (const auto& u : r.unverified) std::printf("  UNVERIFIED: %s\n", psi::one_line(u).c_str());
  // The float64 block is the reference of its rows: the recording is measured against it.
  const auto float64_row = [](const psi::probes::TensorResult& t) { return t.variant == psi::probes::kFloat64Variant; };
  if (!std::all_of(r.results.begin(), r.results.end(), float64_row))
    std::fputs(psi::probes::metrics_legend().c_str(), stdout);
  if (std::any_of(r.results.begin(), r.results.end(), float64_row))
    std::fputs(psi::probes::metrics_legend_to_float64().c_str(), stdout);
  std::printf("%-19s %-26s %-8s %-18s %s\n", "variant", "tensor", "vs", "rows", "result");
  for (const auto& t : r.results) {
    std::string res = t.distance
                          ? psi::probes::format_distance(*t.distance, float64_row(t))
                          : std::string("(not stored)");
    if (t.full_sha_equal) res += *t.full_sha_equal ? "; full tensor sha256 equal" : "; full tensor sha256 differs";
    // Every result rests on the inputs too: any unchecked read marks them all.
    if (!t.unverified.empty()) res += "; UNVERIFIED (the recorded tensor: " + t.unverified + ")";
    else if (!r.unverified.empty()) res += "; UNVERIFIED (rests on data listed above)";
    std::printf("%-19s %-26s %-8s %-18s %s\n", t.variant.c_str(), t.tensor.c_str(), t.backend.c_str(),
                t.rows.c_str(), res.c_str());
  }
  if (!r.attributions.empty()) {
    std::printf("differences from the recording each variant claims (MATH when it claims none), by where they arise "
                "(own: the module on the recorded upstream probes still differs; inherited: first upstream probe "
                "differing in the token row)\n");
    // The own column holds three numbers: say which is which.
    std::printf("own \"A (B in C rows)\": A = differing elements that also differ when the module runs alone on the "
                "recorded upstream probes (the rest are inherited); B = all elements where the module alone differs "
                "from the recording; C = the token rows those B lie in\n");
    std::printf("%-19s %-22s %-8s %-18s %-30s %s\n", "variant", "tensor", "vs", "differs", "own (module alone, its rows)",
                "inherited");
    for (const auto& a : r.attributions) {
      std::string inh;
      for (const auto& [name, n] : a.inherited) inh += (inh.empty() ? "" : ", ") + name + " " + std::to_string(n);
      std::printf("%-19s %-22s %-8s %-18s %-30s %s\n", a.variant.c_str(), a.tensor.c_str(), a.against.c_str(),
                  (std::to_string(a.differing) + "/" + std::to_string(a.total)).c_str(),
                  (std::to_string(a.own) + " (" + std::to_string(a.module_alone) + " in " +
                   std::to_string(a.module_alone_rows) + " rows)").c_str(),
                  inh.empty() ? "-" : inh.c_str());
    }
  }
  std::printf("(%.1f s)\n", r.seconds);
}

// The figures of every comparison that differs, as <case>.<variant>.<tensor>.<recording>.ulp-map
// and .ulp-histogram (.svg, .png) in `dir`, each checked by the output rule before any is written.
std::vector<psi::report::Figure> probe_figures(const psi::probes::ProbeReport& r, bool log_counts) {
  std::vector<psi::report::Figure> figs;
  for (const auto& t : r.results) {
    if (!t.diff) continue;
    std::string path = t.backend;
    for (char& ch : path) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    const std::string against = t.backend == "official" ? "the recording" : "the " + path + " recording";
    for (auto& f : psi::report::diff_figures(t.variant + "." + t.tensor + "." + t.backend,
                                          t.variant + " " + t.tensor + " vs " + against, *t.diff, log_counts))
      figs.push_back(std::move(f));
  }
  return figs;
}

// Writes the figures and prints, per comparison, the files and the histogram's numbers.
void write_probe_figures(const psi::probes::ProbeReport& r, const std::vector<psi::report::Figure>& figs,
                         const std::filesystem::path& dir) {
  std::vector<std::string> notes;
  // figure_file names <report stem>.<figure name>: the case's name stands for the report.
  const auto written = psi::report::write_figures(dir / r.case_name, figs, notes);
  for (const auto& t : r.results)
    if (t.diff)
      std::printf("figures %s.%s.%s: %s\n", t.variant.c_str(), t.tensor.c_str(), t.backend.c_str(),
                  psi::report::ulp_histogram_line(*t.diff).c_str());
  for (const auto& f : written) std::printf("figure: %s\n", f.string().c_str());
  for (const auto& n : notes) std::printf("%s\n", n.c_str());
}

// A word of a command line as a POSIX shell reads it back.
std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string_view("/._-+=:,@").find(ch) != std::string_view::npos;
  });
  if (plain) return w;
  std::string out = "'";
  for (char ch : w) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// The command that lists more of a failed claim's differing elements: this probe on the same
// recordings, for the claiming variant only, with ten times as many per tensor.
std::string more_differences_command(const ProbeOpts& o, const psi::probes::ProbeReport& r, const std::string& variant) {
  std::string cmd = "psi probe " + shell_word(r.case_name) + " --reference " + shell_word(r.file.string());
  if (!r.flash_file.empty()) cmd += " --flash-reference " + shell_word(r.flash_file.string());
  cmd += " --variant " + shell_word(variant);
  if (o.backend != "host") cmd += " --backend " + o.backend;
  return cmd + " --differences " + std::to_string(std::max<std::int64_t>(100, o.differences * 10));
}

// One line per claim: what it says and whether this run bears it out; under a failed claim, the
// first differing elements of each tensor that fails it and the command that lists more.
void print_claims(const ProbeOpts& o, const psi::probes::ProbeReport& r,
                  const std::vector<psi::probes::ClaimCheck>& claims) {
  for (const auto& c : claims) {
    std::string verdict;
    if (c.checked == 0) verdict = "NOT CHECKED (the recording stores no " + c.path + " tensor)";
    else if (c.held()) verdict = "held (" + std::to_string(c.checked) + (c.checked == 1 ? " tensor" : " tensors") + " bitwise equal)";
    else {
      verdict = "FAILED (" + std::to_string(c.failed.size()) + " of " + std::to_string(c.checked) + " differ:";
      for (const auto& t : c.failed) verdict += " " + t;
      verdict += ")";
    }
    std::string path = c.path;
    for (char& ch : path) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    if (c.unverified) verdict += ", UNVERIFIED (on data psi could not check)";
    std::printf("claim: %s reproduces the recorded %s path bit for bit: %s\n", c.variant.c_str(), path.c_str(),
                verdict.c_str());
    if (c.held() || c.checked == 0) continue;
    bool more = false;
    for (const std::size_t i : c.failed_results) {
      const psi::probes::TensorResult& t = r.results[i];
      if (t.first_differences.empty()) {
        // Only the full tensor's SHA-256 is recorded (or its stored rows agree): no element to show.
        std::printf("  %s: its stored rows (%s) are equal; the full tensor's sha256 differs from the recorded "
                    "one, which holds no more elements to compare\n", t.tensor.c_str(), t.rows.c_str());
        continue;
      }
      std::string against = t.backend;
      for (char& ch : against) ch = char(std::toupper(static_cast<unsigned char>(ch)));
      against = t.backend == "official" ? "the recording" : "the " + against + " recording";
      std::printf("  %s vs %s (%s): the first %zu of %lld differing elements, by index in the %s tensor\n",
                  t.tensor.c_str(), against.c_str(), t.rows.c_str(), t.first_differences.size(),
                  (long long)t.distance->differing, psi::shape_str(t.shape).c_str());
      for (const auto& d : t.first_differences)
        std::printf("    %s\n", psi::probes::format_difference(d, "psi", "recorded").c_str());
      more = more || t.distance->differing > std::int64_t(t.first_differences.size());
    }
    if (more) std::printf("  more of them: %s\n", more_differences_command(o, r, c.variant).c_str());
    std::printf("  where all of them lie: the same command with --figures DIR%s\n",
                r.case_name.starts_with("block-") ? "; where they arise: the same with --explain-differences" : "");
  }
}

psi::cli::Registrar probe_reg("probe", "re-run a recorded official case through psi's numerics variants and compare",
                              [](CLI::App& sub) {
  auto o = std::make_shared<ProbeOpts>();
  std::string cases;
  for (const auto& c : psi::probes::probe_cases()) cases += "\n  " + c.name + ": " + c.description;
  cases += std::string("\n  ") + kTrajectoryStep +
           ": a per-operator capture of one teacher-forced step of the tiny trajectory (--reference FILE, --step N), "
           "replayed operator by operator; prints the first departing operator";
  sub.add_option("name", o->name, "probe case:" + cases)->required();
  sub.add_option("--reference", o->reference,
                 "FILE: the recording to use (default: the case's file in <shared>/reference; PSI_SHARED overrides "
                 "<shared>); a FOLDER of recordings (as psi run takes) means the case's file in it")
      ->check(psi::cli::non_empty());
  sub.add_option("--flash-reference", o->flash_reference,
                 "FILE: separate recording holding the FLASH probes (block-full's default: block_full_flash.h5)")
      ->check(psi::cli::non_empty());
  sub.add_option("--variant", o->variants,
                 psi::model::numerics_variant_list() + " or all (repeatable); float64: the "
                 "dense block in float64 (block cases, not part of all); math-to-flash-K (K = 1 to " +
                     std::to_string(psi::official::kMathToFlashSteps - 1) +
                     "): official-h200's MATH attention with the first K steps towards FLASH taken "
                     "(engine/official/math_to_flash.h; not part of all)");
  sub.add_option("--out", o->out, "write psi's outputs to this HDF5 file")->check(psi::cli::output_path());
  sub.add_option("--figures", o->figures,
                 "DIR: draw, for every tensor that differs from its recording, where it differs (tokens x channels, "
                 "coloured by ULP distance) and a histogram of the ULP distances, as SVG and PNG")
      ->check(psi::cli::output_path());
  sub.add_flag("--log-counts", o->log_counts,
               "with --figures: the ULP histograms' counts on a log axis, so that the few elements of large "
               "distances show beside the many of 1 ULP");
  psi::cli::add_force_flag(sub);
  psi::cli::add_allow_links_option(sub);
  psi::cli::add_allow_unverified_flag(sub);
  sub.add_option("--threads", o->threads, "CPU threads (results do not depend on it)")
      ->transform(psi::cli::whole_number(1, 1024));
  sub.add_option("--backend", o->backend,
                 "host (default: engine/ops on whole tensors), or cpu, cuda, auto: the block through the PSI "
                 "executor and the projections as one product on that runtime backend")
      ->check(CLI::IsMember({"host", "cpu", "cuda", "auto"}));
  sub.add_flag("--require-bitwise", o->require_bitwise,
               "exit 1 unless every claim holds: official-h200 bitwise equal to the MATH recording, "
               "official-h200-flash to the FLASH recording (each in every tensor it stores; a recording of one "
               "path counts for both); exit 2 when no variant asked for makes a claim (without it the distances "
               "are a measurement and psi probe exits 0)");
  sub.add_option("--differences", o->differences,
                 "N: under a failed claim, list the first N differing elements of each tensor that fails it (index, "
                 "both values as BF16 bits and decimal, ULP distance; default " +
                     std::to_string(psi::probes::kShownDifferences) + ")")
      ->transform(psi::cli::whole_number(1, 1000000));
  sub.add_option("--step", o->step, std::string(kTrajectoryStep) + ": the teacher-forced step the capture holds (1..8, 10..12)")
      ->transform(psi::cli::whole_number(1, 12));
  sub.add_flag("--explain-differences", o->explain,
               "block cases: for every probe, which differing elements arise in its own module and which are "
               "inherited, from which upstream probe (teacher forcing with the recorded MATH probes)");
  sub.footer(std::string(psi::cli::kExitRule) +
             "\npsi probe: the distances to the recording are a measurement, so a tensor that differs is exit 0 "
             "(as in psi run probes); with --require-bitwise a failed claim is exit 1. A recorded tensor with nothing to "
             "check it against (no sha256_full) is refused, exit 2; with --allow-unverified its results and claims "
             "are marked UNVERIFIED and the exit status is 4. psi probe " + kTrajectoryStep +
             ": exit 0 when no operator departs, 1 when one does.");
  return [o, &sub] {
    if (o->name == kTrajectoryStep) return run_step_replay(*o, sub);
    if (o->log_counts && o->figures.empty()) throw psi::Error("probe: --log-counts applies to --figures' histograms");
    if (sub.count("--step"))
      throw psi::Error("probe " + o->name + ": --step applies to " + kTrajectoryStep + " only");
    // "all" stands for every numerics variant; float64 (and any other name) is added beside it.
    std::vector<std::string> variants;
    auto add = [&](const std::string& v) {
      if (std::find(variants.begin(), variants.end(), v) == variants.end()) variants.push_back(v);
    };
    for (const auto& v : o->variants) {
      if (v == "all") {
        for (const auto& n : psi::model::numerics_variant_names()) add(n);
        continue;
      }
      // Unknown names are refused before any work, naming what psi probe takes beside the variants.
      if (v != psi::probes::kFloat64Variant) {
        try {
          psi::model::numerics_variant(v);
        } catch (const psi::Error& e) {
          throw psi::Error(std::string(e.what()) + "; psi probe also takes all (every variant) and float64");
        }
      }
      add(v);
    }
    if (o->require_bitwise &&
        std::none_of(variants.begin(), variants.end(), [](const std::string& v) {
          return v != psi::probes::kFloat64Variant && !psi::model::numerics_variant(v).claims.empty();
        }))
      throw psi::Error("probe: --require-bitwise checks the variants' claims, and none of the variants asked for "
                       "claims a recording bit for bit (official-h200 claims MATH, official-h200-flash FLASH)");
    if (o->threads > 0) psi::set_thread_count(o->threads);
    // A folder of recordings (psi run's --reference) stands for the case's files in it.
    const psi::probes::ProbeCase& pc = psi::probes::probe_case(o->name);
    std::error_code ec;  // a path that cannot be searched is no folder; its cause is named below
    if (!o->reference.empty() && std::filesystem::is_directory(o->reference, ec)) {
      const std::filesystem::path dir = o->reference;
      o->reference = (dir / pc.default_file).string();
      if (o->flash_reference.empty() && !pc.flash_default_file.empty())
        o->flash_reference = (dir / pc.flash_default_file).string();
    }
    if (!o->reference.empty())
      if (const std::string why = psi::input_file_problem(o->reference); !why.empty())
        throw psi::Error("--reference " + o->reference + ": " + why + " (psi probe takes a recording file, or a folder "
                         "holding " + pc.default_file + ")");
    // --backend is the one string: resolved to the kind that runs (and that the outputs name) here.
    std::optional<psi::rt::BackendKind> runtime;
    if (o->backend != "host") runtime = psi::exp::resolve_backend(o->backend, false);
    psi::probes::ProbeOptions po{o->reference, o->flash_reference, variants, runtime, o->explain, o->differences, nullptr};
    const auto in = psi::probes::probe_files(psi::probes::probe_case(o->name), po);
    if (!o->out.empty()) psi::outputs::check_output(o->out, {in.file, in.flash_file}, "probe: --out", psi::hdf5::is_psi_h5);
    if (!o->figures.empty() && std::filesystem::exists(o->figures) && !std::filesystem::is_directory(o->figures))
      throw psi::Error("probe: --figures " + o->figures + ": not a folder");
    // Held from here: the figures' names are known only after the run.
    if (!o->figures.empty()) psi::outputs::hold_output_folder(o->figures, "probe: --figures");
    const psi::probes::ProbeReport r = psi::probes::run_probe(o->name, po);
    print_report(r);
    const auto claims = psi::probes::check_claims(r);
    print_claims(*o, r, claims);
    if (!o->figures.empty()) {
      // The figures' names come from the comparisons: checked once they are known, before any is written.
      const std::vector<psi::report::Figure> figs = probe_figures(r, o->log_counts);
      const std::filesystem::path dir = o->figures;
      for (const auto& f : figs)
        for (const char* ext : {".svg", ".png"})
          psi::outputs::check_output(psi::report::figure_file(dir / r.case_name, f, ext), {in.file, in.flash_file},
                                     "probe: --figures", psi::report::is_psi_figure);
      write_probe_figures(r, figs, dir);
    }
    if (!o->out.empty()) {
      psi::probes::write_probe_outputs(r, o->out, psi::exp::device_name(runtime.value_or(psi::rt::BackendKind::cpu)));
      std::printf("outputs written to %s\n", o->out.c_str());
    }
    if (!o->require_bitwise) return int(psi::Exit::ok);
    for (const auto& c : claims)
      if (!c.held()) return int(psi::Exit::differs);
    return int(psi::Exit::ok);
  };
});

}  // namespace
