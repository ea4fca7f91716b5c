#!/usr/bin/env python3
"""Writes the .npy files of tests/test_compare_formats.cpp with NumPy's own writer, as a user would.

a.npy        float32 [4, 8], values -2..2
a_b.npy      a, one float32 ulp up at [1, 3] and the sign of zero flipped at [0, 0] (a holds +0 there)
a_big.npy    a, big-endian ('>f4')
a_fortran.npy  a, in Fortran order
bits.npy     uint16 [3, 5] BF16 bits as a user keeps them (no BF16 dtype in NumPy)
scalar.npy   a 0-d float64
empty.npy    float32 [0, 3]
objects.npy  an object array (pickled Python objects): refused
int32.npy    int32 [2, 2]: a dtype psi does not read
bf16_as_f32_a.npy, bf16_as_f32_b.npy  float32 [3, 4] holding BF16 values; b one BF16 step up at [1, 2]
v2.npy       a, written with format version 2.0
Run from this folder:  python3 make_fixtures.py   (numpy 2.x)
"""
import numpy as np
from numpy.lib import format as npformat

a = np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8)
a[0, 0] = 0.0
np.save("a.npy", a)

b = a.copy()
b[1, 3] = np.nextafter(b[1, 3], np.float32(np.inf))
b[0, 0] = -0.0
np.save("a_b.npy", b)

np.save("a_big.npy", a.astype(">f4"))
np.save("a_fortran.npy", np.asfortranarray(a))
np.save("bits.npy", np.arange(15, dtype=np.uint16).reshape(3, 5) + np.uint16(0x3f80))
np.save("scalar.npy", np.float64(2.5))
np.save("empty.npy", np.zeros((0, 3), dtype=np.float32))
np.save("objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
np.save("int32.npy", np.arange(4, dtype=np.int32).reshape(2, 2))
with open("v2.npy", "wb") as f:
    npformat.write_array(f, a, version=(2, 0))

# BF16 states saved as float32 (state.float().numpy()): every value a BF16 value; the second copy
# one BF16 step up at [1, 2] (its 16 low bits stay zero), as psi compare --as bf16 reads them.
bf = (np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.375) - np.float32(1.5))
assert np.all(bf.view(np.uint32) & 0xFFFF == 0)
np.save("bf16_as_f32_a.npy", bf)
bf_b = bf.copy()
bf_b.view(np.uint32)[1, 2] += 0x10000
np.save("bf16_as_f32_b.npy", bf_b)
