// The attention module (spec §3.2) on token row tiles: keys and values projected per key row
// tile and journaled in pieces; per query row tile the projection, full-row q norm (norm.cpp)
// and split RoPE (rope.cpp), then the key blocks streamed back from the journal into the online
// softmax's running state, the per-head gate and the output projection.
#include <algorithm>

#include "engine/exec/operators.h"
#include "engine/model/block_catalogue.h"

namespace psi::exec {

namespace {

// a[r, head h] = bf(a · g) with g = bf(2 · bf(sigmoid(z[r, h]))), as model::attention_forward
// gates each head (spec §3.2 step 6); z is made bf(sigmoid(z)) in place first.
void apply_gate(Driver& d, const std::string& op, const ArenaMat& z, const ArenaMat& a, std::int64_t heads,
                std::int64_t head_dim) {
  d.launch(op, {rt::reads(z.region), rt::writes(z.region), rt::reads(a.region), rt::writes(a.region)},
           [=](const rt::KernelContext& k) { k.ops->attention_gate(k, ref(z), ref(a), heads, head_dim); });
}

// The module's Linear `layer` (checkpoint names from the block catalogue), run as op s.op.op.
LinearSpec layer_spec(const AttentionSpec& s, const char* op, const char* layer) {
  return {s.op + "." + op, s.module + model::weight_of(layer), s.module + model::bias_of(layer),
          psi::BiasRule::fused_f32, s.product};
}

std::uint64_t bf16_bytes(std::int64_t rows, std::int64_t cols) { return std::uint64_t(rows * cols) * 2; }

rt::JournalKey piece_key(rt::JournalKey k, std::int64_t piece) {
  k.tile = int(piece);
  return k;
}

// Reloads the pieces holding key rows [row0, row0 + m.rows) of `key` into m.
void reload_keys(Driver& d, const rt::JournalKey& key, const KeyStore& store, std::int64_t row0, const ArenaMat& m) {
  const RowTiles pieces{store.keys, store.piece};
  for (std::int64_t p = row0 / store.piece; p < pieces.count() && pieces.start(p) < row0 + m.rows; ++p)
    d.reload(piece_key(key, p),
             m.region.sub(bf16_bytes(pieces.start(p) - row0, m.cols), bf16_bytes(pieces.rows(p), m.cols), m.region.name));
}

// Commits rows of m (key rows [row0, row0 + m.rows)) piece by piece.
void commit_keys(Driver& d, const rt::JournalKey& key, const KeyStore& store, std::int64_t row0, const ArenaMat& m) {
  const RowTiles pieces{store.keys, store.piece};
  for (std::int64_t p = row0 / store.piece; p < pieces.count() && pieces.start(p) < row0 + m.rows; ++p) {
    const std::int64_t n = pieces.rows(p);
    d.commit(piece_key(key, p), m.region.sub(bf16_bytes(pieces.start(p) - row0, m.cols), bf16_bytes(n, m.cols), m.region.name),
             {n, m.cols});
  }
}

}  // namespace

void project_keys(Driver& d, const AttentionSpec& s, const KeyStore& store, std::int64_t row0, std::int64_t rows,
                  int tile, const MakeInput& make_xc, const RopeKeys* k_rope) {
  const std::int64_t inner = s.heads * s.head_dim;
  const std::string& m = s.module;
  const std::string op = s.op + ".keys";
  namespace layer = model::layer;
  Frame f(d);
  const ArenaMat xc = make_xc(f);
  {
    Frame g(d);
    const ArenaMat k = alloc_mat(g, Pool::scratch, rows, inner, op, "k", tile);
    linear(d, layer_spec(s, "to_k", layer::to_k), xc, k);
    rms_norm(d, s.op + ".k_norm", k, m + model::weight_of(layer::k_norm), s.eps, k, s.norm);
    if (k_rope) rope(d, s.op + ".k_rope", k, *k_rope, tile);
    commit_keys(d, store.k, store, row0, k);
  }
  Frame g(d);
  const ArenaMat v = alloc_mat(g, Pool::scratch, rows, inner, op, "v", tile);
  linear(d, layer_spec(s, "to_v", layer::to_v), xc, v);
  commit_keys(d, store.v, store, row0, v);
}

ArenaMat attend(Driver& d, Frame& f, const AttentionSpec& s, std::int64_t rows, std::int64_t out_cols, int tile,
                const MakeInput& make_xq, const RopeKeys* q_rope, const KeyStore& store) {
  const std::int64_t heads = s.heads, inner = heads * s.head_dim;
  const std::string& m = s.module;
  namespace layer = model::layer;
  const bool online = s.sdpa.form == ops::SoftmaxForm::online;
  ArenaMat z;
  if (s.gated) z = alloc_mat(f, Pool::scratch, rows, heads, s.op, "gate logits", tile);
  const ArenaMat q = alloc_mat(f, Pool::scratch, rows, inner, s.op, "q", tile);
  {
    Frame g(d);
    const ArenaMat xq = make_xq(g);
    linear(d, layer_spec(s, "to_q", layer::to_q), xq, q);
    if (s.gated) linear(d, layer_spec(s, "to_gate_logits", layer::to_gate_logits), xq, z);
  }
  rms_norm(d, s.op + ".q_norm", q, m + model::weight_of(layer::q_norm), s.eps, q, s.norm);
  if (q_rope) rope(d, s.op + ".q_rope", q, *q_rope, tile);
  const ops::SdpaOptions opt = s.sdpa;
  const std::string sdpa = s.op + ".sdpa tile " + std::to_string(tile);
  // Online: the tile's output is written over q once the last key block has been seen.
  const ArenaMat a = online ? q : alloc_mat(f, Pool::scratch, rows, inner, s.op, "sdpa out", tile);
  if (online) {
    Frame g(d);
    const rt::DeviceRegion o =
        g.alloc(Pool::scratch, std::uint64_t(rows * inner) * sizeof(float), s.op, tile, "softmax accumulator");
    const rt::DeviceRegion mx =
        g.alloc(Pool::scratch, std::uint64_t(rows * heads) * sizeof(float), s.op, tile, "softmax max");
    const rt::DeviceRegion sum =
        g.alloc(Pool::scratch, std::uint64_t(rows * heads) * sizeof(float), s.op, tile, "softmax sum");
    const rt::OnlineRef state{ref(mx, rows, heads), ref(sum, rows, heads), ref(o, rows, inner)};
    d.launch(sdpa + " begin", {rt::writes(o), rt::writes(mx), rt::writes(sum)},
             [=](const rt::KernelContext& k) { k.ops->sdpa_online_begin(k, state); });
    const std::int64_t block = opt.key_tile;
    for (std::int64_t j0 = 0; j0 < store.keys; j0 += block) {
      const std::int64_t nk = std::min(block, store.keys - j0);
      Frame kb(d);
      const ArenaMat kt = alloc_mat(kb, Pool::scratch, nk, inner, s.op, "key block k", tile);
      const ArenaMat vt = alloc_mat(kb, Pool::scratch, nk, inner, s.op, "key block v", tile);
      reload_keys(d, store.k, store, j0, kt);
      reload_keys(d, store.v, store, j0, vt);
      d.launch(sdpa + " keys " + std::to_string(j0),
               {rt::reads(q.region), rt::reads(kt.region), rt::reads(vt.region), rt::reads(o), rt::writes(o),
                rt::reads(mx), rt::writes(mx), rt::reads(sum), rt::writes(sum)},
               [=](const rt::KernelContext& k) {
                 k.ops->sdpa_online_update(k, ref(q), ref(kt), ref(vt), heads, opt, state);
               });
    }
    d.launch(sdpa + " end", {rt::reads(o), rt::reads(sum), rt::reads(mx), rt::writes(a.region)},
             [=](const rt::KernelContext& k) { k.ops->sdpa_online_end(k, state, ref(a)); });
  } else {
    Frame g(d);
    const ArenaMat kt = alloc_mat(g, Pool::scratch, store.keys, inner, s.op, "k", tile);
    const ArenaMat vt = alloc_mat(g, Pool::scratch, store.keys, inner, s.op, "v", tile);
    reload_keys(d, store.k, store, 0, kt);
    reload_keys(d, store.v, store, 0, vt);
    d.launch(sdpa, {rt::reads(q.region), rt::reads(kt.region), rt::reads(vt.region), rt::writes(a.region)},
             [=](const rt::KernelContext& k) { k.ops->sdpa(k, ref(q), ref(kt), ref(vt), heads, opt, ref(a)); });
  }
  if (s.gated) apply_gate(d, s.op + ".gate", z, a, heads, s.head_dim);
  const ArenaMat out = alloc_mat(f, Pool::scratch, rows, out_cols, s.op, "out", tile);
  linear(d, layer_spec(s, "to_out", layer::to_out), a, out);
  return out;
}

}  // namespace psi::exec
