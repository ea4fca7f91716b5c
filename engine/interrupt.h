#pragma once
// Signal handling, one table for every terminating signal a process can catch (SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGVTALRM): the first
// only sets a flag; work loops call check_interrupt() at safe points (between cases, steps,
// blocks, planned tiles, progress steps), which throws an Error with exit status 128 + n so
// that nothing is written under a final name, and no file is renamed into place once a signal
// has arrived. A second signal ends the process at once: the temporary files registered below
// are unlinked and the process exits with 128 + n. A signal ignored when psi starts (nohup's
// SIGHUP, a parent's SIGPIPE or SIGXFSZ) stays ignored.
#include <string>

namespace psi {

void install_interrupt_handlers();
std::string signal_name(int sig);  // "SIGINT", "SIGHUP", …
// Throws psi::Error(interrupted_by(signal)) naming the signal and `where` if one arrived;
// otherwise remembers `where` as the last check point passed.
void check_interrupt(const std::string& where);
// The last check point passed ("" before the first), for messages that say where the work is.
std::string last_check_point();
// The check point inside an operator (psi::parallel_for, before each task): a long product stops
// within a task's time, not at the next step. Names the last check point passed.
void check_interrupt_in_operator();

// Temporary files that a second signal removes before the process exits. Registration is
// bounded (kMaxTempFiles at once, paths under 4 KiB); a file that does not fit is still removed
// by its owner on every ordinary exit path, only not by the second-signal exit.
inline constexpr int kMaxTempFiles = 32;
void register_temp_file(const std::string& path);
void release_temp_file(const std::string& path);

}  // namespace psi
