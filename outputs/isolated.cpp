#include "outputs/isolated.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "engine/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PSI_UNDER_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PSI_UNDER_SANITIZER 1
#endif
#ifdef PSI_UNDER_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

namespace psi::outputs {

namespace {

// A child's exit status when a sanitizer (or libFuzzer) would otherwise report and end it.
constexpr int kChildDied = 97;

#ifdef PSI_UNDER_SANITIZER
void child_death() { ::_exit(kChildDied); }
#endif

// The child's virtual size now (VmSize), so that the limit adds to what fork() gave it.
std::uint64_t virtual_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmSize:")) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

[[noreturn]] void child(const std::function<void()>& work, std::uint64_t memory_bytes) {
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
  const struct rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  // The crash signals end the child as the kernel would, not through psi's or a sanitizer's
  // handlers (which would report it, or write a fuzzer's crash file, from here).
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(s, SIG_DFL);
#ifdef PSI_UNDER_SANITIZER
  __sanitizer_set_death_callback(child_death);
  (void)memory_bytes;
#else
  if (const std::uint64_t now = virtual_bytes()) {
    const struct rlimit as{rlim_t(now + memory_bytes), rlim_t(now + memory_bytes)};
    ::setrlimit(RLIMIT_AS, &as);
  }
#endif
  try {
    work();
  } catch (...) {
    // An error is the parent's to find again and report; only a crash or a hang is not.
  }
  ::_exit(0);
}

}  // namespace

IsolatedOutcome run_isolated(const std::function<void()>& work, std::chrono::milliseconds limit,
                             std::uint64_t memory_bytes) {
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start a child process to check a file: ") + std::strerror(errno), Exit::run_failed);
  if (pid == 0) child(work, memory_bytes);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto pause = std::chrono::microseconds(200);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw Error("lost the child process checking a file", Exit::run_failed);
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      char buf[64];
      std::snprintf(buf, sizeof buf, "no answer within %g s", double(limit.count()) / 1000.0);
      return {IsolatedOutcome::Kind::timed_out, buf};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status)) {
    const char* abbrev = ::sigabbrev_np(WTERMSIG(status));
    return {IsolatedOutcome::Kind::crashed, abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(WTERMSIG(status))};
  }
  return {IsolatedOutcome::Kind::crashed, WEXITSTATUS(status) == kChildDied
                                              ? std::string("a sanitizer's report")
                                              : "exit status " + std::to_string(WEXITSTATUS(status))};
}

}  // namespace psi::outputs
