#pragma once
// The SDPA FLASH attention core as PyTorch 2.11 computed it on the H200: its bundled
// FlashAttention-2 forward (aten/src/ATen/native/transformers/cuda/flash_attn/), BF16, no mask,
// no dropout, batch 1 (../shared/spec/h200-tensor-core-gemm.md, "The SDPA FLASH attention core";
// docs/official-kernels.md names the source of every step). Bitwise the recorded FLASH
// sdpa_out of the audio self-attention probe and every FLASH probe of the small blocks.
//
// Which kernel runs (flash_api.cpp, mha_fwd → set_params_splitkv with num_splits = 0):
//   splits = num_splits_heuristic(heads · ⌈Nq/64⌉, 2 · 132 SMs, ⌈Nk/bn⌉, 128), bn = 256 for
//   head dim ≤ 64, else 128. One split: the plain kernel (flash_fwd_kernel.h,
//   compute_attn_1rowblock), key tiles of 128 (head dim 64) or 64 (128) keys. More: the split-KV
//   kernel (compute_attn_1rowblock_splitkv), tiles of bn keys, ⌈tiles/splits⌉ tiles a split,
//   then the combine kernel (combine_attn_seqk_parallel).
//
// One query row and head of width d, over the tiles of one split (the plain kernel: all), visited
// from the last to the first:
//   S_j   = the tensor-core chain (tensor_core.h) of q and k_j over d, from +0; keys past the
//           end −∞ (mask.h)
//   m     = the running row max (exact); c = f32(f64(f32(1/√d)) · log2 e)
//   later tiles: s = ex2(f32(f32(m_prev − m) · c)), every O element ·= s (FP32), and each
//           thread's sum is continued by fma(sum, s, p_first) (row_sum *= s contracted with the
//           tile's first addition)
//   p_j   = ex2.approx(f32(f32(S_j · c) − f32(m · c)))   (PyTorch's UNFUSE_FMA; nv_expf.h's
//           ex2 model)
//   sums  = four threads q = 0..3 per row, each over columns 8i + 2q, 8i + 2q + 1 (i ascending)
//           in that order from its first value; the row's sum (s0 + s2) + (s1 + s3) at the end
//   O    += bf16(p) · V over the tile's keys: the tensor-core chain continued from O
//   inv   = 1 / sum correctly rounded (1 for a sum of 0 or NaN)
//   plain kernel: out = bf16(f32(O · inv))
//   split: O_s = f32(O · inv), lse_s = fma(m, f32(1/√d), f32(lg2.approx(sum) · ln 2)) (−∞ for
//           a sum of 0 or NaN, and for an empty split, whose O_s is 0)
// The combine, per row (kBlockM = 4 rows a block for d = 128, 8 for 64; K = the next power of
//   two ≥ splits, at least 2; T = min(128 / kBlockM, K) lanes, each holding the splits l·T + t):
//   lse_max = the exact max (0 when −∞); each lane sums expf(lse − lse_max) of its splits in
//   order, the lanes are combined by the xor butterfly (warp_butterfly_sum); lse = f32(logf(sum)
//   + lse_max) with libdevice's logf (nv_logf.h); O = fma(expf(lse_s − lse), O_s, O) over the
//   splits in order from 0; out = bf16(O). expf is libdevice's (nv_expf.h).
#include <cstdint>

#include "engine/matrix.h"

namespace psi::official {

// The kernel PyTorch launches for one FLASH call of `heads` heads of width head_dim.
struct FlashLaunch {
  bool split_kv = false;            // the split-KV kernel and the combine
  std::int64_t block_n = 0;         // keys per tile
  std::int64_t tiles = 0;           // ⌈Nk / block_n⌉
  std::int64_t splits = 1;          // 1: the plain kernel
  std::int64_t tiles_per_split = 0; // ⌈tiles / splits⌉
};

// Head dims 64 and 128 only (the tile shapes for others are not modelled): psi::Error otherwise.
FlashLaunch flash_launch(std::int64_t heads, std::int64_t Nq, std::int64_t Nk, std::int64_t head_dim);

// flash_api.cpp's num_splits_heuristic: one split when the blocks nearly fill the SMs (≥ 0.8 ×);
// else, over the split counts up to min(max_splits, SMs, n_blocks) that do not repeat the
// previous count's blocks per split, the smallest whose last-wave occupancy is ≥ 0.85 × the best.
int flash_num_splits(int batch_heads_mblocks, int num_sms, int num_n_blocks, int max_splits);

// One tile's contribution to a row's four per-thread sums (block_n a multiple of 8, p[0,
// block_n) with 0 for keys past the end): thread q adds columns 8i + 2q, 8i + 2q + 1, i
// ascending; on the first tile visited it starts from its first value, on later ones from
// fma(sum, rescale, first value).
void flash_thread_sums(const float* p, std::int64_t block_n, bool first, float rescale, float sums[4]);
// The row's sum from the four: (s0 + s2) + (s1 + s3), the quad's butterfly.
float flash_row_sum(const float sums[4]);

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d].
void sdpa_flash_h200(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, Bf16Mat out);

}  // namespace psi::official
