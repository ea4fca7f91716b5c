#include "engine/ops/adaln.h"

#include <string>

#include "engine/error.h"
#include "engine/ops/norm.h"

namespace psi::ops {

namespace {

// Row r of a modulation vector that is either per token ([N, D]) or broadcast ([1, D]).
const Bf16* mod_row(CBf16Mat m, std::int64_t r) { return m.rows == 1 ? m.row(0) : m.row(r); }

void check_mod(CBf16Mat m, std::int64_t rows, std::int64_t cols, const char* what) {
  if (m.cols != cols || (m.rows != 1 && m.rows != rows))
    throw Error(std::string(what) + ": modulation is " + std::to_string(m.rows) + "x" +
                std::to_string(m.cols) + " for a " + std::to_string(rows) + "x" +
                std::to_string(cols) + " input");
}

}  // namespace

Bf16Tensor ada_value(const Bf16Tensor& table, const Bf16Tensor& timestep, int row) {
  return ada_value(table, row, timestep, row);
}

Bf16Tensor ada_value(const Bf16Tensor& table, int row, const Bf16Tensor& timestep, int ts_row) {
  if (table.shape.size() != 2) throw Error("ada_value: table must be [R, D], got " + shape_str(table.shape));
  const std::int64_t R = table.dim(0), D = table.dim(1);
  if (row < 0 || row >= R) throw Error("ada_value: row " + std::to_string(row) + " of a " + std::to_string(R) + "-row table");
  auto S = as_matrix(timestep);
  if (ts_row < 0 || S.cols % D != 0 || (ts_row + 1) * D > S.cols)
    throw Error("ada_value: timestep rows of " + std::to_string(S.cols) + " values have no row " +
                std::to_string(ts_row) + " of width " + std::to_string(D));
  Bf16Tensor out({S.rows, D});
  const Bf16* t = table.ptr() + row * D;
  for (std::int64_t i = 0; i < S.rows; ++i) {
    const Bf16* s = S.row(i) + ts_row * D;
    Bf16* o = out.ptr() + i * D;
    for (std::int64_t c = 0; c < D; ++c) o[c] = bf16_rne(t[c].to_float() + s[c].to_float());
  }
  return out;
}

Bf16Tensor one_plus(const Bf16Tensor& v) {
  Bf16Tensor out(v.shape);
  for (std::int64_t i = 0; i < v.numel(); ++i) out.data[i] = bf16_rne(1.0f + v.data[i].to_float());
  return out;
}

void modulate(CBf16Mat x, CBf16Mat one_plus_scale, CBf16Mat shift, Bf16Mat y) {
  check_mod(one_plus_scale, x.rows, x.cols, "modulate scale");
  check_mod(shift, x.rows, x.cols, "modulate shift");
  for (std::int64_t r = 0; r < x.rows; ++r) {
    const Bf16* xr = x.row(r);
    const Bf16* s = mod_row(one_plus_scale, r);
    const Bf16* b = mod_row(shift, r);
    Bf16* yr = y.row(r);
    for (std::int64_t c = 0; c < x.cols; ++c)
      yr[c] = bf16_rne(bf(xr[c].to_float() * s[c].to_float()) + b[c].to_float());
  }
}

Bf16Tensor modulate(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift) {
  Bf16Tensor ops_scale = one_plus(scale);
  Bf16Tensor y(x.shape);
  modulate(as_matrix(x), as_matrix(ops_scale), as_matrix(shift), as_matrix(y));
  return y;
}

Bf16Tensor ada_zero(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift,
                    float eps, NormKernel norm) {
  return modulate(rms_norm(x, nullptr, eps, norm), scale, shift);
}

Bf16Tensor gated_residual(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g) {
  if (y.shape != x.shape)
    throw Error("gated_residual: update " + shape_str(y.shape) + " for state " + shape_str(x.shape));
  auto X = as_matrix(x), Y = as_matrix(y), G = as_matrix(g);
  check_mod(G, X.rows, X.cols, "gated_residual gate");
  Bf16Tensor out(x.shape);
  auto O = as_matrix(out);
  for (std::int64_t r = 0; r < X.rows; ++r) {
    const Bf16* gr = mod_row(G, r);
    for (std::int64_t c = 0; c < X.cols; ++c)
      O.at(r, c) = bf16_rne(X.at(r, c).to_float() + bf(Y.at(r, c).to_float() * gr[c].to_float()));
  }
  return out;
}

Bf16Tensor residual(const Bf16Tensor& x, const Bf16Tensor& y) {
  if (y.shape != x.shape)
    throw Error("residual: update " + shape_str(y.shape) + " for state " + shape_str(x.shape));
  Bf16Tensor out(x.shape);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    out.data[i] = bf16_rne(x.data[i].to_float() + y.data[i].to_float());
  return out;
}

PostSa post_sa(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g, float eps, NormKernel norm) {
  PostSa r;
  r.x = gated_residual(x, y, g);
  r.normed = rms_norm(r.x, nullptr, eps, norm);
  return r;
}

}  // namespace psi::ops
