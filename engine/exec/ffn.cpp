// The hidden-channel-tiled feed-forward network (ops/ffn.h's partitioned form) on one token
// row tile, as arena kernels, in its two schedules:
//   recompute: for each output group, every hidden tile is computed again and applied at once;
//   reuse:     each hidden tile [row tile, hidden tile] is computed once and journaled (BF16,
//              role ffn.h, one journal tile per (row tile, hidden tile)), then reloaded for
//              every output group.
// Layout: the biases and the hidden tile are workspace temporaries (the hidden tile on top, at
// the same offset in both phases, so an async journal keeps a single tile resident); the
// output group's float32 accumulator [row tile, group] is live in scratch while the hidden
// tiles are applied.
#include <algorithm>

#include "engine/exec/operators.h"

namespace psi::exec {

namespace {

struct Ctx {
  Driver& d;
  const FfnSpec& s;
  ArenaMat x, y;
  rt::DeviceRegion up_bias, down_bias;  // empty when absent

  std::int64_t h0(std::int64_t t) const { return t * s.geometry.hidden_tile; }
  std::int64_t nh(std::int64_t t) const { return std::min(s.geometry.hidden_tile, s.hidden - h0(t)); }
  std::int64_t o0(std::int64_t o) const { return o * s.geometry.out_group; }
  std::int64_t no(std::int64_t o) const { return std::min(s.geometry.out_group, y.cols - o0(o)); }

  // H = bf(gelu(x · W1[tile t]ᵀ + b1[tile t])): one weight tile, as ops::ffn's hidden_tile().
  void up(std::int64_t t, const ArenaMat& H) const {
    const std::int64_t start = h0(t), n = nh(t), D = x.cols;
    const int p = d.weight({s.up_weight, {start, start + n, 0, D}, s.op + ".up", int(t)});
    const rt::DeviceRegion page = d.page(p);
    const bool has_bias = !s.up_bias.empty();
    const rt::DeviceRegion bias = up_bias;
    const psi::BiasRule rule = s.up_rule;
    const ops::Product product = s.product;
    const ArenaMat X = x;
    rt::Accesses acc = {rt::reads(page), rt::reads(X.region), rt::writes(H.region)};
    if (has_bias) acc.push_back(rt::reads(bias));
    d.launch(s.op + ".up tile " + std::to_string(t), acc, [=, hidden = s.hidden](const rt::KernelContext& k) {
      const rt::MatRef b = ref(bias, 1, hidden).block(0, 1, start, n);
      k.ops->linear(k, ref(X), ref(page, n, D), has_bias ? &b : nullptr, rule, ref(H), product);
      k.ops->gelu_tanh(k, ref(H));
    });
    d.release(p);
  }

  // acc += H · W2[group o, hidden tile t]ᵀ in the ordered K chunks of gemm.h (or the
  // tensor-core chain, continued across hidden tiles).
  void down(std::int64_t o, std::int64_t t, const ArenaMat& H, const rt::DeviceRegion& acc) const {
    const std::int64_t r0 = o0(o), nr = no(o), c0 = h0(t), nc = nh(t), M = x.rows;
    const int tile = int(o * s.geometry.n_hidden + t);
    const int p = d.weight({s.down_weight, {r0, r0 + nr, c0, c0 + nc}, s.op + ".down", tile});
    const rt::DeviceRegion page = d.page(p);
    d.launch(s.op + ".down tile " + std::to_string(tile),
             {rt::reads(page), rt::reads(H.region), rt::reads(acc), rt::writes(acc)},
             [=, product = s.product](const rt::KernelContext& k) {
               k.ops->gemm_accumulate(k, ref(H), ref(page, nr, nc), ref(acc, M, nr), product);
             });
    d.release(p);
  }

