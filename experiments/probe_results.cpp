#include "experiments/probe_results.h"

namespace psi::exp {

std::vector<ProbeRow> probe_rows(const probes::ProbeReport& r) {
  std::vector<ProbeRow> rows;
  for (const auto& t : r.results) {
    ProbeRow row{t.variant, t.tensor, t.backend, t.rows, std::nullopt, t.full_sha_equal};
    if (t.distance)
      row.distance = ProbeRow::Distance{t.distance->differing, t.distance->total, t.distance->rel_l2,
                                        t.distance->sign_flips, t.distance->max_ulp_same_sign};
    rows.push_back(std::move(row));
  }
  return rows;
}

void save_probe_outputs(Report& report, const probes::ProbeReport& r) {
  for (const auto& [variant, tensors] : r.outputs)
    for (const auto& [name, t] : tensors)
      report.writer().write("/probes/" + r.case_name + "/" + variant + "/" + name, t,
                            hdf5::TensorMeta{variant, "psi output of probe " + r.case_name + ": " + name, "", {}});
}

}  // namespace psi::exp
