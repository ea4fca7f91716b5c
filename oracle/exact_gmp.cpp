#include "oracle/exact_gmp.h"

#include <string>

#include "engine/error.h"

namespace psi::oracle {

namespace {

void check_lengths(std::span<const Bf16> x, std::span<const Bf16> w) {
  if (x.size() != w.size())
    throw Error("oracle: dot product of lengths " + std::to_string(x.size()) + " and " +
                std::to_string(w.size()));
}

}  // namespace

mpq_class to_mpq(Bf16 v) {
  if (!v.is_finite()) throw Error("oracle: non-finite BF16 value has no exact rational value");
  // mpq_set_d is exact: every float (hence every BF16) is a dyadic rational.
  return mpq_class(double(v.to_float()));
}

mpq_class exact_dot_gmp(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b) {
  check_lengths(x, w);
  mpq_class sum = b ? to_mpq(*b) : mpq_class(0);
  for (std::size_t k = 0; k < x.size(); ++k) sum += to_mpq(x[k]) * to_mpq(w[k]);
  return sum;
}

mpq_class exact_abs_dot_gmp(std::span<const Bf16> x, std::span<const Bf16> w) {
  check_lengths(x, w);
  mpq_class sum = 0;
  for (std::size_t k = 0; k < x.size(); ++k) sum += abs(to_mpq(x[k]) * to_mpq(w[k]));
  return sum;
}

}  // namespace psi::oracle
