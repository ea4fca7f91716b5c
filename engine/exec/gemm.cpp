// Streamed Linear layers (ops/gemm.h's linear) as arena kernels, one weight row tile per page.
#include <algorithm>

#include "engine/exec/operators.h"

namespace psi::exec {

void linear(Driver& d, const LinearSpec& s, const ArenaMat& x, const ArenaMat& y) {
  const std::int64_t M = x.rows, in = x.cols, out = y.cols;
  Frame f(d);
  rt::DeviceRegion bias;
  if (!s.bias.empty()) {
    bias = f.alloc(Pool::workspace, std::uint64_t(out) * 2, s.op, -1, "bias");
    stage_vector(d, s.op, s.bias, out, bias);
  }
  const std::int64_t rows = rows_per_tile(d.page_bytes(), in, out);
  const bool has_bias = !s.bias.empty();
  const psi::BiasRule rule = s.rule;
  const ops::Product product = s.product;
  for (std::int64_t r0 = 0, t = 0; r0 < out; r0 += rows, ++t) {
    const std::int64_t nr = std::min(rows, out - r0);
    const std::string op = s.op + " tile " + std::to_string(t);
    const int p = d.weight({s.weight, {r0, r0 + nr, 0, in}, s.op, int(t)});
    const rt::DeviceRegion page = d.page(p);
    rt::Accesses acc = {rt::reads(page), rt::reads(x.region), rt::writes(y.region)};
    if (has_bias) acc.push_back(rt::reads(bias));
    // The tile writes columns [r0, r0+nr) of y: strided, so the whole of y is declared.
    d.launch(op, acc, [=](const rt::KernelContext& k) {
      const rt::MatRef b = ref(bias, 1, out).block(0, 1, r0, nr);
      k.ops->linear(k, ref(x), ref(page, nr, in), has_bias ? &b : nullptr, rule, ref(y).block(0, M, r0, nr), product);
    });
    d.release(p);
  }
}

}  // namespace psi::exec
