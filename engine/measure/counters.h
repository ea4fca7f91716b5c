#pragma once
// What a run moved and how often the host blocked: reported per run, next to the measured
// managed peak.
#include <array>
#include <cstdint>
#include <string_view>

namespace psi::rt {

enum class CopyKind { weights, journal, other };
inline constexpr int kCopyKinds = 3;

constexpr std::string_view copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::weights: return "weights";
    case CopyKind::journal: return "journal";
    case CopyKind::other: return "other";
  }
  return "?";
}

struct Counters {
  std::array<std::uint64_t, kCopyKinds> h2d_bytes{};  // indexed by CopyKind
  std::array<std::uint64_t, kCopyKinds> d2h_bytes{};
  std::uint64_t weight_tiles = 0;          // slice requests filled into a page
  std::uint64_t journal_commits = 0;       // tensors committed (each a D2H of its bytes)
  std::uint64_t journal_reloads = 0;       // tensors reloaded by an H2D copy
  std::uint64_t journal_kept_resident = 0; // reloads served by state still resident in the arena
  std::uint64_t blocking_syncs = 0;        // host waits on an event or a stream
  std::uint64_t journal_host_bytes = 0;    // bytes held by the host journal at the end
  std::uint64_t resident_bytes_peak = 0;   // most journal state kept resident in the arena at once

  std::uint64_t h2d(CopyKind k) const { return h2d_bytes[std::size_t(k)]; }
  std::uint64_t d2h(CopyKind k) const { return d2h_bytes[std::size_t(k)]; }
};

}  // namespace psi::rt
