#pragma once
// The module steps of the block order (block_order.h), as data: which inputs a step reads, how
// each is normed and modulated, which module runs, what its residual adds to and which tap and
// state it writes. An arithmetic reads a step whole: DenseSteps (below) as whole-tensor
// operators, the PSI block program (engine/exec/block_program.cpp) as its key loop and its
// fused query-row-tile loop. The names (`name`, `side`, a Mod's name, a state's role) are what
// a tiled program calls the values; whole-tensor arithmetics ignore them.
#include <optional>
#include <type_traits>
#include <utility>

#include "engine/official/kernel_config.h"

namespace psi::model::block_order {

// A tap of the tap set P and the role a tiled program journals it under.
template <class P>
struct Tap {
  using Member = std::remove_reference_t<decltype(std::declval<P&>().attn1)> P::*;
  Member member;
  const char* role;
};

// table[row] + the timestep ts's row ts_row; table[row] alone when ts is null.
template <class Table, class Ts>
struct Mod {
  const Table* table = nullptr;
  int row = 0;
  const Ts* ts = nullptr;
  int ts_row = 0;
  const char* name = "";
};

// How an operator's input is made from x: as it is, modulate(x, scale, shift), or
// ada_zero(x, scale, shift) = modulate(rms(x), scale, shift).
enum class Prep { none, modulate, ada_zero };

template <class T, class M>
struct Input {
  const T* x = nullptr;
  Prep prep = Prep::none;
  M scale{}, shift{};
  const char* side = nullptr;  // the side of an attention whose two inputs differ in kind ("q", "kv")
  const char* name = nullptr;  // the modulated value ("q_in", "c_in")
};

// state = x + update · gate (no gate: x + update), journaled as `state`; `normed`, when set,
// names rms(state), which a post-SA residual hands on with the sum.
template <class T, class M>
struct Residual {
  const T* x = nullptr;
  std::optional<M> gate;
  const char* state = nullptr;
  const char* normed = nullptr;
};

// An attention module step: attention of query's input over keys' (none: the query input
// itself), the module output tapped, then the residual. `name` with the query stream's name is
// the step's operator name ("video.attn1", "video.a2v").
template <class S, class T, class M>
struct AttentionStep {
  using Value = T;
  const char* name;
  const S& q;   // the stream whose tap and state the step writes
  const S& kv;  // the stream the keys come from
  const typename S::Attn& module;
  Input<T, M> query;
  std::optional<Input<T, M>> keys;
  const typename S::Rope *q_rope = nullptr, *k_rope = nullptr;
  Residual<T, M> residual;
  Tap<typename S::Taps> tap;
};

// A feed-forward step: the FFN on input, tapped, then the residual, whose sum is tapped too.
template <class S, class T, class M>
struct FfnStep {
  using Value = T;
  const char* name;
  const S& s;
  const typename S::Ffn& module;
  Input<T, M> input;
  Residual<T, M> residual;
  Tap<typename S::Taps> tap, out;
};

// The whole-tensor reading of the steps, for an arithmetic A (CRTP) that supplies the
// operators block_order.h lists. Video's self- and text attention run before audio's, as in the
// official model (the operator observers see that order).
template <class A>
struct DenseSteps {
  static constexpr bool audio_first = false;
  static official::ProductSite site(const char* name) { return official::ProductSite(name); }

  // Steps 1-4's form: the residual and the norm of its sum together ({.x, .normed}).
  template <class St, class P>
  auto post_sa_step(const St& st, P& p) const {
    auto o = attend(st);
    const auto& r = st.residual;
    auto ps = self().post_sa(*r.x, self().update(o, st.tap.member), mod(*r.gate));
    p.*st.tap.member = self().tap(std::move(o));
    return ps;
  }
  template <class St, class P>
  auto attention_step(const St& st, P& p) const {
    auto o = attend(st);
    auto x = add_residual(st.residual, self().update(o, st.tap.member));
    p.*st.tap.member = self().tap(std::move(o));
    return x;
  }
  template <class St, class P>
  void ffn_step(const St& st, P& p) const {
    std::optional<typename St::Value> store;
    auto o = self().ffn(st.module, input(st.input, store));
    auto out = add_residual(st.residual, self().update(o, st.tap.member));
    p.*st.tap.member = self().tap(std::move(o));
    p.*st.out.member = self().tap(std::move(out));
  }

 private:
  const A& self() const { return static_cast<const A&>(*this); }

  template <class M>
  auto mod(const M& m) const {
    return m.ts ? self().ada(*m.table, m.row, *m.ts, m.ts_row) : self().table_row(*m.table, m.row);
  }
  // The input's value, computed into `store` unless it is x as it is.
  template <class I, class V>
  const V& input(const I& in, std::optional<V>& store) const {
    switch (in.prep) {
      case Prep::none:
        return *in.x;
      case Prep::modulate:
        return store.emplace(self().modulate(*in.x, mod(in.scale), mod(in.shift)));
      case Prep::ada_zero:
        break;
    }
    return store.emplace(self().ada_zero(*in.x, mod(in.scale), mod(in.shift)));
  }
  template <class St>
  auto attend(const St& st) const {
    std::optional<typename St::Value> qs, ks;
    const auto& q = input(st.query, qs);
    return self().attention(st.module, q, st.keys ? input(*st.keys, ks) : q, st.q_rope, st.k_rope);
  }
  template <class R, class Y>
  auto add_residual(const R& r, const Y& y) const {
    return r.gate ? self().gated_residual(*r.x, y, mod(*r.gate)) : self().residual(*r.x, y);
  }
};

}  // namespace psi::model::block_order
