"""The exact oracle on one projection ``y = x @ w.T + b`` (docs/oracle.md): exact rational values,
the correctly rounded BF16, and which float32 summation orders give a value."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from . import _psi
from ._arrays import bf16_bits


@dataclass
class Judged:
    """One candidate BF16 value, judged against the exact value."""

    name: str
    bits: int
    value: float
    ulp_distance: int
    signed_ulps: float
    orders: List[str]


@dataclass
class Explanation:
    row: int
    col: int
    K: int
    bias: Optional[int]  # BF16 bits, None without a bias
    exact: Fraction
    exact_numerator: int
    exact_denominator: int
    decimal: str  # the exact value to 25 significant digits
    condition: float  # sum |x_k w_k| / |exact|; inf when the exact value is 0
    correctly_rounded: int  # BF16 bits
    correctly_rounded_orders: List[str]  # the float32 orders that give it
    candidates: List[Judged]
    float32_orders: Dict[str, int]  # every order's result, BF16 bits
    as_json: dict = field(repr=False)  # what `psi oracle explain --json` prints for the element


@dataclass
class Element:
    """One output element that is not the correctly rounded value."""

    row: int
    col: int
    given: int  # BF16 bits of y
    correctly_rounded: int
    ulps: int
    exact: Fraction
    orders: List[str]  # the float32 orders that give the value of y


@dataclass
class Certification:
    elements: int
    correctly_rounded: int
    not_correctly_rounded: int
    ulp_histogram: Dict[int, int]
    reproduced_by: Dict[str, int]
    reproduced_by_none: int
    not_correctly_rounded_elements: List[Element]
    as_json: dict = field(repr=False)  # what `psi oracle certify --json` prints, timings included


def _bits(h: str) -> int:
    return int(h, 16)


def _candidate_bits(name: str, v: Any) -> int:
    call = "psi.oracle.explain"
    if isinstance(v, bool):
        raise TypeError(f"{call}: candidate {name!r} is a bool, not BF16 bits or a BF16 value")
    if isinstance(v, (int, np.integer)):
        if not 0 <= int(v) <= 0xFFFF:
            raise _psi.Error(f"{call}: candidate {name!r} = {int(v)} is not 16-bit BF16 bits (0 to 0xffff)")
        return int(v)
    if isinstance(v, (float, np.floating)) and not (isinstance(v, np.generic) and v.dtype.name == "bfloat16"):
        f32 = np.float32(v)
        bits32 = int(np.array(f32).view(np.uint32))
        if (float(f32) != float(v) and not np.isnan(v)) or bits32 & 0xFFFF:
            raise _psi.Error(f"{call}: candidate {name!r} = {v!r} is not a BF16 value; give its bits as an int")
        return bits32 >> 16
    a = bf16_bits(np.asarray(v) if isinstance(v, np.generic) else v, f"candidate {name!r}", call)
    if a.size != 1:
        raise _psi.Error(f"{call}: candidate {name!r} holds {a.size} values, not one")
    return int(a.reshape(-1)[0])


def explain(x: Any, w: Any, b: Optional[Any], row: int, col: int, candidates: Optional[Mapping[str, Any]] = None) -> Explanation:
    """Everything about output element (row, col) of ``x @ w.T + b``.

    x ``[..., K]`` (leading dimensions flattened into rows), w ``[N, K]``, b ``[N]`` or None, all
    BF16 (see psi.official.linear). ``candidates`` maps a name to a BF16 value to judge: its bits
    as an int, or a float that is a BF16 value.
    """
    call = "psi.oracle.explain"
    cands = [(str(n), _candidate_bits(str(n), v)) for n, v in (candidates or {}).items()]
    text, (num, den) = _psi.explain(
        bf16_bits(x, "x", call), bf16_bits(w, "w", call), None if b is None else bf16_bits(b, "b", call),
        int(row), int(col), cands,
    )
    j = json.loads(text)
    cr = j["correctly_rounded"]
    exact = Fraction(int(num), int(den))
    return Explanation(
        row=j["row"], col=j["col"], K=j["K"],
        bias=None if j["bias"] is None else _bits(j["bias"]["bits"]),
        exact=exact, exact_numerator=exact.numerator, exact_denominator=exact.denominator,
        decimal=j["exact"]["decimal"],
        condition=float(j["condition"]),
        correctly_rounded=_bits(cr["bits"]), correctly_rounded_orders=list(cr["orders"]),
        candidates=[
            Judged(c["name"], _bits(c["bits"]), c["value"], c["ulp_distance"], float(c["signed_ulps"]), list(c["orders"]))
            for c in j["candidates"]
        ],
        float32_orders={k: _bits(v) for k, v in j["float32_orders"].items()},
        as_json=j,
    )


def certify(x: Any, w: Any, b: Optional[Any], y: Any) -> Certification:
    """Which elements of y ``[..., N]`` are not the correctly rounded ``x @ w.T + b``, and which
    float32 orders give them (operands as in explain)."""
    call = "psi.oracle.certify"
    text, elements = _psi.certify(
        bf16_bits(x, "x", call), bf16_bits(w, "w", call), None if b is None else bf16_bits(b, "b", call),
        bf16_bits(y, "y", call),
    )
    j = json.loads(text)
    return Certification(
        elements=j["elements"],
        correctly_rounded=j["correctly_rounded"],
        not_correctly_rounded=j["not_correctly_rounded"],
        ulp_histogram={int(k): v for k, v in j["ulp_histogram"].items()},
        reproduced_by=dict(j["reproduced_by"]),
        reproduced_by_none=j["reproduced_by_none"],
        not_correctly_rounded_elements=[
            Element(r, c, given, correct, ulps, Fraction(int(num), int(den)), list(orders))
            for r, c, given, correct, ulps, (num, den), orders in elements
        ],
        as_json=j,
    )
