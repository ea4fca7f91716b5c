#pragma once
// Work that hostile input can crash, hang or blow up (libhdf5 parsing a file psi was sent: it has
// crashed, looped and allocated gigabytes on corrupt files, docs/reliability/bugs-found.md bug 16), run in a
// child process with limits, so that psi survives it and refuses the input instead.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace psi::outputs {

struct IsolatedOutcome {
  enum class Kind { finished, refused, crashed, timed_out } kind = Kind::finished;
  // The work's reason when it refused; how the child ended when it did not finish: "SIGSEGV",
  // "exit status 1".
  std::string detail;
};

// Runs `work` in a forked child and waits at most `limit` for it. `work` returns why it refuses
// what it was given, or "" (its first kMaxRefusal bytes come back); whatever it throws counts as
// finished (an error is the parent's to meet again and report). The child has its stderr on
// /dev/null, no core file, an address space of at most what it inherited plus `memory_bytes`
// (not under a sanitizer, whose shadow memory needs more) and default handlers for the signals a
// crash raises (a sanitizer's report ends it too). It is killed past the limit, and when the
// parent dies, however it dies: a hang is never left running. psi::Error (exit 3) if no child
// can be made.
inline constexpr std::size_t kMaxRefusal = 1024;
IsolatedOutcome run_isolated(const std::function<std::string()>& work, std::chrono::milliseconds limit,
                             std::uint64_t memory_bytes);

// Resident memory the process reached since construction above what it held then: what one step
// of the work needed, for work that must refuse input making a library allocate far beyond its
// size (libhdf5 fills gigabytes for a string a 12 KB file claims). The kernel's high-water mark is
// reset at construction (/proc/self/clear_refs); where it cannot be, the mark from before counts,
// which can only make the growth seem smaller.
class MemoryGrowth {
 public:
  MemoryGrowth();
  std::uint64_t bytes() const;

 private:
  std::uint64_t start_;
};

}  // namespace psi::outputs
