"""psi.official and psi.synthinit against the H200's recordings, bit for bit."""

import hashlib
import json

import h5py
import ml_dtypes
import numpy as np
import pytest

import psi


def weights(f, group):
    """The probe's weight and bias, regenerated from its weights_json and the file's seed, each
    checked against the SHA-256 the recording gives it."""
    seed = int(f.attrs["synthinit_global_seed"])
    out = {}
    for entry in json.loads(bytes(f[group]["weights_json"][()]).decode()):
        t = psi.synthinit(entry["name"], entry["shape"], seed=seed)
        assert t.dtype == np.uint16 and list(t.shape) == entry["shape"]
        assert hashlib.sha256(t.tobytes()).hexdigest() == entry["sha256"], entry["name"]
        out["w" if t.ndim == 2 else "b"] = t
    return out["w"], out["b"]


@pytest.mark.parametrize("group,output", [("probe_video_q_proj", "q"), ("probe_audio_ff_up", "proj_out")])
def test_linear_is_the_recorded_h200_projection(reference, group, output):
    with h5py.File(reference / "probes_linear.h5", "r") as f:
        w, b = weights(f, group)
        x = f[group]["x"][()]
        want = f[group][output][()]
    y = psi.official.linear(x, w, b)
    assert y.dtype == np.uint16 and y.shape == want.shape
    assert np.array_equal(y, want), f"{np.count_nonzero(y != want)} elements differ"


def test_linear_takes_and_gives_ml_dtypes_bfloat16(reference):
    with h5py.File(reference / "probes_linear.h5", "r") as f:
        w, b = weights(f, "probe_video_q_proj")
        x = f["probe_video_q_proj"]["x"][:16]
        want = f["probe_video_q_proj"]["q"][:16]
    bf = ml_dtypes.bfloat16
    y = psi.official.linear(x.view(bf), w.view(bf), b.view(bf))
    assert y.dtype == bf
    assert np.array_equal(y.view(np.uint16), want)


def test_linear_dense_variant_is_psis_own_order_not_the_h200s(reference):
    with h5py.File(reference / "probes_linear.h5", "r") as f:
        w, b = weights(f, "probe_video_q_proj")
        x = f["probe_video_q_proj"]["x"][()]
        want = f["probe_video_q_proj"]["q"][()]
    dense = psi.official.linear(x, w, b, variant="dense")
    assert "dense" in psi.official.variants()
    assert not np.array_equal(dense, want)  # the recorded products are the tensor cores', not float32's


def test_linear_leading_dimensions_and_no_bias(reference):
    with h5py.File(reference / "probes_linear.h5", "r") as f:
        w, _ = weights(f, "probe_video_q_proj")
        x = f["probe_video_q_proj"]["x"][:8]
    flat = psi.official.linear(x, w)
    batched = psi.official.linear(x.reshape(2, 4, -1), w)
    assert batched.shape == (2, 4, w.shape[0])
    assert np.array_equal(batched.reshape(8, -1), flat)


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_sdpa_is_the_recorded_attention_core(reference, backend):
    # The FLASH run's q, k and v are the MATH run's (the recording stores them once: equal
    # sha256_full), so both cores are fed the MATH run's inputs.
    with h5py.File(reference / "probe_attn_traj.h5", "r") as f:
        g = f["probe_audio_self_attn"]
        for t in ("q", "k", "v"):
            assert g["flash"][t].attrs["sha256_full"] == g["math"][t].attrs["sha256_full"]
        q, k, v = (g["math"][t][()] for t in ("q", "k", "v"))
        want = g[backend]["sdpa_out"][()]
    heads, d = 32, 64  # the audio self-attention: 2,048 channels as 32 heads of 64
    torch_layout = lambda a: np.ascontiguousarray(a.reshape(1, -1, heads, d).transpose(0, 2, 1, 3))
    out = psi.official.sdpa(torch_layout(q), torch_layout(k), torch_layout(v), backend=backend)
    assert out.shape == (1, heads, q.shape[1], d)
    merged = out.transpose(0, 2, 1, 3).reshape(want.shape)
    assert np.array_equal(merged, want), f"{np.count_nonzero(merged != want)} elements differ"


def test_sdpa_math_and_flash_differ_on_the_recording(reference):
    with h5py.File(reference / "probe_attn_traj.h5", "r") as f:
        q, k, v = (f["probe_audio_self_attn"]["math"][t][()].reshape(1, -1, 32, 64).transpose(0, 2, 1, 3) for t in "qkv")
    m = psi.official.sdpa(q, k, v, backend="math")
    fl = psi.official.sdpa(q, k, v, backend="flash", scale=1 / 8)
    assert not np.array_equal(m, fl)


def test_synthinit_is_a_pure_function_of_seed_name_and_index():
    a = psi.synthinit("transformer_blocks.0.attn1.to_q.weight", [64, 4096], seed=0)
    b = psi.synthinit("transformer_blocks.0.attn1.to_q.weight", [64, 4096], seed=1)
    assert a.shape == (64, 4096) and not np.array_equal(a, b)
    # The spec's check values (shared/spec/synthetic-weights.md): the first four elements.
    assert [hex(v) for v in a.reshape(-1)[:4]] == ["0xbb9a", "0xbaaf", "0xbc0b", "0xbc05"]
