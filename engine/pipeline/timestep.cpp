#include "engine/pipeline/timestep.h"

#include <cmath>

#include "engine/pipeline/model_structure.h"

namespace psi::pipeline {

namespace {

// Python's -math.log(10000) rounded to R, times i in R, over half_dim, exp in R.
template <class R>
std::vector<R> sinusoid(R tau) {
  const R neg_log_period = R(-std::log(10000.0));
  std::vector<R> out(kSinusoidWidth);
  for (std::int64_t i = 0; i < kSinusoidHalf; ++i) {
    const R exponent = (neg_log_period * R(i)) / R(kSinusoidHalf);
    const R arg = tau * std::exp(exponent);
    out[i] = std::cos(arg);
    out[kSinusoidHalf + i] = std::sin(arg);
  }
  return out;
}

}  // namespace

std::vector<float> timestep_sinusoid(float tau) { return sinusoid(tau); }
std::vector<double> timestep_sinusoid(double tau) { return sinusoid(tau); }

AdaLnOut adaln_single(model::WeightSource& weights, const std::string& prefix, std::int64_t dim,
                      std::int64_t rows, float tau, ops::Product product) {
  return adaln(Bf16Arith{product}, weights, prefix, dim, rows, tau);
}

}  // namespace psi::pipeline
