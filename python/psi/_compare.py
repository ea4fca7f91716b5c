"""psi.compare: two sets of tensors compared as ``psi compare`` compares two files."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Union

import numpy as np

from . import _psi
from ._arrays import _is_torch, _torch, bf16_bits

# NumPy element types psi compares as they are, and those it widens exactly (as it widens a
# safetensors file's): psi's comparisons know six element types.
_AS_IS = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.uint8): "uint8",
          np.dtype(np.uint16): "uint16", np.dtype(np.int64): "int64"}
_WIDENED = {np.dtype(np.bool_): np.uint8, np.dtype(np.int8): np.int64, np.dtype(np.int16): np.int64,
            np.dtype(np.int32): np.int64, np.dtype(np.uint32): np.int64, np.dtype(np.float16): np.float32}


def _array(name: str, a: Any, side: str):
    if _is_torch(a):
        if a.dtype == _torch().bfloat16:
            bits = bf16_bits(a.detach().cpu(), f"{side}[{name!r}]", "psi.compare")
            return (name, "bfloat16", list(bits.shape), bits)
        a = a.detach().cpu().contiguous().numpy()
    if not isinstance(a, np.ndarray):
        raise TypeError(f"psi.compare: {side}[{name!r}] is a {type(a).__name__}, not a NumPy array or torch tensor")
    if a.dtype.name == "bfloat16":
        return (name, "bfloat16", list(a.shape), np.ascontiguousarray(a).view(np.uint16))
    dt = a.dtype.newbyteorder("=") if a.dtype.byteorder == ">" else a.dtype
    if dt in _WIDENED:
        a = a.astype(_WIDENED[dt])
        dt = a.dtype
    if dt not in _AS_IS:
        raise TypeError(f"psi.compare: {side}[{name!r}] is {a.dtype}, which psi does not compare")
    return (name, _AS_IS[dt], list(a.shape), np.ascontiguousarray(a, dtype=dt.newbyteorder("<")))


def _side(s: Any, side: str):
    if isinstance(s, (str, os.PathLike)):
        return os.fspath(s)
    if isinstance(s, Mapping):
        return [_array(str(n), a, side) for n, a in s.items()]
    raise TypeError(f"psi.compare: {side} is a {type(s).__name__}; give a file path or a mapping of name to array")


def compare(a: Union[str, os.PathLike, Mapping[str, Any]], b: Union[str, os.PathLike, Mapping[str, Any]], *,
            only: Optional[str] = None, strict: bool = False, as_bf16: bool = False, by_value: bool = False,
            differences: Union[int, str] = 0, allow_partial: bool = False, timing: bool = False) -> dict:
    """Compare A with B (B the reference) tensor by tensor: what ``psi compare --json`` prints.

    Each side is a file psi reads (HDF5, .npy, .npz, safetensors) or a mapping of name to array
    (NumPy, ml_dtypes.bfloat16, torch). Options as the command's: ``only`` (a regular expression
    on the tensor path), ``strict``, ``as_bf16`` (uint16 as BF16 bits), ``by_value``,
    ``differences`` (how many differing elements to list per tensor, or "all"), ``allow_partial``,
    ``timing``. The result's ``exit_code`` is the command's exit status (0: bitwise equal).
    """
    if differences == "all":
        n = -1
    elif isinstance(differences, int) and not isinstance(differences, bool) and differences >= 0:
        n = differences
    else:
        raise _psi.Error(f"psi.compare: differences={differences!r} is not a count >= 0 or 'all'")
    sa, sb = _side(a, "a"), _side(b, "b")
    return json.loads(_psi.compare(sa, sb, only or "", bool(strict), bool(as_bf16), bool(by_value), n,
                                   bool(allow_partial), bool(timing)))
