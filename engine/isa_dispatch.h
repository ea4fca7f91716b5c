#pragma once
// Runs a kernel compiled for the vector level in force (engine/cpu_features.h), for speed only:
// every level performs the same float operations in the same order (no FMA contraction:
// -ffp-contract=off), so the bits do not depend on the machine or on PSI_ISA.
//
// A kernel is a struct with one [[gnu::always_inline]] static run(...); isa_dispatch<K>(args)
// runs it inlined into a wrapper compiled for each level and picks the wrapper at the call.
// Explicit, not target_clones: clang 14 resolves target_clones("arch=x86-64-v4", ...) from the
// CPU's vendor field instead of its features (the v4 clone ran on CPUs without AVX-512), and an
// ifunc resolver can neither honour PSI_ISA nor run under ThreadSanitizer. The targets are
// feature lists, not arch=: GCC inlines a kernel into a wrapper only when their arch agrees.
#include <optional>

#include "engine/cpu_features.h"

#if defined(__x86_64__)
#define PSI_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
#define PSI_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace psi {

namespace isa_detail {
// The level of the wrapper this thread ran last; kNone before any (or after forget).
inline constexpr int kNone = -1;
inline thread_local int t_last = kNone;

#if defined(__x86_64__)
template <class Kernel, class... Args>
PSI_TARGET_AVX512 auto run_avx512(Args... args) {
  t_last = int(Isa::avx512);
  return Kernel::run(args...);
}

template <class Kernel, class... Args>
PSI_TARGET_AVX2 auto run_avx2(Args... args) {
  t_last = int(Isa::avx2);
  return Kernel::run(args...);
}
#endif

template <class Kernel, class... Args>
auto run_portable(Args... args) {
  t_last = int(Isa::portable);
  return Kernel::run(args...);
}
}  // namespace isa_detail

template <class Kernel, class... Args>
auto isa_dispatch(Args... args) {
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::avx512: return isa_detail::run_avx512<Kernel>(args...);
    case Isa::avx2: return isa_detail::run_avx2<Kernel>(args...);
    case Isa::portable: break;
  }
#endif
  return isa_detail::run_portable<Kernel>(args...);
}

// The level whose wrapper this thread's last isa_dispatch ran (nullopt: none since the last
// forget_dispatched_isa): how the tests see that every dispatched kernel ran the level
// cpu_features.h names.
inline std::optional<Isa> last_dispatched_isa() {
  if (isa_detail::t_last == isa_detail::kNone) return std::nullopt;
  return Isa(isa_detail::t_last);
}
inline void forget_dispatched_isa() { isa_detail::t_last = isa_detail::kNone; }

// For a kernel compiled once per level in files of its own, with the level's compiler flags
// (oracle/float64_gemm.h: Eigen vectorises by flags, not target attributes): its caller records
// the level it chose, as isa_dispatch does.
inline void note_dispatched_isa(Isa isa) { isa_detail::t_last = int(isa); }

}  // namespace psi
