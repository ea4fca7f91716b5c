// The premise of the executor's streamed attention: ops::sdpa_online_update fed the keys a
// block at a time (blocks starting at multiples of the key tile, of several key tiles, the last
// one short), with the running state held by the caller and query rows split into tiles, gives
// ops::sdpa's online result bit for bit — with and without BF16 P, with a mask addressed
// through its row stride. A block boundary off the key-tile grid changes the result, which is
// why the executor's journal pieces divide the key tile.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "engine/ops/attention.h"
#include "engine/synthinit.h"

namespace ops = psi::ops;
using psi::Bf16;
using psi::Bf16Tensor;

namespace {

constexpr std::int64_t kHeads = 2, kD = 64, kNq = 37, kNk = 300, kKeyTile = 32;

struct Inputs {
  Bf16Tensor q, k, v;
};

Inputs inputs() {
  return {psi::synthinit::make("input.keyblocks.q", {kNq, kHeads * kD}, 3),
          psi::synthinit::make("input.keyblocks.k", {kNk, kHeads * kD}, 3),
          psi::synthinit::make("input.keyblocks.v", {kNk, kHeads * kD}, 3)};
}

Bf16Tensor whole(const Inputs& in, const ops::SdpaOptions& o) {
  Bf16Tensor out({kNq, kHeads * kD});
  ops::sdpa(psi::as_matrix(in.q), psi::as_matrix(in.k), psi::as_matrix(in.v), kHeads, o, psi::as_matrix(out));
  return out;
}

// Query tiles of q_tile rows; keys in blocks starting at the given offsets (then to kNk).
Bf16Tensor streamed(const Inputs& in, const ops::SdpaOptions& o, std::int64_t q_tile, const std::vector<std::int64_t>& starts,
                    const std::vector<float>* mask) {
  Bf16Tensor out({kNq, kHeads * kD});
  const auto Q = psi::as_matrix(in.q), K = psi::as_matrix(in.k), V = psi::as_matrix(in.v);
  for (std::int64_t i0 = 0; i0 < kNq; i0 += q_tile) {
    const std::int64_t nq = std::min(q_tile, kNq - i0);
    std::vector<float> m(nq * kHeads), l(nq * kHeads), acc(nq * kHeads * kD);
    const ops::OnlineState s{{m.data(), nq, kHeads, kHeads}, {l.data(), nq, kHeads, kHeads},
                             {acc.data(), nq, kHeads * kD, kHeads * kD}};
    ops::sdpa_online_begin(s);
    for (std::size_t b = 0; b < starts.size(); ++b) {
      const std::int64_t j0 = starts[b], j1 = b + 1 < starts.size() ? starts[b + 1] : kNk;
      ops::SdpaOptions ob = o;
      if (mask) {
        ob.mask = mask->data() + i0 * kNk + j0;
        ob.mask_ld = kNk;
      }
      ops::sdpa_online_update(Q.block(i0, nq, 0, Q.cols), K.block(j0, j1 - j0, 0, K.cols), V.block(j0, j1 - j0, 0, V.cols),
                              kHeads, ob, s);
    }
    ops::sdpa_online_end(s, psi::as_matrix(out).block(i0, nq, 0, kHeads * kD));
  }
  return out;
}

ops::SdpaOptions online(bool p_bf16) {
  ops::SdpaOptions o;
  o.form = ops::SoftmaxForm::online;
  o.key_tile = kKeyTile;
  o.p_bf16 = p_bf16;
  return o;
}

}  // namespace

TEST(PsiExecKeyBlocks, BlocksOnTheKeyTileGridAreBitwiseTheWholeCall) {
  const Inputs in = inputs();
  for (bool p_bf16 : {true, false}) {
    const Bf16Tensor want = whole(in, online(p_bf16));
    // One block; key-tile blocks; blocks of several key tiles; uneven multiples, last short.
    for (const std::vector<std::int64_t>& starts :
         {std::vector<std::int64_t>{0}, {0, 32, 64, 96, 128, 160, 192, 224, 256, 288}, {0, 128, 256}, {0, 64, 160, 288}})
      for (std::int64_t q_tile : {1, 16, 37}) {
        const Bf16Tensor got = streamed(in, online(p_bf16), q_tile, starts, nullptr);
        EXPECT_TRUE(got.data == want.data) << "p_bf16 " << p_bf16 << ", " << starts.size() << " blocks, query tile " << q_tile;
      }
  }
}

TEST(PsiExecKeyBlocks, MaskThroughItsRowStride) {
  const Inputs in = inputs();
  std::vector<float> mask(kNq * kNk, 0.0f);
  for (std::int64_t i = 0; i < kNq; ++i)
    for (std::int64_t j = 0; j < kNk; ++j)
      if ((i + 2 * j) % 5 == 0 || (i == 3 && j < 200)) mask[i * kNk + j] = -std::numeric_limits<float>::infinity();
  ops::SdpaOptions o = online(true);
  o.mask = mask.data();
  const Bf16Tensor want = whole(in, o);
  EXPECT_TRUE(streamed(in, online(true), 16, {0, 64, 192}, &mask).data == want.data);
}

TEST(PsiExecKeyBlocks, ABlockOffTheGridChangesTheResult) {
  const Inputs in = inputs();
  const Bf16Tensor want = whole(in, online(true));
  // A boundary at key 48 splits a 32-key tile: the softmax sees other tiles, other rounding.
  EXPECT_FALSE(streamed(in, online(true), 37, {0, 48}, nullptr).data == want.data);
}
