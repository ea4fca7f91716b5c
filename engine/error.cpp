#include "engine/error.h"

#include <cstdio>

namespace psi {

std::string one_line(const std::string& message) {
  std::string out;
  for (unsigned char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace psi
