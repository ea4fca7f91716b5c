#include "engine/ops/norm.h"

#include <cmath>
#include <string>

#include "engine/error.h"
#include "engine/official/norm_stats.h"
#include "engine/official/nv_rsqrt.h"
#include "engine/ops/reduce.h"
#include "engine/parallel.h"

namespace psi::ops {

namespace {

void check_same(CBf16Mat x, Bf16Mat y, const char* what) {
  if (x.rows != y.rows || x.cols != y.cols)
    throw Error(std::string(what) + ": output is " + std::to_string(y.rows) + "x" +
                std::to_string(y.cols) + ", input " + std::to_string(x.rows) + "x" +
                std::to_string(x.cols));
}

float rstd_of(float mean_square, float eps) { return 1.0f / std::sqrt(mean_square + eps); }

void scale_row(const Bf16* x, const Bf16* w, float rstd, std::int64_t n, Bf16* y) {
  if (w) {
    for (std::int64_t c = 0; c < n; ++c) y[c] = bf16_rne((x[c].to_float() * rstd) * w[c].to_float());
  } else {
    for (std::int64_t c = 0; c < n; ++c) y[c] = bf16_rne(x[c].to_float() * rstd);
  }
}

constexpr std::int64_t kRowsPerTask = 16;

}  // namespace

void rms_norm(CBf16Mat x, const Bf16* weight, float eps, Bf16Mat y, NormKernel kernel) {
  check_same(x, y, "rms_norm");
  const std::int64_t n = x.cols;
  parallel_for((x.rows + kRowsPerTask - 1) / kRowsPerTask, [&](std::int64_t t) {
    for (std::int64_t r = t * kRowsPerTask; r < std::min(x.rows, (t + 1) * kRowsPerTask); ++r) {
      const Bf16* xr = x.row(r);
      if (kernel == NormKernel::h200) {
        scale_row(xr, weight, official::rsqrt_approx(official::h200_sum_of_squares(xr, n) / float(n) + eps), n, y.row(r));
        continue;
      }
      const float ss = ordered_sum(n, [&](std::int64_t c) {
        const float v = xr[c].to_float();
        return v * v;
      });
      scale_row(xr, weight, rstd_of(ss / float(n), eps), n, y.row(r));
    }
  });
}

void rms_norm_tiled(CBf16Mat x, const Bf16* weight, float eps, std::int64_t tile, Bf16Mat y) {
  check_same(x, y, "rms_norm_tiled");
  if (tile <= 0) throw Error("rms_norm_tiled: tile width " + std::to_string(tile) + " must be positive");
  const std::int64_t n = x.cols;
  parallel_for((x.rows + kRowsPerTask - 1) / kRowsPerTask, [&](std::int64_t t) {
    for (std::int64_t r = t * kRowsPerTask; r < std::min(x.rows, (t + 1) * kRowsPerTask); ++r) {
      // Pass 1: every tile feeds the row's single statistic, tiles in column order.
      OrderedAccumulator ss;
      for (std::int64_t c0 = 0; c0 < n; c0 += tile) {
        const Bf16* xt = x.row(r) + c0;
        for (std::int64_t c = 0; c < std::min(tile, n - c0); ++c) {
          const float v = xt[c].to_float();
          ss.add(v * v);
        }
      }
      const float rstd = rstd_of(ss.result() / float(n), eps);
      // Pass 2: each tile is scaled on its own.
      for (std::int64_t c0 = 0; c0 < n; c0 += tile)
        scale_row(x.row(r) + c0, weight ? weight + c0 : nullptr, rstd, std::min(tile, n - c0),
                  y.row(r) + c0);
    }
  });
}

void layer_norm(CBf16Mat x, float eps, Bf16Mat y, NormKernel kernel) {
  check_same(x, y, "layer_norm");
  const std::int64_t n = x.cols;
  parallel_for((x.rows + kRowsPerTask - 1) / kRowsPerTask, [&](std::int64_t t) {
    for (std::int64_t r = t * kRowsPerTask; r < std::min(x.rows, (t + 1) * kRowsPerTask); ++r) {
      const Bf16* xr = x.row(r);
      if (kernel == NormKernel::h200) {
        const official::LayerNormStats st = official::h200_layer_norm_stats(xr, n);
        const float rstd = official::rsqrt_approx(st.var + eps);
        Bf16* yr = y.row(r);
        for (std::int64_t c = 0; c < n; ++c) yr[c] = bf16_rne(rstd * (xr[c].to_float() - st.mean));
        continue;
      }
      const float mean = ordered_sum(n, [&](std::int64_t c) { return xr[c].to_float(); }) / float(n);
      const float var = ordered_sum(n, [&](std::int64_t c) {
                          const float d = xr[c].to_float() - mean;
                          return d * d;
                        }) / float(n);
      const float rstd = rstd_of(var, eps);
      Bf16* yr = y.row(r);
      for (std::int64_t c = 0; c < n; ++c) yr[c] = bf16_rne((xr[c].to_float() - mean) * rstd);
    }
  });
}

Bf16Tensor rms_norm(const Bf16Tensor& x, const Bf16Tensor* weight, float eps, NormKernel kernel) {
  if (weight && weight->numel() != x.shape.back())
    throw Error("rms_norm: weight has " + std::to_string(weight->numel()) + " values for rows of " +
                std::to_string(x.shape.back()));
  Bf16Tensor y(x.shape);
  rms_norm(as_matrix(x), weight ? weight->ptr() : nullptr, eps, as_matrix(y), kernel);
  return y;
}

}  // namespace psi::ops
