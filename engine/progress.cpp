#include "engine/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "engine/environment.h"
#include "engine/interrupt.h"

namespace psi {

namespace {

// The Progress that owns this thread's line (progress is drawn from the thread doing the work).
thread_local Progress* line_owner = nullptr;

// Seconds between plain lines when stderr is not a terminal, and before the first: soon by
// default, but a period the user set (PSI_PROGRESS_SECONDS) holds for the first line too.
constexpr double kDefaultPeriodSeconds = 30.0;
double plain_period() {
  static const double period = env_progress_seconds().value_or(kDefaultPeriodSeconds);
  return period;
}
double first_line_after() {
  static const double first = env_progress_seconds().value_or(kFirstLineSeconds);
  return first;
}

// When a progress line (or pulse) was last printed, and when the process began, in steady-clock
// nanoseconds: what a pulse from any thread reads without a lock.
std::atomic<std::int64_t> g_last_line{0};
const std::int64_t g_start = std::chrono::steady_clock::now().time_since_epoch().count();
std::mutex g_pulse_mutex;

std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

}  // namespace

void progress_pulse() {
  static const bool tty = Progress::enabled();
  if (tty) return;
  const std::int64_t now = now_ns();
  std::int64_t last = g_last_line.load(std::memory_order_relaxed);
  // The first line soon after the start (a second after a progress line's first would have
  // come: that one says more), the next ones a period apart.
  const double wait = last == 0 ? std::max(first_line_after(), kFirstLineSeconds) + 1.0 : std::max(plain_period(), 10.0);
  if (now - std::max(last, g_start) < std::int64_t(wait * 1e9)) return;
  std::unique_lock<std::mutex> lock(g_pulse_mutex, std::try_to_lock);
  if (!lock || !g_last_line.compare_exchange_strong(last, now)) return;  // another thread prints it
  const std::string place = last_check_point();
  std::fprintf(stderr, "psi: working%s%s, %.0f s elapsed\n", place.empty() ? "" : " at ", place.c_str(),
               double(now - g_start) * 1e-9);
  std::fflush(stderr);
}

bool Progress::enabled() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string title, long total)
    : title_(std::move(title)), total_(total), start_(Clock::now()), last_plain_(start_) {
  if (line_owner) {
    owner_ = line_owner;
    part_index_ = ++owner_->parts_;
    // "one-token one-token float64 ..." under "one-token": the owner's title is said once.
    if (title_ == owner_->title_) title_.clear();
    else if (title_.starts_with(owner_->title_ + " ")) title_.erase(0, owner_->title_.size() + 1);
  } else {
    line_owner = this;
  }
}

Progress::~Progress() {
  finish();
  if (line_owner == this) line_owner = nullptr;
}

void Progress::set_total(long total) { total_ = total; }

void Progress::expect_parts(long n) {
  if (line_owner) line_owner->parts_expected_ += n;
}

void Progress::step(const std::string& where) {
  // Every loop long enough to show progress is a place a signal is noticed.
  check_interrupt(where);
  ++done_;
  if (owner_) owner_->draw(*this, where);
  else draw(*this, where);
}

void Progress::draw(const Progress& part, const std::string& where) {
  const auto now = Clock::now();
  const bool tty = enabled();
  if (!tty) {
    const double wait = printed_ ? plain_period() : first_line_after();
    if (std::chrono::duration<double>(now - last_plain_).count() < wait) return;
  }
  last_plain_ = now;
  printed_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double part_elapsed = std::chrono::duration<double>(now - part.start_).count();
  const double eta = part.done_ > 0 && part.total_ > part.done_
                         ? part_elapsed / double(part.done_) * double(part.total_ - part.done_)
                         : 0.0;
  // The owner's own units, or the part's with its name (and number out of the parts declared, once
  // there is more than one: a number without a total says nothing of how far the command is).
  std::string what = title_ + ": ";
  const bool numbered = &part != this && parts_expected_ > 1 && part.part_index_ <= parts_expected_;
  if (&part != this) {
    if (numbered)
      what += "part " + std::to_string(part.part_index_) + "/" + std::to_string(parts_expected_) +
              (part.title_.empty() ? ": " : " ");
    if (!part.title_.empty()) what += part.title_ + ": ";
  }
  // The whole command, once it has more than one part: the units of the parts finished and of
  // this one, out of theirs and (parts not yet begun counted like this one) those to come.
  std::string whole;
  if (&part != this && (parts_ > 1 || parts_expected_ > 1)) {
    const long expected = std::max<long>(parts_expected_, parts_);
    const long done = parts_units_done_ + part.done_;
    const long total = parts_units_total_ + part.total_ + (expected - parts_) * part.total_;
    const double whole_eta = done > 0 && total > done ? elapsed / double(done) * double(total - done) : 0.0;
    char buf[120];
    std::snprintf(buf, sizeof buf, ", whole command [%ld/%s%ld] ETA %.1fs", done, expected > parts_ ? "~" : "",
                  total, whole_eta);
    whole = buf;
  }
  g_last_line.store(now_ns());
  std::fprintf(stderr, "%s%s%s  [%ld/%ld]  %.1fs elapsed, %sETA %.1fs%s%s", tty ? "\r\033[K" : "", what.c_str(),
               where.c_str(), part.done_, part.total_, elapsed, numbered ? "part " : "", eta, whole.c_str(),
               tty ? "" : "\n");
  std::fflush(stderr);
}

void Progress::note(const std::string& line) {
  if (!enabled()) return;
  std::fprintf(stderr, "\r\033[K%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (owner_) {
    owner_->parts_units_done_ += done_;
    owner_->parts_units_total_ += std::max(total_, done_);
  }
  // A part leaves the line to its owner; the owner clears it.
  if (!owner_ && enabled() && (done_ > 0 || parts_ > 0)) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

}  // namespace psi
