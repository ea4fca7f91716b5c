// Attention kernels: MATH against a float64 softmax, online (key-tiled) against MATH on
// structured inputs for several tile sizes (including ones that do not divide the key count),
// masked and unmasked, and independence of the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"
#include "engine/official/attention_math.h"
#include "engine/ops/attention.h"
#include "engine/parallel.h"

namespace official = psi::official;
namespace ops = psi::ops;
using psi::Bf16;
using psi::Bf16Tensor;

namespace {

constexpr std::int64_t kHeads = 2, kD = 64, kNq = 40, kNk = 300;

// Structured inputs: every key is distinct and dominated by one "address" channel, queries aim
// at a few keys each, values are positive and grow with the key index. A key-tiling mistake
// (a skipped, repeated or misplaced tile) moves outputs by many ulps. Values are positive so
// outputs are convex combinations without cancellation.
struct Inputs {
  Bf16Tensor q{{kNq, kHeads * kD}}, k{{kNk, kHeads * kD}}, v{{kNk, kHeads * kD}};
};

Inputs structured() {
  Inputs in;
  for (std::int64_t j = 0; j < kNk; ++j)
    for (std::int64_t c = 0; c < kHeads * kD; ++c) {
      const std::int64_t h = c / kD, cc = c % kD;
      in.k.data[j * kHeads * kD + c] = psi::bf16_rne(cc == (j + h) % kD ? 3.0f : float((j * 31 + c * 7) % 11) / 16.0f - 0.3f);
      in.v.data[j * kHeads * kD + c] = psi::bf16_rne(1.0f + float(j) / kNk + float(cc % 5) / 64.0f);
    }
  for (std::int64_t i = 0; i < kNq; ++i)
    for (std::int64_t c = 0; c < kHeads * kD; ++c)
      in.q.data[i * kHeads * kD + c] = psi::bf16_rne((c % kD) == (i * 3) % kD ? 4.0f : float((i + c) % 7) / 8.0f - 0.4f);
  return in;
}

Bf16Tensor run(const Inputs& in, const ops::SdpaOptions& o) {
  Bf16Tensor out({kNq, kHeads * kD});
  ops::sdpa(psi::as_matrix(in.q), psi::as_matrix(in.k), psi::as_matrix(in.v), kHeads, o, psi::as_matrix(out));
  return out;
}

std::int64_t max_ulp(const Bf16Tensor& a, const Bf16Tensor& b) {
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) m = std::max(m, psi::bf16_ulp_distance(a.data[i], b.data[i]));
  return m;
}

// Attention in float64 on the same BF16 inputs, scale exactly 1/sqrt(d).
std::vector<double> reference(const Inputs& in, const std::vector<float>* mask) {
  std::vector<double> out(kNq * kHeads * kD, 0.0);
  for (std::int64_t h = 0; h < kHeads; ++h)
    for (std::int64_t i = 0; i < kNq; ++i) {
      std::vector<double> s(kNk);
      double m = -INFINITY;
      for (std::int64_t j = 0; j < kNk; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < kD; ++c)
          dot += double(in.q.data[i * kHeads * kD + h * kD + c].to_float()) * in.k.data[j * kHeads * kD + h * kD + c].to_float();
        s[j] = dot / std::sqrt(double(kD)) + (mask ? (*mask)[i * kNk + j] : 0.0);
        m = std::max(m, s[j]);
      }
      if (m == -INFINITY) continue;
      double l = 0;
      for (auto& x : s) l += (x = std::exp(x - m));
      for (std::int64_t c = 0; c < kD; ++c) {
        double o = 0;
        for (std::int64_t j = 0; j < kNk; ++j) o += s[j] * in.v.data[j * kHeads * kD + h * kD + c].to_float();
        out[i * kHeads * kD + h * kD + c] = o / l;
      }
    }
  return out;
}

std::vector<float> make_mask() {
  std::vector<float> mask(kNq * kNk, 0.0f);
  for (std::int64_t i = 0; i < kNq; ++i)
    for (std::int64_t j = 0; j < kNk; ++j) {
      if ((i + j) % 3 == 0) mask[i * kNk + j] = -std::numeric_limits<float>::infinity();
      else if (j % 5 == 0) mask[i * kNk + j] = -2.5f;
    }
  for (std::int64_t j = 0; j < kNk; ++j) mask[7 * kNk + j] = -std::numeric_limits<float>::infinity();  // row 7: all masked
  return mask;
}

}  // namespace

