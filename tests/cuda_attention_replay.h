#pragma once
// The CUDA MATH attention kernel's schedule replayed on the host with element_math.h (host exp),
// for the tests: test_cuda_element_math proves it reproduces ops::sdpa (MATH) bit for bit, and
// test_cuda_kernels uses its float32 values before the BF16 write (which ops::sdpa does not
// expose) to bound the device's result.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/backend/cuda/element_math.h"
#include "engine/tensor.h"

namespace psi::test {

struct MathReplay {
  std::vector<float> o;   // [Nq, H·d]: the float32 P·V before the BF16 write
  std::vector<double> a;  // [Nq, H·d]: Σ_j P_j·|v_jc| (the scale of the sum, for error bounds)
  double min_p = 1.0;     // the smallest unnormalized probability exp(s − max) met
};

// q [Nq, H·d], k and v [Nk, H·d] dense.
inline MathReplay math_replay(const Bf16Tensor& q, const Bf16Tensor& k, const Bf16Tensor& v, std::int64_t heads,
                              float factor) {
  const std::int64_t Nq = q.dim(0), Nk = k.dim(0), W = q.dim(1), d = W / heads;
  MathReplay r;
  r.o.assign(std::size_t(Nq * W), 0.0f);
  r.a.assign(std::size_t(Nq * W), 0.0);
  const auto* kb = reinterpret_cast<const std::uint16_t*>(k.ptr());
  std::vector<float> qs(d), s(Nk);
  for (std::int64_t i = 0; i < Nq; ++i)
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t c = 0; c < d; ++c) qs[c] = em::mul(q.data[i * W + h * d + c].to_float(), factor);
      float m = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < Nk; ++j) {
        s[j] = em::score(qs.data(), kb + j * W + h * d, factor, d);
        m = em::fold_max(m, s[j]);
      }
      if (m == -std::numeric_limits<float>::infinity()) continue;  // zeros
      float l = 0.0f;
      for (std::int64_t c0 = 0; c0 < Nk; c0 += em::kChunk) {
        const std::int64_t cn = std::min(em::kChunk, Nk - c0);
        for (std::int64_t j = c0; j < c0 + cn; ++j) {
          s[j] = em::exp_f32(em::sub(s[j], m));
          if (s[j] < r.min_p) r.min_p = s[j];
        }
        float lanes[em::kLanes];
        for (int lane = 0; lane < em::kLanes; ++lane) lanes[lane] = em::lane_sum(s.data() + c0, cn, lane);
        l = em::add(l, em::lane_tree(lanes));
      }
      for (std::int64_t j = 0; j < Nk; ++j) s[j] = em::div(s[j], l);
      for (std::int64_t c = 0; c < d; ++c) {
        float o = 0.0f;
        double a = 0.0;
        for (std::int64_t c0 = 0; c0 < Nk; c0 += em::kChunk) {
          const std::int64_t cn = std::min(em::kChunk, Nk - c0);
          float lane[em::kLanes] = {};
          for (std::int64_t j = 0; j < cn; ++j) {
            const float vj = v.data[(c0 + j) * W + h * d + c].to_float();
            lane[j % em::kLanes] = em::add(lane[j % em::kLanes], em::mul(s[c0 + j], vj));
            a += double(s[c0 + j]) * (vj < 0 ? -double(vj) : double(vj));
          }
          o = em::add(o, em::lane_tree(lane));
        }
        r.o[i * W + h * d + c] = o;
        r.a[i * W + h * d + c] = a;
      }
    }
  return r;
}

}  // namespace psi::test
