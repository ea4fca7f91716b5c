#pragma once
// Internal to engine/official/tensor_core*.cpp (and their tests): the matrix form's lane kernels, which
// gemm_accumulate (tensor_core_linear.cpp) runs task by task. Every kernel gives dot()'s bits
// (tensor_core.h); which one runs is the machine's and set_lane_kernel's choice.
//
// A task computes an (up to kTaskRows) x (up to kTaskCols) block of outputs. It decodes its
// rows of A once (signed significand pre-shifted by 11, exponent) and, per panel of 16 output
// columns, W's rows into a k-major panel of int32 lanes, then runs the chain with the 16
// columns in vector lanes (two AVX2 vectors, or one AVX-512): pass 1 takes E as a lane-wise
// max over the block's 16 k, pass 2 aligns and sums, and the normalisation runs in the vector
// (the rare blocks it cannot take lane by lane). The FP32-product and double-FMA kernels decode
// into layouts of their own (FP32 or double values, int16 exponents), with K padded by zeros to
// whole blocks: a zero takes no part in a block (its exponent never sets E, its term is 0), so a
// padded block is the model's short last block. Outputs whose row or column holds a non-finite value, or whose
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
// the values as FP32 and the exponents as int16; for the double-FMA kernel (tensor_core_double.cpp,
// K padded to Kp) A's values times 1 + 2^−28 and W's as doubles, a zero or non-finite value as
// −2^−500, exponents as int16 and each block's 16 signs as one word.
struct RowData {
  std::vector<std::int32_t> sig, exp;  // [rows][K]; exp kZeroExp for 0
  std::vector<float> val;               // [rows][Kp]
  std::vector<std::int32_t> exp_pairs;  // [rows][Kp/2], exponents 2p and 2p+1 as two int16
  std::vector<double> xd;               // [rows][Kp]
  std::vector<std::int16_t> xe16;       // [rows][Kp]
  std::vector<std::uint16_t> xsign;     // [rows][Kp/16], bit k%16 for k
  std::vector<std::uint16_t> xe8;       // [rows][Kp/2], k 2p's exponent byte (ExponentBytes) low, 2p+1's high
};

struct PanelData {
  std::vector<std::int32_t> sig, exp;  // [K][kLanes]; missing columns are zeros
  std::vector<std::int32_t> row_sig, row_exp;  // W's rows as decoded, before the transposition
  std::vector<float> val;                      // [Kp][kLanes]
  std::vector<std::int16_t> exp16;             // [Kp/2][kLanes][2], k's pairs interleaved lane by lane
  std::vector<double> wd;                      // [Kp][kLanes]
  std::vector<std::int16_t> we16;              // [Kp][kLanes], lanes in the double-FMA kernel's order
  std::vector<std::uint16_t> wsign;            // [Kp/16][kLanes], the same
  std::vector<std::int8_t> we8;                // [Kp/2][kLanes][2], k 2p's and 2p+1's exponent bytes, the same
};

// The double-FMA kernel's E pass with the exponents in bytes, two k a vector, where each
// operand's non-zero exponents span at most 63 binades (every real activation and weight): an
// exponent less its operand's offset is then 0..63, a zero's byte is −128 (their sums, −65 and
// below, never exceed a real one's, 0 and up), and a sum is exact in a saturating byte. Off
// where a span is wider: the E pass in int16.
struct ExponentBytes {
  bool on = false;
  int a_offset = 0, w_offset = 0;
};
ExponentBytes exponent_bytes(const Bf16Scan& a, const Bf16Scan& w);

// A task's operands take the layouts of the kernel that runs: one row at a time with the integer
// kernels', or (x86 only) K padded to Kp and several rows at a time with the FP32-product
// kernel's (decoded in the vector unit) or the double-FMA kernel's.
// `bytes` is the double-FMA kernel's (exponent_bytes of the product's scans), the same for every task.
void decode_task_rows(LaneKernel k, CBf16Mat A, std::int64_t r0, std::int64_t nr, std::int64_t Kp,
                      const ExponentBytes& bytes, RowData& d);

void decode_task_panel(LaneKernel k, CBf16Mat W, std::int64_t n0, std::int64_t nn, std::int64_t Kp,
                       const ExponentBytes& bytes, PanelData& d);

#if defined(__x86_64__)
// The double-FMA kernel's part (tensor_core_double.cpp).
void decode_rows_double(CBf16Mat A, std::int64_t r0, std::int64_t nr, std::int64_t Kp, const ExponentBytes& bytes,
                        RowData& d);
void decode_panel_double(CBf16Mat W, std::int64_t n0, std::int64_t nn, std::int64_t Kp, const ExponentBytes& bytes,
                         PanelData& d);
void run_panel_double(const RowData& r, std::int64_t rows, const PanelData& p, std::int64_t Kp,
                      const ExponentBytes& bytes, float* acc);
#endif

// Runs the task's `rows` rows against the panel, continuing from acc [rows][kLanes].
void run_task_panel(LaneKernel k, const RowData& r, std::int64_t rows, const PanelData& p, std::int64_t K,
                    std::int64_t Kp, const ExponentBytes& bytes, float* acc);

// The kernel a product gets: the chosen one, with the FP32-product kernel only where its products
// are exact and its panel gather can index W's rows (15·ld fits an int32).
LaneKernel kernel_for(CBf16Mat W, const Bf16Scan& a, const Bf16Scan& w);

}  // namespace psi::official::tc
