#pragma once
// One pass over a BF16 matrix that says what its products can be: per row whether it is all
// finite, and over its finite non-zero elements the exponent range and whether any is
// subnormal. The exact-product arguments of the tensor-core lanes and of psi's own FMA product
// are decided from two scans.
#include <limits>
#include <vector>

#include "engine/matrix.h"

namespace psi {

// Exponents are biased fields here (1 to 254); lo > hi where a matrix has no normal element.
struct Bf16Scan {
  std::vector<char> finite;
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  bool subnormal = false;

  bool all_finite() const;
};

// M's scan: rows in parallel, 64 a task, each task's bounds folded in afterwards (min, max and
// or do not depend on the order).
Bf16Scan scan_bf16(CBf16Mat M);

// Whether every product of an element of one scanned matrix with one of the other is finite and
// exactly an FP32 value, subnormal or not: then a fused multiply-add gives the bits of a product
// rounded and then added (RN(RN(a·w) + c) = RN(a·w + c)).
bool products_exact_in_fp32(const Bf16Scan& a, const Bf16Scan& w);

}  // namespace psi
