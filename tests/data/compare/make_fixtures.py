#!/usr/bin/env python3
"""Writes user_a.h5 and user_b.h5 the way a user would with h5py, for tests/test_compare_cli.cpp.

BF16 data is kept as uint16 raw bits with attribute dtype='bfloat16' (the psi and recording
convention); float32 data is stored as itself. B differs from A in exactly two BF16 elements:
stage1/latent[1, 3] is one BF16 step larger in magnitude and stage1/latent[2, 5] three steps.
Run from this folder:  python3 make_fixtures.py
"""
import h5py
import numpy as np


def to_bf16_bits(x):
    """float32 -> BF16 bits, round to nearest even (finite inputs)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


latent = to_bf16_bits(np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8))
scale = np.arange(16, dtype=np.float32) / np.float32(7)

latent_b = latent.copy()
latent_b[1, 3] += 1
latent_b[2, 5] += 3

for name, lat, extra in (("user_a.h5", latent, "only_in_a"), ("user_b.h5", latent_b, "only_in_b")):
    with h5py.File(name, "w") as f:
        d = f.create_dataset("stage1/latent", data=lat)
        d.attrs["dtype"] = "bfloat16"
        f.create_dataset("stage1/scale", data=scale)
        f.create_dataset(extra, data=np.array([1.5, 2.5, 3.5], dtype=np.float32))
