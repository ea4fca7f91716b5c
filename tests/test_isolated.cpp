// outputs/isolated.h: work run in a child process ends as finished, refused (with its reason),
// crashed (with the signal) or timed out, and psi (the parent) goes on in every case; the child
// never outlives its parent.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>
#include <thread>

#include "engine/error.h"
#include "outputs/isolated.h"

using psi::outputs::IsolatedOutcome;
using psi::outputs::run_isolated;

namespace {
constexpr auto kLimit = std::chrono::milliseconds(3000);
constexpr std::uint64_t kMemory = std::uint64_t(1) << 30;
}  // namespace

TEST(Isolated, FinishedWorkAndItsErrorsAreFinished) {
  EXPECT_EQ(run_isolated([] { return std::string(); }, kLimit, kMemory).kind, IsolatedOutcome::Kind::finished);
  // An error is the parent's to meet again and report, not a crash.
  EXPECT_EQ(run_isolated([]() -> std::string { throw psi::Error("corrupt"); }, kLimit, kMemory).kind, IsolatedOutcome::Kind::finished);
}

TEST(Isolated, ACrashIsNamedBySignal) {
  const IsolatedOutcome segv = run_isolated([] { std::raise(SIGSEGV); return std::string(); }, kLimit, kMemory);
  EXPECT_EQ(segv.kind, IsolatedOutcome::Kind::crashed);
  EXPECT_EQ(segv.detail, "SIGSEGV");
  const IsolatedOutcome abrt = run_isolated([]() -> std::string { std::abort(); }, kLimit, kMemory);
  EXPECT_EQ(abrt.kind, IsolatedOutcome::Kind::crashed);
  EXPECT_EQ(abrt.detail, "SIGABRT");
}

TEST(Isolated, AHangIsKilledAtTheLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  const IsolatedOutcome o = run_isolated([] { std::this_thread::sleep_for(std::chrono::hours(1)); return std::string(); },
                                         std::chrono::milliseconds(300), kMemory);
  EXPECT_EQ(o.kind, IsolatedOutcome::Kind::timed_out);
  EXPECT_EQ(o.detail, "no answer within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(Isolated, ARefusalComesBackWithItsReason) {
  const IsolatedOutcome o = run_isolated([] { return std::string("cannot list the attributes of /"); }, kLimit, kMemory);
  EXPECT_EQ(o.kind, IsolatedOutcome::Kind::refused);
  EXPECT_EQ(o.detail, "cannot list the attributes of /");
  const IsolatedOutcome long_one = run_isolated([] { return std::string(100000, 'x'); }, kLimit, kMemory);
  EXPECT_EQ(long_one.kind, IsolatedOutcome::Kind::refused);
  EXPECT_EQ(long_one.detail, std::string(psi::outputs::kMaxRefusal, 'x'));
}

namespace {
// Whether `pid` has ended (gone, or a zombie nobody reaps).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}
}  // namespace

// A parent killed while its child hangs (SIGKILL: no handler runs) takes the child with it; a
// libhdf5 loop used to run on, a CPU busy for ever.
TEST(Isolated, AChildDoesNotOutliveItsParent) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    ::close(fds[0]);
    run_isolated(
        [&] {
          const pid_t me = ::getpid();
          [[maybe_unused]] const ssize_t n = ::write(fds[1], &me, sizeof me);
          std::this_thread::sleep_for(std::chrono::hours(1));
          return std::string();
        },
        std::chrono::hours(1), kMemory);
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t child = 0;
  ASSERT_EQ(::read(fds[0], &child, sizeof child), ssize_t(sizeof child));
  ::close(fds[0]);
  ASSERT_FALSE(ended(child));
  ::kill(parent, SIGKILL);
  ::waitpid(parent, nullptr, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ended(child) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool gone = ended(child);
  if (!gone) ::kill(child, SIGKILL);
  EXPECT_TRUE(gone) << "the child of a killed parent still runs";
}
