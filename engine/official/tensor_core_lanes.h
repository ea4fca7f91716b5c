#pragma once
// Internal to engine/official/tensor_core*.cpp: the matrix form's lane kernels, which
// gemm_accumulate (tensor_core_linear.cpp) runs task by task. Every kernel gives dot()'s bits
// (tensor_core.h); which one runs is the machine's and set_lane_kernel's choice.
//
// A task computes an (up to kTaskRows) x (up to kTaskCols) block of outputs. It decodes its
// rows of A once (signed significand pre-shifted by 11, exponent) and, per panel of 16 output
// columns, W's rows into a k-major panel of int32 lanes, then runs the chain with the 16
// columns in vector lanes (two AVX2 vectors, or one AVX-512): pass 1 takes E as a lane-wise
// max over the block's 16 k, pass 2 aligns and sums, and the normalisation runs in the vector
// (the rare blocks it cannot take lane by lane). The FP32-product kernel decodes into layouts of
// its own (FP32 values, int16 exponents), in the vector unit, with K padded by zeros to whole
// blocks: a zero takes no part in a block (its exponent never sets E, its term is 0), so a padded block is the
// model's short last block. Outputs whose row or column holds a non-finite value, or whose
// entering accumulator is not finite, are recomputed with dot() afterwards (tensor_core.h's rule), so
// the vector path only ever sees finite operands.
#include <cstdint>
#include <vector>

#include "engine/bf16_scan.h"
#include "engine/matrix.h"
#include "engine/official/tensor_core.h"

namespace psi::official::tc {

constexpr int kLanes = 16;
constexpr std::int64_t kTaskRows = 128;
constexpr std::int64_t kTaskCols = 128;
// Rows of A the FP32-product kernel runs at once against one panel.
constexpr int kFpRows = 4;

// The operands as a kernel reads them: for the integer kernels signed significands (A's
// pre-shifted by 11) and exponents; for the FP32-product kernel (K padded to Kp, whole blocks)
// the values as FP32 and the exponents as int16.
struct RowData {
  std::vector<std::int32_t> sig, exp;  // [rows][K]; exp kZeroExp for 0
  std::vector<float> val;               // [rows][Kp]
  std::vector<std::int32_t> exp_pairs;  // [rows][Kp/2], exponents 2p and 2p+1 as two int16
};

struct PanelData {
  std::vector<std::int32_t> sig, exp;  // [K][kLanes]; missing columns are zeros
  std::vector<std::int32_t> row_sig, row_exp;  // W's rows as decoded, before the transposition
  std::vector<float> val;                      // [Kp][kLanes]
  std::vector<std::int16_t> exp16;             // [Kp/2][kLanes][2], k's pairs interleaved lane by lane
};

// A task's operands and rows go one of two ways: one row at a time with the integer kernels'
// layouts, or (`fp`, x86 only) decoded in the vector unit, K padded to Kp, and run kFpRows rows
// at a time.
void decode_task_rows(bool fp, CBf16Mat A, std::int64_t r0, std::int64_t nr, std::int64_t Kp, RowData& d);

void decode_task_panel(bool fp, CBf16Mat W, std::int64_t n0, std::int64_t nn, std::int64_t Kp, PanelData& d);

// Runs rows i.. of the task (at most `left`) into acc [rows][kLanes]; returns how many it ran.
std::int64_t run_task_rows(LaneKernel k, const RowData& r, std::int64_t i, std::int64_t left, const PanelData& p,
                           std::int64_t K, std::int64_t Kp, float* acc);

// The kernel a product gets: the chosen one, with the FP32-product kernel only where its products
// are exact and its panel gather can index W's rows (15·ld fits an int32).
LaneKernel kernel_for(CBf16Mat W, const Bf16Scan& a, const Bf16Scan& w);

}  // namespace psi::official::tc
