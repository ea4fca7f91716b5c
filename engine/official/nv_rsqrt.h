#pragma once
// rsqrtf as CUDA device code computes it (PyTorch's c10::cuda::compat::rsqrt, the norms' rstd):
// the SFU instruction MUFU.RSQ (PTX rsqrt.approx.f32), an undocumented hardware approximation
// (the CUDA guide only bounds its error, 2 ulp).
//
// The model is the reverse-engineered one of the NVIDIA SFU in envytools (nvhw/sfu.c, sfu_rsqrt;
// table nvhw/sfu_tab.c, sfu_rsqrt_tab; MIT licence, © 2015 Marcin Kościelnicki), unchanged: the
// input's significand with the parity of its exponent prepended ([1, 4) as 2.23 fixed point),
// its top 7 bits a table index, the low 17 an offset; A + B·offset + C·offset² in fixed point,
// rounded once; the exponent halved and negated. Powers of four are exact. Established on the
// recorded H200 block (every RMS norm of block_small through it reproduces all ten recorded
// MATH probes bit for bit, docs/official-kernels.md), not on direct hardware vectors.
namespace psi::official {

// 1/√x as MUFU.RSQ computes it, for positive normal x (the norms' x is at least eps). Zero gives
// +∞ (−0: −∞), negative x and NaN give NaN, +∞ gives +0; subnormal x is taken as zero (the
// non-FTZ instruction's prescaling of subnormals is not modelled).
float rsqrt_approx(float x);

}  // namespace psi::official
