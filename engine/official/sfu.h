#pragma once
// The fixed-point square the NVIDIA SFU forms for its quadratic interpolation (ex2, rsqrt, …),
// as reverse-engineered by envytools (nvhw/sfu.c, sfu_square; MIT licence, © 2015 Marcin
// Kościelnicki): offset² / 2^19 of a 17-bit offset, one partial product per set bit i,
// each truncated on its own (⌊offset / 2^(18−i)⌋), summed, then halved with truncation.
#include <cstdint>

namespace psi::official {

inline std::uint32_t sfu_square(std::uint32_t offset) {
  std::uint32_t sum = 0;
  for (int i = 0; i < 17; ++i)
    if (offset >> i & 1) sum += offset >> (18 - i);
  return sum >> 1;
}

}  // namespace psi::official
