#!/usr/bin/env python3
"""Writes the safetensors files of tests/test_compare_kinds.cpp with the safetensors package's own
writer (its NumPy API; BF16 from ml_dtypes), every element set by its bits.

kinds_a.safetensors  f32 [13]: 1, +0, NaN 0x7fc00000, 2, 3, -Inf, 5, NaN, +Inf, 1.5, -2.5, 0.25, NaN
                     bf [4] BF16: 1, NaN 0x7fc0, 2, -Inf
                     d [3] F64: NaN, 1, 2
kinds_b.safetensors  f32: [0] one ulp up, [1] -0, [2] NaN 0x7fc00001 (payload), [3] NaN (against
                     a number), [4] +Inf (against a number), [5] +Inf (against -Inf), [11] three
                     ulps up, [12] NaN 0xffc00000 (sign); [7] and [8] the same NaN and Inf as A
                     bf: [1] NaN 0x7fc1 (payload), [2] one BF16 ulp up; d: the same as A
bv_f32.safetensors   x F32 [6]: BF16 values 1, +0, -1.5, NaN, +Inf, 3.25 held in float32
                     y F32 [3]: 1 + 2^-9, 1 + 2^-7 + 2^-20 (no BF16 values), 3
bv_bf16.safetensors  x BF16: the same values (the NaN with another payload); y BF16 [3]: 1, 1, 3
bv_bf16_diff.safetensors  x BF16 with [0] one BF16 ulp up, [1] -0, [2] NaN; y as bv_bf16
Run from this folder:  python3 make_fixtures.py   (numpy 2.x, safetensors 0.8, ml_dtypes)
"""
import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

bf16 = ml_dtypes.bfloat16


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def bf(bits):
    return np.array(bits, dtype=np.uint16).view(bf16)


ONE, NAN, INF, NINF = 0x3F800000, 0x7FC00000, 0x7F800000, 0xFF800000
a_f32 = [ONE, 0x00000000, NAN, 0x40000000, 0x40400000, NINF, 0x40A00000, NAN, INF, 0x3FC00000, 0xC0200000, 0x3E800000, NAN]
b_f32 = list(a_f32)
b_f32[0] = ONE + 1
b_f32[1] = 0x80000000
b_f32[2] = NAN + 1
b_f32[3] = NAN
b_f32[4] = INF
b_f32[5] = INF
b_f32[11] = 0x3E800000 + 3
b_f32[12] = 0xFFC00000
a_bf = [0x3F80, 0x7FC0, 0x4000, 0xFF80]
b_bf = [0x3F80, 0x7FC1, 0x4001, 0xFF80]
d = np.array([np.nan, 1.0, 2.0], dtype=np.float64)
save_file({"f32": f32(a_f32), "bf": bf(a_bf), "d": d}, "kinds_a.safetensors")
save_file({"f32": f32(b_f32), "bf": bf(b_bf), "d": d.copy()}, "kinds_b.safetensors")

x_bits = [0x3F80, 0x0000, 0xBFC0, 0x7FC0, 0x7F80, 0x4050]
x_f32 = np.array([b << 16 for b in x_bits], dtype=np.uint32).view(np.float32)
y_f32 = np.array([1 + 2.0**-9, 1 + 2.0**-7 + 2.0**-20, 3.0], dtype=np.float32)
save_file({"x": x_f32, "y": y_f32}, "bv_f32.safetensors")
y_bf = bf([0x3F80, 0x3F80, 0x4040])
save_file({"x": bf([0x3F80, 0x0000, 0xBFC0, 0x7FC1, 0x7F80, 0x4050]), "y": y_bf}, "bv_bf16.safetensors")
save_file({"x": bf([0x3F81, 0x8000, 0x7FC0, 0x7FC1, 0x7F80, 0x4050]), "y": y_bf}, "bv_bf16_diff.safetensors")
