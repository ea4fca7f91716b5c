#pragma once
// The official SDPA MATH core (attention_math.h) turned into the official FLASH core
// (attention_flash.h) one step at a time, so that every element where the two official paths
// differ can be put down to the step that makes the difference. Step k replaces MATH's way of
// doing one thing by FLASH's; sdpa_math_to_flash with the first `steps` of them:
//
//   0  (none)          bitwise sdpa_math_h200 (under the recorded kernel choices)
//   1  QK product      FP32 FMA chains over q' = f32(q·f), k' = f32(k·f), f = f32(√(1/√d)) →
//                      the tensor-core chains over the BF16 q and k
//   2  exponent        expf(x − max) of the scaled scores (libdevice) → ex2.approx(f32(f32(S·c)
//                      − f32(max·c))), c = f32(scale · log2 e) (c = f32(log2 e) on MATH's
//                      already scaled scores)
//   3  row-sum order   the warp softmax's lanes and butterfly (the block softmax past 2,048
//                      keys) → four threads over pairs of columns, (s0 + s2) + (s1 + s3)
//   4  reciprocal      P = e / sum before P·V → O · f32(1 / sum) after it (unnormalised P)
//   5  P to BF16       P kept in FP32 → rounded to BF16 before P·V
//   6  PV product      FP32 FMA chains over the keys → the tensor-core chains
//   7  key split       one pass over every key → the kernel PyTorch launches: key tiles with
//                      the online rescale, and the split-KV kernel with its log-sum-exp
//                      combine: bitwise sdpa_flash_h200
//
// Steps 1–6 see every key of a row in one pass (FLASH's column order over one tile as wide as
// the row); step 7 is the FLASH core itself. The order is a choice (P·V on the tensor cores
// needs a BF16 P, so 5 comes before 6), and psi run block-controls attributes each element by
// it: to the last step that changes the element.
#include <cstdint>

#include "engine/matrix.h"

namespace psi::official {

inline constexpr int kMathToFlashSteps = 7;

// The step's short name as tables print it (1 … 7).
const char* math_to_flash_step_name(int step);

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d]; 0 ≤ steps ≤ 7. No mask (FLASH takes none).
void sdpa_math_to_flash(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, int steps, Bf16Mat out);

}  // namespace psi::official
