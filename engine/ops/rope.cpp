#include "engine/ops/rope.h"

#include <cmath>
#include <numbers>
#include <string>

#include "engine/error.h"

namespace psi::ops {

namespace {

// The grid in float64, before its rounding to R.
template <class R>
std::vector<R> frequencies(std::int64_t inner, std::int64_t axes, double theta) {
  if (axes <= 0 || inner < 2 * axes)
    throw Error("rope: width " + std::to_string(inner) + " too small for " + std::to_string(axes) + " position axes");
  const std::int64_t n = inner / (2 * axes);
  std::vector<R> w(n);
  // NumPy's linspace(0, 1, n): i · (1/(n−1)), the last entry exactly 1.
  const double step = n > 1 ? 1.0 / double(n - 1) : 0.0;
  for (std::int64_t f = 0; f < n; ++f) {
    const double x = (n > 1 && f == n - 1) ? 1.0 : double(f) * step;
    w[f] = R(std::pow(theta, x) * std::numbers::pi / 2.0);
  }
  return w;
}

// cos and sin in R: float under the chosen arithmetic, double (the reference) always the host's.
float cos_in(float x, official::F32Math math) { return official::cos_f32(x, math); }
float sin_in(float x, official::F32Math math) { return official::sin_f32(x, math); }
double cos_in(double x, official::F32Math) { return std::cos(x); }
double sin_in(double x, official::F32Math) { return std::sin(x); }

// The tables in R arithmetic (float: the official one; double: the float64 reference), each
// entry passed to store(destination index, cos, sin).
template <class R, class Store>
void fill_tables(const F32Tensor& positions, const std::vector<double>& max_pos, std::int64_t inner,
                 std::int64_t heads, double theta, official::F32Math math, const Store& store) {
  if (positions.shape.size() != 4 || positions.dim(0) != 1 || positions.dim(3) != 2)
    throw Error("rope: positions must be [1, P, T, 2], got " + shape_str(positions.shape));
  const std::int64_t P = positions.dim(1), T = positions.dim(2);
  if (std::int64_t(max_pos.size()) != P)
    throw Error("rope: " + std::to_string(max_pos.size()) + " max positions for " + std::to_string(P) + " axes");
  if (heads <= 0 || inner % (2 * heads) != 0)
    throw Error("rope: width " + std::to_string(inner) + " does not split into " + std::to_string(heads) + " heads");
  const std::vector<R> w = frequencies<R>(inner, P, theta);
  const std::int64_t n = std::int64_t(w.size()), half_total = inner / 2, pad = half_total - P * n;
  const std::int64_t half = half_total / heads;
  // PyTorch divides a CUDA tensor by a scalar as a multiplication by the scalar's float32
  // reciprocal; the recorded audio tables (max_pos 20, not a power of two) show it.
  std::vector<R> inv_max(P);
  for (std::int64_t p = 0; p < P; ++p) inv_max[p] = R(1) / R(max_pos[p]);
  std::vector<R> a(P), cs(half_total), sn(half_total);
  for (std::int64_t tok = 0; tok < T; ++tok) {
    for (std::int64_t p = 0; p < P; ++p) {
      const float* se = positions.ptr() + (p * T + tok) * 2;
      const R mid = (R(se[0]) + R(se[1])) / R(2);
      const R u = mid * inv_max[p];
      a[p] = R(2) * u - R(1);
    }
    for (std::int64_t g = 0; g < pad; ++g) {
      cs[g] = R(1);
      sn[g] = R(0);
    }
    for (std::int64_t f = 0; f < n; ++f)
      for (std::int64_t p = 0; p < P; ++p) {
        const R angle = w[f] * a[p];
        cs[pad + f * P + p] = cos_in(angle, math);
        sn[pad + f * P + p] = sin_in(angle, math);
      }
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t j = 0; j < half; ++j) store((h * T + tok) * half + j, cs[h * half + j], sn[h * half + j]);
  }
}

// [1, H, T, d/2] for the positions' token count.
Shape table_shape(const F32Tensor& positions, std::int64_t inner, std::int64_t heads) {
  return {1, heads, positions.shape.size() == 4 ? positions.dim(2) : 0, heads > 0 ? inner / 2 / heads : 0};
}

}  // namespace

std::vector<float> rope_frequencies_f64(std::int64_t inner, std::int64_t axes, double theta) {
  return frequencies<float>(inner, axes, theta);
}

RopeTables rope_tables(const F32Tensor& positions, const std::vector<double>& max_pos,
                       std::int64_t inner, std::int64_t heads, double theta, official::F32Math math) {
  const Shape shape = table_shape(positions, inner, heads);
  RopeTables t{Bf16Tensor(shape), Bf16Tensor(shape)};
  fill_tables<float>(positions, max_pos, inner, heads, theta, math, [&](std::int64_t i, float c, float s) {
    t.cos.data[i] = bf16_rne(c);
    t.sin.data[i] = bf16_rne(s);
  });
  return t;
}

RopeTablesF64 rope_tables_f64(const F32Tensor& positions, const std::vector<double>& max_pos,
                              std::int64_t inner, std::int64_t heads, double theta) {
  const Shape shape = table_shape(positions, inner, heads);
  RopeTablesF64 t{F64Tensor(shape), F64Tensor(shape)};
  fill_tables<double>(positions, max_pos, inner, heads, theta, official::F32Math::host, [&](std::int64_t i, double c, double s) {
    t.cos.data[i] = c;
    t.sin.data[i] = s;
  });
  return t;
}

void apply_split_rope(Bf16Mat x, const RopeTables& t) {
  const std::int64_t H = t.heads(), half = t.half();
  if (t.tokens() != x.rows || H * 2 * half != x.cols)
    throw Error("rope: tables [" + std::to_string(H) + " heads, " + std::to_string(t.tokens()) +
                " tokens, " + std::to_string(half) + "] do not fit a " + std::to_string(x.rows) + "x" +
                std::to_string(x.cols) + " input");
  const std::int64_t d = 2 * half;
  for (std::int64_t tok = 0; tok < x.rows; ++tok) {
    Bf16* row = x.row(tok);
    for (std::int64_t h = 0; h < H; ++h) {
      Bf16* x1 = row + h * d;
      Bf16* x2 = x1 + half;
      const Bf16* c = t.cos.ptr() + (h * x.rows + tok) * half;
      const Bf16* s = t.sin.ptr() + (h * x.rows + tok) * half;
      for (std::int64_t j = 0; j < half; ++j) {
        const float a = x1[j].to_float(), b = x2[j].to_float();
        const float cj = c[j].to_float(), sj = s[j].to_float();
        const float t1 = bf(a * cj), t2 = bf(b * cj);
        x1[j] = bf16_rne(t1 + (-sj) * b);
        x2[j] = bf16_rne(t2 + sj * a);
      }
    }
  }
}

}  // namespace psi::ops
