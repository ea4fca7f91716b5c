#pragma once
// Names, in a benchmark's context (the console's header, the JSON's "context"), the CPU, the
// vector extensions it reports and the level psi's kernels ran at (engine/cpu_features.h), so
// that a figure says which class of CPU gave it: an AVX2 figure taken with PSI_ISA=avx2 on an
// AVX-512 CPU reads as such, not as one of a CPU without AVX-512.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/cpu_features.h"
#include "engine/error.h"

namespace psi::bench {

// The /proc/cpuinfo field `key` of the first processor ("" if absent).
inline std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(key)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos || colon + 1 >= line.size()) return "";
      return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "";
}

// The SSE, AVX and FMA flags among the CPU's, as the kernel lists them.
inline std::string vector_extensions() {
  std::istringstream flags(cpuinfo_field("flags"));
  std::string flag, out;
  while (flags >> flag)
    if (flag.starts_with("sse") || flag.starts_with("ssse") || flag.starts_with("avx") || flag.starts_with("fma"))
      out += (out.empty() ? "" : " ") + flag;
  return out;
}

inline bool add_cpu_context() {
  benchmark::AddCustomContext("cpu_model", cpuinfo_field("model name"));
  benchmark::AddCustomContext("cpu_vector_extensions", vector_extensions());
  std::string level;
  try {
    level = isa_name(active_isa());
    if (active_isa() < cpu_isa()) level += std::string(" (PSI_ISA; this CPU has ") + isa_name(cpu_isa()) + ")";
  } catch (const Error& e) {  // a bad PSI_ISA: said here, refused by the first kernel that asks
    level = e.what();
  }
  benchmark::AddCustomContext("psi_vector_level", level);
  return true;
}

// Registered before main (benchmark_main's) runs the benchmarks.
inline const bool kCpuContextAdded = add_cpu_context();

}  // namespace psi::bench
