#pragma once
// What this CPU's vector unit can do, asked once per process: the kernels that pick an ISA at
// run time (for speed only; every choice gives the same bits) and the benchmarks' FMA peak loop
// all ask here.

namespace psi {

#if defined(__x86_64__)
inline bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

inline bool have_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

inline bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

inline bool have_avx512bw() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return yes;
}
#else
inline bool have_avx2() { return false; }
inline bool have_avx2_fma() { return false; }
inline bool have_avx512() { return false; }
inline bool have_avx512bw() { return false; }
#endif

}  // namespace psi
