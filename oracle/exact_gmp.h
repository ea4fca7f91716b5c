#pragma once
// Exact value of one projection output y = sum_k x_k * w_k + b as a GMP rational. This is the
// oracle's reference path: no scaling tricks, each operand converted to a rational and the
// sum formed with rational arithmetic.
#include <gmpxx.h>

#include <optional>
#include <span>

#include "engine/bf16.h"

namespace psi::oracle {

// x and w have the same length K (any K); non-finite operands throw psi::Error.
mpq_class exact_dot_gmp(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b);

// sum_k |x_k * w_k| exactly (the numerator of the condition number).
mpq_class exact_abs_dot_gmp(std::span<const Bf16> x, std::span<const Bf16> w);

// A finite BF16 value as a rational (exact).
mpq_class to_mpq(Bf16 v);

}  // namespace psi::oracle
