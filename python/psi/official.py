"""The H200's BF16 arithmetic as PyTorch ran it there, bit for bit (docs/official-arithmetic.md)."""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from . import _psi
from ._arrays import bf16_bits, give_back, kind


def variants() -> list:
    """The numerics variants psi knows (what ``psi probe --variant all`` runs)."""
    return list(_psi.variants())


def linear(x: Any, w: Any, b: Optional[Any] = None, *, variant: str = "official-h200"):
    """PyTorch's BF16 ``nn.Linear``: ``x [..., K] @ w[N, K].T + b[N]`` as the H200 computes it.

    The tensor-core product in cuBLAS's K order and split, the bias added in float32 by the
    epilogue, one BF16 rounding. Operands: torch.bfloat16 tensors (CPU), ml_dtypes.bfloat16
    arrays, or uint16 arrays of BF16 bits; the result is of x's kind. ``variant`` names another
    arithmetic psi knows (``variants()``), e.g. ``"dense"`` for psi's own float32 order.
    """
    call = "psi.official.linear"
    xb = bf16_bits(x, "x", call)
    wb = bf16_bits(w, "w", call)
    bb = None if b is None else bf16_bits(b, "b", call)
    return give_back(_psi.linear(xb, wb, bb, str(variant)), kind(x))


def sdpa(q: Any, k: Any, v: Any, *, backend: str = "math", scale: Optional[float] = None):
    """``torch.nn.functional.scaled_dot_product_attention`` in BF16 as the H200 computes it.

    q ``[..., H, Nq, d]``, k and v ``[..., H, Nk, d]`` (PyTorch's layout; leading dimensions are
    batch), no mask, no dropout. ``backend``: ``"math"`` (SDPA MATH) or ``"flash"``
    (FlashAttention-2; head widths 64 and 128). ``scale`` may only be the default 1/sqrt(d): the
    cores are modelled for it.
    """
    call = "psi.official.sdpa"
    qb, kb, vb = (bf16_bits(a, n, call) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    if qb.ndim < 3:
        raise _psi.Error(f"{call}: q {list(qb.shape)} is not [..., H, Nq, d]")
    for name, a in (("k", kb), ("v", vb)):
        if a.ndim != qb.ndim or a.shape[:-3] != qb.shape[:-3] or a.shape[-3] != qb.shape[-3] or a.shape[-1] != qb.shape[-1]:
            raise _psi.Error(
                f"{call}: {name} {list(a.shape)} does not fit q {list(qb.shape)}: q, k and v are [..., H, N, d] with "
                "the same batch, heads and head width"
            )
    if kb.shape[-2] != vb.shape[-2]:
        raise _psi.Error(f"{call}: k {list(kb.shape)} and v {list(vb.shape)} have different key counts")
    heads, d = qb.shape[-3], qb.shape[-1]
    if scale is not None and float(scale) != 1.0 / math.sqrt(d):
        raise _psi.Error(f"{call}: scale {scale} is not 1/sqrt({d}); only the default scale is modelled")
    batch = qb.shape[:-3]

    def merged(a: np.ndarray) -> np.ndarray:
        # [..., H, N, d] -> [B, N, H·d]: heads side by side, as the block's attention holds them.
        n = a.shape[-2]
        return np.ascontiguousarray(a.reshape(-1, heads, n, d).transpose(0, 2, 1, 3).reshape(-1, n, heads * d))

    out = _psi.sdpa(merged(qb), merged(kb), merged(vb), int(heads), str(backend))
    nq = qb.shape[-2]
    out = np.ascontiguousarray(out.reshape(-1, nq, heads, d).transpose(0, 2, 1, 3)).reshape(*batch, heads, nq, d)
    return give_back(out, kind(q))
