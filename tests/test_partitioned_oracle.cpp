// Partitioned operators against the exact oracle: a projection cut into token row tiles and
// page-sized output-column groups (as the PSI executor streams it), and the FFN down-projection
// accumulated over 1,024-channel hidden tiles, are bitwise equal to their unpartitioned forms, and
// measured against the exact rational result they are no worse than the official cuBLAS output:
// the oracle counts the elements that are not the correctly rounded BF16 of the real result.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/ops/gemm.h"
#include "engine/sha256.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "oracle/fixed_dot.h"
#include "oracle/operands.h"
#include "tests/recordings.h"

using namespace psi;

namespace {

std::int64_t not_correctly_rounded(const Bf16Tensor& y, const Bf16Tensor& exact) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) n += !(y.data[i] == exact.data[i]);
  return n;
}

// y = x W^T + b over row tiles of x and column groups of W, each tile its own ops::linear call
// on views, written into the tile's place of the output.
Bf16Tensor tiled_linear(const Bf16Tensor& x, const Bf16Tensor& w, const Bf16Tensor& b, std::int64_t row_tile,
                        std::int64_t col_group) {
  const auto X = psi::as_matrix(x), W = psi::as_matrix(w);
  Bf16Tensor y({X.rows, W.rows});
  auto Y = psi::as_matrix(y);
  for (std::int64_t r0 = 0; r0 < X.rows; r0 += row_tile)
    for (std::int64_t c0 = 0; c0 < W.rows; c0 += col_group) {
      const std::int64_t nr = std::min(row_tile, X.rows - r0), nc = std::min(col_group, W.rows - c0);
      ops::linear(X.block(r0, nr, 0, X.cols), W.block(c0, nc, 0, W.cols), b.ptr() + c0, psi::BiasRule::fused_f32,
                  Y.block(r0, nr, c0, nc));
    }
  return y;
}

}  // namespace

TEST(PartitionedOracle, TiledProjectionIsDenseAndNoWorseThanOfficial) {
  auto f = hdf5::File::open_read(psi::test::reference_file("probes_linear.h5"));
  const oracle::LinearProblem p = oracle::load_probe(f, "probe_video_q_proj");
  const std::int64_t rows = 48;  // a slice of the 256 recorded rows keeps the test to about a second
  Bf16Tensor x({rows, p.K});
  std::copy_n(p.x.data.begin(), rows * p.K, x.data.begin());
  const Bf16Tensor dense = ops::linear(x, p.w, &*p.b);
  const Bf16Tensor tiled = tiled_linear(x, p.w, *p.b, 16, 1000);  // 1000 does not divide 4,096
  EXPECT_EQ(sha256_hex(tiled), sha256_hex(dense));
  const Bf16Tensor exact = oracle::correctly_rounded_linear(x.span(), p.w.span(), p.b->span(), p.K, 0, rows, 2);
  const Bf16Tensor official = oracle::load_output(f, "/probe_video_q_proj/q", p);
  Bf16Tensor official_rows({rows, p.N});
  std::copy_n(official.data.begin(), rows * p.N, official_rows.data.begin());
  const std::int64_t ours = not_correctly_rounded(tiled, exact), theirs = not_correctly_rounded(official_rows, exact);
  EXPECT_GT(theirs, 0);  // the recording is not exact either: the comparison means something
  EXPECT_LE(ours, theirs) << "psi " << ours << " vs official " << theirs << " of " << exact.numel();
}

// The FFN down-projection over hidden tiles (the executor's K split) is the dense product bit for
// bit, and both sit at most one BF16 ULP from the correctly rounded exact value here.
TEST(PartitionedOracle, HiddenTiledDownProjectionEqualsDense) {
  const std::int64_t tokens = 8, hidden = 3072, out = 64;  // three 1,024-channel hidden tiles
  const Bf16Tensor h = synthinit::make("input.test.ffn.hidden", {tokens, hidden}, 3);
  const Bf16Tensor w = synthinit::make("test.ffn.net.2.weight", {out, hidden}, 3);
  const Bf16Tensor b = synthinit::make("test.ffn.net.2.bias", {out}, 3);
  const Bf16Tensor dense = ops::linear(h, w, &b);
  F32Tensor acc({tokens, out});
  const auto H = psi::as_matrix(h), W = psi::as_matrix(w);
  for (std::int64_t t0 = 0; t0 < hidden; t0 += 1024)
    ops::gemm_accumulate(H.block(0, tokens, t0, 1024), W.block(0, out, t0, 1024), psi::as_matrix(acc));
  Bf16Tensor tiled({tokens, out});
  for (std::int64_t r = 0; r < tokens; ++r)
    psi::finish_linear(acc.ptr() + r * out, b.ptr(), psi::BiasRule::fused_f32, tiled.ptr() + r * out, out);
  EXPECT_EQ(sha256_hex(tiled), sha256_hex(dense));
  const Bf16Tensor exact = oracle::correctly_rounded_linear(h.span(), w.span(), b.span(), hidden, 0, tokens, 1);
  for (std::int64_t i = 0; i < tiled.numel(); ++i) EXPECT_LE(bf16_ulp_distance(tiled.data[i], exact.data[i]), 1) << i;
}
