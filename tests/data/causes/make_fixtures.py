#!/usr/bin/env python3
"""Writes the fixture of tests/test_input_causes.cpp with h5py's own writer, as a user would.

lzf.h5   the eq. (5) operands of ../oracle/fixture.h5 (x, w, b, y) as uint16 BF16 bits, each
         chunked and compressed with h5py's LZF filter (registered filter id 32000), which
         libhdf5 itself lacks: psi must name the filter, not call the file corrupt

Run from this folder:  python3 make_fixtures.py   (numpy 2.x, h5py 3.x)
"""
import h5py

with h5py.File("../oracle/fixture.h5", "r") as f:
    bits = {name: f[name][()] for name in ("x", "w", "b", "y")}
with h5py.File("lzf.h5", "w") as f:
    for name, v in bits.items():
        f.create_dataset(name, data=v, compression="lzf", chunks=v.shape)
print("wrote lzf.h5")
