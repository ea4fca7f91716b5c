#pragma once
// SIGINT/SIGTERM handling. The first signal only sets a flag; work loops call check_interrupt()
// at safe points (between cases, steps, blocks, planned tiles, progress steps), which throws an
// Error with Exit::interrupted so that nothing is written under a final name, and no file is
// renamed into place once a signal has arrived. A second signal ends the process at once: the
// temporary files registered below are unlinked and the process exits with 130.
#include <string>

namespace psi {

void install_interrupt_handlers();
bool interrupt_requested();
int interrupt_signal();  // the signal number received, 0 if none
// Throws psi::Error(Exit::interrupted) naming `where` if a signal arrived.
void check_interrupt(const std::string& where);

// Temporary files that a second signal removes before the process exits. Registration is
// bounded (kMaxTempFiles at once, paths under 4 KiB); a file that does not fit is still removed
// by its owner on every ordinary exit path, only not by the second-signal exit.
inline constexpr int kMaxTempFiles = 32;
void register_temp_file(const std::string& path);
void release_temp_file(const std::string& path);

}  // namespace psi
