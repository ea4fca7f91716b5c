#pragma once
// What the machine can hold: the bound every size that comes from an input (a dataset's extent,
// a shape to regenerate, a JSON document's values) is checked against before it is allocated.
#include <unistd.h>

#include <cstdint>

namespace psi {

// Physical memory in bytes (sysconf(_SC_PHYS_PAGES) pages of _SC_PAGESIZE bytes).
inline std::uint64_t physical_memory_bytes() {
  return std::uint64_t(::sysconf(_SC_PHYS_PAGES)) * std::uint64_t(::sysconf(_SC_PAGESIZE));
}

}  // namespace psi