  // y[:, group o] = bf(acc + b2) (psi::finish_linear, the bias added once at the end).
  void finish(std::int64_t o, const rt::DeviceRegion& acc) const {
    const std::int64_t start = o0(o), n = no(o), M = x.rows, Dout = y.cols;
    const bool has_bias = !s.down_bias.empty();
    const rt::DeviceRegion bias = down_bias;
    const ArenaMat Y = y;
    rt::Accesses a = {rt::reads(acc), rt::writes(Y.region)};
    if (has_bias) a.push_back(rt::reads(bias));
    d.launch(s.op + ".down finish group " + std::to_string(o), a, [=](const rt::KernelContext& k) {
      const rt::MatRef b = ref(bias, 1, Dout).block(0, 1, start, n);
      k.ops->finish_linear(k, ref(acc, M, n), has_bias ? &b : nullptr, ref(Y).block(0, M, start, n));
    });
  }

  rt::DeviceRegion zeroed_accumulator(Frame& f, std::int64_t o) const {
    const std::int64_t M = x.rows, n = no(o);
    const rt::DeviceRegion acc =
        f.alloc(Pool::scratch, std::uint64_t(M * n) * sizeof(float), s.op + ".down", int(o), "accumulator");
    d.launch(s.op + ".down zero group " + std::to_string(o), {rt::writes(acc)},
             [=](const rt::KernelContext& k) { k.ops->zero_f32(k, ref(acc, M, n)); });
    return acc;
  }

  rt::JournalKey key(std::int64_t t) const {
    rt::JournalKey k = s.hidden_key;
    k.tile += int(t);
    return k;
  }

  ArenaMat hidden_tile(Frame& f, std::int64_t t) const {
    ArenaMat H{{}, x.rows, nh(t)};
    H.region = f.alloc(Pool::workspace, H.bytes_bf16(), s.op + ".up", key(t).tile, "hidden");
    return H;
  }
};

}  // namespace

void ffn(Driver& d, const FfnSpec& s, const ArenaMat& x, const ArenaMat& y) {
  Frame f(d);
  Ctx c{d, s, x, y, {}, {}};
  if (!s.up_bias.empty()) {
    c.up_bias = f.alloc(Pool::workspace, std::uint64_t(s.hidden) * 2, s.op + ".up", -1, "bias");
    stage_vector(d, s.op + ".up", s.up_bias, s.hidden, c.up_bias);
  }
  if (!s.down_bias.empty()) {
    c.down_bias = f.alloc(Pool::workspace, std::uint64_t(y.cols) * 2, s.op + ".down", -1, "bias");
    stage_vector(d, s.op + ".down", s.down_bias, y.cols, c.down_bias);
  }
  const FfnGeometry& g = s.geometry;
  if (s.schedule == ops::FfnSchedule::reuse) {
    for (std::int64_t t = 0; t < g.n_hidden; ++t) {
      Frame ft(d);
      const ArenaMat H = c.hidden_tile(ft, t);
      c.up(t, H);
      d.commit(c.key(t), H.region, H.shape());
    }
    for (std::int64_t o = 0; o < g.n_out; ++o) {
      Frame fo(d);
      const rt::DeviceRegion acc = c.zeroed_accumulator(fo, o);
      for (std::int64_t t = 0; t < g.n_hidden; ++t) {
        Frame ft(d);
        const ArenaMat H = c.hidden_tile(ft, t);
        d.reload(c.key(t), H.region);
        c.down(o, t, H, acc);
      }
      c.finish(o, acc);
    }
    return;
  }
  for (std::int64_t o = 0; o < g.n_out; ++o) {
    Frame fo(d);
    const rt::DeviceRegion acc = c.zeroed_accumulator(fo, o);
    for (std::int64_t t = 0; t < g.n_hidden; ++t) {
      Frame ft(d);
      const ArenaMat H = c.hidden_tile(ft, t);
      c.up(t, H);
      c.down(o, t, H, acc);
    }
    c.finish(o, acc);
  }
}

}  // namespace psi::exec
