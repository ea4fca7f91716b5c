#pragma once
// The partitioned operators of a PSI block, written against the Driver (so the same code plans
// and runs). Each streams its weights through the pages, keeps its live tensors in scratch and
// its temporaries in workspace, declares every arena access of every kernel, and computes with
// the engine/ops functions on tiles whose results are provably those of the whole tensor:
//
//  * linear: ops::linear on (x, a row tile of W) writes the tile's output columns. An output
//    element depends only on its row of x, its row of W and K (gemm.h), so the tiles add up to
//    the whole product bit for bit.
//  * ffn: hidden tiles of min(1024, hidden) channels (ops::linear + ops::gelu_tanh per tile, as
//    ops::ffn does); the down-projection of an output group accumulates the K slices at the
//    hidden-tile boundaries (multiples of 1,024) in order with ops::gemm_accumulate into a
//    float32 accumulator and finishes with ops::finish_linear — gemm.h's K-split identity.
//  * rms_norm: ops::rms_norm over full rows; modulate, ada_value, gated_residual, residual,
//    split RoPE, sigmoid, GELU: the ops functions themselves on the whole operand.
//  * attention: whole q, k, v of a stream in scratch and ops::sdpa on them (MATH or online, as
//    the variant says), exactly as model::attention_forward calls it.
#include <cstdint>
#include <string>

#include "engine/ops/attention.h"
#include "engine/ops/ffn.h"
#include "engine/ops/gemm.h"
#include "engine/psi/driver.h"
#include "engine/psi/tiling.h"
#include "engine/psi/views.h"

namespace psi::exec {

// A [rows, cols] BF16 tensor allocated in a frame.
ArenaMat alloc_mat(Frame& f, Pool pool, std::int64_t rows, std::int64_t cols, const std::string& op,
                   const std::string& name);
// The same, filled from the journal.
ArenaMat reload_mat(Driver& d, Frame& f, const rt::JournalKey& key, std::int64_t rows, std::int64_t cols,
                    const std::string& op, const std::string& name);

// Copies a whole 1-D parameter (a bias) of n values through a page into dst, where it stays
// for the operator that uses it.
void stage_vector(Driver& d, const std::string& op, const std::string& tensor, std::int64_t n,
                  const rt::DeviceRegion& dst);

struct LinearSpec {
  std::string op;      // names kernels, tiles and allocations: "video.attn1.to_q"
  std::string weight;  // [out, in]
  std::string bias;    // [out]; empty when the layer has none
  ops::BiasRule rule = ops::BiasRule::fused_f32;
};
// y [M, out] = x [M, in] · Wᵀ (+ b).
void linear(Driver& d, const LinearSpec& s, const ArenaMat& x, const ArenaMat& y);

// y = rms_norm(x) over full rows, weightless (empty `weight`) or with the learned weight
// streamed through a page. y may be x.
void rms_norm(Driver& d, const std::string& op, const ArenaMat& x, const std::string& weight, float eps,
              const ArenaMat& y);

// dst [Ts, D] = bf(table[row] + S) with S the journal's [Ts, D] timestep row `ts`.
void ada_value(Driver& d, const std::string& op, const std::string& table, int row, const rt::JournalKey& ts,
               const ArenaMat& dst);
// dst [1, D] = table[row] (a prompt table used without a prompt timestep).
void table_row(Driver& d, const std::string& op, const std::string& table, int row, const ArenaMat& dst);
// y = bf( bf(x · bf(1 + scale)) + shift ); y may be x.
void modulate(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              const ArenaMat& y);
// y = modulate(rms_norm(x), scale, shift) (ops::ada_zero); y must not be x.
void ada_zero(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& scale, const ArenaMat& shift,
              float eps, const ArenaMat& y);
// x = bf(x + bf(y · g)) in place.
void gated_residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y, const ArenaMat& g);
// x = bf(x + y) in place.
void residual(Driver& d, const std::string& op, const ArenaMat& x, const ArenaMat& y);

struct AttentionSpec {
  std::string op;      // "video.attn1"
  std::string module;  // checkpoint prefix, "transformer_blocks.0.attn1."
  std::int64_t heads = 0, head_dim = 0;
  bool gated = false;
  ops::SdpaOptions sdpa;
  float eps = 1e-6f;
};
// A RoPE table pair [1, H, T, half] in the journal.
struct RopeKeys {
  rt::JournalKey cos, sin;
  Shape shape;
};
// out [Nq, Dq] = the attention module (spec §3.2) of queries from xq [Nq, Dq] and keys/values
// from xc [Nk, Dc]; null tables: no RoPE on that side.
void attention(Driver& d, const AttentionSpec& s, const ArenaMat& xq, const ArenaMat& xc, const RopeKeys* q_rope,
               const RopeKeys* k_rope, const ArenaMat& out);

struct FfnSpec {
  std::string op;  // "video.ffn"
  std::string up_weight, up_bias, down_weight, down_bias;  // biases empty when absent
  std::int64_t hidden = 0;
  ops::BiasRule up_rule = ops::BiasRule::fused_f32;
  ops::FfnSchedule schedule = ops::FfnSchedule::reuse;  // recompute or reuse
  FfnGeometry geometry;
  rt::JournalKey hidden_key;  // reuse: hidden tile t is journaled under this key with tile t
};
// y [M, Dout] = W2 · gelu(W1 · x + b1) + b2 for x [M, D].
void ffn(Driver& d, const FfnSpec& s, const ArenaMat& x, const ArenaMat& y);

}  // namespace psi::exec
