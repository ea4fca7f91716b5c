#include "outputs/isolated.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
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
// A child's exit status when the work refused its input; the reason is on the pipe.
constexpr int kChildRefused = 96;

#ifdef PSI_UNDER_SANITIZER
void child_death() { ::_exit(kChildDied); }
#endif

// A size line of /proc/self/status ("VmSize", "VmRSS", "VmHWM") in bytes; 0 if there is none.
std::uint64_t status_bytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ':')
      return std::stoull(line.substr(key.size() + 1)) * 1024;
  return 0;
}

// The child's virtual size now, so that the limit adds to what fork() gave it.
std::uint64_t virtual_bytes() { return status_bytes("VmSize"); }

[[noreturn]] void child(const std::function<std::string()>& work, std::uint64_t memory_bytes, pid_t parent,
                        int reason_fd) {
  // A parent killed (SIGKILL leaves it no say) takes the child with it: a libhdf5 loop would
  // otherwise run on with nobody to stop it. Asked before the parent could have died, and the
  // parent checked after, so a death in between is seen too.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kChildDied);
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
  std::string reason;
  try {
    reason = work();
  } catch (...) {
    // An error is the parent's to find again and report; only a crash or a hang is not.
  }
  if (reason.empty()) ::_exit(0);
  // Under the pipe's atomic size, into an empty pipe: the write is whole and never waits.
  reason.resize(std::min(reason.size(), kMaxRefusal));
  [[maybe_unused]] const ssize_t n = ::write(reason_fd, reason.data(), reason.size());
  ::_exit(kChildRefused);
}

// What the child wrote before it ended (all of it in the pipe by then: one write under
// PIPE_BUF).
std::string read_reason(int fd) {
  std::string out;
  char buf[512];
  for (ssize_t n; out.size() < kMaxRefusal && (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // EAGAIN: nothing more
    }
    out.append(buf, std::size_t(n));
  }
  return out;
}

}  // namespace

MemoryGrowth::MemoryGrowth() {
  // "5" resets the peak resident size to the current one (proc(5)).
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  start_ = status_bytes("VmRSS");
}

std::uint64_t MemoryGrowth::bytes() const {
  const std::uint64_t peak = status_bytes("VmHWM");
  return peak > start_ ? peak - start_ : 0;
}

IsolatedOutcome run_isolated(const std::function<std::string()>& work, std::chrono::milliseconds limit,
                             std::uint64_t memory_bytes) {
  static_assert(kMaxRefusal <= PIPE_BUF);
  int fds[2];
  // Non-blocking: a child another thread forks meanwhile inherits the write end too, and the
  // parent must not wait for that one's end to read this one's reason.
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(std::string("cannot start a child process to check a file: ") + std::strerror(errno), Exit::run_failed);
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot start a child process to check a file: ") + std::strerror(e), Exit::run_failed);
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(work, memory_bytes, parent, fds[1]);
  }
  ::close(fds[1]);
  struct Reader {
    int fd;
    ~Reader() { ::close(fd); }
  } reader{fds[0]};
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
  if (WIFEXITED(status) && WEXITSTATUS(status) == kChildRefused)
    if (std::string reason = read_reason(reader.fd); !reason.empty())
      return {IsolatedOutcome::Kind::refused, std::move(reason)};
  if (WIFSIGNALED(status)) {
    const char* abbrev = ::sigabbrev_np(WTERMSIG(status));
    return {IsolatedOutcome::Kind::crashed, abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(WTERMSIG(status))};
  }
  return {IsolatedOutcome::Kind::crashed, WEXITSTATUS(status) == kChildDied
                                              ? std::string("a sanitizer's report")
                                              : "exit status " + std::to_string(WEXITSTATUS(status))};
}

}  // namespace psi::outputs
