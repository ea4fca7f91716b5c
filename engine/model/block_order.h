#pragma once
// The official block's operator order (spec §3.3 steps 1–14), written once over an arithmetic A,
// so that the BF16 block (block.cpp: the official operators of a numerics variant, teacher
// forcing) and the float64 block (block_f64.cpp: Eigen products, double elsewhere) cannot
// drift apart: which AdaLN row feeds which operator, what each residual adds, which snapshot
// A2V and V2A read, which taps are written. An arithmetic supplies:
//   T                           its tensor type; Taps, the tap set it returns
//   load(t)                     an input tensor as T (a reference where no conversion is needed)
//   ada(table, ts, row)         table[row] + ts's row `row`; ada(table, row, ts, ts_row) another ts row
//   table_row(table, row)       a table row alone (prompt tables without a prompt timestep)
//   ada_zero(x, scale, shift)   modulate(rms(x), scale, shift); modulate(x, scale, shift)
//   post_sa(x, y, g)            {x + y·g, rms(x + y·g)} (.x, .normed)
//   gated_residual(x, y, g), residual(x, y)
//   attention(w, x, context, q_rope, k_rope), ffn(w, x)
//   update(computed, tap)       the module output a residual adds (teacher forcing reads another)
//   tap(t)                      a computed tensor as the tap set holds it
// The product-site scopes ("video", "attn1", "attn2", "a2v", "v2a", "video.ff", "audio.ff") name
// the BF16 products for the kernel configurations, which key on them.
#include <type_traits>
#include <utility>

#include "engine/model/block_catalogue.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/official/kernel_config.h"

