// psi kernels shapes / search / confirm: the kernel configurations of the tiny model's products
// (experiments/kernel_search.h). `shapes` lists every distinct product of one forward with where
// it occurs; `search` runs the joint coordinate descent on one teacher-forced step of the
// recorded one-token trajectory and confirms what it finds on every state of both recorded
// trajectories; `where` shows how one teacher-forced step's differences spread over token rows,
// channels and ulps (with --capture, writing the step operator by operator for `psi probe
// trajectory-step`, experiments/trajectory_ops.h); `fragile` audits which output elements of the
// step's products and attention cores the kernel order decides (experiments/fragility.h);
// `confirm` does the confirmation alone for a configuration file.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/bf16.h"
#include "engine/error.h"
#include "engine/progress.h"
#include "experiments/experiment.h"
#include "experiments/fragility.h"
#include "experiments/kernel_config_file.h"
#include "experiments/kernel_search.h"
#include "experiments/trajectory_ops.h"
#include "hdf5/schema.h"
#include "outputs/output_path.h"
#include "outputs/pending_output.h"
#include "probes/probe_cases.h"

namespace {

namespace fs = std::filesystem;
using psi::exp::StepDifference;

struct KernelsOpts {
  std::string reference;
  std::string config;
  std::string out;
  std::string capture;
  int step = 1;
  int sweeps = 4;
  int context = 1;
  bool influence = false;
};

fs::path reference_dir(const KernelsOpts& o) {
  psi::exp::Options eo;
  eo.reference_dir = o.reference;
  return psi::exp::reference_dir(eo);
}

// What a subcommand reads: the recordings `recorded` names in the reference folder, and --config.
std::vector<fs::path> inputs(const KernelsOpts& o, const fs::path& ref, std::initializer_list<std::int64_t> recorded) {
  std::vector<fs::path> in;
  for (const std::int64_t rows : recorded) in.push_back(ref / psi::probes::trajectory_recording(rows).file);
  if (!o.config.empty()) in.push_back(o.config);
  return in;
}

psi::official::KernelConfig start_config(const KernelsOpts& o) {
  return o.config.empty() ? psi::official::KernelConfig{} : psi::exp::read_kernel_config(o.config);
}

std::string choice_text(const psi::official::KernelChoice& c, std::int64_t depth) {
  const auto slices = psi::official::k_slices(depth, c);
  if (c.fma_chain) return (slices.size() == 1 ? std::string("one") : std::to_string(slices.size())) + " FP32 FMA chain(s)";
  if (slices.size() == 1) return "one chain";
  std::string s = std::to_string(slices.size()) + " slices (";
  for (std::size_t i = 0; i < slices.size(); ++i) s += (i ? "+" : "") + std::to_string(slices[i].second - slices[i].first);
  return s + ")";
}

std::string pair_text(const StepDifference& d) { return std::to_string(d.video) + " / " + std::to_string(d.audio); }

int shapes(const KernelsOpts& o) {
  const psi::official::KernelConfig start = start_config(o);
  const psi::exp::TinyTrajectory t(reference_dir(o), o.context);
  const auto uses = t.shapes(o.step, start);
  std::printf("products of the tiny model's forward at step %d (%s context), official-h200; M x N x K\n", o.step,
              t.label().c_str());
  std::printf("%-11s %-16s %5s  %-22s %s\n", "chain", "shape", "calls", "kernel", "where");
  for (const auto& u : uses) {
    std::string where;
    for (const auto& s : u.sites) where += (where.empty() ? "" : ", ") + s;
    std::printf("%-11s %-16s %5lld  %-22s %s\n", std::string(psi::official::chain_kind_name(u.key.kind)).c_str(),
                psi::official::shape_text(u.key.shape).c_str(), (long long)u.calls,
                choice_text(start.choice(u.key.kind, u.key.shape), u.key.shape.depth).c_str(),
                where.c_str());
  }
  return 0;
}

void print_confirmation(const psi::exp::Confirmation& base, const psi::exp::Confirmation& found) {
  std::printf("\n%s context: differing elements (video / audio) against the recorded states\n", base.context.c_str());
  std::printf("%-18s %-22s %-22s %-22s %-22s\n", "state", "recorded: forced", "found: forced", "recorded: free",
              "found: free");
  for (std::size_t i = 0; i < base.states.size(); ++i)
    std::printf("%-18s %-22s %-22s %-22s %-22s\n", base.states[i].c_str(),
                base.forced[i] ? pair_text(*base.forced[i]).c_str() : "-",
                found.forced[i] ? pair_text(*found.forced[i]).c_str() : "-", pair_text(base.free[i]).c_str(),
                pair_text(found.free[i]).c_str());
}

// Both recorded trajectories under the recorded choices and under `found`: the table printed,
// and one record per state (differing video and audio elements; forced: none for the initial
// and inter-stage states).
nlohmann::json confirm_both(const fs::path& ref, const psi::official::KernelConfig& found) {
  nlohmann::json out = nlohmann::json::array();
  const auto pair = [](const StepDifference& d) { return nlohmann::json::array({d.video, d.audio}); };
  for (std::int64_t rows : {1, 1024}) {
    const psi::exp::TinyTrajectory t(ref, rows);
    const auto base = psi::exp::confirm(t, psi::official::KernelConfig{});
    const auto mine = psi::exp::confirm(t, found);
    print_confirmation(base, mine);
    for (std::size_t i = 0; i < base.states.size(); ++i) {
      nlohmann::json row = {{"context", base.context}, {"state", base.states[i]}};
      if (base.forced[i]) {
        row["recorded_forced"] = pair(*base.forced[i]);
        row["found_forced"] = pair(*mine.forced[i]);
      }
      row["recorded_free"] = pair(base.free[i]);
      row["found_free"] = pair(mine.free[i]);
      out.push_back(row);
    }
  }
  return out;
}

int search(const KernelsOpts& o) {
  const fs::path ref = reference_dir(o);
  if (!o.out.empty())
    psi::outputs::check_output(o.out, inputs(o, ref, {1, 1024}), "kernels search: --out",
                               psi::exp::is_kernel_config_file());
  const psi::official::KernelConfig start = start_config(o);
  const psi::exp::TinyTrajectory t(ref, 1);
  psi::exp::KernelSearchOptions so;
  so.step = o.step;
  so.max_sweeps = o.sweeps;
  psi::Progress progress("kernel search", 1);
  int sweep = 1;
  std::size_t last_done = 0;
  const auto r = psi::exp::search_kernels(t, start, so, [&](const psi::exp::KernelTrial& tr, std::size_t done, std::size_t total) {
    if (done < last_done) ++sweep;
    last_done = done;
    progress.set_total(long(total));
    progress.step("sweep " + std::to_string(sweep) + " trial " + std::to_string(done) + "/" + std::to_string(total));
    if (tr.kept)
      progress.note("kept " + std::string(psi::official::chain_kind_name(tr.key.kind)) + " " +
                    psi::official::shape_text(tr.key.shape) + " split " + std::to_string(tr.choice.split_k) + (tr.choice.fma_chain ? " (FP32 FMA)" : "") + " granule " +
                    std::to_string(tr.choice.granule) + ": " + std::to_string(tr.objective) + " differing");
  });
  progress.finish();
  std::printf("kernel search on step %d (%s), official-h200: %lld differing elements with the start configuration, "
              "%lld with the best found; %d sweep(s), %zu trials over %zu product shapes\n",
              o.step, t.state_name(o.step).c_str(), (long long)r.start_objective, (long long)r.best_objective, r.sweeps,
              r.trials.size(), r.shapes.size());
  if (r.best.overrides().empty()) std::printf("best: the recorded choices (no shape changed)\n");
  for (const auto& [k, c] : r.best.overrides())
    std::printf("best: %s %s -> %s\n", std::string(psi::official::chain_kind_name(k.kind)).c_str(),
                psi::official::shape_text(k.shape).c_str(), choice_text(c, k.shape.depth).c_str());
  nlohmann::json record = psi::exp::to_json(r);
  record["objective_step"] = o.step;
  record["start"] = psi::exp::kernel_config_products(start);
  record["candidates"] = {{"splits", so.splits}, {"granules", so.granules}, {"fma_chains", so.fma_chains}};
  record["confirmation"] = confirm_both(ref, r.best);
  if (!o.out.empty()) {
    psi::outputs::write_file_atomically(o.out, psi::exp::kernel_config_text(r.best, record));
    std::printf("\nconfiguration: %s\n", o.out.c_str());
  }
  return 0;
}

// min / median / max of a count per row or channel.
std::string spread(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return "min " + std::to_string(v.front()) + " / median " + std::to_string(v[v.size() / 2]) + " / max " +
         std::to_string(v.back());
}

int where(const KernelsOpts& o) {
  const fs::path ref = reference_dir(o);
  const psi::probes::TrajectoryRecording& recorded = psi::probes::trajectory_recording(o.context);
  if (!o.capture.empty()) psi::outputs::check_output(o.capture, inputs(o, ref, {o.context}), "kernels where: --capture", psi::hdf5::is_psi_h5);
  const psi::official::KernelConfig start = start_config(o);
  const psi::exp::TinyTrajectory t(ref, o.context);
  psi::exp::OpCapture capture;
  const auto [ours, rec] = psi::exp::observed_step(t, o.step, start, capture);
  std::printf("step %d (%s, %s context), official-h200 teacher-forced, against the recorded state: differing "
              "elements per token row and per channel, and by BF16 ulps apart\n",
              o.step, t.state_name(o.step).c_str(), t.label().c_str());
  for (const bool video : {true, false}) {
    const psi::Bf16Tensor& a = video ? ours.video : ours.audio;
    const psi::Bf16Tensor& b = video ? rec.video : rec.audio;
    const std::int64_t n = a.dim(1), ch = a.dim(2);
    std::vector<std::int64_t> per_row(std::size_t(n), 0), per_ch(std::size_t(ch), 0);
    const std::int64_t bounds[] = {1, 2, 3, 4, 8};
    std::int64_t by_ulps[6] = {}, total = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < ch; ++c) {
        const psi::Bf16 x = a.data[std::size_t(i * ch + c)], y = b.data[std::size_t(i * ch + c)];
        if (x.bits == y.bits) continue;
        ++total;
        ++per_row[std::size_t(i)];
        ++per_ch[std::size_t(c)];
        const std::int64_t u = psi::bf16_ulp_distance(x, y);
        std::size_t bin = 0;
        while (bin < 5 && u > bounds[bin]) ++bin;
        ++by_ulps[bin];
      }
    std::printf("%s: %lld of %lld differ; per token row (%lld rows) %s; per channel (%lld) %s; ulps 1: %lld, 2: %lld, "
                "3: %lld, 4: %lld, 5-8: %lld, 9+: %lld\n",
                video ? "video" : "audio", (long long)total, (long long)(n * ch), (long long)n, spread(per_row).c_str(),
                (long long)ch, spread(per_ch).c_str(), (long long)by_ulps[0], (long long)by_ulps[1],
                (long long)by_ulps[2], (long long)by_ulps[3], (long long)by_ulps[4], (long long)by_ulps[5]);
  }
  if (!o.capture.empty()) {
    psi::exp::write_capture(o.capture, recorded.group, o.step, t.state_name(o.step), t.seed(), capture.ops());
    std::printf("capture: %zu operators of the step (%s) in %s\n", capture.ops().size(),
                psi::exp::ops_group(recorded.group, o.step).c_str(), o.capture.c_str());
  }
  return 0;
}

