#pragma once
// Signal handling, one table for every signal whose default action ends the process and that
// a program can handle (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM,
// SIGXCPU, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSYS, SIGSTKFLT and the real-time signals): the
// first only sets a flag; work loops call check_interrupt() at safe points (between cases,
// steps, blocks, planned tiles, progress steps, operator tasks), which throws an Error with exit
// status 128 + n so that nothing is written under a final name, and no file is put in place
// once a signal has arrived. A second signal ends the process at once: the temporary files
// registered below are unlinked and the process exits with 128 + n. SIGHUP or SIGPIPE ignored
// when psi starts (nohup's, a parent's) stays ignored; the others are handled all the same (a
// shell starts a background job with SIGINT and SIGQUIT ignored). SIGXFSZ (a file-size limit) is
// no interruption: it is recorded, and the write that passed the limit fails with EFBIG.
#include <string>

namespace psi {

// First thing in main: a signal that arrives while the command line is read is seen at the
// first check point.
void install_interrupt_handlers();
// Whether a write passed the file-size limit (RLIMIT_FSIZE, `ulimit -f`): SIGXFSZ arrived.
bool file_size_limit_reached();
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
