#pragma once
// psi's error value: one line that names the thing (file, dataset, operator, tile) and the
// numbers involved. The CLI prints what() and exits with the carried status.
#include <stdexcept>
#include <string>

namespace psi {

// Exit codes: 0 ok / bitwise equal, 1 a comparison found differences, 2 bad input or usage,
// 3 a run failed (resource outcome, internal error), 130 interrupted.
enum class Exit : int { ok = 0, differs = 1, bad_input = 2, run_failed = 3, interrupted = 130 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, Exit code = Exit::bad_input)
      : std::runtime_error(msg), code_(code) {}
  Exit code() const { return code_; }

 private:
  Exit code_;
};

// Error messages can quote file content (attribute values, JSON): printed through this, control
// characters are escaped so that every error stays exactly one line.
std::string one_line(const std::string& message);

}  // namespace psi
