#include "experiments/probe_results.h"

namespace psi::exp {

void to_json(nlohmann::json& j, const ProbeRow& r) {
  j = {{"variant", r.variant}, {"tensor", r.tensor}, {"backend", r.backend}, {"rows", r.rows}};
  if (r.distance) {
    j["differing"] = r.distance->differing;
    j["total"] = r.distance->total;
    j["rel_l2"] = r.distance->rel_l2;
    if (r.distance->sign_flips) j["sign_flips"] = *r.distance->sign_flips;
    if (r.distance->max_ulp_same_sign) j["max_ulp_same_sign"] = *r.distance->max_ulp_same_sign;
  }
  if (r.full_sha_equal) j["full_sha_equal"] = *r.full_sha_equal;
}

void from_json(const nlohmann::json& j, ProbeRow& r) {
  j.at("variant").get_to(r.variant);
  j.at("tensor").get_to(r.tensor);
  j.at("backend").get_to(r.backend);
  j.at("rows").get_to(r.rows);
  r.distance.reset();
  if (j.contains("differing")) {
    ProbeRow::Distance d{j.at("differing").get<std::int64_t>(), j.at("total").get<std::int64_t>(),
                         j.at("rel_l2").get<double>(), std::nullopt, std::nullopt};
    read_optional(j, "sign_flips", d.sign_flips);
    read_optional(j, "max_ulp_same_sign", d.max_ulp_same_sign);
    r.distance = d;
  }
  r.full_sha_equal.reset();
  if (j.contains("full_sha_equal")) r.full_sha_equal = j.at("full_sha_equal").get<bool>();
}

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
