#pragma once
// The official block's operator order (spec §3.3 steps 1–14), written once over an arithmetic A,
// so that the BF16 block (block.cpp: the official operators of a numerics variant, teacher
// forcing), the float64 block (block_f64.cpp: Eigen products, double elsewhere) and the PSI
// block program (engine/exec/block_program.cpp: row tiles over the arena and the journal)
// cannot drift apart: which AdaLN row feeds which operator, what each residual adds, which
// snapshot A2V and V2A read, which taps and states are written. The order is a sequence of
// module steps (block_steps.h), each read whole by A:
//   T                           its tensor type; Taps, the tap set it returns
//   load(t)                     an input tensor as T (a reference where no conversion is needed)
//   post_sa_step(step, taps)    steps 1-4: {.x, .normed}, the state and its norm
//   attention_step(step, taps), ffn_step(step, taps)
//   site(name)                  a guard naming the products within ("video", "attn1", "a2v", ...)
//   audio_first                 whether audio's steps 1-10 run before video's (they are independent)
// block_steps.h's DenseSteps reads the steps with whole-tensor operators, which an arithmetic
// then supplies:
//   ada(table, row, ts, ts_row) table[row] + ts's row ts_row; table_row(table, row) the row alone
//   ada_zero(x, scale, shift)   modulate(rms(x), scale, shift); modulate(x, scale, shift)
//   post_sa(x, y, g)            {x + y·g, rms(x + y·g)} (.x, .normed)
//   gated_residual(x, y, g), residual(x, y)
//   attention(w, x, context, q_rope, k_rope), ffn(w, x)
//   update(computed, tap)       the module output a residual adds (teacher forcing reads another)
//   tap(t)                      a computed tensor as the tap set holds it
// The product-site scopes ("video", "attn1", "attn2", "a2v", "v2a", "video.ff", "audio.ff") name
// the BF16 products for the kernel configurations, which key on them.
#include <optional>
#include <utility>

#include "engine/model/block_catalogue.h"
#include "engine/model/block_steps.h"
#include "engine/model/config.h"

