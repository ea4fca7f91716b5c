#include "experiments/probe_results.h"

namespace psi::exp {

probes::ProbeOptions probe_options(const Options& o) {
  probes::ProbeOptions po;
  po.kernels = o.kernels;
  if (!rt::backend_traits(o.backend).host_bits) po.runtime = o.backend;
  return po;
}

std::vector<ProbeRow> probe_rows(const probes::ProbeReport& r) {
  std::vector<ProbeRow> rows;
  for (const auto& t : r.results) {
    rows.push_back({t.variant, t.tensor, t.backend, t.rows, t.distance, t.full_sha_equal, std::nullopt});
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
