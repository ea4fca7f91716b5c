#pragma once
// Per-ISA clones of the hot kernels, for speed only: every clone performs the same float32
// operations in the same order (no FMA: -ffp-contract=off), so the bits do not depend on the
// machine. Not under ThreadSanitizer: the clones' ifunc resolvers run during relocation, before
// TSan's runtime is up, and every program would die at load.
#if defined(__SANITIZE_THREAD__)
#define PSI_ISA_CLONES
#else
#define PSI_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
