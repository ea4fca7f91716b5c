#include "engine/ops/ffn.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/official/kernel_config.h"
#include "engine/ops/activation.h"
#include "engine/ops/reduce.h"

namespace psi::ops {

namespace {

void check(const Bf16Tensor& x, const FfnWeights& w, const FfnOptions* opt) {
  if (!w.up_w || !w.down_w) throw Error("ffn: missing up or down weight");
  const std::int64_t D = x.shape.back(), hidden = w.up_w->dim(0);
  if (w.up_w->dim(1) != D || w.down_w->dim(1) != hidden)
    throw Error("ffn: weights " + shape_str(w.up_w->shape) + " and " + shape_str(w.down_w->shape) +
                " do not chain for input width " + std::to_string(D));
  if (w.up_b && w.up_b->numel() != hidden) throw Error("ffn: up bias size " + std::to_string(w.up_b->numel()));
  if (w.down_b && w.down_b->numel() != w.down_w->dim(0))
    throw Error("ffn: down bias size " + std::to_string(w.down_b->numel()));
  if (opt) {
    if (opt->hidden_tile <= 0 || (opt->hidden_tile % kChunk != 0 && opt->hidden_tile < hidden))
      throw Error("ffn: hidden tile " + std::to_string(opt->hidden_tile) +
                  " must be a multiple of 1024 or cover the hidden width " + std::to_string(hidden));
    if (opt->out_tile <= 0) throw Error("ffn: output tile " + std::to_string(opt->out_tile) + " must be positive");
  }
}

// H_t = bf(gelu(x · W1[h0 : h0+nh]ᵀ + b1[h0 : h0+nh])) into a [M, nh] buffer.
void hidden_tile(CBf16Mat X, const FfnWeights& w, BiasRule rule, Product product, std::int64_t h0,
                 std::int64_t nh, std::vector<Bf16>& H) {
  H.resize(X.rows * nh);
  const std::int64_t D = X.cols;
  CBf16Mat W1_slice{w.up_w->ptr() + h0 * D, nh, D, D};
  linear(X, W1_slice, w.up_b ? w.up_b->ptr() + h0 : nullptr, rule, Bf16Mat{H.data(), X.rows, nh, nh}, product);
  gelu_tanh(H.data(), H.data(), std::int64_t(H.size()));
}

}  // namespace

Bf16Tensor ffn_hidden(const Bf16Tensor& x, const FfnWeights& w, BiasRule up_bias, Product product) {
  check(x, w, nullptr);
  Bf16Tensor h = linear(x, *w.up_w, w.up_b, up_bias, product);
  gelu_tanh(h.ptr(), h.ptr(), h.numel());
  return h;
}

Bf16Tensor ffn(const Bf16Tensor& x, const FfnWeights& w, const FfnOptions& opt) {
  check(x, w, &opt);
  if (opt.schedule == FfnSchedule::dense) {
    Bf16Tensor h;
    {
      const official::ProductSite site("up");
      h = ffn_hidden(x, w, opt.up_bias, opt.product);
    }
    const official::ProductSite site("down");
    return linear(h, *w.down_w, w.down_b, BiasRule::fused_f32, opt.product);
  }

  const CBf16Mat X = as_matrix(x);
  const std::int64_t M = X.rows, hidden = w.up_w->dim(0), Dout = w.down_w->dim(0);
  const std::int64_t ht = std::min(opt.hidden_tile, hidden);
  const std::int64_t n_hidden = (hidden + ht - 1) / ht, n_out = (Dout + opt.out_tile - 1) / opt.out_tile;
  Shape out_shape = x.shape;
  out_shape.back() = Dout;
  Bf16Tensor y(out_shape);
  std::vector<float> acc(M * Dout, 0.0f);  // the float32 partial-sum buffer of the down-projection
  auto down_partial = [&](const std::vector<Bf16>& H, std::int64_t h0, std::int64_t nh, std::int64_t o0,
                          std::int64_t no) {
    CBf16Mat W2_slice{w.down_w->ptr() + o0 * hidden + h0, no, nh, hidden};
    gemm_accumulate(CBf16Mat{H.data(), M, nh, nh}, W2_slice, F32Mat{acc.data() + o0, M, no, Dout}, opt.product);
  };
  auto finish_out_tile = [&](std::int64_t o0, std::int64_t no) {
    for (std::int64_t r = 0; r < M; ++r)
      finish_linear(acc.data() + r * Dout + o0, w.down_b ? w.down_b->ptr() + o0 : nullptr,
                    BiasRule::fused_f32, y.ptr() + r * Dout + o0, no);
  };
  std::vector<Bf16> H;
  if (opt.schedule == FfnSchedule::recompute) {
    for (std::int64_t o = 0; o < n_out; ++o) {
      const std::int64_t o0 = o * opt.out_tile, no = std::min(opt.out_tile, Dout - o0);
      for (std::int64_t t = 0; t < n_hidden; ++t) {
        const std::int64_t h0 = t * ht, nh = std::min(ht, hidden - h0);
        hidden_tile(X, w, opt.up_bias, opt.product, h0, nh, H);
        down_partial(H, h0, nh, o0, no);
      }
      finish_out_tile(o0, no);
    }
  } else {
    for (std::int64_t t = 0; t < n_hidden; ++t) {
      const std::int64_t h0 = t * ht, nh = std::min(ht, hidden - h0);
      hidden_tile(X, w, opt.up_bias, opt.product, h0, nh, H);
      for (std::int64_t o = 0; o < n_out; ++o) {
        const std::int64_t o0 = o * opt.out_tile;
        down_partial(H, h0, nh, o0, std::min(opt.out_tile, Dout - o0));
      }
    }
    for (std::int64_t o = 0; o < n_out; ++o) {
      const std::int64_t o0 = o * opt.out_tile;
      finish_out_tile(o0, std::min(opt.out_tile, Dout - o0));
    }
  }
  return y;
}

}  // namespace psi::ops
