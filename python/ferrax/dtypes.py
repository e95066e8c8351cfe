"""Dtypes and JAX's type promotion, weak types included.

A Python scalar is *weakly typed*: ``float`` is a weak float32, ``int`` a weak int32,
``bool`` is plain bool. Mixed with an array, a weak value takes the array's dtype when the
array's kind (bool < int < float) is at least its own; otherwise the result is the weak
value's default dtype (an int array plus ``1.5`` is float32). NumPy arrays keep their
dtype (float64 stays float64).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import ml_dtypes
import numpy as np

__all__ = [
    "DTypeLike",
    "bfloat16",
    "canonicalize",
    "default_float",
    "default_int",
    "is_float",
    "is_int",
    "kind_rank",
    "promote",
]

DTypeLike: TypeAlias = str | np.dtype[Any] | type[Any]
"""Anything that names a dtype: ``"float32"``, ``np.float32``, ``np.dtype("f4")``, ``float``."""

bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
default_float: np.dtype[Any] = np.dtype(np.float32)
default_int: np.dtype[Any] = np.dtype(np.int32)
_bool: np.dtype[Any] = np.dtype(np.bool_)

_SUPPORTED = frozenset(
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
) | {bfloat16}


def canonicalize(dtype: DTypeLike) -> np.dtype[Any]:
    """The NumPy dtype for a dtype-like; Python ``float``/``int`` mean the defaults."""
    if dtype is float:
        return default_float
    if dtype is int:
        return default_int
    if dtype is bool:
        return _bool
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return bfloat16
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{dtype!r} is not a dtype") from e
    if d not in _SUPPORTED:
        raise TypeError(f"dtype {d} is not supported by ferrax")
    return d


def is_float(d: np.dtype[Any]) -> bool:
    """True for floating dtypes (bfloat16 included)."""
    return d == bfloat16 or d.kind == "f"


def is_int(d: np.dtype[Any]) -> bool:
    """True for signed and unsigned integer dtypes."""
    return d.kind in "iu"


def kind_rank(d: np.dtype[Any]) -> int:
    """bool 0, integers 1, floats 2: the order weak types are promoted in."""
    if d == _bool:
        return 0
    if is_float(d):
        return 2
    return 1


def _join_strong(a: np.dtype[Any], b: np.dtype[Any]) -> np.dtype[Any]:
    if a == b:
        return a
    if a == _bool:
        return b
    if b == _bool:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        if {a, b} == {np.dtype(np.float16), bfloat16}:
            return default_float
        return a if a.itemsize >= b.itemsize else b
    if fa:
        return a
    if fb:
        return b
    # Both integers.
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    if unsigned.itemsize < 8:
        return np.dtype(f"int{unsigned.itemsize * 16}")
    # u64 with any signed integer has no integer join.
    return default_float


def _weak_default(rank: int) -> np.dtype[Any]:
    return (_bool, default_int, default_float)[rank]


def promote(operands: list[tuple[np.dtype[Any], bool]]) -> tuple[np.dtype[Any], bool]:
    """The result dtype and weak flag of combining values of these (dtype, weak) types."""
    strong: np.dtype[Any] | None = None
    weak_rank = -1
    for d, weak in operands:
        if weak:
            weak_rank = max(weak_rank, kind_rank(d))
        else:
            strong = d if strong is None else _join_strong(strong, d)
    if strong is None:
        if weak_rank < 0:
            raise ValueError("promote needs at least one operand")
        # All weak: a weak value of the widest kind (bool is never weak).
        d = _weak_default(weak_rank)
        return d, weak_rank > 0
    if weak_rank <= kind_rank(strong):
        return strong, False
    return _weak_default(weak_rank), True
