#include "engine/model/block.h"

#include "engine/error.h"
#include "engine/model/attention_module.h"
#include "engine/model/block_order.h"
#include "engine/ops/adaln.h"
#include "engine/ops/ffn.h"
#include "engine/ops/norm.h"
#include "engine/synthinit.h"

namespace psi::model {

namespace {

using ops::ada_value;

// The BF16 arithmetic of the block order (block_order.h): the official operators with the
// variant's products, norms and attention; teacher forcing when `forced` is set.
struct Bf16Block : block_order::DenseSteps<Bf16Block> {
  using T = Bf16Tensor;
  using Taps = BlockTaps;
  const NumericsVariant& v;
  float eps;
  const BlockTaps* forced;

  Bf16Block(const NumericsVariant& variant, float norm_eps, const BlockTaps* forced_taps)
      : v(variant), eps(norm_eps), forced(forced_taps) {}

  const Bf16Tensor& load(const Bf16Tensor& t) const { return t; }
  Bf16Tensor ada(const Bf16Tensor& table, int row, const Bf16Tensor& ts, int ts_row) const {
    return ada_value(table, row, ts, ts_row);
  }
  Bf16Tensor table_row(const Bf16Tensor& table, int row) const {
    const std::int64_t D = table.dim(1);
    Bf16Tensor out({1, D});
    for (std::int64_t c = 0; c < D; ++c) out.data[c] = table.data[row * D + c];
    return out;
  }
  Bf16Tensor ada_zero(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift) const {
    return ops::ada_zero(x, scale, shift, eps, v.norm);
  }
  Bf16Tensor modulate(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift) const {
    return ops::modulate(x, scale, shift);
  }
  // Residual and norm fused, as the official kernel writes them.
  ops::PostSa post_sa(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g) const {
    return ops::post_sa(x, y, g, eps, v.norm);
  }
  Bf16Tensor gated_residual(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g) const {
    return ops::gated_residual(x, y, g);
  }
  Bf16Tensor residual(const Bf16Tensor& x, const Bf16Tensor& y) const { return ops::residual(x, y); }
  Bf16Tensor attention(const AttentionWeights& w, const Bf16Tensor& x, const Bf16Tensor& context,
                       const ops::RopeTables* q_rope, const ops::RopeTables* k_rope) const {
    return attention_forward(w, x, context, q_rope, k_rope, v.sdpa(w.head_dim), eps, v.product, v.norm);
  }
  Bf16Tensor ffn(const FfnWeightsOwned& w, const Bf16Tensor& x) const {
    ops::FfnWeights fw{&w.up.w, w.up.bias(), &w.down.w, w.down.bias()};
    return ops::ffn(x, fw, v.ffn(w.up.w.dim(0)));
  }
  const Bf16Tensor& update(const Bf16Tensor& computed, Bf16Tensor BlockTaps::*tap) const {
    return forced ? forced->*tap : computed;
  }
  Bf16Tensor tap(Bf16Tensor&& t) const { return std::move(t); }
};

void check_inputs(const ModelConfig& c, const BlockInputs& in) {
  auto want = [](const Bf16Tensor& t, std::int64_t width, const char* what) {
    if (t.shape.size() != 3 || t.dim(0) != 1 || t.dim(2) != width)
      throw Error(std::string("block input ") + what + " is " + shape_str(t.shape) + ", expected [1, N, " +
                  std::to_string(width) + "]");
  };
  const std::int64_t rows = c.features.ada_rows();
  want(in.video.x, c.video_dim(), "video.x");
  want(in.audio.x, c.audio_dim(), "audio.x");
  want(in.video.context, c.cross_attention_dim, "video.context");
  want(in.audio.context, c.audio_cross_attention_dim, "audio.context");
  if (in.video.timesteps.shape.back() != rows * c.video_dim() || in.audio.timesteps.shape.back() != rows * c.audio_dim())
    throw Error("block inputs: timesteps " + shape_str(in.video.timesteps.shape) + " / " +
                shape_str(in.audio.timesteps.shape) + " do not hold " + std::to_string(rows) + " AdaLN rows");
}

}  // namespace

BlockRope block_rope(const ModelConfig& c, const F32Tensor& video_positions, const F32Tensor& audio_positions,
                     official::F32Math math) {
  return block_rope_with(c, video_positions, audio_positions,
                         [math](const F32Tensor& positions, const std::vector<double>& max_pos, std::int64_t inner,
                                std::int64_t heads, double theta) {
                           return ops::rope_tables(positions, max_pos, inner, heads, theta, math);
                         });
}

BlockInputs synthetic_block_inputs(const ModelConfig& c, const F32Tensor& video_positions,
                                   const F32Tensor& audio_positions, std::int64_t context_len,
                                   std::uint64_t seed) {
  const BlockRope rope = block_rope(c, video_positions, audio_positions);
  const std::int64_t rows = c.features.ada_rows();
  auto stream = [&](const std::string& s, std::int64_t n, std::int64_t D, std::int64_t ctx_width,
                    const ops::RopeTables& pe, const ops::RopeTables& cross_pe) {
    auto in = [&](const std::string& name, Shape shape) {
      return synthinit::make("input.synthetic." + s + "." + name, shape, seed);
    };
    StreamInputs r;
    r.x = in("x", {1, n, D});
    r.timesteps = in("timesteps", {1, 1, rows * D});
    r.context = in("context", {1, context_len, ctx_width});
    if (c.features.cross_attention_adaln) r.prompt_timestep = in("prompt_timestep", {1, 1, prompt_row::count * D});
    r.pe = pe;
    r.cross_pe = cross_pe;
    r.cross_scale_shift_timestep = in("cross_scale_shift_timestep", {1, 1, av_row::timestep_rows * D});
    r.cross_gate_timestep = in("cross_gate_timestep", {1, 1, D});
    return r;
  };
  return {stream("video", video_positions.dim(2), c.video_dim(), c.cross_attention_dim, rope.video, rope.video_cross),
          stream("audio", audio_positions.dim(2), c.audio_dim(), c.audio_cross_attention_dim, rope.audio,
                 rope.audio_cross)};
}

std::vector<std::pair<std::string, const Bf16Tensor*>> BlockTaps::named() const { return named_taps(*this); }

BlockTaps block_forward(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in,
                        const NumericsVariant& v, const BlockTaps* forced) {
  check_inputs(c, in);
  return block_in_order(Bf16Block{v, c.norm_eps, forced}, c, w, in);
}

}  // namespace psi::model
