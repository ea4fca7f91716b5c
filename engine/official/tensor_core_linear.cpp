#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/official/kernel_config.h"
#include "engine/official/tensor_core.h"
#include "engine/official/tensor_core_lanes.h"
#include "engine/parallel.h"

namespace psi::official::tc {

namespace {

bool all_finite(const Bf16Scan& s, std::int64_t r0, std::int64_t n) {
  return std::all_of(s.finite.begin() + r0, s.finite.begin() + r0 + n, [](char f) { return f != 0; });
}

void check_product(CBf16Mat A, CBf16Mat W, F32Mat C) {
  const std::int64_t K = A.cols;
  if (W.cols != K)
    throw Error("tensor-core gemm: inner sizes differ (A has " + std::to_string(K) + " columns, W has " +
                std::to_string(W.cols) + ")");
  if (C.rows != A.rows || C.cols != W.rows)
    throw Error("tensor-core gemm: output is " + std::to_string(C.rows) + "x" + std::to_string(C.cols) +
                ", product is " + std::to_string(A.rows) + "x" + std::to_string(W.rows));
}

// Numbers each matrix product, so that a thread knows whether the rows of A it decoded last are
// this product's.
std::atomic<std::uint64_t> g_products{0};

void check_scan(OperandScan s, std::int64_t rows) {
  if (s.row0 < 0 || std::int64_t(s.scan.finite.size()) - s.row0 < rows)
    throw Error("tensor-core gemm: an operand's scan covers " + std::to_string(s.scan.finite.size()) +
                " rows, not its rows " + std::to_string(s.row0) + " to " + std::to_string(s.row0 + rows - 1));
}

}  // namespace

void gemm_accumulate(CBf16Mat A, CBf16Mat W, F32Mat C) {
  check_product(A, W, C);
  if (A.rows == 0 || W.rows == 0) return;
  const Bf16Scan a = scan_bf16(A), w = scan_bf16(W);
  gemm_accumulate(A, OperandScan{a}, W, OperandScan{w}, C);
}

void gemm_accumulate(CBf16Mat A, OperandScan as, CBf16Mat W, OperandScan ws, F32Mat C) {
  check_product(A, W, C);
  const std::int64_t M = A.rows, N = W.rows, K = A.cols;
  if (M == 0 || N == 0) return;
  check_scan(as, M);
  check_scan(ws, N);
  const LaneKernel kernel = kernel_for(W, as.scan, ws.scan);
  const ExponentBytes bytes = kernel == LaneKernel::avx2_double ? exponent_bytes(as.scan, ws.scan) : ExponentBytes{};
  const std::int64_t Kp = (K + kBlock - 1) / kBlock * kBlock;

  const std::int64_t mtasks = (M + kTaskRows - 1) / kTaskRows, ntasks = (N + kTaskCols - 1) / kTaskCols;
  const std::uint64_t product = g_products.fetch_add(1, std::memory_order_relaxed) + 1;
  parallel_for(mtasks * ntasks, [&](std::int64_t task) {
    const std::int64_t m0 = (task / ntasks) * kTaskRows, n0 = (task % ntasks) * kTaskCols;
    const std::int64_t mb = std::min(kTaskRows, M - m0), nb = std::min(kTaskCols, N - n0);
    // A thread's layouts serve its next task too: their sizes repeat, so nothing is allocated
    // or cleared again.
    thread_local RowData rows;
    thread_local std::uint64_t rows_product = 0;
    thread_local std::int64_t rows_m0 = -1;
    thread_local PanelData panel;
    thread_local std::vector<float> acc;
    thread_local std::vector<char> entering_finite;
    acc.resize(std::size_t(kTaskRows * kLanes));
    entering_finite.resize(std::size_t(kTaskRows));
    // Tasks are handed out in order along a row of tasks, so a thread's next task mostly has the
    // same rows of A: they are decoded once for all of those.
    if (rows_product != product || rows_m0 != m0) {
      decode_task_rows(kernel, A, m0, mb, Kp, bytes, rows);
      rows_product = product;
      rows_m0 = m0;
    }
    const bool rows_finite = all_finite(as.scan, as.row0 + m0, mb);
    for (std::int64_t p0 = n0; p0 < n0 + nb; p0 += kLanes) {
      const std::int64_t nn = std::min<std::int64_t>(kLanes, n0 + nb - p0);
      decode_task_panel(kernel, W, p0, nn, Kp, bytes, panel);
      const bool finite = rows_finite && all_finite(ws.scan, ws.row0 + p0, nn);
      for (std::int64_t i = 0; i < mb; ++i) {
        const float* c = &C.at(m0 + i, p0);
        float* a = acc.data() + i * kLanes;
        std::copy(c, c + nn, a);
        std::fill(a + nn, a + kLanes, 0.0f);
        entering_finite[std::size_t(i)] = std::all_of(c, c + nn, [](float v) { return std::isfinite(v); });
      }
      run_task_panel(kernel, rows, mb, panel, K, Kp, bytes, acc.data());
      for (std::int64_t i = 0; i < mb; ++i) {
        const std::int64_t m = m0 + i;
        float* c = &C.at(m, p0);
        const float* a = acc.data() + i * kLanes;
        if (finite && entering_finite[std::size_t(i)]) {
          std::copy(a, a + nn, c);
          continue;
        }
        // A non-finite operand row or entering value: that output is dot()'s (tensor_core.h).
        for (std::int64_t j = 0; j < nn; ++j)
          if (!as.scan.finite[std::size_t(as.row0 + m)] || !ws.scan.finite[std::size_t(ws.row0 + p0 + j)] ||
              !std::isfinite(c[j]))
            c[j] = dot(std::span<const Bf16>(A.row(m), std::size_t(K)),
                       std::span<const Bf16>(W.row(p0 + j), std::size_t(K)), c[j]);
          else
            c[j] = a[j];
      }
    }
  });
}

void linear(CBf16Mat x, CBf16Mat W, const Bf16* bias, BiasRule rule, Bf16Mat y, const KernelConfig* kernels) {
  if (x.cols != W.cols)
    throw Error("tensor-core linear: input width " + std::to_string(x.cols) + " but weight is [" +
                std::to_string(W.rows) + ", " + std::to_string(W.cols) + "]");
  if (y.rows != x.rows || y.cols != W.rows)
    throw Error("tensor-core linear: output is " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                ", expected " + std::to_string(x.rows) + "x" + std::to_string(W.rows));
  const ProductShape shape{rows_as_if(x.rows), W.rows, x.cols};
  log_product(ChainKind::tensor_core, shape);
  const std::size_t size = std::size_t(x.rows * W.rows);
  std::vector<float> acc(size, 0.0f);
  const KernelChoice choice = kernel_choice(kernels, ChainKind::tensor_core, shape);
  const auto slices = k_slices(x.cols, choice);
  if (choice.fma_chain) {
    for (std::int64_t m = 0; m < x.rows; ++m)
      for (std::int64_t n = 0; n < W.rows; ++n) {
        float total = 0.0f;
        for (std::size_t s = 0; s < slices.size(); ++s) {
          float a = 0.0f;
          for (std::int64_t k = slices[s].first; k < slices[s].second; ++k)
            a = std::fma(x.at(m, k).to_float(), W.at(n, k).to_float(), a);
          total = s == 0 ? a : total + a;
        }
        acc[std::size_t(m * W.rows + n)] = total;
      }
    for (std::int64_t r = 0; r < x.rows; ++r) finish_linear(acc.data() + r * W.rows, bias, rule, y.row(r), W.rows);
    return;
  }
  // Each slice is a chain of its own from +0; the partial sums are added in FP32, in order.
  std::vector<float> part;
  for (std::size_t s = 0; s < slices.size(); ++s) {
    const auto [k0, k1] = slices[s];
    if (s > 0) part.assign(size, 0.0f);
    tc::gemm_accumulate(CBf16Mat{x.data + k0, x.rows, k1 - k0, x.ld}, CBf16Mat{W.data + k0, W.rows, k1 - k0, W.ld},
                        F32Mat{s == 0 ? acc.data() : part.data(), x.rows, W.rows, W.rows});
    if (s > 0)
      for (std::size_t i = 0; i < size; ++i) acc[i] += part[i];
  }
  for (std::int64_t r = 0; r < x.rows; ++r) finish_linear(acc.data() + r * W.rows, bias, rule, y.row(r), W.rows);
}

}  // namespace psi::official::tc
