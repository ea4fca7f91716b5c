"""psi.oracle against the command line on the same operands, and on a recorded projection."""

import json
from fractions import Fraction

import h5py
import numpy as np
import pytest

import psi

from test_official import weights


@pytest.fixture(scope="module")
def video_q(reference):
    """The first 8 rows of the recorded video Q projection: x, W, b and the H200's y."""
    with h5py.File(reference / "probes_linear.h5", "r") as f:
        w, b = weights(f, "probe_video_q_proj")
        return f["probe_video_q_proj"]["x"][:8], w, b, f["probe_video_q_proj"]["q"][:8]


@pytest.fixture(scope="module")
def operand_files(video_q, tmp_path_factory):
    """The same operands as .npy files (NumPy's writer), for the command line."""
    d = tmp_path_factory.mktemp("operands")
    for name, a in zip("xwby", video_q):
        np.save(d / f"{name}.npy", a)
    return d


def test_certify_finds_what_the_command_line_finds(video_q, operand_files, psi_cli):
    x, w, b, y = video_q
    cert = psi.oracle.certify(x, w, b, y)
    status, out, err = psi_cli("oracle", "certify", *(f"--{n}={operand_files / (n + '.npy')}" for n in "xwby"), "--json")
    assert status == 0, err
    cli = json.loads(out)
    for key in ("elements", "correctly_rounded", "not_correctly_rounded", "ulp_histogram", "reproduced_by",
                "reproduced_by_none", "worst"):
        assert cert.as_json[key] == cli[key], key
    assert cert.elements == 8 * w.shape[0]
    assert cert.not_correctly_rounded == len(cert.not_correctly_rounded_elements) > 0
    for e in cert.not_correctly_rounded_elements:
        assert e.given == int(y[e.row, e.col]) and e.given != e.correctly_rounded and e.ulps >= 1


def test_explain_agrees_with_the_command_line_on_a_misrounded_element(video_q, operand_files, psi_cli):
    x, w, b, y = video_q
    e0 = psi.oracle.certify(x, w, b, y).not_correctly_rounded_elements[0]
    official = int(y[e0.row, e0.col])
    e = psi.oracle.explain(x, w, b, e0.row, e0.col, candidates={"official": official, "one": 1.0})
    assert isinstance(e.correctly_rounded, int) and e.correctly_rounded == e0.correctly_rounded
    assert e.exact == e0.exact == Fraction(e.exact_numerator, e.exact_denominator)
    assert [c.name for c in e.candidates] == ["official", "one"]
    assert e.candidates[0].bits == official and e.candidates[0].ulp_distance == e0.ulps
    assert e.candidates[1].bits == 0x3F80
    status, out, err = psi_cli("oracle", "explain", *(f"--{n}={operand_files / (n + '.npy')}" for n in "xwb"),
                               f"--row={e0.row}", f"--col={e0.col}", f"--candidate=official={official:#06x}",
                               "--candidate=one=0x3f80", "--json")
    assert status == 0, err
    cli = json.loads(out)
    for key in ("row", "col", "K", "bias", "exact", "condition", "correctly_rounded", "candidates", "float32_orders"):
        assert e.as_json[key] == cli[key], key
    num, den = cli["exact"]["fraction"].split("/")
    assert Fraction(int(num), 2 ** int(den.removeprefix("2^"))) == e.exact


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_explain_without_bias_and_with_leading_dimensions(video_q):
    x, w, _, _ = video_q
    e = psi.oracle.explain(x.reshape(2, 4, -1), w, None, 5, 3)
    assert e.bias is None
    # The exact value, summed here in Python's own rationals.
    assert e.exact == sum(Fraction(float(a)) * Fraction(float(c)) for a, c in zip(bf16_values(x[5]), bf16_values(w[3])))
