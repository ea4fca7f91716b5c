#!/usr/bin/env python3
"""Writes fixture.h5 the way a user would hand operands to `psi oracle`: plain h5py, BF16 as
uint16 raw bits with attribute dtype='bfloat16', W stored [out, in], each tensor with its
sha256_full (of its little-endian bytes: psi refuses a tensor it cannot check).

Element (0, 0) is the paper's eq. (5) case: x.w = 257/256 and b = 1/256. Its recorded value is
what a kernel that writes the matrix product as BF16 before adding the bias produces,
bf16(bf16(257/256) + 1/256) = 1.0, while the correctly rounded result is 129/128. Every other
element's exact value is a BF16 number, recorded as is.

Run: python3 make_fixture.py  (writes fixture.h5 next to this script)
"""
import hashlib
from fractions import Fraction
from pathlib import Path

import h5py
import numpy as np


def bf16_bits(values):
    """Raw BF16 bits of values that are exactly representable in BF16."""
    f32 = np.asarray(values, dtype=np.float32)
    assert np.all(f32.astype(np.float64) == np.asarray(values, dtype=np.float64)), "not float32-exact"
    u32 = f32.view(np.uint32)
    assert np.all(u32 & 0xFFFF == 0), "not BF16-exact"
    return (u32 >> 16).astype(np.uint16)


def write_bf16(f, name, values):
    bits = bf16_bits(values)
    ds = f.create_dataset(name, data=bits)
    ds.attrs["dtype"] = "bfloat16"
    ds.attrs["sha256_full"] = hashlib.sha256(bits.astype("<u2").tobytes()).hexdigest()


x = np.array([[1.0, 2.0**-8, 0, 0, 0, 0, 0, 0],
              [0.5, -0.25, 1.5, 2.0, 0, 0, 0.125, -1.0]])
w = np.array([[1.0, 1.0, 0, 0, 0, 0, 0, 0],
              [0.25, 1.0, -0.75, 1.0, 0.5, 0.5, 2.0, 0.125],
              [-1.0, 0.0, 0.5, -0.5, 3.0, 1.0, 0.25, 0.5]])
b = np.array([2.0**-8, 0.5, -0.125])

y = np.zeros((2, 3))
for r in range(2):
    for c in range(3):
        exact = sum(Fraction(float(x[r, k])) * Fraction(float(w[c, k])) for k in range(8)) + Fraction(float(b[c]))
        y[r, c] = float(exact)
y[0, 0] = 1.0  # bf16(bf16(257/256) + 1/256); the exact value 129/128 is not what was recorded
assert Fraction(float(x[0] @ w[0])) == Fraction(257, 256)

out = Path(__file__).with_name("fixture.h5")
with h5py.File(out, "w") as f:
    write_bf16(f, "x", x)
    write_bf16(f, "w", w)
    write_bf16(f, "b", b)
    write_bf16(f, "y", y)
print(f"wrote {out}")
