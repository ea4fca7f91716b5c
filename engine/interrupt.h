#pragma once
// SIGINT/SIGTERM handling for long runs: the handler only sets a flag; work loops call
// check_interrupt() at safe points (between blocks, steps, cases), which throws an Error with
// Exit::interrupted so that nothing is written under a final name.
#include <string>

namespace psi {

void install_interrupt_handlers();
bool interrupt_requested();
int interrupt_signal();  // the signal number received, 0 if none
// Throws psi::Error(Exit::interrupted) naming `where` if a signal arrived.
void check_interrupt(const std::string& where);

}  // namespace psi
