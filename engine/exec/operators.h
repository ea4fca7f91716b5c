#pragma once
// The partitioned operators of a PSI block, written against the Driver (so the same code plans
// and runs). Each streams its weights through the pages, keeps the tiles it works on in
// scratch and its temporaries in workspace, declares every arena access of every kernel, and
// computes through the backend's OpKernels (backend/op_kernels.h: engine/ops on the CPU) on
// tiles whose results are provably those of the whole tensor (the proofs below are about the
// CPU arithmetic; the CUDA kernels' relation to it is in docs/cuda-backend.md):
//
//  * every per-token operator runs on a token row tile: an output row depends only on its own
//    input row (Linear: gemm.h's order depends only on K; RMS norms are full-row; modulation,
//    RoPE, gates and residual adds are elementwise per token), so row tiles are exact;
//  * linear: ops::linear on (x, a row tile of W) writes the tile's output columns, which add
//    up to the whole product bit for bit (an output element depends on its row of x, its row of
//    W and K);
//  * ffn: hidden tiles of min(1024, hidden) channels (ops::linear + ops::gelu_tanh per tile, as
//    ops::ffn does); the down-projection of an output group accumulates the K slices at the
//    hidden-tile boundaries (multiples of 1,024) in order with ops::gemm_accumulate into a
//    float32 accumulator and finishes with psi::finish_linear — gemm.h's K-split identity;
//  * attention: k and v are projected per key row tile and journaled in pieces; each query
//    row tile streams them back a key block at a time through ops::sdpa_online_update with
//    its running state (max, sum, accumulator) in scratch — the very function ops::sdpa's
//    online form runs, fed key blocks that start at multiples of the variant's key tile, so the
//    state is the one-call state bit for bit. MATH attention (the dense variant) needs whole
//    score rows: its query tiles see every key at once (ops::sdpa on the query tile, whole
//    k and v), exact because every MATH output row depends only on its own query row.
#include <cstdint>
#include <functional>
#include <string>

#include "engine/exec/driver.h"
#include "engine/exec/tiling.h"
#include "engine/exec/views.h"
#include "engine/ops/attention.h"
#include "engine/ops/ffn.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"

namespace psi::exec {

// One family, one name: each group below is defined in the psi/ file named after its engine/ops
// family (operators.cpp: the shared helpers; gemm.cpp, norm.cpp, adaln.cpp, rope.cpp,
// attention.cpp, ffn.cpp), as the backends' kernels are (docs/psi-executor.md).

// ---- shared helpers (operators.cpp) ----

// A [rows, cols] BF16 tensor allocated in a frame (tile: the row tile, for messages; -1: none).
ArenaMat alloc_mat(Frame& f, Pool pool, std::int64_t rows, std::int64_t cols, const std::string& op,
                   const std::string& name, int tile = -1);
// The same, filled from the journal.
ArenaMat reload_mat(Driver& d, Frame& f, const rt::JournalKey& key, std::int64_t rows, std::int64_t cols,
                    const std::string& op, const std::string& name, int tile = -1);

// Copies a whole 1-D parameter (a bias) of n values through a page into dst, where it stays
// for the operator that uses it.
void stage_vector(Driver& d, const std::string& op, const std::string& tensor, std::int64_t n,
                  const rt::DeviceRegion& dst);

// ---- gemm (gemm.cpp) ----

struct LinearSpec {
  std::string op;      // names kernels, tiles and allocations: "video.attn1.to_q"
  std::string weight;  // [out, in]
  std::string bias;    // [out]; empty when the layer has none
  psi::BiasRule rule = psi::BiasRule::fused_f32;
  ops::Product product = ops::Product::psi_f32;  // the accumulator's arithmetic (the variant's)
};
// y [M, out] = x [M, in] · Wᵀ (+ b).
void linear(Driver& d, const LinearSpec& s, const ArenaMat& x, const ArenaMat& y);

// ---- norm (norm.cpp) ----

// y = rms_norm(x) over full rows in `norm`'s arithmetic, weightless (empty `weight`) or with the
// learned weight streamed through a page. y may be x.
void rms_norm(Driver& d, const std::string& op, const ArenaMat& x, const std::string& weight, float eps,
              const ArenaMat& y, ops::NormKernel norm);

// ---- adaln (adaln.cpp) ----

// dst [Ts, D] = bf(table[row] + S) with S the journal's [Ts, D] timestep tile `ts`, reloaded
// into dst and the table row added in place.
void ada_value(Driver& d, const std::string& op, const std::string& table, int row, const rt::JournalKey& ts,
               const ArenaMat& dst);
// dst [1, D] = table[row] (a prompt table used without a prompt timestep).
void table_row(Driver& d, const std::string& op, const std::string& table, int row, const ArenaMat& dst);
// y = bf( bf(x · bf(1 + scale)) + shift ); y may be x.
void modulate(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              const ArenaMat& y);
// y = modulate(rms_norm(x), scale, shift) (ops::ada_zero); y may be x.
void ada_zero(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              float eps, const ArenaMat& y, ops::NormKernel norm);
// x = bf(x + bf(y · g)) in place.
void gated_residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y, const ArenaMat& g);
// x = bf(x + y) in place.
void residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y);

