#pragma once
// psi compare --by-value: two tensors of different element types compared by value.
//
// Each element is converted exactly to a double: BF16, float32 and float64 values are doubles;
// uint8 and uint16 always convert, an int64 when a double holds it exactly (every one up to
// 2^53 in magnitude); an int64 that does not is refused, not rounded. Two elements are equal
// when their doubles are bitwise equal, so +0 against -0 is a difference (the sign of zero), or
// when both are NaN: their payloads and signs are not compared, a NaN has no value.
//
// ULPs are those of the coarser of the two types: BF16 before float32 before float64; a floating
// type before an integer type; two integer types count steps of 1. The distance of two values is
// the number of the unit type's steps across the smallest interval of its values that holds both
// (each value rounded away from the other to the unit type): exact when both are values of the
// unit type (a float32 copy of BF16 states one BF16 step up is 1 ULP), and at least 1 for any
// two values that differ other than in the sign of zero.
#include <cstdint>
#include <string_view>

#include "hdf5/h5.h"

namespace psi::compare {

enum class UlpUnit { bf16, f32, f64, one };

// The unit of two element types' distances (kinds bf16, f32, f64, u8, u16, i64).
UlpUnit coarser_unit(hdf5::ElemKind a, hdf5::ElemKind b);
std::string_view unit_name(UlpUnit u);  // "bfloat16", "float32", "float64", "1"

// Whether a double holds `v` exactly.
bool exact_in_double(std::int64_t v);

// Equal by value: the same double, or both NaN.
bool equal_by_value(double a, double b);

// The distance of two values of one sign class (engine/distance.h is_sign_flip false) in steps
// of `u`, as above; kUlpNaN when either is a NaN.
std::int64_t ulps_in(UlpUnit u, double a, double b);

}  // namespace psi::compare
