#!/usr/bin/env python3
"""Writes the safetensors files of tests/test_compare_safetensors.cpp with the safetensors
package's own writer (its NumPy API; BF16 from ml_dtypes), as a user would.

states_a.safetensors     video BF16 [4, 8], audio F32 [3, 5] (+0 at [0, 0]), step I32 [1],
                         mask BOOL [2, 2], model/block0/x F16 [2, 3] (a name with groups)
states_same.safetensors  the same tensors, written in another order
states_b.safetensors     states_a with video one BF16 ulp up at [2, 5] and audio -0 at [0, 0]
one_f32.safetensors      latent F32 [4, 8]: the values of tests/data/npy/a.npy
u64.safetensors          a U64 tensor: a dtype psi does not compare
group_clash.safetensors  tensors "a" and "a/b": "a" would be a tensor and a group
Run from this folder:  python3 make_fixtures.py   (numpy 2.x, safetensors 0.8, ml_dtypes)
"""
import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

bf16 = ml_dtypes.bfloat16
video = np.linspace(-3.0, 3.0, 32, dtype=np.float32).reshape(4, 8).astype(bf16)
audio = np.linspace(-1.0, 1.0, 15, dtype=np.float32).reshape(3, 5)
audio[0, 0] = 0.0
a = {
    "video": video,
    "audio": audio,
    "step": np.array([7], dtype=np.int32),
    "mask": np.array([[True, False], [False, True]]),
    "model/block0/x": np.array([[0.5, -1.25, 3.0], [65504.0, -0.0, 2.0**-24]], dtype=np.float16),
}
save_file(a, "states_a.safetensors")
save_file(dict(reversed(list(a.items()))), "states_same.safetensors")

b = dict(a)
bits = video.view(np.uint16).copy()
bits[2, 5] += 1
b["video"] = bits.view(bf16)
b["audio"] = audio.copy()
b["audio"][0, 0] = -0.0
save_file(b, "states_b.safetensors")

latent = np.linspace(-2.0, 2.0, 32, dtype=np.float32).reshape(4, 8)
latent[0, 0] = 0.0
save_file({"latent": latent}, "one_f32.safetensors")
save_file({"ids": np.arange(3, dtype=np.uint64)}, "u64.safetensors")
save_file({"a": np.zeros(2, dtype=np.float32), "a/b": np.ones(2, dtype=np.float32)}, "group_clash.safetensors")
