#include "engine/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace psi {

namespace {

Isa detect() {
#if defined(__x86_64__)
  // __builtin_cpu_supports also asks the OS (XGETBV) whether it saves the vector state.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (avx2 && avx512) return Isa::avx512;
  if (avx2) return Isa::avx2;
#endif
  return Isa::portable;
}

constexpr int kUnread = -1;
std::atomic<int> g_active{kUnread};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::portable: break;
  }
  return "portable";
}

Isa cpu_isa() {
  static const Isa isa = detect();
  return isa;
}

std::optional<Isa> env_isa() {
  const char* v = std::getenv("PSI_ISA");
  if (!v) return std::nullopt;
  const std::string t = v;
  if (t.empty()) throw Error("environment variable PSI_ISA is set but empty (unset it for the default)");
  for (const Isa isa : {Isa::avx512, Isa::avx2, Isa::portable}) {
    if (t != isa_name(isa)) continue;
    if (isa > cpu_isa())
      throw Error("environment variable PSI_ISA='" + t + "' names a vector level this CPU lacks (it supports up to " +
                  isa_name(cpu_isa()) + ")");
    return isa;
  }
  throw Error("environment variable PSI_ISA='" + t + "' is not one of avx512, avx2, portable");
}

Isa active_isa() {
  const int v = g_active.load(std::memory_order_relaxed);
  if (v != kUnread) return Isa(v);
  // Racing first calls read the same variable and store the same level.
  const Isa isa = env_isa().value_or(cpu_isa());
  g_active.store(int(isa), std::memory_order_relaxed);
  return isa;
}

void set_active_isa(Isa isa) {
  if (isa > cpu_isa())
    throw Error(std::string("vector level ") + isa_name(isa) + ": this CPU supports up to " + isa_name(cpu_isa()));
  g_active.store(int(isa), std::memory_order_relaxed);
}

}  // namespace psi