namespace psi::model {

namespace block_order {

// One stream's taps within the tap set P, with the roles a tiled program journals them under.
template <class P>
struct StreamTaps {
  Tap<P> attn1, attn2, av, ff, out;
};
template <class P>
StreamTaps<P> video_taps() {
  return {{&P::attn1, "attn1"}, {&P::attn2, "attn2"}, {&P::audio_to_video_attn, "av"}, {&P::ff, "ff"}, {&P::video_out, "out"}};
}
template <class P>
StreamTaps<P> audio_taps() {
  return {{&P::audio_attn1, "attn1"},
          {&P::audio_attn2, "attn2"},
          {&P::video_to_audio_attn, "av"},
          {&P::audio_ff, "ff"},
          {&P::audio_out, "out"}};
}

// One modality: its modules and tables (of the weights W, BlockWeights' members), its inputs In
// (a StreamInputs of A's), its taps.
template <class W, class In, class P>
struct Stream {
  using Attn = decltype(W::attn1);
  using Ffn = decltype(W::ff);
  using Table = decltype(W::scale_shift_table);
  using Ts = decltype(In::timesteps);
  using Rope = decltype(In::pe);
  using Taps = P;
  const char* name;
  const Attn &attn1, &attn2, &av_attn;  // av_attn: the A/V direction it queries
  const Ffn& ff;
  const Table &table, &prompt_table, &av_table;
  const In& in;
  StreamTaps<P> taps;
};

template <class P, class W, class In>
Stream<W, In, P> video_stream(const W& w, const In& in) {
  return {"video", w.attn1, w.attn2, w.audio_to_video_attn, w.ff, w.scale_shift_table, w.prompt_scale_shift_table,
          w.scale_shift_table_a2v_ca_video, in, video_taps<P>()};
}
template <class P, class W, class In>
Stream<W, In, P> audio_stream(const W& w, const In& in) {
  return {"audio", w.audio_attn1, w.audio_attn2, w.video_to_audio_attn, w.audio_ff, w.audio_scale_shift_table,
          w.audio_prompt_scale_shift_table, w.scale_shift_table_a2v_ca_audio, in, audio_taps<P>()};
}

template <class S>
using ModOf = Mod<typename S::Table, typename S::Ts>;

// AdaLN row r of s's table and timesteps.
template <class S>
ModOf<S> ada(const S& s, int r, const char* name) {
  return {&s.table, r, &s.in.timesteps, r, name};
}

// Steps 1–4: self-attention on ada_zero(x; shift/scale_msa) and the post-SA residual with its
// norm. Writes the attn1 tap and state x1; returns {x1, rms(x1)}.
template <class A, class S>
auto self_attention(const A& a, const S& s, typename A::Taps& p) {
  using T = typename A::T;
  using M = ModOf<S>;
  const auto& in = s.in;
  const T& x = a.load(in.x);
  const Input<T, M> h{&x, Prep::ada_zero, ada(s, ada_row::scale_msa, "scale"), ada(s, ada_row::shift_msa, "shift")};
  [[maybe_unused]] const auto site = a.site("attn1");
  return a.post_sa_step(AttentionStep<S, T, M>{"attn1", s, s, s.attn1, h, std::nullopt, &in.pe, &in.pe,
                                                {&x, ada(s, ada_row::gate_msa, "gate_msa"), "x1", "n1"}, s.taps.attn1},
                        p);
}

// Steps 5–10: text cross-attention from rms(x1), with CA-AdaLN (queries modulated by the q
// rows, the context by the prompt rows, a gated residual) or without (a plain residual).
// Writes the attn2 tap and state x2; returns x2.
template <class A, class S, class PostSa>
typename A::T text_attention(const A& a, const ModelConfig& c, const S& s, const PostSa& ps, typename A::Taps& p) {
  using T = typename A::T;
  using M = ModOf<S>;
  const auto& in = s.in;
  const T& context = a.load(in.context);
  Input<T, M> q{&ps.normed}, kv{&context};
  Residual<T, M> r{&ps.x, std::nullopt, "x2"};
  if (c.features.cross_attention_adaln) {
    const bool has_prompt = in.prompt_timestep.numel() > 0;
    const auto prompt = [&](int row, const char* name) {
      return M{&s.prompt_table, row, has_prompt ? &in.prompt_timestep : nullptr, row, name};
    };
    q = {&ps.normed, Prep::modulate, ada(s, ada_row::scale_q, "scale_q"), ada(s, ada_row::shift_q, "shift_q"), nullptr,
         "q_in"};
    kv = {&context, Prep::modulate, prompt(prompt_row::scale_kv, "scale_kv"), prompt(prompt_row::shift_kv, "shift_kv"),
          nullptr, "c_in"};
    r.gate = ada(s, ada_row::gate_q, "gate_q");
  }
  return a.attention_step(AttentionStep<S, T, M>{"attn2", s, s, s.attn2, q, kv, nullptr, nullptr, r, s.taps.attn2}, p);
}

// Steps 1–10 for one stream.
template <class A, class S>
typename A::T self_and_text(const A& a, const ModelConfig& c, const S& s, typename A::Taps& p) {
  const auto ps = self_attention(a, s, p);
  [[maybe_unused]] const auto site = a.site("attn2");
  return text_attention(a, c, s, ps, p);
}

// Steps 11–12, one direction (`name`: "a2v", "v2a"): q's queries and kv's keys/values, each
// ada_zero of its pre-A/V snapshot (x_q, x_kv) by its own A/V table's rows (scale_row,
// shift_row) and cross timestep, with the cross RoPE; then x3 = x_q + o·(q's A/V gate row + its
// cross gate timestep). Writes q's av tap and state x3; returns x3.
template <class A, class S>
typename A::T av_direction(const A& a, const char* name, const S& q, const S& kv, const typename A::T& x_q,
                           const typename A::T& x_kv, int scale_row, int shift_row, typename A::Taps& p) {
  using T = typename A::T;
  using M = ModOf<S>;
  const auto av = [](const S& s, int row, const char* n) {
    return M{&s.av_table, row, &s.in.cross_scale_shift_timestep, row, n};
  };
  const Input<T, M> q_in{&x_q, Prep::ada_zero, av(q, scale_row, "scale"), av(q, shift_row, "shift"), "q"};
  const Input<T, M> kv_in{&x_kv, Prep::ada_zero, av(kv, scale_row, "scale"), av(kv, shift_row, "shift"), "kv"};
  const M gate{&q.av_table, av_row::gate, &q.in.cross_gate_timestep, 0, "gate"};
  return a.attention_step(AttentionStep<S, T, M>{name, q, kv, q.av_attn, q_in, kv_in, &q.in.cross_pe, &kv.in.cross_pe,
                                                 {&x_q, gate, "x3"}, q.taps.av},
                          p);
}

// Steps 13–14 for one stream: the FFN on ada_zero(x3; shift/scale_mlp), then the gated residual.
// Writes the ff and out taps (out is also the state).
template <class A, class S>
void feed_forward(const A& a, const S& s, const typename A::T& x3, typename A::Taps& p) {
  using T = typename A::T;
  using M = ModOf<S>;
  const Input<T, M> h{&x3, Prep::ada_zero, ada(s, ada_row::scale_mlp, "scale"), ada(s, ada_row::shift_mlp, "shift")};
  a.ffn_step(FfnStep<S, T, M>{"ff", s, s.ff, h, {&x3, ada(s, ada_row::gate_mlp, "gate_mlp"), s.taps.out.role},
                              s.taps.ff, s.taps.out},
             p);
}

}  // namespace block_order

// The block (both streams) on weights W (BlockWeights or a stand-in with its members) and inputs
// In (A's BlockInputs) in arithmetic A.
template <class A, class W, class In>
typename A::Taps block_in_order(const A& a, const ModelConfig& c, const W& w, const In& in) {
  using T = typename A::T;
  using P = typename A::Taps;
  namespace bo = block_order;
  const auto video = bo::video_stream<P>(w, in.video);
  const auto audio = bo::audio_stream<P>(w, in.audio);
  P p;
  const auto self_and_text = [&](const auto& s) {
    [[maybe_unused]] const auto site = a.site(s.name);
    return bo::self_and_text(a, c, s, p);
  };
  T vx2, ax2;  // the pre-A/V snapshots: both directions read them
  if constexpr (A::audio_first) {
    ax2 = self_and_text(audio);
    vx2 = self_and_text(video);
  } else {
    vx2 = self_and_text(video);
    ax2 = self_and_text(audio);
  }
  T vx3, ax3;
  {
    // A2V: video queries, audio keys/values. A/V tables list scale before shift.
    [[maybe_unused]] const auto site = a.site("a2v");
    vx3 = bo::av_direction(a, "a2v", video, audio, vx2, ax2, av_row::a2v_scale, av_row::a2v_shift, p);
  }
  {
    // V2A: audio queries, video keys/values (the pre-A2V video state).
    [[maybe_unused]] const auto site = a.site("v2a");
    ax3 = bo::av_direction(a, "v2a", audio, video, ax2, vx2, av_row::v2a_scale, av_row::v2a_shift, p);
  }
  {
    [[maybe_unused]] const auto site = a.site("video.ff");
    bo::feed_forward(a, video, vx3, p);
  }
  {
    [[maybe_unused]] const auto site = a.site("audio.ff");
    bo::feed_forward(a, audio, ax3, p);
  }
  return p;
}

}  // namespace psi::model