// ---- rope (rope.cpp) ----

// One row tile's RoPE tables [1, H, rows, half] in the journal.
struct RopeKeys {
  rt::JournalKey cos, sin;
  Shape shape;
};
// x [rows, H·d] <- split RoPE (ops::apply_split_rope) in place, the tables reloaded into scratch.
void rope(Driver& d, const std::string& op, const ArenaMat& x, const RopeKeys& keys, int tile);

// ---- attention (attention.cpp) ----

struct AttentionSpec {
  std::string op;      // "video.attn1"
  std::string module;  // checkpoint prefix, "transformer_blocks.0.attn1."
  std::int64_t heads = 0, head_dim = 0;
  bool gated = false;
  ops::SdpaOptions sdpa;
  float eps = 1e-6f;
  ops::Product product = ops::Product::psi_f32;  // its Linears' arithmetic
  ops::NormKernel norm = ops::NormKernel::psi_f32;  // its q/k norms' arithmetic
};

// The keys and values of one attention module in the journal: k and v [keys, H·d] in pieces of
// `piece` rows (journal tile = piece index; the last piece may be shorter).
struct KeyStore {
  rt::JournalKey k, v;
  std::int64_t keys = 0, piece = 0;
};

// Allocates and fills one row tile of an attention input (the query side or the key side) in
// the frame it is given; the frame closes once the projections have read it.
using MakeInput = std::function<ArenaMat(Frame&)>;

// k = rope(k_norm(to_k(xc))), v = to_v(xc) of key rows [row0, row0 + rows) (row0 a multiple of
// the piece, rows too unless they end the keys), committed to `store` piece by piece. No RoPE
// when k_rope is null.
void project_keys(Driver& d, const AttentionSpec& s, const KeyStore& store, std::int64_t row0, std::int64_t rows,
                  int tile, const MakeInput& make_xc, const RopeKeys* k_rope);

// The attention module's output [rows, out_cols] for one query row tile (spec §3.2: q from the
// query-side input, attention over every key of `store`, the per-head gate from the same input,
// to_out), allocated in f above the tile's gated attention output and gate logits.
ArenaMat attend(Driver& d, Frame& f, const AttentionSpec& s, std::int64_t rows, std::int64_t out_cols, int tile,
                const MakeInput& make_xq, const RopeKeys* q_rope, const KeyStore& store);

// ---- ffn (ffn.cpp) ----

struct FfnSpec {
  std::string op;  // "video.ff"
  std::string up_weight, up_bias, down_weight, down_bias;  // biases empty when absent
  std::int64_t hidden = 0;
  psi::BiasRule up_rule = psi::BiasRule::fused_f32;
  ops::Product product = ops::Product::psi_f32;  // both projections' arithmetic
  ops::FfnSchedule schedule = ops::FfnSchedule::reuse;  // recompute or reuse
  FfnGeometry geometry;
  // reuse: hidden tile t of this row tile is journaled under hidden_key with tile
  // hidden_key.tile + t.
  rt::JournalKey hidden_key;
};
// y [M, Dout] = W2 · gelu(W1 · x + b1) + b2 for one row tile x [M, D].
void ffn(Driver& d, const FfnSpec& s, const ArenaMat& x, const ArenaMat& y);

}  // namespace psi::exec
