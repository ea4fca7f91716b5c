"""psi.compare on arrays and files, against `psi compare --json`."""

import json

import ml_dtypes
import numpy as np
import pytest

import psi


def states(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "video/latent": rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16),
        "audio/latent": rng.standard_normal((2, 8)).astype(np.float32),
        "step": np.array([3], dtype=np.int64),
    }


def test_equal_arrays_are_bitwise_equal():
    r = psi.compare(states(), states())
    assert r["exit_code"] == 0 and r["summary"]["equal"] == 3
    by_path = {d["path_a"]: d for d in r["datasets"]}
    assert by_path["/video/latent"]["dtype"] == "bfloat16" and by_path["/audio/latent"]["dtype"] == "float32"


def test_a_differing_element_is_named_with_its_kind():
    a, b = states(), states()
    a["video/latent"][1, 2] = -a["video/latent"][1, 2]
    a["audio/latent"][0, 0] = np.nan
    r = psi.compare(a, b, differences="all")
    assert r["exit_code"] == 1
    d = {x["path_a"]: x for x in r["datasets"]}
    v = d["/video/latent"]
    assert v["status"] == "differs" and v["differing"] == 1 and v["differences"][0]["index"] == [1, 2]
    assert d["/audio/latent"]["differences"][0]["kind"] == "nan_vs_number"
    assert d["/step"]["status"] == "equal"


def test_arrays_against_a_file_and_files_as_the_command_line(tmp_path, psi_cli):
    s = states()
    np.savez(tmp_path / "a.npz", **{k.replace("/", "_"): np.asarray(v).view(np.uint16) if v.dtype == ml_dtypes.bfloat16 else v for k, v in s.items()})
    b = dict(s)
    b["step"] = np.array([4], dtype=np.int64)
    np.savez(tmp_path / "b.npz", **{k.replace("/", "_"): np.asarray(v).view(np.uint16) if v.dtype == ml_dtypes.bfloat16 else v for k, v in b.items()})
    mine = psi.compare(tmp_path / "a.npz", tmp_path / "b.npz", as_bf16=True, differences=5)
    status, out, err = psi_cli("compare", tmp_path / "a.npz", tmp_path / "b.npz", "--as", "bf16", "--differences", "5", "--json")
    assert status == mine["exit_code"] == 1, err
    assert mine == json.loads(out)
    flat = {k.replace("/", "_"): v for k, v in s.items()}
    r = psi.compare(flat, tmp_path / "a.npz", as_bf16=True)
    assert r["exit_code"] == 0, r


def test_torch_tensors_where_torch_is_installed():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16)
    r = psi.compare({"t": t}, {"t": t.clone()})
    assert r["exit_code"] == 0 and r["datasets"][0]["dtype"] == "bfloat16"
