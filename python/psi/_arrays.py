"""How the package takes BF16 operands and gives results back.

psi's C++ side sees BF16 as its 16-bit patterns in C-contiguous uint16 arrays. A user's operand is
one of: a ``torch.bfloat16`` tensor on the CPU, an ``ml_dtypes.bfloat16`` NumPy array, or a NumPy
``uint16`` array holding the bits. Results come back in the kind of the first operand.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _torch():
    # Only a torch already imported by the caller can have made a tensor: psi never imports it.
    return sys.modules.get("torch")


def _is_torch(a: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(a, torch.Tensor)


def kind(a: Any) -> str:
    """'torch', 'ml_dtypes' or 'bits': how a BF16 result is to be returned."""
    if _is_torch(a):
        return "torch"
    if isinstance(a, np.ndarray) and a.dtype.name == "bfloat16":
        return "ml_dtypes"
    return "bits"


def bf16_bits(a: Any, what: str, call: str) -> np.ndarray:
    """The operand's BF16 bit patterns as a C-contiguous uint16 array (a copy when it was not)."""
    if _is_torch(a):
        torch = _torch()
        if a.dtype != torch.bfloat16:
            raise TypeError(f"{call}: {what} is a {a.dtype} tensor; psi takes BF16 (torch.bfloat16)")
        if a.device.type != "cpu":
            raise TypeError(f"{call}: {what} is on {a.device}; move it to the CPU first (.cpu())")
        if a.requires_grad:
            a = a.detach()
        return np.ascontiguousarray(a.contiguous().view(torch.int16).numpy().view(np.uint16))
    if not isinstance(a, np.ndarray):
        raise TypeError(
            f"{call}: {what} is a {type(a).__name__}; psi takes a NumPy array (ml_dtypes.bfloat16, or uint16 "
            "holding BF16 bits) or a torch.bfloat16 tensor"
        )
    if a.dtype.name == "bfloat16":
        return np.ascontiguousarray(a).view(np.uint16)
    if a.dtype == np.uint16:
        return np.ascontiguousarray(a)
    raise TypeError(
        f"{call}: {what} is {a.dtype}; psi takes BF16: an ml_dtypes.bfloat16 array, uint16 holding BF16 bits, "
        "or a torch.bfloat16 tensor (convert exactly with .astype(ml_dtypes.bfloat16) only if its values are BF16)"
    )


def give_back(bits: np.ndarray, like: str):
    """A uint16 result in the kind `like` names."""
    if like == "torch":
        torch = _torch()
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    if like == "ml_dtypes":
        import ml_dtypes

        return bits.view(ml_dtypes.bfloat16)
    return bits
