// outputs/isolated.h: work run in a child process ends as finished, crashed (with the signal) or
// timed out, and psi (the parent) goes on in every case.
#include <gtest/gtest.h>

#include <csignal>
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
  EXPECT_EQ(run_isolated([] {}, kLimit, kMemory).kind, IsolatedOutcome::Kind::finished);
  // An error is the parent's to meet again and report, not a crash.
  EXPECT_EQ(run_isolated([] { throw psi::Error("corrupt"); }, kLimit, kMemory).kind, IsolatedOutcome::Kind::finished);
}

TEST(Isolated, ACrashIsNamedBySignal) {
  const IsolatedOutcome segv = run_isolated([] { std::raise(SIGSEGV); }, kLimit, kMemory);
  EXPECT_EQ(segv.kind, IsolatedOutcome::Kind::crashed);
  EXPECT_EQ(segv.detail, "SIGSEGV");
  const IsolatedOutcome abrt = run_isolated([] { std::abort(); }, kLimit, kMemory);
  EXPECT_EQ(abrt.kind, IsolatedOutcome::Kind::crashed);
  EXPECT_EQ(abrt.detail, "SIGABRT");
}

TEST(Isolated, AHangIsKilledAtTheLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  const IsolatedOutcome o = run_isolated([] { std::this_thread::sleep_for(std::chrono::hours(1)); },
                                         std::chrono::milliseconds(300), kMemory);
  EXPECT_EQ(o.kind, IsolatedOutcome::Kind::timed_out);
  EXPECT_EQ(o.detail, "no answer within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}
