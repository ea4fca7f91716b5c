#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (small, valid files of each kind psi reads).

Run from anywhere: python3 fuzz/corpus/make_seeds.py. Needs numpy and h5py.
"""
import json
import os
import struct

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16(values):
    return (np.asarray(values, dtype="<f4").view("<u4") >> 16).astype("<u2")


def st_seeds(d):
    os.makedirs(d, exist_ok=True)
    w = bf16(np.arange(6) * 0.25 - 0.5).tobytes()
    b = bf16([1.0, -2.0]).tobytes()
    safetensors(os.path.join(d, "bf16.safetensors"),
                [("model.diffusion_model.blocks.0.w", "BF16", [2, 3], w),
                 ("model.diffusion_model.blocks.0.b", "BF16", [2], b)],
                {"format": "pt"})
    safetensors(os.path.join(d, "mixed.safetensors"),
                [("h", "F16", [3], np.asarray([1.5, -2, 2 ** -24], dtype="<f2").tobytes()),
                 ("f", "F32", [2, 2], np.asarray([1.5, -2, 0.0078125, 57344], dtype="<f4").tobytes()),
                 ("s", "BF16", [], bf16([3.0]).tobytes()),
                 ("z", "BF16", [0, 4], b"")])
    safetensors(os.path.join(d, "empty.safetensors"), [])
    # As psi compare reads a user's file: dtypes no checkpoint holds, a name with groups.
    safetensors(os.path.join(d, "user.safetensors"),
                [("run/step_1/video", "F64", [2], np.asarray([0.5, -0.0], dtype="<f8").tobytes()),
                 ("ids", "I32", [3], np.asarray([1, -2, 3], dtype="<i4").tobytes()),
                 ("mask", "BOOL", [2], bytes([1, 0])),
                 ("big", "U64", [1], np.asarray([2 ** 63], dtype="<u8").tobytes())])


def attrs(obj, **kv):
    for k, v in kv.items():
        obj.attrs[k] = v


def bf16_dataset(g, name, values, **kv):
    d = g.create_dataset(name, data=bf16(values).reshape(np.shape(values)))
    attrs(d, dtype="bfloat16", **kv)
    return d


def h5_seeds(d):
    os.makedirs(d, exist_ok=True)
    table = [{"title": "t", "columns": ["path", "rel L2"], "rows": [["dense", "0.00e+00"]], "notes": ["n"]}]
    with h5py.File(os.path.join(d, "psi_report.h5"), "w") as f:
        attrs(f, schema="psi-h5/1", experiment="one-token", model_config="tiny/ltx25", backend="cpu",
              device_name="cpu", seed=np.int64(0), psi_version="0.1.0", start_time_utc="2026-01-01T00:00:00Z")
        x = np.arange(8, dtype="<f4").reshape(2, 4) * 0.5
        bf16_dataset(f, "states/dense/x", x, full_shape="[2, 4]", stored="full", variant="dense",
                     shape_semantics="[2, 4] test", sha256_full="0" * 64, sum_f64=14.0, sumsq_f64=35.0,
                     absmax=3.5, nonfinite_count=np.int64(0))
        r = f.create_dataset("report/tables", data=np.frombuffer(json.dumps(table).encode(), dtype="u1"))
        attrs(r, dtype="utf8")
    with h5py.File(os.path.join(d, "recording.h5"), "w") as f:
        attrs(f, format="record_official/1", synthinit_global_seed=np.int64(7))
        bf16_dataset(f, "probe/out", np.ones((1, 2, 4)), full_shape="[1, 6, 4]", stored="rows_2_to_3_of_axis_1")
        bf16_dataset(f, "probe/none", np.zeros((0,)), full_shape="[1, 6, 4]", stored="none")
        f.create_dataset("probe/weights_json", data=np.frombuffer(b'[{"name": "w", "shape": [4, 4]}]', dtype="u1"))
    with h5py.File(os.path.join(d, "plain_latest.h5"), "w", libver="latest") as f:
        f.create_dataset("a/f32", data=np.array([1.0, np.nan, np.inf], dtype="<f4"))
        f.create_dataset("a/f64", data=np.array([[1.0, 2.0]], dtype="<f8"), chunks=(1, 1), compression="gzip")
        f.create_dataset("a/i64", data=np.arange(3, dtype="<i8"))
        f.create_dataset("a/u16", data=np.arange(3, dtype="<u2"))


def attrs_seeds(d):
    # fuzz_h5_attrs reads its bytes as choices; any bytes are valid, these start it off.
    os.makedirs(d, exist_ok=True)
    for i, seed in enumerate([bytes(range(64)), bytes((7 * k + 3) % 256 for k in range(256))]):
        with open(os.path.join(d, "choices%d.bin" % i), "wb") as f:
            f.write(seed)


def npy_seeds(d):
    # NumPy's own writer: each dtype psi reads, both byte orders, Fortran order, a 0-d and an
    # empty array, format version 2.0.
    os.makedirs(d, exist_ok=True)
    a = np.linspace(-2.0, 2.0, 12, dtype=np.float32).reshape(3, 4)
    np.save(os.path.join(d, "f4.npy"), a)
    np.save(os.path.join(d, "f8_big.npy"), a.astype(">f8"))
    np.save(os.path.join(d, "u2_fortran.npy"), np.asfortranarray(np.arange(12, dtype="<u2").reshape(3, 4)))
    np.save(os.path.join(d, "u1.npy"), np.arange(5, dtype="|u1"))
    np.save(os.path.join(d, "i8_0d.npy"), np.int64(-3))
    np.save(os.path.join(d, "f4_empty.npy"), np.zeros((0, 2), dtype="<f4"))
    with open(os.path.join(d, "f4_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, a, version=(2, 0))


st_seeds(os.path.join(HERE, "fuzz_safetensors_header"))
npy_seeds(os.path.join(HERE, "fuzz_npy"))
attrs_seeds(os.path.join(HERE, "fuzz_h5_attrs"))
h5_seeds(os.path.join(HERE, "fuzz_h5_report"))
