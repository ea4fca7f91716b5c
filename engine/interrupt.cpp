#include "engine/interrupt.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

#include "engine/error.h"

namespace psi {

namespace {

std::atomic<int> g_signal{0};

// One slot per registered temporary file. The handler reads only slots marked live, so a slot
// being filled or cleared by the program is never unlinked half-written.
enum SlotState : int { kFree = 0, kBusy = 1, kLive = 2 };
struct TempSlot {
  std::atomic<int> state{kFree};
  char path[4096] = {};
};
std::array<TempSlot, kMaxTempFiles> g_temps;
std::mutex g_temps_mutex;  // the program's side; the handler takes no lock

// The last check point passed, for a stop inside an operator to say where the work was.
std::mutex g_place_mutex;
std::string g_place;

extern "C" void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) return;
  // The second signal: only async-signal-safe calls from here on (unlink, write, _exit).
  for (TempSlot& s : g_temps)
    if (s.state.load() == kLive) ::unlink(s.path);
  static const char msg[] = "psi: error: interrupted again; stopped at once, temporary files removed\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(int(interrupted_by(sig)));
}

std::atomic<bool> g_file_size_limit{false};

// SIGXFSZ is no interruption: the write that passed the limit fails (EFBIG) and says so.
extern "C" void on_file_size_limit(int) { g_file_size_limit.store(true); }

// The signals whose default action ends the process and that a program may handle, with the
// names its messages use. Not here: the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL), SIGABRT and
// SIGTRAP, after which the program cannot go on to a check point; what psi writes has no name
// until it is complete (outputs/pending_output.h), so they leave nothing behind either. The
// real-time signals SIGRTMIN..SIGRTMAX are added at run time.
struct NamedSignal {
  int sig;
  const char* name;
};
constexpr NamedSignal kSignals[] = {
    {SIGINT, "SIGINT"},       {SIGTERM, "SIGTERM"},     {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"},
    {SIGUSR1, "SIGUSR1"},     {SIGUSR2, "SIGUSR2"},     {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},
    {SIGXCPU, "SIGXCPU"},     {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGIO, "SIGIO"},
    {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},       {SIGSTKFLT, "SIGSTKFLT"}};

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART keeps library reads and writes whole after the first signal; the flag is seen
  // at the next check point.
  sa.sa_flags = SA_RESTART;
  // SIGHUP and SIGPIPE ignored when psi starts stay ignored: nohup's, and a parent that wants
  // EPIPE instead. Every other one is handled whatever psi inherited: a shell without job
  // control starts `psi … &` with SIGINT and SIGQUIT ignored, and `kill -INT` must still stop it.
  auto install = [&](int sig) {
    struct sigaction old {};
    if ((sig == SIGHUP || sig == SIGPIPE) && sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
    sigaction(sig, &sa, nullptr);
  };
  for (const NamedSignal& s : kSignals) install(s.sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) install(sig);
  // Ignored or not when psi starts, a file-size limit never ends psi by a signal: its write
  // fails and the error names the limit.
  struct sigaction fsize {};
  fsize.sa_handler = on_file_size_limit;
  sigemptyset(&fsize.sa_mask);
  fsize.sa_flags = SA_RESTART;
  sigaction(SIGXFSZ, &fsize, nullptr);
}

bool file_size_limit_reached() { return g_file_size_limit.load(); }

std::string signal_name(int sig) {
  for (const NamedSignal& s : kSignals)
    if (s.sig == sig) return s.name;
  if (sig == SIGXFSZ) return "SIGXFSZ";
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) return sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  return "signal " + std::to_string(sig);
}

void check_interrupt(const std::string& where) {
  if (int s = g_signal.load()) throw Error("interrupted by " + signal_name(s) + " at " + where, interrupted_by(s));
  std::lock_guard<std::mutex> lock(g_place_mutex);
  g_place = where;
}

std::string last_check_point() {
  std::lock_guard<std::mutex> lock(g_place_mutex);
  return g_place;
}

void check_interrupt_in_operator() {
  const int s = g_signal.load();
  if (!s) return;
  const std::string place = last_check_point();
  throw Error("interrupted by " + signal_name(s) + (place.empty() ? "" : " at " + place) + " (inside an operator)",
              interrupted_by(s));
}

void register_temp_file(const std::string& path) {
  if (path.size() >= sizeof(TempSlot::path)) return;
  std::lock_guard<std::mutex> lock(g_temps_mutex);
  for (TempSlot& s : g_temps) {
    if (s.state.load() != kFree) continue;
    s.state.store(kBusy);
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.state.store(kLive);
    return;
  }
}

void release_temp_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_temps_mutex);
  for (TempSlot& s : g_temps) {
    if (s.state.load() != kLive || std::strcmp(s.path, path.c_str()) != 0) continue;
    s.state.store(kBusy);
    s.path[0] = '\0';
    s.state.store(kFree);
    return;
  }
}

}  // namespace psi
