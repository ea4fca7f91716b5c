#!/usr/bin/env python3
"""Writes the .npz files of tests/test_npz.cpp with NumPy's own writers, as a user would.

ab.npz          numpy.savez: a (float32 [4, 8]), bits (uint16 [3, 5] BF16 bits), big (a, '>f4'),
                fortran (a in Fortran order), block/x (float64 [2, 3]: a name with '/')
ab_deflate.npz  the same arrays with numpy.savez_compressed (deflate)
ab_b.npz        numpy.savez_compressed of the same, a one float32 ulp up at [1, 3]
a_only.npz      numpy.savez of a alone (pairs with ../npy/a.npy and a.safetensors)
a.safetensors   a as the tensor "a", written by the safetensors package when it is there
objects.npz     an object array (pickled Python objects): refused by the .npy parser
torch_like.pt   a zip holding archive/data.pkl, as torch.save writes (Python's zipfile): refused
dup.npz         two members named a.npy (Python's zipfile warns, and writes them): refused
not_npy.npz     a.npy and readme.txt: refused, naming readme.txt
clash.npz       a.npy and a/b.npy: "a" cannot be both a tensor and a group: refused
dotdot.npz      ../a.npy: a name with a '..' part: refused
eq5.npz         the eq. (5) operands of ../oracle/fixture.h5 (x, w, b, y) as uint16 BF16 bits,
                numpy.savez_compressed, for psi oracle explain --x eq5.npz:x ...
Run from this folder:  python3 make_fixtures.py   (numpy 2.x; h5py; safetensors optional)
"""
import zipfile

import h5py
import numpy as np

a = np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8)
a[0, 0] = 0.0
bits = np.arange(15, dtype=np.uint16).reshape(3, 5) + np.uint16(0x3F80)
x = np.arange(6, dtype=np.float64).reshape(2, 3) / 8
arrays = {"a": a, "bits": bits, "big": a.astype(">f4"), "fortran": np.asfortranarray(a), "block/x": x}

np.savez("ab.npz", **arrays)
np.savez_compressed("ab_deflate.npz", **arrays)
b = dict(arrays)
b["a"] = a.copy()
b["a"][1, 3] = np.nextafter(a[1, 3], np.float32(np.inf))
np.savez_compressed("ab_b.npz", **b)
np.savez("a_only.npz", a=a)
np.savez("objects.npz", o=np.array([{"a": 1}, None], dtype=object), allow_pickle=True)

try:
    from safetensors.numpy import save_file

    save_file({"a": a}, "a.safetensors")
except ImportError:
    pass

with zipfile.ZipFile("torch_like.pt", "w") as z:
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("archive/version", b"3\n")
    z.writestr("archive/data/0", bytes(16))

with h5py.File("../oracle/fixture.h5", "r") as f:
    np.savez_compressed("eq5.npz", **{name: f[name][()] for name in ("x", "w", "b", "y")})

npy_bytes = zipfile.ZipFile("a_only.npz").read("a.npy")
for archive, names in (("dup.npz", ["a.npy", "a.npy"]), ("not_npy.npz", ["a.npy", "readme.txt"]),
                       ("clash.npz", ["a.npy", "a/b.npy"]), ("dotdot.npz", ["../a.npy"])):
    with zipfile.ZipFile(archive, "w") as z:
        for name in names:
            z.writestr(name, npy_bytes)
