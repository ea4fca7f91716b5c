// The SynthInit weight source: tiles generated per row segment equal the whole tensor's slice.
#include <gtest/gtest.h>

#include "engine/checkpoint/synth_source.h"
#include "engine/error.h"
#include "engine/synthinit.h"

namespace ck = psi::ckpt;
using psi::Bf16;

TEST(SynthSource, SlicesEqualTheWholeTensor) {
  const std::string w = "transformer_blocks.2.ff.net.2.weight", x = "input.video.x",
                    b = "transformer_blocks.2.ff.net.2.bias";
  ck::SynthSource src(185, {{w, {48, 80}}, {x, {1, 12, 10}}, {b, {48}}});
  const auto ww = psi::synthinit::make(w, {48, 80}, 185);
  for (auto s : {ck::Slice{0, 48, 0, 80}, ck::Slice{16, 32, 0, 80}, ck::Slice{7, 19, 33, 61}}) {
    std::vector<Bf16> part(std::size_t(s.numel()));
    src.read(w, s, part);
    for (std::int64_t r = s.r0; r < s.r1; ++r)
      for (std::int64_t c = s.c0; c < s.c1; ++c)
        ASSERT_EQ(part[std::size_t((r - s.r0) * s.cols() + c - s.c0)], ww.data[std::size_t(r * 80 + c)]);
  }
  const auto xx = psi::synthinit::make(x, {1, 12, 10}, 185);  // viewed as [1, 120]
  std::vector<Bf16> xs(50);
  src.read(x, {0, 1, 40, 90}, xs);
  EXPECT_TRUE(std::equal(xs.begin(), xs.end(), xx.data.begin() + 40));
  const auto bb = psi::synthinit::make(b, {48}, 185);  // viewed as [48, 1]
  std::vector<Bf16> bs(16);
  src.read(b, {16, 32, 0, 1}, bs);
  EXPECT_TRUE(std::equal(bs.begin(), bs.end(), bb.data.begin() + 16));
}

TEST(SynthSource, Errors) {
  ck::SynthSource src(0, {{"transformer_blocks.0.attn1.to_k.weight", {8, 8}}});
  std::vector<Bf16> out(8);
  try {
    src.read("transformer_blocks.0.attn1.to_v.weight", {0, 1, 0, 8}, out);
    FAIL();
  } catch (const psi::Error& e) {
    EXPECT_STREQ(e.what(), "synthinit source: unknown tensor transformer_blocks.0.attn1.to_v.weight");
  }
  try {
    src.read("transformer_blocks.0.attn1.to_k.weight", {0, 1, 4, 12}, out);
    FAIL();
  } catch (const psi::Error& e) {
    EXPECT_STREQ(e.what(),
                 "transformer_blocks.0.attn1.to_k.weight: rows [0, 1) cols [4, 12) is empty or outside its 2-D view "
                 "[8, 8] of [8, 8]");
  }
  // A name SynthInit has no rule for fails when the source is made, not mid-run.
  EXPECT_THROW(ck::SynthSource(0, {{"something.else", {4}}}), psi::Error);
}
