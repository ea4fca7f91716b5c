#pragma once
// Which vector instructions psi's kernels use: every run-time ISA choice asks here (the lane
// kernels of the tensor-core model, the GEMM's wide kernel, the BF16 scan, the dispatched
// kernels of engine/isa_dispatch.h, the benchmarks' FMA peak loop). The choice is for speed
// only; every level gives the same bits.
//
// The level is the highest this CPU (and its OS) supports, or a lower one named by PSI_ISA
// (avx512 | avx2 | portable), so that the lower paths run — and are checked bitwise against the
// others — on a machine that has more.
#include <optional>

namespace psi {

// The levels, lowest first. avx2 needs AVX2 and FMA; avx512 needs those and AVX-512 F, BW,
// DQ and VL (the x86-64-v4 set the kernels use).
enum class Isa { portable, avx2, avx512 };

const char* isa_name(Isa isa);

// The highest level this CPU supports.
Isa cpu_isa();

// PSI_ISA: the level it names, at most this CPU's; nullopt when unset. A psi::Error naming the
// variable when it is empty, not a level, or one this CPU lacks. Read here, with the level it
// sets, rather than in engine/environment.h, which checks it with the other variables.
std::optional<Isa> env_isa();

// The level in force: PSI_ISA's if set (a psi::Error if it is not a level, or one this CPU
// lacks), else cpu_isa(). Read once; set_active_isa changes it.
Isa active_isa();

// Sets the level in force (tests, benchmarks): a psi::Error for one above cpu_isa().
void set_active_isa(Isa isa);

inline bool have_avx2() { return active_isa() >= Isa::avx2; }
inline bool have_avx512() { return active_isa() >= Isa::avx512; }

// Sets a level for one scope and puts the previous one back.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : previous_(active_isa()) { set_active_isa(isa); }
  ~ScopedIsa() { set_active_isa(previous_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace psi
