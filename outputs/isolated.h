#pragma once
// Work that hostile input can crash, hang or blow up (libhdf5 parsing a file psi was sent: it has
// crashed, looped and allocated gigabytes on corrupt files, docs/reliability.md bug 16), run in a
// child process with limits, so that psi survives it and refuses the input instead.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace psi::outputs {

struct IsolatedOutcome {
  enum class Kind { finished, crashed, timed_out } kind = Kind::finished;
  std::string detail;  // how the child ended when it did not finish: "SIGSEGV", "exit status 1"
};

// Runs `work` in a forked child and waits at most `limit` for it. The child has its stderr on
// /dev/null, no core file, an address space of at most what it inherited plus `memory_bytes`
// (not under a sanitizer, whose shadow memory needs more) and default handlers for the signals a
// crash raises (a sanitizer's report ends it too); whatever `work` returns or throws counts as
// finished. A child past the limit is killed. psi::Error (exit 3) if no child can be made.
IsolatedOutcome run_isolated(const std::function<void()>& work, std::chrono::milliseconds limit,
                             std::uint64_t memory_bytes);

}  // namespace psi::outputs
