"""Bad input is a clear exception, never a crash; long calls let other Python threads run."""

import subprocess
import sys
import textwrap
import threading
import time

import ml_dtypes
import numpy as np
import pytest

import psi

BF = ml_dtypes.bfloat16


def operands(rows=4, k=32, n=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, k)).astype(BF), rng.standard_normal((n, k)).astype(BF),
            rng.standard_normal(n).astype(BF))


def test_wrong_element_type_names_the_operand_and_what_psi_takes():
    x, w, b = operands()
    with pytest.raises(TypeError, match=r"x is float32; psi takes BF16"):
        psi.official.linear(x.astype(np.float32), w, b)
    with pytest.raises(TypeError, match=r"w is a list"):
        psi.official.linear(x, w.tolist(), b)


def test_shapes_that_do_not_agree():
    x, w, b = operands()
    with pytest.raises(psi.Error, match=r"w \[8, 31\] does not fit x \[4, 32\]"):
        psi.official.linear(x, w[:, :31], b)
    with pytest.raises(psi.Error, match=r"b \[7\] does not fit w \[8, 32\]"):
        psi.official.linear(x, w, b[:7])
    with pytest.raises(psi.Error, match=r"does not fit"):
        psi.oracle.explain(x, w[:, :31], b, 0, 0)
    with pytest.raises(psi.Error, match=r"--col 8 outside 0..7"):
        psi.oracle.explain(x, w, b, 0, 8)
    with pytest.raises(psi.Error, match=r"output \[4, 7\] does not fit"):
        psi.oracle.certify(x, w, b, np.zeros((4, 7), dtype=BF))
    q = np.zeros((1, 2, 5, 64), dtype=BF)
    with pytest.raises(psi.Error, match=r"k \[1, 2, 5, 32\] does not fit q"):
        psi.official.sdpa(q, q[..., :32], q)
    assert issubclass(psi.Error, ValueError)


def test_non_contiguous_operands_are_copied_not_misread():
    x, w, b = operands(k=64)
    strided = x[:, ::2]  # a view: every other column
    assert not strided.flags.c_contiguous
    assert np.array_equal(psi.official.linear(strided, w[:, :32], b).view(np.uint16),
                          psi.official.linear(np.ascontiguousarray(strided), w[:, :32], b).view(np.uint16))
    wt = np.asfortranarray(w)
    assert np.array_equal(psi.official.linear(x, wt, b).view(np.uint16), psi.official.linear(x, w, b).view(np.uint16))


def test_nan_has_no_exact_value():
    x, w, b = operands()
    x[2, 5] = np.nan
    with pytest.raises(psi.Error, match=r"operand x row 2 \[5\] is NaN"):
        psi.oracle.explain(x, w, b, 2, 0)
    with pytest.raises(psi.Error, match=r"not a BF16 value"):
        psi.oracle.explain(x, w, b, 0, 0, candidates={"c": 0.1})


def test_names_psi_does_not_know():
    x, w, b = operands()
    with pytest.raises(psi.Error, match=r"official-h100"):
        psi.official.linear(x, w, b, variant="official-h100")
    with pytest.raises(psi.Error, match=r"backend 'efficient'"):
        psi.official.sdpa(*(np.zeros((1, 1, 4, 64), dtype=BF),) * 3, backend="efficient")
    with pytest.raises(psi.Error, match=r"only the default scale"):
        psi.official.sdpa(*(np.zeros((1, 1, 4, 64), dtype=BF),) * 3, scale=0.5)
    with pytest.raises(psi.Error):
        psi.synthinit("not.a.synthinit.name", [2, 2])


def test_files_that_are_not_there_are_named(tmp_path):
    with pytest.raises(psi.Error, match=r"nothing\.h5"):
        psi.compare(tmp_path / "nothing.h5", {"t": np.zeros(3, np.float32)})
    with pytest.raises(psi.Error, match=r"cannot be both a tensor and a group"):
        psi.compare({"a": np.zeros(2, np.float32), "a/b": np.zeros(2, np.float32)}, {})


def test_hostile_calls_do_not_crash_the_interpreter():
    # In a child: a crash there (abort, segfault) is a non-zero status here, not a lost test run.
    script = textwrap.dedent("""
        import numpy as np, psi
        from psi import _psi
        u16 = np.zeros((2, 3), np.uint16)
        calls = [
            lambda: _psi.linear(np.zeros((2, 3), np.float32), u16, None, "official-h200"),
            lambda: _psi.linear(np.zeros((0, 3), np.uint16), u16, None, "official-h200"),
            lambda: _psi.linear(np.zeros((2, 0), np.uint16), np.zeros((3, 0), np.uint16), None, "official-h200"),
            lambda: _psi.linear(np.zeros((), np.uint16), u16, None, "official-h200"),
            lambda: _psi.linear(u16.T, u16, None, "official-h200"),
            lambda: _psi.sdpa(u16, u16, u16, 0, "math"),
            lambda: _psi.sdpa(np.zeros((1, 4, 96), np.uint16), np.zeros((1, 0, 96), np.uint16), np.zeros((1, 0, 96), np.uint16), 1, "flash"),
            lambda: _psi.sdpa(*(np.zeros((1, 4, 96), np.uint16),) * 3, 1, "flash"),
            lambda: _psi.synthinit("transformer_blocks.0.attn1.to_q.weight", [1 << 40, 1 << 40], 0),
            lambda: _psi.synthinit("transformer_blocks.0.attn1.to_q.weight", [-4, 4], 0),
            lambda: _psi.explain(u16, u16, None, -1, 0, []),
            lambda: _psi.explain(u16, u16, None, 0, 0, [("c", 1 << 20)]),
            lambda: _psi.certify(u16, u16, None, np.zeros((2, 2), np.uint16)),
            lambda: _psi.compare(7, "x", "", False, False, False, 0, False, False),
            lambda: _psi.compare([("t", "complex", [1], np.zeros(1, np.uint8))], [], "", False, False, False, 0, False, False),
            lambda: _psi.compare([("t", "float32", [4], np.zeros(1, np.uint8))], [], "", False, False, False, 0, False, False),
            lambda: psi.compare({"t": np.zeros(2, np.float32)}, {"t": np.zeros(2, np.float32)}, only="(("),
            lambda: _psi.set_threads(-1),
        ]
        for i, call in enumerate(calls):
            try:
                call()
                print(i, "returned")
            except (ValueError, TypeError, OverflowError, MemoryError) as e:
                print(i, type(e).__name__, str(e)[:100])
        print("survived")
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("survived"), p.stdout + p.stderr


def test_long_calls_release_the_gil():
    x, w, b = operands(rows=512, k=4096, n=1024)
    span = []

    def work():
        t0 = time.perf_counter()
        psi.official.linear(x, w, b)
        span.extend([t0, time.perf_counter()])

    t = threading.Thread(target=work)
    stamps = []
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    t0, t1 = span
    assert t1 - t0 > 0.02, "the call was too short to tell"
    # Held through the product, the GIL would let this thread run before and after it, never in
    # its middle half.
    middle = [s for s in stamps if t0 + (t1 - t0) / 4 < s < t1 - (t1 - t0) / 4]
    assert len(middle) > 100, (len(middle), t1 - t0)
