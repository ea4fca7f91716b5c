#include "experiments/probe_results.h"

namespace psi::exp {

nlohmann::json probe_rows(const probes::ProbeReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : r.results) {
    nlohmann::json row{{"variant", t.variant}, {"tensor", t.tensor}, {"backend", t.backend}, {"rows", t.rows}};
    if (t.distance) {
      row["differing"] = t.distance->differing;
      row["total"] = t.distance->total;
      row["rel_l2"] = t.distance->rel_l2;
      row["max_ulp"] = t.distance->max_ulp;
    }
    if (t.full_sha_equal) row["full_sha_equal"] = *t.full_sha_equal;
    rows.push_back(std::move(row));
  }
  return rows;
}

void save_probe_outputs(Report& report, const probes::ProbeReport& r) {
  for (const auto& [variant, tensors] : r.outputs)
    for (const auto& [name, t] : tensors)
      report.writer().write("/probes/" + r.case_name + "/" + variant + "/" + name, t,
                            reports::TensorMeta{variant, "psi output of probe " + r.case_name + ": " + name, "", {}});
}

}  // namespace psi::exp
