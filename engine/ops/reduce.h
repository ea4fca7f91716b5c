#pragma once
// psi's one fixed float32 reduction order, used by every CPU sum whose bits matter (GEMM dot
// products, norm statistics, softmax sums, attention scores).
//
// A sum over indices k = 0 .. n-1 is cut into consecutive chunks of kChunk (1,024) indices
// starting at 0. Inside a chunk, lane j (j = 0..7) adds the terms with (k - chunk_start) % 8
// == j in increasing k, starting from +0; the eight lanes are combined by the fixed tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). The chunk results are added in chunk
// order to a running float32 total that starts at +0.
//
// Why this shape: eight independent lanes are what a compiler vectorizes without
// reassociating anything (no -ffast-math needed, identical bits on SSE2, AVX2 or AVX-512), and
// the sequential 1,024-wide chunks make a K-partitioned product (the PSI FFN's 1,024-channel
// hidden tiles) add up exactly like the unpartitioned one.
#include <cstdint>

#include "engine/ops/reduce_order.h"

namespace psi::ops {

// kLanes, kChunk and the lane tree: reduce_order.h, shared with the CUDA kernels.
inline float lane_tree(const float* l) {
  return lane_tree(l, [](float a, float b) { return a + b; });
}

// The eight lanes as one value: GCC and clang lower it to whatever vector unit the target has,
// always lane by lane, so the arithmetic is the same on every x86-64 level.
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
static_assert(kLanes == 8);

// Eight consecutive floats from memory of any alignment. A vector load, not std::memcpy: under
// AddressSanitizer a 32-byte memcpy stays a library call with a region check, which was a
// quarter of a sanitized `psi run` in the GEMM alone. Passed by reference: a 32-byte vector
// return value would change the ABI between the ISA clones.
inline void load_lanes(Lanes& v, const float* p) {
  typedef float Unaligned __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float)), may_alias));
  v = *reinterpret_cast<const Unaligned*>(p);
}

inline float lane_tree(const Lanes& v) {
  float l[kLanes];
  for (int i = 0; i < kLanes; ++i) l[i] = v[i];
  return lane_tree(l);
}

// Sum of f(k) for k in [0, n) in the order above. f returns a float32 term.
template <class F>
float ordered_sum(std::int64_t n, F&& f) {
  float total = 0.0f;
  for (std::int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::int64_t c1 = c0 + kChunk < n ? c0 + kChunk : n;
    float lane[kLanes] = {};
    for (std::int64_t k = c0; k < c1; ++k) lane[(k - c0) % kLanes] += f(k);
    total = total + lane_tree(lane);
  }
  return total;
}

// The same order, fed one term at a time: lets a partitioned operator (a row cut into column
// tiles, tiles visited in order) reproduce ordered_sum exactly across tile boundaries.
class OrderedAccumulator {
 public:
  void add(float term) {
    lane_[pos_in_chunk_ % kLanes] += term;
    if (++pos_in_chunk_ == kChunk) flush();
  }
  float result() const {
    if (pos_in_chunk_ == 0) return total_;
    return total_ + lane_tree(lane_);
  }

 private:
  void flush() {
    total_ = total_ + lane_tree(lane_);
    for (float& l : lane_) l = 0.0f;
    pos_in_chunk_ = 0;
  }
  float total_ = 0.0f;
  float lane_[kLanes] = {};
  std::int64_t pos_in_chunk_ = 0;
};

}  // namespace psi::ops