// The first line of a fragility report (--out), which the output rule recognizes as psi's.
constexpr const char* kFragilityFirstLine = "{\"schema\": \"psi-fragility/1\",";

int fragile(const KernelsOpts& o) {
  const fs::path ref = reference_dir(o);
  if (!o.out.empty())
    psi::outputs::check_output(o.out, inputs(o, ref, {o.context}), "kernels fragile: --out",
                            psi::outputs::first_line_is(kFragilityFirstLine));
  const psi::official::KernelConfig start = start_config(o);
  const psi::exp::TinyTrajectory t(ref, o.context);
  std::vector<psi::exp::OpFragility> ops = psi::exp::audit_step(t, o.step, o.influence, start);
  std::printf("fragility of step %d (%s, %s context), official-h200 on psi's own inputs of the step: output elements "
              "whose BF16 value changes under some admissible kernel order (products: exact, one FP32 FMA chain, "
              "split-K 2/4/8; attention: score and P.V products split 2/4/8, psi's float32 MATH core); margin: the "
              "distance of the exact (products) or float64 (attention) value from the nearest BF16 rounding "
              "boundary, as a fraction of the gap between boundaries (0 to 0.5), the largest among the fragile "
              "elements%s\n",
              o.step, t.state_name(o.step).c_str(), t.label().c_str(),
              o.influence ? "; influence: state elements that one fragile element (the smallest margin's), set to "
                            "the other order's value inside the forward, moves; sorted by it"
                          : "; forward order");
  if (o.influence)
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.influence.value_or(-1) > b.influence.value_or(-1);
    });
  std::printf("%-44s %-26s %5s %9s %8s %10s %9s  %s\n", "operator", "shape", "K", "elements", "fragile", "margin",
              "influence", "changed by order");
  std::int64_t total = 0, fragile_total = 0;
  for (const auto& f : ops) {
    std::string by;
    for (const auto& [name, n] : f.by_order) by += (by.empty() ? "" : ", ") + name + " " + std::to_string(n);
    char margin[32];
    std::snprintf(margin, sizeof margin, "%.3g", f.largest_margin);
    std::printf("%-44s %-26s %5lld %9lld %8lld %10s %9s  %s\n", f.site.c_str(), f.shape.c_str(), (long long)f.k,
                (long long)f.elements, (long long)f.fragile, f.fragile ? margin : "-",
                f.influence ? std::to_string(*f.influence).c_str() : "-", by.c_str());
    total += f.elements;
    fragile_total += f.fragile;
  }
  std::printf("%zu operators, %lld of %lld output elements fragile\n", ops.size(), (long long)fragile_total,
              (long long)total);
  if (!o.out.empty()) {
    const nlohmann::json j = {{"step", o.step},
                              {"state", t.state_name(o.step)},
                              {"context", t.label()},
                              {"influence_measured", o.influence},
                              {"operators", psi::exp::to_json(ops)}};
    // The schema line first, as the output rule reads it; then the rest of the object.
    psi::outputs::write_file_atomically(o.out, std::string(kFragilityFirstLine) + "\n" + j.dump(1).substr(2) + "\n");
    std::printf("report: %s\n", o.out.c_str());
  }
  return 0;
}

