#include "engine/pipeline/timestep.h"

#include <cmath>

#include "engine/official/nv_expf.h"

namespace psi::pipeline {

namespace {

// exp in R: float under the chosen arithmetic, double (the reference) always the host's.
float exp_in(float x, official::F32Math math) { return math == official::F32Math::cuda ? official::nv_expf(x) : std::exp(x); }
double exp_in(double x, official::F32Math) { return std::exp(x); }
double cos_in(double x, official::F32Math) { return std::cos(x); }
double sin_in(double x, official::F32Math) { return std::sin(x); }
float cos_in(float x, official::F32Math math) { return official::cos_f32(x, math); }
float sin_in(float x, official::F32Math math) { return official::sin_f32(x, math); }

// Python's -math.log(10000) rounded to R, times i in R, over half_dim, exp in R.
template <class R>
std::vector<R> sinusoid(R tau, official::F32Math math) {
  const R neg_log_period = R(-std::log(10000.0));
  std::vector<R> out(kSinusoidWidth);
  for (std::int64_t i = 0; i < kSinusoidHalf; ++i) {
    const R exponent = (neg_log_period * R(i)) / R(kSinusoidHalf);
    const R arg = tau * exp_in(exponent, math);
    out[i] = cos_in(arg, math);
    out[kSinusoidHalf + i] = sin_in(arg, math);
  }
  return out;
}

}  // namespace

std::vector<float> timestep_sinusoid(float tau, official::F32Math math) { return sinusoid(tau, math); }
std::vector<double> timestep_sinusoid(double tau) { return sinusoid(tau, official::F32Math::host); }

}  // namespace psi::pipeline
