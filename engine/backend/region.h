#pragma once
// A named byte range of the arena, and how an operation touches it.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"

namespace psi::rt {

struct DeviceRegion {
  std::uint64_t offset = 0;  // from the arena's start
  std::uint64_t bytes = 0;
  std::string name;          // "page 1", "scratch ffn.h", ... (used in every message)

  std::uint64_t end() const { return offset + bytes; }
  bool overlaps(const DeviceRegion& o) const { return offset < o.end() && o.offset < end(); }

  // A sub-range, e.g. one tile's rows of a state buffer.
  DeviceRegion sub(std::uint64_t off, std::uint64_t n, const std::string& sub_name) const {
    if (off > bytes || n > bytes - off)
      throw Error("region " + name + ": bytes [" + std::to_string(off) + ", " + std::to_string(off + n) +
                      ") out of its " + std::to_string(bytes) + " bytes",
                  Exit::run_failed);
    return DeviceRegion{offset + off, n, sub_name};
  }
};

enum class AccessMode { read, write };

struct Access {
  AccessMode mode;
  DeviceRegion region;
};

inline Access reads(DeviceRegion r) { return Access{AccessMode::read, std::move(r)}; }
inline Access writes(DeviceRegion r) { return Access{AccessMode::write, std::move(r)}; }

using Accesses = std::vector<Access>;

}  // namespace psi::rt
