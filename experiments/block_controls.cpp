// block-controls (Table VI): on identical frozen block inputs, psi's dense path, baseline PSI and
// modified PSI against the recorded official MATH block (and the recorded FLASH block as the
// official implementation's own control): video and audio relative L2 to MATH, and peaks.
#include "experiments/drivers.h"

#include "experiments/probe_results.h"
#include "reports/h5.h"

namespace psi::exp {

namespace {
// The recorded block that stands for a config: the small block for tiny and small, the
// full-size first block for ltx2-22b.
std::string block_case(const Options& o) {
  if (o.model == "ltx2-22b") return "block-full";
  return o.profile == "ltx2" ? "block-small-alt" : "block-small";
}
}  // namespace

void run_block_controls(const Options& o, Report& report) {
  const std::string name = block_case(o);
  const probes::ProbeCase& pc = probes::probe_case(name);
  probes::ProbeOptions po;
  po.reference = reference_dir(o) / pc.default_file;
  if (!pc.flash_default_file.empty()) po.flash_reference = reference_dir(o) / pc.flash_default_file;
  // On CUDA the psi side runs on the device (probes/probe_cases.h); on the CPU, on the host.
  po.backend = o.backend == "cuda" ? "cuda" : "host";
  probes::ProbeReport r = probes::run_probe(name, po);
  save_probe_outputs(report, r);

  // The official implementation's own timing and memory on the recording machine.
  nlohmann::json official = nlohmann::json::object();
  auto f = h5::File::open_read(r.file);
  if (auto tm = f.attr("/" + r.group, "timing_and_memory"); tm && std::holds_alternative<std::string>(*tm))
    official = nlohmann::json::parse(std::get<std::string>(*tm), nullptr, false);
  // FLASH vs MATH of the recordings themselves.
  nlohmann::json flash_rows = nlohmann::json::array();
  for (const char* t : {"video_out", "audio_out"}) {
    const std::string m = "/" + r.group + "/math/" + t;
    std::string fl = "/" + r.group + "/flash/" + t;
    auto ff = r.flash_file.empty() ? h5::File::open_read(r.file) : h5::File::open_read(r.flash_file);
    if (!f.exists(m) || !ff.exists(fl)) continue;
    const Bf16Tensor a = ff.read_bf16(fl), b = f.read_bf16(m);
    const probes::Distance d = probes::distance(a.span(), b.span());
    flash_rows.push_back({{"tensor", t}, {"rel_l2", d.rel_l2}, {"differing", d.differing}, {"total", d.total}});
  }
  report.add_case(0, {{"case", name},
                      {"file", r.file.filename().string()},
                      {"seed", r.seed},
                      {"rows", probe_rows(r)},
                      {"official_flash_vs_math", flash_rows},
                      {"official_timing_and_memory", official},
                      {"notes", r.notes}});
}

std::vector<Table> tabulate_block_controls(const nlohmann::json& cases, const nlohmann::json&) {
  Table t;
  t.title = "block controls on identical frozen inputs (Table VI): relative L2 to the official MATH block";
  t.columns = {"path", "video_out rel L2", "audio_out rel L2", "video differing", "audio differing"};
  for (auto& c : cases) {
    std::map<std::string, std::map<std::string, nlohmann::json>> by;
    for (auto& r : c["rows"])
      if (r.contains("differing") && (r["backend"] == "math" || r["backend"] == "official"))
        by[r["variant"]][r["tensor"]] = r;
    nlohmann::json fv, fa;
    for (auto& r : c["official_flash_vs_math"]) (r["tensor"] == "video_out" ? fv : fa) = r;
    if (!fv.is_null() && !fa.is_null())
      t.add_row({"official FLASH (recorded)", fmt_sci(fv["rel_l2"]), fmt_sci(fa["rel_l2"]),
                 fmt_count(fv["differing"]) + " / " + fmt_count(fv["total"]),
                 fmt_count(fa["differing"]) + " / " + fmt_count(fa["total"])});
    for (const char* v : {"dense", "baseline", "modified"}) {
      if (!by.count(v)) continue;
      auto& vo = by[v]["video_out"];
      auto& ao = by[v]["audio_out"];
      if (vo.is_null() || ao.is_null()) continue;
      t.add_row({std::string("psi ") + v, fmt_sci(vo["rel_l2"]), fmt_sci(ao["rel_l2"]),
                 fmt_count(vo["differing"]) + " / " + fmt_count(vo["total"]),
                 fmt_count(ao["differing"]) + " / " + fmt_count(ao["total"])});
    }
    const auto& tm = c["official_timing_and_memory"];
    if (!tm.is_null() && !tm.empty()) t.notes.push_back("official timing and memory on the recording GPU: " + tm.dump());
    t.notes.push_back("case " + c["case"].get<std::string>() + " from " + c["file"].get<std::string>() +
                      "; paper (RTX A6000, real weights): FLASH vs MATH video 2.246e-3, audio 3.195e-3.");
  }
  return {t};
}

}  // namespace psi::exp
