#include "engine/interrupt.h"

#include <atomic>
#include <csignal>

#include "engine/error.h"

namespace psi {

namespace {
std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return g_signal.load() != 0; }
int interrupt_signal() { return g_signal.load(); }

void check_interrupt(const std::string& where) {
  if (int s = g_signal.load())
    throw Error(std::string("interrupted by ") + (s == SIGINT ? "SIGINT" : "SIGTERM") + " at " + where,
                Exit::interrupted);
}

}  // namespace psi
