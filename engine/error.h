#pragma once
// psi's error value: one line that names the thing (file, dataset, operator, tile) and the
// numbers involved. The CLI prints what() and exits with the carried status.
#include <stdexcept>
#include <string>

namespace psi {

// Exit codes: 0 ok / bitwise equal, 1 a comparison found differences, 2 bad input or usage,
// 3 a run failed (resource outcome, internal error), 4 a verdict rests on data psi could not
// check (read under --allow-unverified, hdf5/unverified.h), 128 + n interrupted by signal n (130
// for SIGINT, 143 for SIGTERM, 129 SIGHUP, … engine/interrupt.h).
enum class Exit : int { ok = 0, differs = 1, bad_input = 2, run_failed = 3, unverified = 4, interrupted = 130 };

// The exit status of an interruption by signal `sig`, and whether a status is one.
inline Exit interrupted_by(int sig) { return Exit(128 + sig); }
inline bool is_interrupted(Exit e) { return int(e) > 128 && int(e) < 128 + 65; }

// Escapes control characters (\n, \r, \xNN) so that a message is exactly one line. Inline:
// the CUDA backend library throws psi::Error without linking back to psi_engine.
inline std::string one_line(const std::string& message) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}

// The message is kept on one line (control characters escaped by one_line): errors can quote
// file content, and a newline there must not split an error or forge another line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, Exit code = Exit::bad_input)
      : std::runtime_error(one_line(msg)), code_(code) {}
  Exit code() const { return code_; }

 private:
  Exit code_;
};

}  // namespace psi
