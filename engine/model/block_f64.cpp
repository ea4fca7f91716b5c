#include "engine/model/block_f64.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include <Eigen/Dense>

#include "engine/bf16_f64.h"
#include "engine/error.h"
#include "engine/model/block_order.h"

namespace psi::model {

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowRef = Eigen::Ref<const Eigen::Matrix<double, 1, Eigen::Dynamic>>;

double real(Bf16 v) { return v.to_float(); }
double real(double v) { return v; }

// Every operand enters through here, exactly (a BF16 value is a double); the last axis is the
// columns.
template <class T>
Mat to_mat(const Tensor<T>& t) {
  const std::int64_t cols = t.shape.back(), rows = cols ? t.numel() / cols : 0;
  Mat m(rows, cols);
  for (std::int64_t i = 0; i < t.numel(); ++i) m.data()[i] = real(t.data[i]);
  return m;
}

// Row r of a modulation that is either per token or a single broadcast row.
RowRef mod_row(const Mat& m, Eigen::Index r) { return m.row(m.rows() == 1 ? 0 : r); }

// table[row] + timestep[:, ts_row·D : (ts_row+1)·D] (ops::ada_value without its BF16 write).
Mat ada_value(const Bf16Tensor& table, int row, const F64Tensor& timestep, int ts_row) {
  const Mat t = to_mat(table), s = to_mat(timestep);
  const Eigen::Index D = t.cols();
  if (row >= t.rows() || (ts_row + 1) * D > s.cols())
    throw Error("block_f64: no AdaLN row " + std::to_string(row) + " / timestep row " + std::to_string(ts_row));
  Mat out = s.middleCols(ts_row * D, D);
  out.rowwise() += t.row(row);
  return out;
}

// x · rstd (· w), rstd = 1/√(Σx²/N + eps) per row.
Mat rms_norm(const Mat& x, const Bf16Tensor* weight, double eps) {
  Mat y(x.rows(), x.cols());
  const Mat w = weight ? to_mat(*weight) : Mat();
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double rstd = 1.0 / std::sqrt(x.row(r).squaredNorm() / double(x.cols()) + eps);
    y.row(r) = x.row(r) * rstd;
    if (weight) y.row(r) = y.row(r).cwiseProduct(w.row(0));
  }
  return y;
}

// x · (1 + scale) + shift.
Mat modulate(const Mat& x, const Mat& scale, const Mat& shift) {
  Mat y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    y.row(r) = x.row(r).cwiseProduct((mod_row(scale, r).array() + 1.0).matrix()) + mod_row(shift, r);
  return y;
}

Mat ada_zero(const Mat& x, const Mat& scale, const Mat& shift, double eps) {
  return modulate(rms_norm(x, nullptr, eps), scale, shift);
}

// x + y · g.
Mat gated_residual(const Mat& x, const Mat& y, const Mat& g) {
  Mat out(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) out.row(r) = x.row(r) + y.row(r).cwiseProduct(mod_row(g, r));
  return out;
}

// x · Wᵀ + b.
Mat linear(const Mat& x, const Bf16Tensor& w, const Bf16Tensor* bias) {
  Mat y = x * to_mat(w).transpose();
  if (bias) y.rowwise() += to_mat(*bias).row(0);
  return y;
}
Mat linear(const Mat& x, const LinearWeights& lw) { return linear(x, lw.w, lw.bias()); }

// SPLIT RoPE in place (§4.6): y1 = x1·cos − x2·sin, y2 = x2·cos + x1·sin, per head.
void apply_split_rope(Mat& x, const ops::RopeTablesF64& t) {
  const std::int64_t H = t.cos.dim(1), half = t.cos.dim(3), T = x.rows();
  if (t.cos.dim(2) != T || H * 2 * half != x.cols())
    throw Error("block_f64: RoPE tables for " + std::to_string(t.cos.dim(2)) + " tokens do not fit " +
                std::to_string(T) + "x" + std::to_string(x.cols()));
  for (std::int64_t tok = 0; tok < T; ++tok)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t e = (h * T + tok) * half + j;
        const double c = t.cos.data[e], s = t.sin.data[e];
        double& x1 = x(tok, h * 2 * half + j);
        double& x2 = x(tok, h * 2 * half + half + j);
        const double a = x1, b = x2;
        x1 = a * c - b * s;
        x2 = b * c + a * s;
      }
}

// The attention module (attention_module.h) in float64: softmax(q kᵀ/√d) v per head, the exact
// scale, max-subtracted exp; gated models multiply each head by 2·sigmoid(gate logit).
Mat attention(const AttentionWeights& w, const Mat& x, const Mat& context, const ops::RopeTablesF64* q_rope,
              const ops::RopeTablesF64* k_rope, double eps) {
  const std::int64_t H = w.heads, d = w.head_dim;
  const Mat v = linear(context, w.to_v);
  Mat q = rms_norm(linear(x, w.to_q), &w.q_norm, eps);
  Mat k = rms_norm(linear(context, w.to_k), &w.k_norm, eps);
  if (q.cols() != H * d)
    throw Error("block_f64: q width " + std::to_string(q.cols()) + " for " + std::to_string(H) + " heads of " +
                std::to_string(d));
  if (q_rope) apply_split_rope(q, *q_rope);
  if (k_rope) apply_split_rope(k, *k_rope);
  const double scale = 1.0 / std::sqrt(double(d));
  Mat a(q.rows(), q.cols());
  for (std::int64_t h = 0; h < H; ++h) {
    Mat p = (q.middleCols(h * d, d) * k.middleCols(h * d, d).transpose()) * scale;
    for (Eigen::Index i = 0; i < p.rows(); ++i) {
      p.row(i) = (p.row(i).array() - p.row(i).maxCoeff()).exp().matrix();
      p.row(i) /= p.row(i).sum();
    }
    a.middleCols(h * d, d) = p * v.middleCols(h * d, d);
  }
  if (w.gated()) {
    const Mat z = linear(x, w.to_gate_logits);
    for (Eigen::Index r = 0; r < a.rows(); ++r)
      for (std::int64_t h = 0; h < H; ++h) a.block(r, h * d, 1, d) *= 2.0 / (1.0 + std::exp(-z(r, h)));
  }
  return linear(a, w.to_out);
}

