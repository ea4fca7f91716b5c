#include "engine/model/block_f64.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include <Eigen/Dense>

#include "engine/bf16_f64.h"
#include "engine/error.h"

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
Mat ada_value(const Bf16Tensor& table, const F64Tensor& timestep, int row) {
  return ada_value(table, row, timestep, row);
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

// Steps 1–10 of spec §3.3 for one stream, as block.cpp's self_and_text.
struct SelfAndTextF64 {
  Mat o_attn1, o_attn2, x2;
};

SelfAndTextF64 self_and_text_f64(const ModelConfig& c, const AttentionWeights& attn1, const AttentionWeights& attn2,
                          const Bf16Tensor& table, const Bf16Tensor& prompt_table, const StreamInputsF64& in,
                          double eps) {
  SelfAndTextF64 r;
  const Mat x = to_mat(in.x);
  const Mat h = ada_zero(x, ada_value(table, in.timesteps, ada_row::scale_msa),
                         ada_value(table, in.timesteps, ada_row::shift_msa), eps);
  r.o_attn1 = attention(attn1, h, h, &in.pe, &in.pe, eps);
  const Mat x1 = gated_residual(x, r.o_attn1, ada_value(table, in.timesteps, ada_row::gate_msa));
  const Mat normed = rms_norm(x1, nullptr, eps);
  const Mat context = to_mat(in.context);
  if (c.features.cross_attention_adaln) {
    const bool has_prompt = in.prompt_timestep.numel() > 0;
    const Mat pt = to_mat(prompt_table);
    const auto prompt = [&](int row) {
      return has_prompt ? ada_value(prompt_table, in.prompt_timestep, row) : Mat(pt.row(row));
    };
    const Mat shift_kv = prompt(prompt_row::shift_kv);
    const Mat scale_kv = prompt(prompt_row::scale_kv);
    const Mat q_in = modulate(normed, ada_value(table, in.timesteps, ada_row::scale_q),
                              ada_value(table, in.timesteps, ada_row::shift_q));
    r.o_attn2 = attention(attn2, q_in, modulate(context, scale_kv, shift_kv), nullptr, nullptr, eps);
    r.x2 = gated_residual(x1, r.o_attn2, ada_value(table, in.timesteps, ada_row::gate_q));
  } else {
    r.o_attn2 = attention(attn2, normed, context, nullptr, nullptr, eps);
    r.x2 = x1 + r.o_attn2;
  }
  return r;
}

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
  const double eps = c.norm_eps;
  BlockTapsF64 p;

  // Video and audio self-attention and text cross-attention (steps 1–10).
  const SelfAndTextF64 vs = self_and_text_f64(c, w.attn1, w.attn2, w.scale_shift_table, w.prompt_scale_shift_table,
                                       in.video, eps);
  const SelfAndTextF64 as = self_and_text_f64(c, w.audio_attn1, w.audio_attn2, w.audio_scale_shift_table,
                                       w.audio_prompt_scale_shift_table, in.audio, eps);
  const Bf16Tensor& tv = w.scale_shift_table_a2v_ca_video;
  const Bf16Tensor& ta = w.scale_shift_table_a2v_ca_audio;
  const F64Tensor& vss = in.video.cross_scale_shift_timestep;
  const F64Tensor& ass = in.audio.cross_scale_shift_timestep;

  // A2V (step 11) and V2A (step 12), both from the pre-A/V states; tables list scale first.
  const Mat a2v = attention(
      w.audio_to_video_attn, ada_zero(vs.x2, ada_value(tv, vss, av_row::a2v_scale), ada_value(tv, vss, av_row::a2v_shift), eps),
      ada_zero(as.x2, ada_value(ta, ass, av_row::a2v_scale), ada_value(ta, ass, av_row::a2v_shift), eps),
      &in.video.cross_pe, &in.audio.cross_pe, eps);
  const Mat vx3 = gated_residual(vs.x2, a2v, ada_value(tv, av_row::gate, in.video.cross_gate_timestep, 0));
  const Mat v2a = attention(
      w.video_to_audio_attn, ada_zero(as.x2, ada_value(ta, ass, av_row::v2a_scale), ada_value(ta, ass, av_row::v2a_shift), eps),
      ada_zero(vs.x2, ada_value(tv, vss, av_row::v2a_scale), ada_value(tv, vss, av_row::v2a_shift), eps),
      &in.audio.cross_pe, &in.video.cross_pe, eps);
  const Mat ax3 = gated_residual(as.x2, v2a, ada_value(ta, av_row::gate, in.audio.cross_gate_timestep, 0));

  // Feed-forwards (steps 13–14).
  const Bf16Tensor& t = w.scale_shift_table;
  const Mat ff = ffn(w.ff, ada_zero(vx3, ada_value(t, in.video.timesteps, ada_row::scale_mlp),
                                    ada_value(t, in.video.timesteps, ada_row::shift_mlp), eps));
  const Bf16Tensor& ta2 = w.audio_scale_shift_table;
  const Mat audio_ff = ffn(w.audio_ff, ada_zero(ax3, ada_value(ta2, in.audio.timesteps, ada_row::scale_mlp),
                                                ada_value(ta2, in.audio.timesteps, ada_row::shift_mlp), eps));

  p.attn1 = to_tensor(vs.o_attn1);
  p.attn2 = to_tensor(vs.o_attn2);
  p.audio_attn1 = to_tensor(as.o_attn1);
  p.audio_attn2 = to_tensor(as.o_attn2);
  p.audio_to_video_attn = to_tensor(a2v);
  p.video_to_audio_attn = to_tensor(v2a);
  p.ff = to_tensor(ff);
  p.audio_ff = to_tensor(audio_ff);
  p.video_out = to_tensor(gated_residual(vx3, ff, ada_value(t, in.video.timesteps, ada_row::gate_mlp)));
  p.audio_out = to_tensor(gated_residual(ax3, audio_ff, ada_value(ta2, in.audio.timesteps, ada_row::gate_mlp)));
  return p;
}

Bf16Tensor round_to_bf16(const F64Tensor& t) {
  Bf16Tensor out(t.shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) out.data[i] = bf16_of_f64(t.data[i]);
  return out;
}

}  // namespace psi::model
