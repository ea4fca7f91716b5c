#!/usr/bin/env python3
"""Writes the operands of fixture.h5 (eq. (5), see make_fixture.py) as a user's own runtime would
save them, for `psi oracle` on operands from anywhere, each with its format's own writer and no
psi hash anywhere:

eq5.safetensors   attn.x [2, 8], blocks.0.to_q.weight [3, 8] and blocks.0.to_q.bias [3], BF16
                  (safetensors' NumPy API, BF16 from ml_dtypes)
y_bits.npy        y [2, 3] as uint16 BF16 bit patterns (numpy.save: NumPy has no BF16)
y_f32.npy         y [2, 3] as float32, (0, 0) = 1 + 2^-10: not a BF16 value, it rounds to 1.0
w_in_out.npy      W stored transposed, [8, 3] float32 holding the BF16 values
x_not_bf16.npy    x as float32 with 0.1 at [1, 2]: not a BF16 value
eq5_h5py.h5       x, w, b, y as h5py writes BF16 bits: plain uint16, no attribute at all

Run from this folder:  python3 make_user_files.py   (numpy 2.x, safetensors 0.8, ml_dtypes, h5py)
"""
import h5py
import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

with h5py.File("fixture.h5", "r") as f:
    bits = {name: f[name][()] for name in ("x", "w", "b", "y")}
bf16 = {name: v.view(ml_dtypes.bfloat16) for name, v in bits.items()}
f32 = {name: v.astype(np.float32) for name, v in bf16.items()}

save_file({"attn.x": bf16["x"], "blocks.0.to_q.weight": bf16["w"], "blocks.0.to_q.bias": bf16["b"]},
          "eq5.safetensors")
np.save("y_bits.npy", bits["y"])
y = f32["y"].copy()
assert y[0, 0] == 1.0
y[0, 0] = np.float32(1 + 2.0**-10)
np.save("y_f32.npy", y)
np.save("w_in_out.npy", np.ascontiguousarray(f32["w"].T))
x = f32["x"].copy()
x[1, 2] = np.float32(0.1)
np.save("x_not_bf16.npy", x)
with h5py.File("eq5_h5py.h5", "w") as f:
    for name, v in bits.items():
        f.create_dataset(name, data=v)
print("wrote the eq. (5) operands as a user's files")
