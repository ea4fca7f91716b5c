#pragma once
// The physical limits a streamed PSI block is measured against (issue GPU, reference README's
// h200-ceilings.jsonl): pinned host<->device copy bandwidth by copy size, and the cuBLAS BF16
// product rate (float32 accumulation) on the block's shapes. Needs a CUDA device.
#include <cstdint>
#include <string>
#include <vector>

namespace psi::rt {

struct CopyCeiling {
  std::int64_t mib = 0;
  double h2d_gbps = 0, d2h_gbps = 0;
};

struct GemmCeiling {
  std::int64_t m = 0, n = 0, k = 0;
  double ms = 0, tflops = 0;
};

struct Ceilings {
  std::string device;
  std::vector<CopyCeiling> copies;
  std::vector<GemmCeiling> gemms;
};

// Times each measurement as the median of `repeats` runs after warm-ups (CUDA events).
Ceilings measure_ceilings(int device, int repeats);

}  // namespace psi::rt
