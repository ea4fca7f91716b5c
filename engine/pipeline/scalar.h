#pragma once
// The element types the pipeline's elementwise steps are written over, so that each step's
// formula exists once: BF16 (the official path: float32 arithmetic, a BF16 write where the
// official code casts) and double (the float64 reference: the same formula, no rounding but
// double's own).
#include "engine/bf16.h"

namespace psi::pipeline {

template <class E>
struct Scalar;

template <>
struct Scalar<Bf16> {
  using Real = float;
  static float load(Bf16 v) { return v.to_float(); }
  static Bf16 store(float v) { return bf16_rne(v); }
  // An intermediate the official code writes as a BF16 tensor.
  static float cast(float v) { return bf(v); }
};

template <>
struct Scalar<double> {
  using Real = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
  static double cast(double v) { return v; }
};

}  // namespace psi::pipeline