namespace psi::model {

namespace block_order {

// One stream's taps within the tap set P.
template <class P>
struct StreamTaps {
  using Member = std::remove_reference_t<decltype(std::declval<P&>().attn1)> P::*;
  Member attn1, attn2, av, ff, out;
};

// One modality: its modules and tables, its inputs In (a StreamInputs of A's), its taps.
template <class In, class P>
struct Stream {
  const AttentionWeights &attn1, &attn2, &av_attn;  // av_attn: the A/V direction it queries
  const FfnWeightsOwned& ff;
  const Bf16Tensor &table, &prompt_table, &av_table;
  const In& in;
  StreamTaps<P> taps;
};

template <class P, class In>
Stream<In, P> video_stream(const BlockWeights& w, const In& in) {
  return {w.attn1, w.attn2, w.audio_to_video_attn, w.ff, w.scale_shift_table, w.prompt_scale_shift_table,
          w.scale_shift_table_a2v_ca_video, in,
          {&P::attn1, &P::attn2, &P::audio_to_video_attn, &P::ff, &P::video_out}};
}
template <class P, class In>
Stream<In, P> audio_stream(const BlockWeights& w, const In& in) {
  return {w.audio_attn1, w.audio_attn2, w.video_to_audio_attn, w.audio_ff, w.audio_scale_shift_table,
          w.audio_prompt_scale_shift_table, w.scale_shift_table_a2v_ca_audio, in,
          {&P::audio_attn1, &P::audio_attn2, &P::video_to_audio_attn, &P::audio_ff, &P::audio_out}};
}

// Steps 1–4: self-attention on ada_zero(x; shift/scale_msa) and the post-SA residual with its
// norm. Writes the attn1 tap; returns {x1, rms(x1)}.
template <class A, class S>
auto self_attention(const A& a, const S& s, typename A::Taps& p) {
  using T = typename A::T;
  const auto& in = s.in;
  const auto& x = a.load(in.x);
  const T shift_msa = a.ada(s.table, in.timesteps, ada_row::shift_msa);
  const T scale_msa = a.ada(s.table, in.timesteps, ada_row::scale_msa);
  const T gate_msa = a.ada(s.table, in.timesteps, ada_row::gate_msa);
  const T h = a.ada_zero(x, scale_msa, shift_msa);
  T o;
  {
    const official::ProductSite site("attn1");
    o = a.attention(s.attn1, h, h, &in.pe, &in.pe);
  }
  auto ps = a.post_sa(x, a.update(o, s.taps.attn1), gate_msa);
  p.*s.taps.attn1 = a.tap(std::move(o));
  return ps;
}

// Steps 5–10: text cross-attention from rms(x1), with CA-AdaLN (queries modulated by the q
// rows, the context by the prompt rows, a gated residual) or without (a plain residual).
// Writes the attn2 tap; returns x2.
template <class A, class S, class PostSa>
typename A::T text_attention(const A& a, const ModelConfig& c, const S& s, PostSa ps, typename A::Taps& p) {
  using T = typename A::T;
  const auto& in = s.in;
  const auto& context = a.load(in.context);
  T o, x2;
  if (c.features.cross_attention_adaln) {
    const T shift_q = a.ada(s.table, in.timesteps, ada_row::shift_q);
    const T scale_q = a.ada(s.table, in.timesteps, ada_row::scale_q);
    const T gate_q = a.ada(s.table, in.timesteps, ada_row::gate_q);
    const bool has_prompt = in.prompt_timestep.numel() > 0;
    const auto prompt = [&](int row) {
      return has_prompt ? a.ada(s.prompt_table, in.prompt_timestep, row) : a.table_row(s.prompt_table, row);
    };
    const T shift_kv = prompt(prompt_row::shift_kv);
    const T scale_kv = prompt(prompt_row::scale_kv);
    const T q_in = a.modulate(ps.normed, scale_q, shift_q);
    const T c_in = a.modulate(context, scale_kv, shift_kv);
    o = a.attention(s.attn2, q_in, c_in, nullptr, nullptr);
    x2 = a.gated_residual(ps.x, a.update(o, s.taps.attn2), gate_q);
  } else {
    o = a.attention(s.attn2, ps.normed, context, nullptr, nullptr);
    x2 = a.residual(ps.x, a.update(o, s.taps.attn2));
  }
  p.*s.taps.attn2 = a.tap(std::move(o));
  return x2;
}

// Steps 1–10 for one stream.
template <class A, class S>
typename A::T self_and_text(const A& a, const ModelConfig& c, const S& s, typename A::Taps& p) {
  auto ps = self_attention(a, s, p);
  const official::ProductSite site("attn2");
  return text_attention(a, c, s, std::move(ps), p);
}

// Steps 11–12, one direction: q's queries and kv's keys/values, each ada_zero of its pre-A/V
// snapshot (x_q, x_kv) by its own A/V table's rows (scale_row, shift_row) and cross timestep, with
// the cross RoPE; then x3 = x_q + o·(q's A/V gate row + its cross gate timestep). Writes q's av
// tap; returns x3.
template <class A, class S>
typename A::T av_direction(const A& a, const S& q, const S& kv, const typename A::T& x_q,
                           const typename A::T& x_kv, int scale_row, int shift_row, typename A::Taps& p) {
  using T = typename A::T;
  const auto& qs = q.in.cross_scale_shift_timestep;
  const auto& kvs = kv.in.cross_scale_shift_timestep;
  const T q_in = a.ada_zero(x_q, a.ada(q.av_table, qs, scale_row), a.ada(q.av_table, qs, shift_row));
  const T kv_in = a.ada_zero(x_kv, a.ada(kv.av_table, kvs, scale_row), a.ada(kv.av_table, kvs, shift_row));
  T o = a.attention(q.av_attn, q_in, kv_in, &q.in.cross_pe, &kv.in.cross_pe);
  T x3 = a.gated_residual(x_q, a.update(o, q.taps.av), a.ada(q.av_table, av_row::gate, q.in.cross_gate_timestep, 0));
  p.*q.taps.av = a.tap(std::move(o));
  return x3;
}

// Steps 13–14 for one stream: the FFN on ada_zero(x3; shift/scale_mlp), then the gated residual.
// Writes the ff and out taps.
template <class A, class S>
void feed_forward(const A& a, const S& s, const typename A::T& x3, typename A::Taps& p) {
  using T = typename A::T;
  const auto& ts = s.in.timesteps;
  const T h = a.ada_zero(x3, a.ada(s.table, ts, ada_row::scale_mlp), a.ada(s.table, ts, ada_row::shift_mlp));
  T o = a.ffn(s.ff, h);
  T out = a.gated_residual(x3, a.update(o, s.taps.ff), a.ada(s.table, ts, ada_row::gate_mlp));
  p.*s.taps.ff = a.tap(std::move(o));
  p.*s.taps.out = a.tap(std::move(out));
}

}  // namespace block_order

// The block (both streams) on inputs In (A's BlockInputs) in arithmetic A.
template <class A, class In>
typename A::Taps block_in_order(const A& a, const ModelConfig& c, const BlockWeights& w, const In& in) {
  using T = typename A::T;
  using P = typename A::Taps;
  namespace bo = block_order;
  const auto video = bo::video_stream<P>(w, in.video);
  const auto audio = bo::audio_stream<P>(w, in.audio);
  P p;
  T vx2, ax2;  // the pre-A/V snapshots: both directions read them
  {
    const official::ProductSite site("video");
    vx2 = bo::self_and_text(a, c, video, p);
  }
  {
    const official::ProductSite site("audio");
    ax2 = bo::self_and_text(a, c, audio, p);
  }
  T vx3, ax3;
  {
    // A2V: video queries, audio keys/values. A/V tables list scale before shift.
    const official::ProductSite site("a2v");
    vx3 = bo::av_direction(a, video, audio, vx2, ax2, av_row::a2v_scale, av_row::a2v_shift, p);
  }
  {
    // V2A: audio queries, video keys/values (the pre-A2V video state).
    const official::ProductSite site("v2a");
    ax3 = bo::av_direction(a, audio, video, ax2, vx2, av_row::v2a_scale, av_row::v2a_shift, p);
  }
  {
    const official::ProductSite site("video.ff");
    bo::feed_forward(a, video, vx3, p);
  }
  {
    const official::ProductSite site("audio.ff");
    bo::feed_forward(a, audio, ax3, p);
  }
  return p;
}

}  // namespace psi::model
