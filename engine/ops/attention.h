#pragma once
// Scaled dot-product attention over heads split along the channel axis (head h owns columns
// [h·d, (h+1)·d)), no causal mask, scale 1/√d. Two forms:
//
// MATH (dense path; PyTorch's SDPA MATH backend, spec §7): q and k widened to float32 and each
// multiplied by c = f32(√(1/√d)); scores S = (c·q)(c·k)ᵀ as a float32 GEMM; optional additive
// mask; safe softmax p = exp(s − max) / Σ exp(s − max) in float32 (a fully masked row gives
// zeros); O = P·V as a float32 GEMM; one BF16 write.
//
// ONLINE (the PSI partitioned form, FlashAttention-style): the same scores, visited in key
// tiles of `key_tile` keys. Per query row and head, with running max m (from −∞), running sum
// l (from 0) and float32 accumulator o (from 0), for each tile in key order:
//   m' = max(m, max_j s_j);  α = exp(m − m');  p_j = exp(s_j − m')
//   l  = l·α + Σ_j p_j           (tile sum of the float32 p_j in the reduce.h order)
//   o  = o·α, then o += P_j · v_j for j in key order, P_j = bf(p_j) (p_bf16) or p_j
// and finally out = bf(o / l) (0 when every key was masked). With p_bf16 this is the paper's
// baseline (BF16 numerator weights, float32 normalizer, as FlashAttention kernels do); without
// it, float32 throughout.
//
// All sums (score dots, softmax sums, P·V in the MATH form) follow reduce.h.
//
// MATH with core = h200_math is instead the official MATH core as the H200 computed it
// (attention_math.h): float32 FMA-chain GEMMs, PyTorch's warp softmax with libdevice expf,
// bitwise the recorded official attention core; core = h200_flash is the official FLASH core,
// FlashAttention-2's forward as the H200 computed it (attention_flash.h), bitwise the recorded
// FLASH attention. Both take whole tensors, as MATH does.
//
// The online form is also exposed in pieces (sdpa_online_begin / _update / _end) for callers
// that hold the running state themselves and see the keys a block at a time (the PSI executor
// streams key tiles from its journal). ops::sdpa's online form is exactly begin, one update
// over all keys, end, so the two agree bit for bit whenever the caller's key blocks start at
// multiples of key_tile.
#include <cstdint>

#include "engine/matrix.h"
#include "engine/official/kernel_config.h"

namespace psi::ops {

enum class SoftmaxForm { math, online };

// The whole-tensor form's arithmetic: psi's MATH (reduce.h sums, std::exp), or one of the two
// official cores as the H200 computes them: SDPA MATH (attention_math.h) or SDPA FLASH
// (attention_flash.h). A field of its own rather than more SoftmaxForms: every one of them runs
// on whole tensors, which is what a caller asking for the form (math or online) wants to know.
// h200_math_to_flash: the MATH core with FLASH's first flash_steps steps (math_to_flash.h).
enum class AttentionCore { psi_f32, h200_math, h200_flash, h200_math_to_flash };

struct SdpaOptions {
  SoftmaxForm form = SoftmaxForm::math;
  AttentionCore core = AttentionCore::psi_f32;  // math form only
  int flash_steps = 0;                          // core h200_math_to_flash only
  // core h200_math only: the K splits of its two products (official/kernel_config.h); null: the
  // recorded choices.
  official::KernelConfigRef kernels;
  std::int64_t key_tile = 128;  // online only; any positive size, the last tile may be shorter
  bool p_bf16 = true;           // online only
  // Additive float32 mask [Nq, Nk] shared by all heads, or null. −∞ masks.
  const float* mask = nullptr;
  std::int64_t mask_ld = 0;  // the mask's row stride; 0: the key count Nk
};

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d].
void sdpa(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
          Bf16Mat out);

// The online form's running state for a block of query rows, held by the caller: per row and
// head the running max m and sum l, and the float32 accumulator o (heads merged).
struct OnlineState {
  F32Mat m;  // [rows, heads]
  F32Mat l;  // [rows, heads]
  F32Mat o;  // [rows, heads·d]
};

// m = −∞, l = 0, o = 0.
void sdpa_online_begin(OnlineState s);
// Visits the keys k, v [nk, H·d] — the next nk keys of the sequence — for the query rows q
// [rows, H·d], in tiles of opt.key_tile keys starting at k's first row, updating s as above.
// Successive calls continue the key order, so a key sequence fed in blocks that start at
// multiples of key_tile gives the one-call state bit for bit. opt.mask, when set, points at the
// entry of (q row 0, k row 0), rows opt.mask_ld apart (0: nk).
void sdpa_online_update(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
                        OnlineState s);
// out = bf(o / l) per head (0 where every key was masked). out may be q's storage.
void sdpa_online_end(OnlineState s, Bf16Mat out);


// psi's MATH softmax of one float32 score row s[0, n) in place: max, std::exp(s − max), the
// reduce.h sum, s / sum; a row of −∞ gives zeros (safe softmax).
void math_softmax_row(float* s, std::int64_t n);

}  // namespace psi::ops
