#pragma once
// The two logarithms of CUDA device code that FlashAttention-2's forward uses (attention_flash.h):
//
// lg2_approx(x): the SFU instruction lg2.approx.f32 (through __logf = lg2.approx(x) · ln 2 in
//   the per-split log-sum-exp). The model is envytools' reverse-engineered NVIDIA SFU (nvhw/sfu.c,
//   sfu_lg2; table nvhw/sfu_tab.c, sfu_lg2_tab; MIT licence, © 2015 Marcin Kościelnicki): the
//   significand's fraction cut into a 6-bit table index and a 17-bit offset, log2 of the
//   significand evaluated as A + B·offset + C·offset² in fixed point from the table, the
//   exponent added as the integer part, the result normalised by truncation (a negative result
//   as the ones' complement of its fixed-point magnitude). Established on recorded tensors only
//   (the FLASH blocks' split sums in [1, 256], ../shared/spec/h200-tensor-core-gemm.md), not on
//   direct hardware vectors.
//
// nv_logf(x): libdevice's precise __nv_logf (the non-FTZ build), read from the disassembled
//   bitcode of CUDA's nvvm/libdevice/libdevice.10.bc (llvm-dis); psi's code, libdevice's
//   algorithm and constants. No approximate instruction; every step an IEEE float32 operation
//   (fma = one rounding):
//     x < 2^−126 (subnormal, zero, negative): x' = x · 2^23, i = −23; else x' = x, i = 0
//     e  = (bits(x') − 0x3f2aaaab) & 0xff800000      the exponent that brings x' into [2/3, 4/3)
//     m  = float(bits(x') − e) − 1                    the reduced argument f, |f| ≤ 1/3
//     n  = fma(float(int32(e)), 2^−23, i)             the exponent as a float
//     p  = Horner in f with fma from c0 = 0xbe055027 over 0x3e1039f6, 0xbdf8cdcc, 0x3e0f2955,
//          0xbe2ad8b9, 0x3e4ced0b, 0xbe7fff22, 0x3eaaaa78, then −0.5
//     r  = fma(p · f, f, f)                           (p · f one rounded product)
//     r  = fma(n, ln 2 = 0x3f317218, r)
//     bits(x') ≥ 0x7f800000 (+∞, NaN, negative): r = fma(x', +∞, +∞); x' = 0: r = −∞
//   It is not correctly rounded (one ulp off for about 8 % of inputs in [1, 5]), which the
//   recorded split-KV combine shows.
namespace psi::official {

float lg2_approx(float x);
float nv_logf(float x);

}  // namespace psi::official
