"""psi from Python: the H200's BF16 arithmetic, the exact oracle and compare, in-process.

- ``psi.official.linear`` and ``psi.official.sdpa``: what the H200 gives for PyTorch's BF16
  ``nn.Linear`` and SDPA MATH / FLASH, bit for bit, on any CPU.
- ``psi.synthinit``: a SynthInit tensor (the recordings' weights and inputs).
- ``psi.oracle.explain`` and ``psi.oracle.certify``: one projection element, or all of them, in
  exact rational arithmetic.
- ``psi.compare``: two sets of tensors (files or arrays by name), as ``psi compare --json``.

Errors are ``psi.Error`` (a ValueError) with the command line's one-line message; wrong types
are TypeError.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _psi
from ._compare import compare
from . import official, oracle

Error = _psi.Error

__all__ = ["Error", "compare", "official", "oracle", "synthinit", "threads", "set_threads"]


def synthinit(name: str, shape: Sequence[int], *, seed: int = 0) -> np.ndarray:
    """The SynthInit v1 tensor `name` of `shape` under global seed `seed`, as BF16 bits (uint16).

    A recording's weights_json lists each weight's name and shape; its root attribute
    synthinit_global_seed is the seed.
    """
    if not isinstance(name, str):
        raise TypeError(f"psi.synthinit: name is a {type(name).__name__}, not a str")
    return _psi.synthinit(name, [int(d) for d in shape], int(seed))


def threads() -> int:
    """The threads psi's kernels use: PSI_THREADS if set, else the hardware's."""
    return _psi.threads()


def set_threads(n: int) -> None:
    """Threads for psi's kernels from now on (0: the default). Results do not depend on it."""
    _psi.set_threads(int(n))
