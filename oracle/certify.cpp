#include "oracle/certify.h"

#include <chrono>
#include <cmath>
#include <string>

#include "engine/error.h"
#include "oracle/f32_orders.h"
#include "oracle/fixed_dot.h"
#include "oracle/rounding.h"

namespace psi::oracle {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

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

  const Bf16Tensor correct =
      correctly_rounded_linear(p.x.data, p.w.data, p.bias_span(), p.K, rep.row_begin, rep.row_end, opt.threads);
  rep.seconds_exact = since(t0);

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
      const auto values = f32_eval_all(xr, wc, b);
      bool any = false;
      for (std::size_t i = 0; i < values.size(); ++i)
        if (values[i] == rec) ++rep.reproduced_by_order[i], any = true;
      rep.reproduced_by_none += !any;

      if (rep.worst && d < rep.worst->ulps) continue;
      mpq_class exact = exact_dot_fixed(xr, wc, b).to_mpq();
      const double s = signed_ulp_error(rec, exact);
      if (!rep.worst || d > rep.worst->ulps || std::fabs(s) > std::fabs(rep.worst->signed_ulps))
        rep.worst = CertifyReport::Worst{r, c, rec, cr, d, s, std::move(exact)};
    }
  }
  rep.seconds_compare = since(t1);
  rep.seconds_total = since(t0);
  return rep;
}

}  // namespace psi::oracle
