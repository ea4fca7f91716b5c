#include "oracle/certify.h"

#include <chrono>
#include <cmath>
#include <string>

#include "engine/error.h"
#include "engine/progress.h"
#include "oracle/explain.h"
#include "oracle/f32_orders.h"
#include "oracle/fixed_dot.h"
#include "oracle/float64_filter.h"
#include "oracle/rounding.h"

namespace psi::oracle {

CertifyReport certify(const LinearProblem& p, const Bf16Tensor& y, const CertifyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  CertifyReport rep;
  rep.row_begin = opt.row_begin;
  rep.row_end = opt.row_end < 0 ? p.rows : opt.row_end;
  rep.N = p.N;
  rep.K = p.K;
  if (rep.row_begin < 0 || rep.row_end > p.rows || rep.row_begin >= rep.row_end)
    throw Error("oracle certify: rows " + std::to_string(rep.row_begin) + ":" + std::to_string(rep.row_end) +
                " is not a non-empty range within 0:" + std::to_string(p.rows));
  if (y.numel() != p.rows * p.N)
    throw Error("oracle certify: output has " + std::to_string(y.numel()) + " values, expected " +
                std::to_string(p.rows) + " x " + std::to_string(p.N));

  CertifiedLinear cl =
      certified_linear(p.x.data, p.w.data, p.bias_span(), p.K, rep.row_begin, rep.row_end, opt.threads);
  const Bf16Tensor& correct = cl.correct;
  rep.decided_by_filter = cl.decided_by_filter;
  rep.sent_exact = cl.sent_exact;
  rep.seconds_filter = cl.seconds_filter;
  rep.seconds_exact = cl.seconds_exact;

  const auto t1 = std::chrono::steady_clock::now();
  rep.reproduced_by_order.assign(f32_orders().size(), 0);
  for (std::int64_t r = rep.row_begin; r < rep.row_end; ++r) {
    for (std::int64_t c = 0; c < p.N; ++c) {
      const Bf16 rec = y.data[std::size_t(r * p.N + c)];
      const Bf16 cr = correct.data[std::size_t((r - rep.row_begin) * p.N + c)];
      ++rep.checked;
      const std::int64_t d = bf16_ulp_distance(rec, cr);
      if (d == 0) continue;
      ++rep.not_correctly_rounded;
      ++rep.ulp_histogram[d];

      const auto xr = p.x_row(r), wc = p.w_row(c);
      const auto b = p.bias(c);
      CertifyReport::Element el{r, c, rec, cr, d, exact_dot_fixed(xr, wc, b).to_mpq(), {}};
      const auto values = f32_eval_all(xr, wc, b);
      for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i] == rec) ++rep.reproduced_by_order[i], el.orders.push_back(i);
      rep.reproduced_by_none += el.orders.empty();

      if (!rep.worst || d >= rep.worst->ulps) {
        const double s = signed_ulp_error(rec, el.exact);
        if (!rep.worst || d > rep.worst->ulps || std::fabs(s) > std::fabs(rep.worst->signed_ulps))
          rep.worst = CertifyReport::Worst{r, c, rec, cr, d, s, el.exact};
      }
      rep.elements.push_back(std::move(el));
    }
  }
  rep.seconds_compare = seconds_since(t1);
  rep.seconds_total = seconds_since(t0);
  return rep;
}

nlohmann::json to_json(const CertifyReport& rep, double seconds_load) {
  using nlohmann::json;
  const auto& orders = f32_orders();
  json hist = json::object();
  for (const auto& [d, n] : rep.ulp_histogram) hist[std::to_string(d)] = n;
  json by = json::object();
  for (std::size_t i = 0; i < orders.size(); ++i) by[orders[i].name] = rep.reproduced_by_order[i];
  json worst = nullptr;
  if (rep.worst) {
    const auto& w = *rep.worst;
    worst = {{"row", w.row},
             {"col", w.col},
             {"recorded", {{"bits", bf16_hex(w.recorded)}, {"value", w.recorded.to_float()}}},
             {"correctly_rounded", {{"bits", bf16_hex(w.correct)}, {"value", w.correct.to_float()}}},
             {"ulps", w.ulps},
             {"signed_ulps", w.signed_ulps},
             {"exact", {{"fraction", dyadic_fraction(w.exact)}, {"decimal", decimal25(w.exact)}}}};
  }
  return {{"rows", {{"begin", rep.row_begin}, {"end", rep.row_end}}},
          {"N", rep.N},
          {"K", rep.K},
          {"elements", rep.checked},
          {"decided_by_float64_filter", rep.decided_by_filter},
          {"decided_by_exact_path", rep.sent_exact},
          {"correctly_rounded", rep.checked - rep.not_correctly_rounded},
          {"not_correctly_rounded", rep.not_correctly_rounded},
          {"ulp_histogram", hist},
          {"reproduced_by", by},
          {"reproduced_by_none", rep.reproduced_by_none},
          {"worst", worst},
          {"seconds",
           {{"load", seconds_load},
            {"filter", rep.seconds_filter},
            {"exact", rep.seconds_exact},
            {"compare", rep.seconds_compare},
            {"total", seconds_load + rep.seconds_total}}}};
}

std::string list_csv(const CertifyReport& rep) {
  const auto& orders = f32_orders();
  std::string out = std::string(kListCsvHeader) + "\n";
  for (const auto& el : rep.elements) {
    std::string names;
    for (std::size_t i : el.orders) names += (names.empty() ? "" : ";") + orders[i].name;
    out += std::to_string(el.row) + "," + std::to_string(el.col) + "," + bf16_hex(el.recorded) + "," +
           bf16_hex(el.correct) + "," + std::to_string(el.ulps) + "," + decimal25(el.exact) + "," +
           dyadic_fraction(el.exact) + "," + names + "\n";
  }
  return out;
}

}  // namespace psi::oracle
