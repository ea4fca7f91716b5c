#include "engine/measure/resident_peak.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace psi::rt {

ResidentPeak::ResidentPeak() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    reset_ = std::fputs("5", f) >= 0;
    reset_ = std::fclose(f) == 0 && reset_;
  }
}

std::uint64_t resident_peak_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmHWM:")) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

std::uint64_t ResidentPeak::bytes() const { return resident_peak_bytes(); }

}  // namespace psi::rt
