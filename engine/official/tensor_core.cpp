#include "engine/official/tensor_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/official/tensor_core_chain.h"

namespace psi::official::tc {

namespace {

// The model's rule for an output with a non-finite operand or accumulator.
float nonfinite_result(std::span<const Bf16> x, std::span<const Bf16> w, float acc) {
  bool nan = std::isnan(acc), pos = acc == std::numeric_limits<float>::infinity(),
       neg = acc == -std::numeric_limits<float>::infinity();
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double p = double(x[k].to_float()) * double(w[k].to_float());
    nan |= std::isnan(p);
    pos |= p == std::numeric_limits<double>::infinity();
    neg |= p == -std::numeric_limits<double>::infinity();
  }
  if (nan || (pos && neg)) return std::numeric_limits<float>::quiet_NaN();
  return pos ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
}

bool all_finite(std::span<const Bf16> v) {
  for (Bf16 b : v)
    if (!b.is_finite()) return false;
  return true;
}

}  // namespace

float dot(std::span<const Bf16> x, std::span<const Bf16> w, float acc, std::vector<BlockStep>* trace) {
  if (x.size() != w.size())
    throw Error("tensor-core dot: lengths " + std::to_string(x.size()) + " and " + std::to_string(w.size()));
  if (!std::isfinite(acc) || !all_finite(x) || !all_finite(w)) return nonfinite_result(x, w, acc);
  const std::size_t K = x.size();
  for (std::size_t k0 = 0; k0 < K; k0 += kBlock) {
    if (std::isinf(acc)) break;  // overflowed in an earlier block: Inf absorbs the rest
    const std::size_t k1 = std::min(K, k0 + kBlock);
    BlockStep step;
    step.k0 = std::int64_t(k0);
    step.acc_in = acc;
    Decoded dx[kBlock], dw[kBlock];
    int E = std::numeric_limits<int>::min();
    for (std::size_t k = k0; k < k1; ++k) {
      dx[k - k0] = decode(x[k]);
      dw[k - k0] = decode(w[k]);
      if (dx[k - k0].sig && dw[k - k0].sig) {
        ++step.products;
        E = std::max(E, dx[k - k0].exp + dw[k - k0].exp);
      }
    }
    const Acc a = decode_acc(acc);
    if (a.mag) E = std::max(E, a.exp);
    E = std::max(E, kMinAlignExp);
    std::int64_t T = 0;
    for (std::size_t i = 0; i < k1 - k0; ++i) {
      const std::int64_t p = std::int64_t(dx[i].sig) * dw[i].sig;
      if (p == 0) continue;
      const std::int64_t mag = (p < 0 ? -p : p) << kProductShift;
      const int shift = E - dx[i].exp - dw[i].exp;
      const std::int64_t t = shifted(mag, shift);
      step.truncated_terms += (t << std::min(shift, 62)) != mag;
      T += p < 0 ? -t : t;
    }
    if (a.mag) T += acc_term(a, E, &step.truncated_terms);
    acc = normalize(T, E, trace ? &step.normalize_dropped : nullptr);
    if (trace) {
      step.align_exp = E;
      step.sum = T;
      step.acc_out = acc;
      trace->push_back(step);
    }
  }
  return acc;
}

}  // namespace psi::official::tc