// y = W2 · gelu_tanh(W1 · x + b1) + b2, GELU(tanh) = 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))).
Mat ffn(const FfnWeightsOwned& w, const Mat& x) {
  const double beta = std::sqrt(2.0 / std::numbers::pi);
  Mat h = linear(x, w.up);
  h = h.unaryExpr([beta](double v) { return 0.5 * v * (1.0 + std::tanh(beta * (v + 0.044715 * v * v * v))); });
  return linear(h, w.down);
}

F64Tensor to_tensor(const Mat& m) {
  F64Tensor t({1, m.rows(), m.cols()});
  std::memcpy(t.ptr(), m.data(), t.bytes());
  return t;
}

// The float64 arithmetic of the block order (block_order.h): Eigen products, double elsewhere,
// no BF16 write; the post-SA residual and its norm as two steps. No teacher forcing.
struct F64Block : block_order::DenseSteps<F64Block> {
  using T = Mat;
  using Taps = BlockTapsF64;
  double eps;

  explicit F64Block(double norm_eps) : eps(norm_eps) {}

  template <class E>
  Mat load(const Tensor<E>& t) const {
    return to_mat(t);
  }
  Mat ada(const Bf16Tensor& table, int row, const F64Tensor& ts, int ts_row) const {
    return ada_value(table, row, ts, ts_row);
  }
  Mat table_row(const Bf16Tensor& table, int row) const { return to_mat(table).row(row); }
  Mat ada_zero(const Mat& x, const Mat& scale, const Mat& shift) const { return model::ada_zero(x, scale, shift, eps); }
  Mat modulate(const Mat& x, const Mat& scale, const Mat& shift) const { return model::modulate(x, scale, shift); }
  struct PostSa {
    Mat x, normed;
  };
  PostSa post_sa(const Mat& x, const Mat& y, const Mat& g) const {
    Mat x1 = model::gated_residual(x, y, g);
    Mat normed = rms_norm(x1, nullptr, eps);
    return {std::move(x1), std::move(normed)};
  }
  Mat gated_residual(const Mat& x, const Mat& y, const Mat& g) const { return model::gated_residual(x, y, g); }
  Mat residual(const Mat& x, const Mat& y) const { return x + y; }
  Mat attention(const AttentionWeights& w, const Mat& x, const Mat& context, const ops::RopeTablesF64* q_rope,
                const ops::RopeTablesF64* k_rope) const {
    return model::attention(w, x, context, q_rope, k_rope, eps);
  }
  Mat ffn(const FfnWeightsOwned& w, const Mat& x) const { return model::ffn(w, x); }
  const Mat& update(const Mat& computed, F64Tensor BlockTapsF64::*) const { return computed; }
  F64Tensor tap(const Mat& m) const { return to_tensor(m); }
};

}  // namespace

std::vector<std::pair<std::string, const F64Tensor*>> BlockTapsF64::named() const { return named_taps(*this); }

F64Tensor to_f64(const Bf16Tensor& t) {
  F64Tensor out(t.shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) out.data[i] = real(t.data[i]);
  return out;
}

BlockInputsF64 to_f64(const BlockInputs& in) {
  auto stream = [](const StreamInputs& s) {
    return StreamInputsF64{to_f64(s.x),
                           to_f64(s.timesteps),
                           s.context,
                           to_f64(s.prompt_timestep),
                           {to_f64(s.pe.cos), to_f64(s.pe.sin)},
                           {to_f64(s.cross_pe.cos), to_f64(s.cross_pe.sin)},
                           to_f64(s.cross_scale_shift_timestep),
                           to_f64(s.cross_gate_timestep)};
  };
  return {stream(in.video), stream(in.audio)};
}

BlockRopeOf<ops::RopeTablesF64> block_rope_f64(const ModelConfig& c, const F32Tensor& video_positions,
                                               const F32Tensor& audio_positions) {
  return block_rope_with(c, video_positions, audio_positions, ops::rope_tables_f64);
}

F64Tensor linear_f64(const F64Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias) {
  const Mat y = linear(to_mat(x), w, bias);
  Shape shape = x.shape;
  shape.back() = y.cols();
  F64Tensor t(shape);
  std::memcpy(t.ptr(), y.data(), t.bytes());
  return t;
}

BlockTapsF64 block_forward_f64(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in) {
  return block_forward_f64(c, w, to_f64(in));
}

BlockTapsF64 block_forward_f64(const ModelConfig& c, const BlockWeights& w, const BlockInputsF64& in) {
  if (in.video.x.shape.back() != c.video_dim() || in.audio.x.shape.back() != c.audio_dim())
    throw Error("block_f64: inputs " + shape_str(in.video.x.shape) + " / " + shape_str(in.audio.x.shape) +
                " for config " + c.name);
  return block_in_order(F64Block{c.norm_eps}, c, w, in);
}

Bf16Tensor round_to_bf16(const F64Tensor& t) {
  Bf16Tensor out(t.shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) out.data[i] = bf16_of_f64(t.data[i]);
  return out;
}

}  // namespace psi::model
