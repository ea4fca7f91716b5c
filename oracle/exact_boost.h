#pragma once
// The same exact projection output as exact_gmp.h, computed independently with
// Boost.Multiprecision's cpp_rational (its own integer code, its own operand decoding), so
// that the two exact paths can check each other.
#include <gmpxx.h>

#include <boost/multiprecision/cpp_int.hpp>
#include <optional>
#include <span>

#include "engine/bf16.h"

namespace psi::oracle {

using BoostRational = boost::multiprecision::cpp_rational;

BoostRational exact_dot_boost(std::span<const Bf16> x, std::span<const Bf16> w, std::optional<Bf16> b);

// The same value as a GMP rational (through the decimal numerator and denominator, so the
// comparison shares no binary conversion code with either path).
mpq_class to_mpq(const BoostRational& r);

}  // namespace psi::oracle