TEST(Attention, MathMatchesFloat64) {
  const Inputs in = structured();
  const std::vector<float> mask = make_mask();
  for (const std::vector<float>* m : {static_cast<const std::vector<float>*>(nullptr), &mask}) {
    ops::SdpaOptions o;
    o.mask = m ? m->data() : nullptr;
    const Bf16Tensor out = run(in, o);
    const auto ref = reference(in, m);
    for (std::int64_t i = 0; i < out.numel(); ++i)
      // float32 softmax and sums of 300 positive terms: well inside one BF16 ulp of the
      // float64 value, so the BF16 result is the correctly rounded one or its neighbour.
      ASSERT_LE(psi::bf16_ulp_distance(out.data[i], psi::bf16_rne(float(ref[i]))), 1) << i;
  }
}

TEST(Attention, FullyMaskedRowIsZero) {
  const Inputs in = structured();
  const std::vector<float> mask = make_mask();
  for (auto form : {ops::SoftmaxForm::math, ops::SoftmaxForm::online}) {
    ops::SdpaOptions o;
    o.form = form;
    o.mask = mask.data();
    const Bf16Tensor out = run(in, o);
    for (std::int64_t c = 0; c < kHeads * kD; ++c) EXPECT_EQ(out.data[7 * kHeads * kD + c].to_float(), 0.0f);
  }
}

TEST(Attention, OnlineMatchesMathForEveryTiling) {
  const Inputs in = structured();
  const std::vector<float> mask = make_mask();
  for (const std::vector<float>* m : {static_cast<const std::vector<float>*>(nullptr), &mask}) {
    ops::SdpaOptions math;
    math.mask = m ? m->data() : nullptr;
    const Bf16Tensor ref = run(in, math);
    for (std::int64_t tile : {1, 7, 64, 128, 299, 300, 1000}) {
      ops::SdpaOptions o = math;
      o.form = ops::SoftmaxForm::online;
      o.key_tile = tile;
      // float32 P: only the summation order and the final division differ from MATH — at most
      // one BF16 ulp on these cancellation-free outputs.
      o.p_bf16 = false;
      EXPECT_LE(max_ulp(run(in, o), ref), 1) << "f32 P, tile " << tile << (m ? " masked" : "");
      // BF16 P: each weight carries a relative error up to 2^-9 while the normalizer does not,
      // so a convex combination of positive values moves by up to 2^-9 relative: two ulps.
      o.p_bf16 = true;
      EXPECT_LE(max_ulp(run(in, o), ref), 2) << "bf16 P, tile " << tile << (m ? " masked" : "");
    }
  }
}

TEST(Attention, KeyTilingMistakeWouldShow) {
  // Dropping the last partial tile is far outside the tolerance above: the check has teeth.
  const Inputs in = structured();
  const Bf16Tensor ref = run(in, {});
  Inputs cut = in;
  cut.k = Bf16Tensor({kNk - 44, kHeads * kD}, std::vector<Bf16>(in.k.data.begin(), in.k.data.end() - 44 * kHeads * kD));
  cut.v = Bf16Tensor({kNk - 44, kHeads * kD}, std::vector<Bf16>(in.v.data.begin(), in.v.data.end() - 44 * kHeads * kD));
  Bf16Tensor out({kNq, kHeads * kD});
  ops::sdpa(psi::as_matrix(cut.q), psi::as_matrix(cut.k), psi::as_matrix(cut.v), kHeads, {}, psi::as_matrix(out));
  EXPECT_GT(max_ulp(out, ref), 2);
}

TEST(Attention, ThreadCountDoesNotChangeBits) {
  const Inputs in = structured();
  for (auto form : {ops::SoftmaxForm::math, ops::SoftmaxForm::online}) {
    ops::SdpaOptions o;
    o.form = form;
    psi::set_thread_count(1);
    const Bf16Tensor a = run(in, o);
    psi::set_thread_count(3);
    const Bf16Tensor b = run(in, o);
    psi::set_thread_count(0);
    EXPECT_EQ(a.data, b.data);
  }
}

TEST(Attention, QkFactor) {
  EXPECT_EQ(official::sdpa_qk_factor(64), float(std::sqrt(0.125)));
}

TEST(Attention, BadShapesAreErrors) {
  Bf16Tensor q({4, 128}), k({5, 128}), v({6, 128}), out({4, 128});
  EXPECT_THROW(ops::sdpa(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), 2, {}, psi::as_matrix(out)), psi::Error);
  EXPECT_THROW(ops::sdpa(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(k), 3, {}, psi::as_matrix(out)), psi::Error);
}
