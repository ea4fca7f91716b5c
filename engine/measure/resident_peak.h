#pragma once
// The process's peak resident set (VmHWM), the CPU backend's "process peak". Linux lets a process
// reset it to its current resident set (proc(5): clear_refs "5"), so that one path of several run
// in the same process has a peak of its own.
#include <cstdint>

namespace psi::rt {

// The process's peak resident set since it started (or since the last reset), in bytes; 0 when
// /proc/self/status gives none.
std::uint64_t resident_peak_bytes();

class ResidentPeak {
 public:
  // Resets the peak; where the kernel refuses (no /proc, an older kernel) the peak stays the
  // process's since it started, which since_start() says.
  ResidentPeak();
  // The peak resident set since construction (or since the process started), in bytes; 0 when
  // /proc/self/status gives none.
  std::uint64_t bytes() const;
  bool since_start() const { return !reset_; }

 private:
  bool reset_ = false;
};

}  // namespace psi::rt
