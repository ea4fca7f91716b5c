#include "engine/progress.h"

#include <unistd.h>

#include <cstdio>

namespace psi {

bool Progress::enabled() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string title, long total)
    : title_(std::move(title)), total_(total), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::step(const std::string& where) {
  ++done_;
  draw(where);
}

void Progress::draw(const std::string& where) {
  if (!enabled()) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double eta = done_ > 0 && total_ > done_ ? elapsed / double(done_) * double(total_ - done_) : 0.0;
  std::fprintf(stderr, "\r\033[K%s: %s  [%ld/%ld]  %.1fs elapsed, ETA %.1fs", title_.c_str(),
               where.c_str(), done_, total_, elapsed, eta);
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
  if (enabled() && done_ > 0) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

}  // namespace psi
