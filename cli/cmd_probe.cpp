// psi probe: re-run one recorded official computation on its recorded inputs through psi's
// numerics variants and compare every output with the recording (MATH, and FLASH where
// recorded). Exit 0 when every compared tensor is bitwise equal, 1 when any differs.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "engine/error.h"
#include "engine/model/variant.h"
#include "engine/ops/parallel.h"
#include "experiments/experiment.h"
#include "probes/probe_cases.h"
#include "reports/output_path.h"

namespace {

struct Opts {
  std::string name;
  std::string reference;
  std::string flash_reference;
  std::vector<std::string> variants{"all"};
  std::string out;
  int threads = 0;
  std::string backend = "host";
};

void print_report(const psi::probes::ProbeReport& r) {
  std::printf("psi probe %s: %s group /%s, seed %llu\n", r.case_name.c_str(), r.file.string().c_str(),
              r.group.c_str(), (unsigned long long)r.seed);
  if (!r.flash_file.empty()) std::printf("  FLASH probes from %s\n", r.flash_file.string().c_str());
  for (const auto& n : r.notes) std::printf("  %s\n", n.c_str());
  std::printf("%-13s %-26s %-8s %-18s %s\n", "variant", "tensor", "vs", "rows", "result");
  for (const auto& t : r.results) {
    std::string res = t.distance ? psi::probes::format_distance(*t.distance) : std::string("(not stored)");
    if (t.full_sha_equal) res += *t.full_sha_equal ? "; full tensor sha256 equal" : "; full tensor sha256 differs";
    std::printf("%-13s %-26s %-8s %-18s %s\n", t.variant.c_str(), t.tensor.c_str(), t.backend.c_str(),
                t.rows.c_str(), res.c_str());
  }
  std::printf("(%.1f s)\n", r.seconds);
}

psi::cli::Registrar reg("probe", "re-run a recorded official case through psi's numerics variants and compare",
                        [](CLI::App& sub) {
  auto o = std::make_shared<Opts>();
  std::string cases;
  for (const auto& c : psi::probes::probe_cases()) cases += "\n  " + c.name + ": " + c.description;
  sub.add_option("name", o->name, "probe case:" + cases)->required();
  sub.add_option("--reference", o->reference,
                 "recording to use (default: the case's file in <shared>/reference; PSI_SHARED overrides <shared>)");
  sub.add_option("--flash-reference", o->flash_reference,
                 "separate recording holding the FLASH probes (block-full's default: block_full_flash.h5)");
  sub.add_option("--variant", o->variants,
                 "dense, official-h200, baseline, modified or all (repeatable); float64: the dense block in "
                 "float64 (block cases, not part of all)");
  sub.add_option("--out", o->out, "write psi's outputs to this HDF5 file");
  sub.add_option("--threads", o->threads, "CPU threads (results do not depend on it)");
  sub.add_option("--backend", o->backend,
                 "host (default: engine/ops on whole tensors), or cpu, cuda, auto: the block through the PSI "
                 "executor and the projections as one product on that runtime backend")
      ->check(CLI::IsMember({"host", "cpu", "cuda", "auto"}));
  return [o] {
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
      if (v != psi::probes::kFloat64Variant) psi::model::numerics_variant(v);  // rejects unknown names before any work
      add(v);
    }
    if (o->threads > 0) psi::ops::set_thread_count(o->threads);
    psi::probes::ProbeOptions po{o->reference, o->flash_reference, variants, o->backend};
    if (!o->out.empty()) {
      const auto in = psi::probes::probe_files(psi::probes::probe_case(o->name), po);
      psi::reports::check_output(o->out, {in.file, in.flash_file}, "probe: --out");
    }
    const psi::probes::ProbeReport r = psi::probes::run_probe(o->name, po);
    print_report(r);
    if (!o->out.empty()) {
      psi::probes::write_probe_outputs(r, o->out, psi::exp::device_name(o->backend == "cuda" ? "cuda" : "cpu"));
      std::printf("outputs written to %s\n", o->out.c_str());
    }
    for (const auto& t : r.results)
      if ((t.distance && !t.distance->bitwise_equal()) || (t.full_sha_equal && !*t.full_sha_equal))
        return int(psi::Exit::differs);
    return int(psi::Exit::ok);
  };
});

}  // namespace
