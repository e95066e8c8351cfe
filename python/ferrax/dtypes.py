"""Dtypes and JAX's type promotion, weak types included.

A Python scalar is *weakly typed*: ``float`` is a weak float32, ``int`` a weak int32,
``bool`` is plain bool. Mixed with an array, a weak value takes the array's dtype when the
array's kind (bool < int < float) is at least its own (``int8_array + 1`` is int8,
``bfloat16_array * 2.0`` is bfloat16); otherwise the result is the weak value's dtype,
still weak (``int_array + 1.5`` is a weak float32). Strongly typed values follow JAX's
promotion lattice (:func:`promote`). NumPy arrays keep their dtype (float64 stays
float64, as in JAX with ``jax_enable_x64``).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """bool 0, integers 1, floats 2: the order of the kinds."""
    if d == _bool:
        return 0
    if is_float(d):
        return 2
    return 1


# JAX's promotion lattice (``jax._src.dtypes``), without complex and 8-bit float types:
# each type with the types directly above it. ``i*`` and ``f*`` are the weak integer and
# float types (Python scalars); a join reaching one of them is weakly typed.
_LATTICE: dict[str, tuple[str, ...]] = {
    "bool": ("i*",),
    "i*": ("uint8", "int8"),
    "uint8": ("uint16", "int16"),
    "uint16": ("uint32", "int32"),
    "uint32": ("uint64", "int64"),
    "uint64": ("f*",),
    "int8": ("int16",),
    "int16": ("int32",),
    "int32": ("int64",),
    "int64": ("f*",),
    "f*": ("bfloat16", "float16"),
    "bfloat16": ("float32",),
    "float16": ("float32",),
    "float32": ("float64",),
    "float64": (),
}


def _upper_bounds(node: str) -> frozenset[str]:
    seen = {node}
    pending = [node]
    while pending:
        for up in _LATTICE[pending.pop()]:
            if up not in seen:
                seen.add(up)
                pending.append(up)
    return frozenset(seen)


def _join_table() -> dict[tuple[str, str], str]:
    bounds = {n: _upper_bounds(n) for n in _LATTICE}
    table: dict[tuple[str, str], str] = {}
    for a in _LATTICE:
        for b in _LATTICE:
            common = bounds[a] & bounds[b]
            # The least upper bound: the common bound below all the others.
            (least,) = [n for n in common if common <= bounds[n]]
            table[a, b] = least
    return table


_JOIN = _join_table()
_NODE_DTYPE: dict[str, np.dtype[Any]] = {
    n: (bfloat16 if n == "bfloat16" else np.dtype(n)) for n in _LATTICE if not n.endswith("*")
}
_NODE_DTYPE["i*"] = default_int
_NODE_DTYPE["f*"] = default_float
# The dtype of a weakly typed result, by kind. JAX's defaults without ``jax_enable_x64``
# (with it, JAX's are the 64-bit types).
_WEAK_DEFAULT: dict[str, np.dtype[Any]] = {
    "i": default_int,
    "u": np.dtype(np.uint32),
    "f": default_float,
}


def _node(d: np.dtype[Any], weak: bool) -> str:
    if weak and d != _bool:
        return "f*" if is_float(d) else "i*"
    return "bfloat16" if d == bfloat16 else d.name


def _lattice_join(operands: Sequence[tuple[np.dtype[Any], bool]]) -> tuple[np.dtype[Any], bool]:
    first, first_weak = operands[0]
    if len(operands) == 1:
        return first, first_weak
    if all(d == first for d, _ in operands):
        return first, all(w for _, w in operands)
    if all(w for _, w in operands):
        # All weak: the join of their dtypes, still weak.
        node = _node(first, False)
        for d, _ in operands[1:]:
            node = _JOIN[node, _node(d, False)]
        return _NODE_DTYPE[node], True
    node = _node(first, first_weak)
    for d, w in operands[1:]:
        node = _JOIN[node, _node(d, w)]
    return _NODE_DTYPE[node], node.endswith("*")


def promote(operands: Sequence[tuple[np.dtype[Any], bool]]) -> tuple[np.dtype[Any], bool]:
    """The result dtype and weak flag of combining values of these ``(dtype, weak)`` types.

    JAX's rules (``jax.dtypes.result_type``): the least upper bound in JAX's promotion
    lattice, where a weakly typed value counts as ``i*`` or ``f*``, below every integer
    or float dtype, and a result of ``i*`` or ``f*`` is weakly typed; operands all weak
    join their dtypes and stay weak; one dtype with a strong operand is that dtype. A
    weakly typed result then takes the default dtype of its kind, and bool is never weak.

    The one deliberate difference from JAX with ``jax_enable_x64``: those defaults are
    int32, uint32 and float32 here (JAX's without x64) rather than the 64-bit types, so
    ``bool_array + 1`` is a weak int32 and ``uint64_array + int64_array`` a weak float32;
    64-bit arrays keep their dtype (as in JAX with x64).
    """
    if not operands:
        raise ValueError("promote needs at least one operand")
    d, weak = _lattice_join(operands)
    if d == _bool:
        return d, False
    if weak:
        return _WEAK_DEFAULT["f" if is_float(d) else d.kind], True
    return d, False
