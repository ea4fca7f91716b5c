#pragma once
// psi's float32 reduction order (reduce.h) written once for the host and the device: the CPU
// operators (reduce.h) and the CUDA kernels (backend/cuda/element_math.h) both take its
// constants and its lane tree from here, so the two cannot drift apart. No host-only construct
// (reduce.h's ISA clones are one), so nvcc compiles it into device code as well.
#include <cstdint>

#if defined(__CUDACC__)
#define PSI_REDUCE_HD __host__ __device__ __forceinline__
#else
#define PSI_REDUCE_HD inline
#endif

namespace psi::ops {

// A sum is cut into consecutive chunks of kChunk indices from 0; inside a chunk, lane j of kLanes
// adds the terms with (k - chunk start) % kLanes == j in increasing k.
inline constexpr int kLanes = 8;
inline constexpr std::int64_t kChunk = 1024;

// The fixed combination of one chunk's eight lane sums, ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
// (l3 + l7)), with `add` the float32 addition (a plain + on the host; an explicitly rounded one
// on the device, which must not be contracted).
template <class Add>
PSI_REDUCE_HD float lane_tree(const float* l, Add add) {
  const float a0 = add(l[0], l[4]), a1 = add(l[1], l[5]), a2 = add(l[2], l[6]), a3 = add(l[3], l[7]);
  return add(add(a0, a2), add(a1, a3));
}

}  // namespace psi::ops
