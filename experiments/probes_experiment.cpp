// probes (§IV-B): the operator probes — the audio FFN up-projection with its bias, the 64-dim
// audio self-attention, the video Q projection — through each numerics variant against the
// recorded official MATH (and FLASH) tensors.
#include "engine/interrupt.h"
#include "experiments/drivers.h"
#include "experiments/probe_results.h"

namespace psi::exp {

namespace {
const std::vector<std::string>& probe_case_names() {
  static const std::vector<std::string> names{"audio-ff-up", "audio-self-attn", "video-q-proj"};
  return names;
}
}  // namespace

void run_probes(const Options& o, Report& report) {
  std::int64_t index = 0;
  for (const std::string& name : probe_case_names()) {
    const std::int64_t i = index++;
    if (!o.in_shard(i)) continue;
    check_interrupt("probe " + name);
    probes::ProbeOptions po;
    const probes::ProbeCase& pc = probes::probe_case(name);
    po.reference = reference_dir(o) / pc.default_file;
    // On CUDA the psi side runs on the device (probes/probe_cases.h); on the CPU, on the host.
    po.backend = o.backend == "cuda" ? "cuda" : "host";
    probes::ProbeReport r = probes::run_probe(name, po);
    save_probe_outputs(report, r);
    report.add_case(i, {{"case", name},
                        {"file", r.file.filename().string()},
                        {"seed", r.seed},
                        {"seconds", r.seconds},
                        {"notes", r.notes},
                        {"rows", probe_rows(r)}});
  }
}

std::vector<Table> tabulate_probes(const nlohmann::json& cases, const nlohmann::json&) {
  Table t;
  t.title = "operator probes against the recorded official implementation (§IV-B)";
  t.columns = {"case", "tensor", "vs", "variant", "differing / total", "rel L2", "max ULP"};
  Table d;
  d.title = "effect of the modified write boundaries (baseline -> modified, vs MATH / official)";
  d.columns = {"case", "tensor", "differing baseline", "differing modified", "removed", "rel L2 baseline",
               "rel L2 modified"};
  for (auto& c : cases) {
    std::map<std::string, nlohmann::json> by_key;
    for (auto& r : c["rows"]) {
      if (!r.contains("differing")) continue;
      t.add_row({c["case"], r["tensor"], r["backend"], r["variant"],
                 fmt_count(r["differing"]) + " / " + fmt_count(r["total"]), fmt_sci(r["rel_l2"]),
                 std::to_string(r["max_ulp"].get<long long>())});
      by_key[r["tensor"].get<std::string>() + "|" + r["backend"].get<std::string>() + "|" +
             r["variant"].get<std::string>()] = r;
    }
    for (auto& [key, r] : by_key) {
      if (r["variant"] != "baseline" || r["backend"] == "flash") continue;
      const auto mk = key.substr(0, key.rfind('|')) + "|modified";
      if (!by_key.count(mk)) continue;
      const auto& m = by_key[mk];
      const long long rb = r["differing"], rm = m["differing"];
      d.add_row({c["case"], r["tensor"], fmt_count(rb), fmt_count(rm), fmt_count(rb - rm), fmt_sci(r["rel_l2"]),
                 fmt_sci(m["rel_l2"])});
    }
  }
  d.notes.push_back("paper (real weights): the fp32 bias change removed 267,593 of 1,032,192 differing elements of "
                    "the audio FFN probe; fp32 attention moved relative L2 from 1.28e-3 to 1.26e-5. Ours are measured "
                    "on the SynthInit recordings and are not tuned toward those numbers.");
  return {t, d};
}

}  // namespace psi::exp
