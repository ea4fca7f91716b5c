// The attention module (spec §3.2) as arena kernels: streamed projections, full-row q/k norms,
// split RoPE, ops::sdpa on the stream's whole q, k, v, the per-head gate and the output
// projection.
#include "engine/ops/activation.h"
#include "engine/ops/rope.h"
#include "engine/psi/operators.h"

namespace psi::exec {

namespace {

// x [T, H·d] <- split RoPE with the journal's tables, applied in place (ops::apply_split_rope).
void rope(Driver& d, const std::string& op, const ArenaMat& x, const RopeKeys& keys) {
  Frame f(d);
  const std::uint64_t bytes = std::uint64_t(numel(keys.shape)) * 2;
  const rt::DeviceRegion cos = f.alloc(Pool::workspace, bytes, op, -1, "rope cos");
  const rt::DeviceRegion sin = f.alloc(Pool::workspace, bytes, op, -1, "rope sin");
  d.reload(keys.cos, cos);
  d.reload(keys.sin, sin);
  const Shape shape = keys.shape;
  d.launch(op, {rt::reads(cos), rt::reads(sin), rt::reads(x.region), rt::writes(x.region)},
           [=](const rt::KernelContext& k) {
             const ops::RopeTables t{load(k, cos, shape), load(k, sin, shape)};
             ops::apply_split_rope(view<Bf16>(k, x), t);
           });
}

// a[r, head h] = bf(a · g) with g = bf(2 · bf(sigmoid(z[r, h]))), as model::attention_forward
// gates each head (spec §3.2 step 6); z is made bf(sigmoid(z)) in place first.
void apply_gate(Driver& d, const std::string& op, const ArenaMat& z, const ArenaMat& a, std::int64_t heads,
                std::int64_t head_dim) {
  d.launch(op, {rt::reads(z.region), rt::writes(z.region), rt::reads(a.region), rt::writes(a.region)},
           [=](const rt::KernelContext& k) {
             const auto Z = view<Bf16>(k, z);
             const auto A = view<Bf16>(k, a);
             ops::sigmoid(Z.data, Z.data, Z.rows * Z.cols);
             for (std::int64_t r = 0; r < A.rows; ++r)
               for (std::int64_t h = 0; h < heads; ++h) {
                 const float g = bf(2.0f * Z.at(r, h).to_float());
                 Bf16* head = A.row(r) + h * head_dim;
                 for (std::int64_t c = 0; c < head_dim; ++c) head[c] = bf16_rne(head[c].to_float() * g);
               }
           });
}

}  // namespace

void attention(Driver& d, const AttentionSpec& s, const ArenaMat& xq, const ArenaMat& xc, const RopeKeys* q_rope,
               const RopeKeys* k_rope, const ArenaMat& out) {
  const std::int64_t inner = s.heads * s.head_dim, Nq = xq.rows, Nk = xc.rows;
  const std::string& m = s.module;
  Frame f(d);
  const ArenaMat a = alloc_mat(f, Pool::scratch, Nq, inner, s.op, "sdpa out");
  {
    Frame g(d);
    const ArenaMat q = alloc_mat(g, Pool::scratch, Nq, inner, s.op, "q");
    linear(d, {s.op + ".to_q", m + "to_q.weight", m + "to_q.bias"}, xq, q);
    rms_norm(d, s.op + ".q_norm", q, m + "q_norm.weight", s.eps, q);
    if (q_rope) rope(d, s.op + ".q_rope", q, *q_rope);
    const ArenaMat kk = alloc_mat(g, Pool::scratch, Nk, inner, s.op, "k");
    linear(d, {s.op + ".to_k", m + "to_k.weight", m + "to_k.bias"}, xc, kk);
    rms_norm(d, s.op + ".k_norm", kk, m + "k_norm.weight", s.eps, kk);
    if (k_rope) rope(d, s.op + ".k_rope", kk, *k_rope);
    const ArenaMat v = alloc_mat(g, Pool::scratch, Nk, inner, s.op, "v");
    linear(d, {s.op + ".to_v", m + "to_v.weight", m + "to_v.bias"}, xc, v);
    const std::int64_t heads = s.heads;
    const ops::SdpaOptions opt = s.sdpa;
    d.launch(s.op + ".sdpa", {rt::reads(q.region), rt::reads(kk.region), rt::reads(v.region), rt::writes(a.region)},
             [=](const rt::KernelContext& k) {
               ops::sdpa(view<const Bf16>(k, q), view<const Bf16>(k, kk), view<const Bf16>(k, v), heads, opt,
                         view<Bf16>(k, a));
             });
  }
  if (s.gated) {
    Frame g(d);
    const ArenaMat z = alloc_mat(g, Pool::workspace, Nq, s.heads, s.op, "gate logits");
    linear(d, {s.op + ".to_gate_logits", m + "to_gate_logits.weight", m + "to_gate_logits.bias"}, xq, z);
    apply_gate(d, s.op + ".gate", z, a, s.heads, s.head_dim);
  }
  linear(d, {s.op + ".to_out", m + "to_out.0.weight", m + "to_out.0.bias"}, a, out);
}

}  // namespace psi::exec
