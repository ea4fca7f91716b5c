#pragma once
// A float64 value correctly rounded to BF16: what a distance to a float64 reference counts its
// differing elements against (engine/distance.h), and the float64 block rounded for a table.
#include "engine/bf16.h"

namespace psi {

// Nearest, ties to even; one rounding, not two (float64 -> float32 -> BF16 could round twice).
Bf16 bf16_of_f64(double v);

}  // namespace psi
