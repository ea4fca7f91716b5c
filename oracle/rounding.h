#pragma once
// Correct rounding of an exact rational to BF16 and the distance of a candidate BF16 from it.
#include <gmpxx.h>

#include <cstdint>

#include "engine/bf16.h"

namespace psi::oracle {

// Round to nearest, ties to even, with BF16's exponent range: values from (2^8 - 1/2) * 2^120
// upwards round to Inf, values below 2^-126 round on the subnormal grid (multiples of
// 2^-133). An exact zero gives +0; a negative value that rounds to zero gives -0.
Bf16 round_to_bf16(const mpq_class& v);

// floor(log2 |v|) for v != 0.
long floor_log2(const mpq_class& v);

// (candidate - exact) in units of the BF16 step at the exact value: 2^(max(floor_log2|exact|,
// -126) - 7), i.e. the ULP of the binade the exact value lies in (2^-133 for an exact zero).
// For display only: the quotient is exact, the returned double is it truncated to a double.
// An infinite candidate gives +-infinity, a NaN candidate NaN.
double signed_ulp_error(Bf16 candidate, const mpq_class& exact);

struct Judgement {
  Bf16 correct;              // the correctly rounded BF16 of the exact value
  std::int64_t ulp_distance; // bf16_ulp_distance(candidate, correct); 0 = correctly rounded
  double signed_ulps;        // signed_ulp_error(candidate, exact)
};

Judgement judge(Bf16 candidate, const mpq_class& exact);

}  // namespace psi::oracle
