#pragma once
// The fast exact path. A BF16 value is m * 2^e with |m| <= 255 and e in [-133, 120]
// (oracle/dyadic.h), so a product x*w is an integer below 2^16 in magnitude times 2^(ex+ew)
// with ex+ew in [-266, 240]: every product, and the bias, is an integer multiple of 2^-266.
// ExactSum keeps sum * 2^266 as an exact integer, split into 16-bit-aligned bins of int64:
// a term m * 2^p (p = its exponent + 266) adds m << (p mod 16) to bin p / 16. Each addition
// is below 2^31 in magnitude, so a bin cannot overflow before 2^32 terms; carries are resolved
// only once, at the end. No rational and no rounding happens while summing.
#include <gmpxx.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "engine/bf16.h"
#include "engine/tensor.h"

namespace psi::oracle {

class ExactSum {
 public:
  static constexpr int kScale = 266;    // bit i of the integer weighs 2^(i - 266)
  static constexpr int kBinBits = 16;
  static constexpr int kBins = 36;      // 576 bits: 2^32 terms of |value| < 2^256 fit
  static constexpr std::int64_t kMaxTerms = std::int64_t{1} << 32;

  // Adds m * 2^(pos - kScale); pos in [0, kBins * kBinBits - 16), |m| < 2^16.
  void add(std::int64_t m, int pos) { bins_[pos >> 4] += m << (pos & 15); }
  std::array<std::int64_t, kBins>& bins() { return bins_; }

  int sign() const;
  mpq_class to_mpq() const;
  Bf16 round_bf16() const;  // the correctly rounded BF16 (same rule as round_to_bf16)

 private:
  std::array<std::int64_t, kBins> bins_{};
};

// One output element through the fast path.
ExactSum exact_dot_fixed(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b);

// The correctly rounded y[r, c] = sum_k x[r, k] * w[c, k] + b[c] for rows [row_begin, row_end)
// of x ([rows, K] row-major), w [N, K] row-major, b [N] or empty. Returns
// [row_end - row_begin, N]. Rows are shared among `threads` threads; every element is exact,
// so the split cannot change any bit.
Bf16Tensor correctly_rounded_linear(std::span<const Bf16> x, std::span<const Bf16> w,
                                    std::span<const Bf16> b, std::int64_t K, std::int64_t row_begin,
                                    std::int64_t row_end, int threads);

}  // namespace psi::oracle
