#include "oracle/rounding.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "oracle/exact_gmp.h"

namespace psi::oracle {

namespace {

constexpr long kSubnormalStepExp = -133;  // BF16 subnormal step 2^-133
constexpr long kMinNormalExp = -126;
constexpr long kFractionBits = 7;
constexpr long kOverflowExp = 128;  // |v| >= 2^128 rounds to Inf whatever its digits

// a * 2^s for s >= 0.
mpz_class shl(const mpz_class& a, long s) {
  mpz_class out;
  mpz_mul_2exp(out.get_mpz_t(), a.get_mpz_t(), mp_bitcnt_t(s));
  return out;
}

}  // namespace

long floor_log2(const mpq_class& v) {
  mpz_class num = abs(v.get_num());
  const mpz_class& den = v.get_den();
  long e = long(mpz_sizeinbase(num.get_mpz_t(), 2)) - long(mpz_sizeinbase(den.get_mpz_t(), 2));
  // 2^(e-1) < |v| < 2^(e+1): it is e if |v| >= 2^e, else e-1.
  bool at_least = e >= 0 ? num >= shl(den, e) : shl(num, -e) >= den;
  return at_least ? e : e - 1;
}

Bf16 round_to_bf16(const mpq_class& v) {
  const int s = sgn(v);
  if (s == 0) return Bf16{};
  const long e = floor_log2(v);
  if (e >= kOverflowExp) return bf16_rne(s < 0 ? -INFINITY : INFINITY);
  // The step of the result's grid: 8 significant bits in a normal binade, fixed 2^-133 below.
  const long step = std::max(e - kFractionBits, kSubnormalStepExp);
  mpz_class num = abs(v.get_num());
  mpz_class den = v.get_den();
  if (step < 0) num = shl(num, -step);
  else den = shl(den, step);
  mpz_class q, r;
  mpz_fdiv_qr(q.get_mpz_t(), r.get_mpz_t(), num.get_mpz_t(), den.get_mpz_t());
  const int half = cmp(mpz_class(2 * r), den);
  if (half > 0 || (half == 0 && mpz_odd_p(q.get_mpz_t()))) q += 1;
  // q <= 2^8 and step <= 120, so q * 2^step is exact in float32 or overflows to Inf exactly
  // when the rounded value reaches 2^128; bf16_rne then only re-encodes it.
  float mag = std::ldexp(float(q.get_ui()), int(step));
  return bf16_rne(s < 0 ? -mag : mag);
}

double signed_ulp_error(Bf16 candidate, const mpq_class& exact) {
  if (candidate.is_nan()) return std::numeric_limits<double>::quiet_NaN();
  if (candidate.is_inf()) return candidate.sign() ? -INFINITY : INFINITY;
  const long unit = sgn(exact) == 0 ? kSubnormalStepExp
                                    : std::max(floor_log2(exact), kMinNormalExp) - kFractionBits;
  mpq_class d = to_mpq(candidate) - exact;
  if (unit >= 0) mpq_div_2exp(d.get_mpq_t(), d.get_mpq_t(), mp_bitcnt_t(unit));
  else mpq_mul_2exp(d.get_mpq_t(), d.get_mpq_t(), mp_bitcnt_t(-unit));
  return d.get_d();
}

Judgement judge(Bf16 candidate, const mpq_class& exact) {
  Bf16 correct = round_to_bf16(exact);
  return {correct, bf16_ulp_distance(candidate, correct), signed_ulp_error(candidate, exact)};
}

}  // namespace psi::oracle