int confirm(const KernelsOpts& o) {
  confirm_both(reference_dir(o), start_config(o));
  return 0;
}

psi::cli::Registrar kernels_reg(
    "kernels",
    "the kernel configurations of the tiny model's products: `psi kernels shapes`, `psi kernels where [--capture FILE]`, "
    "`psi kernels fragile`, `psi kernels search`, `psi kernels confirm --config FILE` (docs/official-kernels.md)",
    [](CLI::App& sub) {
      auto o = std::make_shared<KernelsOpts>();
      sub.require_subcommand(1);
      CLI::App* sh = sub.add_subcommand("shapes", "every distinct product of one tiny-model forward under official-h200, "
                                                  "with its kernel and where it occurs");
      CLI::App* se = sub.add_subcommand("search", "joint coordinate descent over the products' K splits on one "
                                                  "teacher-forced step, confirmed on both recorded trajectories");
      CLI::App* wh = sub.add_subcommand("where", "where one teacher-forced step differs from the recorded state: "
                                                  "per token row, per channel, by ulps");
      CLI::App* fr = sub.add_subcommand("fragile", "per product and attention core of one teacher-forced step: the "
                                                   "output elements whose BF16 value some admissible kernel order "
                                                   "changes, and their largest margin");
      CLI::App* co = sub.add_subcommand("confirm", "every state of both recorded trajectories under the recorded "
                                                   "choices and under --config");
      for (CLI::App* a : {sh, se, wh, fr, co}) {
        a->add_option("--reference", o->reference, "FOLDER of recordings (default <shared>/reference)")
            ->check(psi::cli::non_empty());
        a->add_option("--config", o->config, "kernel-config FILE (psi-kernel-config/1): the K splits to use (search: to start from)")
            ->check(psi::cli::non_empty());
        psi::cli::add_allow_links_option(*a);
      }
      co->get_option("--config")->required();
      for (CLI::App* a : {sh, se, wh, fr})
        a->add_option("--step", o->step, "teacher-forced step (1..8, 10..12; default 1)")
            ->transform(psi::cli::whole_number(1, 12));
      for (CLI::App* a : {sh, wh, fr})
        a->add_option("--context", o->context, "context rows: 1 (default) or 1024")
            ->transform(psi::cli::whole_number(1, 1024))
            ->check(CLI::IsMember({1, 1024}));
      se->add_option("--sweeps", o->sweeps, "at most this many sweeps (default 4)")->transform(psi::cli::whole_number(1, 100));
      se->add_option("--out", o->out, "write the configuration found, with the search's record, here")
          ->check(psi::cli::output_path());
      wh->add_option("--capture", o->capture,
                     "FILE: write the step's every product and attention core, inputs and output, operator by "
                     "operator (the layout psi probe trajectory-step replays; docs/official-kernels.md)")
          ->check(psi::cli::output_path());
      fr->add_flag("--influence", o->influence,
                   "also set one fragile element per operator to the other order's value inside the forward and "
                   "count the state elements it moves (one forward per fragile operator)");
      fr->add_option("--out", o->out, "write the audit here as JSON (psi-fragility/1)")->check(psi::cli::output_path());
      psi::cli::add_force_flag(*se);
      psi::cli::add_force_flag(*wh);
      psi::cli::add_force_flag(*fr);
      return [o, sh, se, wh, fr]() -> int {
        if (o->step == 9) throw psi::Error("--step 9: the inter-stage state is not a model step (1..8, 10..12)");
        if (sh->parsed()) return shapes(*o);
        if (se->parsed()) return search(*o);
        if (wh->parsed()) return where(*o);
        if (fr->parsed()) return fragile(*o);
        return confirm(*o);
      };
    });

}  // namespace
