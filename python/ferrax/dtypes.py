"""Dtypes and JAX's type promotion, weak types included, in JAX's two modes.

**Default (JAX's, without x64).** Every 64-bit value entering ferrax becomes its 32-bit
type: NumPy float64/int64/uint64 arrays and scalars are float32/int32/uint32 as operands,
``jit`` arguments, closed-over constants and in ``asarray``; an explicit
``dtype=float64`` request is truncated to float32 with a ``UserWarning``, as JAX warns.
A Python ``float`` is a *weakly typed* float32, an ``int`` a weak int32 (it must fit
int32: an ``OverflowError`` otherwise, as in JAX; then it wraps to the other operand's
dtype, ``uint8_array + -1`` adds 255), a ``bool`` a plain bool. NumPy scalars are
strongly typed: ``x_f32 / np.sqrt(8)`` is float32, ``x_f16 * np.float64(2)`` float32.

**x64** (``ferrax.config.update("jax_enable_x64", True)`` or ``JAX_ENABLE_X64=1``): 64-bit
values stay 64-bit, and the defaults are the 64-bit types: a Python ``float`` is a weak
float64, ``arange(5)`` int64, ``zeros(3)`` float64. Values made in one mode keep their
dtype in the other (a ferrax array of float64 stays float64), as JAX's arrays do.

In both modes a weak value mixed with an array takes the array's dtype when the array's
kind (bool < int < float) is at least its own (``int8_array + 1`` is int8,
``bfloat16_array * 2.0`` bfloat16); otherwise the result is the default dtype of the
weak value's kind, still weak (``int_array + 1.5`` is a weak float32, or float64 with
x64). Strongly typed values follow JAX's promotion lattice (:func:`promote`), whose one
mode-dependent edge is JAX's: without x64, uint32 and int32 meet at int32 rather than
int64, so no 64-bit type is formed from 32-bit operands.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, TypeAlias

import ml_dtypes
import numpy as np

from ferrax import _config
from ferrax._user_frames import user_location, user_stacklevel

__all__ = [
    "DTypeLike",
    "KeyDType",
    "bfloat16",
    "canonical",
    "canonicalize",
    "default_float",
    "default_int",
    "default_uint",
    "is_float",
    "is_int",
    "is_key",
    "key_fry",
    "kind_rank",
    "promote",
    "result_type",
    "supported",
    "to_inexact",
    "x64_enabled",
]

DTypeLike: TypeAlias = str | np.dtype[Any] | type[Any]
"""Anything that names a dtype: ``"float32"``, ``np.float32``, ``np.dtype("f4")``, ``float``."""

bfloat16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
_bool: np.dtype[Any] = np.dtype(np.bool_)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)
_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)

_SUPPORTED = frozenset(
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
) | {bfloat16}

# What a 64-bit dtype becomes without x64.
# (rust/py/src/avals.rs, numpy_array_aval, narrows NumPy arguments the same way.)
_TO_32: dict[np.dtype[Any], np.dtype[Any]] = {_F64: _F32, _I64: _I32, _U64: _U32}

x64_enabled = _config.x64_enabled


class KeyDType:
    """The dtype of typed PRNG key arrays: ``key<fry>`` for threefry2x32 keys (JAX's
    extended key dtype). Not a NumPy dtype: a key array converts to NumPy only through
    ``ferrax.random.key_data``.

    The IR's key dtype (``ferrax._ir`` gives and takes :data:`key_fry` for it, and the
    string ``"key<fry>"``). A key is two uint32 words, lowered as a trailing dimension of
    2 (``key<fry>[3]`` is ``tensor<3x2xui32>``, JAX's physical layout)."""

    __slots__ = ()

    #: Not an integer, float or bool kind: NumPy's "void" kind letter.
    kind = "V"

    @property
    def name(self) -> str:
        """``key<fry>``, as JAX names it."""
        return "key<fry>"

    @property
    def itemsize(self) -> int:
        """Bytes per key (two uint32 words)."""
        return 8

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyDType) or (isinstance(other, str) and other == "key<fry>")

    def __hash__(self) -> int:
        return hash("key<fry>")


#: The one key dtype ferrax has (threefry2x32 keys).
key_fry = KeyDType()


def is_key(d: Any) -> bool:
    """True for the PRNG key dtype."""
    return isinstance(d, KeyDType)


def default_float() -> np.dtype[Any]:
    """The dtype of Python floats and float defaults: float32, float64 with x64."""
    return _F64 if _config._x64 else _F32


def default_int() -> np.dtype[Any]:
    """The dtype of Python ints and integer defaults: int32, int64 with x64."""
    return _I64 if _config._x64 else _I32


def default_uint() -> np.dtype[Any]:
    """The default unsigned integer dtype: uint32, uint64 with x64."""
    return _U64 if _config._x64 else _U32


def canonical(d: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a value of dtype ``d`` has once it enters ferrax: 64-bit dtypes become
    their 32-bit types unless x64 is on; others are unchanged. Silent (values are
    converted as JAX converts them); explicit requests go through :func:`canonicalize`."""
    if _config._x64:
        return d
    return _TO_32.get(d, d)


def _warn_at_user_line(message: str) -> None:
    # Named at the user's line, however deep in the package it was raised.
    warnings.warn(message, UserWarning, stacklevel=user_stacklevel())


def supported(dtype: DTypeLike) -> np.dtype[Any]:
    """The NumPy dtype a dtype-like names, as it is (no truncation; Python ``float`` and
    ``int`` are float64 and int64 here, as NumPy reads them); a ``TypeError`` if ferrax
    does not support it."""
    if dtype is bool:
        return _bool
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return bfloat16
    try:
        d = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{dtype!r} is not a dtype, at {user_location()}") from e
    if d not in _SUPPORTED:
        raise TypeError(f"dtype {d} is not supported by ferrax, at {user_location()}")
    return d


def canonicalize(dtype: DTypeLike, fun_name: str = "") -> np.dtype[Any]:
    """The NumPy dtype for a dtype the user asked for (``dtype=`` arguments).

    Python ``float``/``int`` mean the default float and int dtypes. Without x64, a
    64-bit request is truncated to its 32-bit type with JAX's ``UserWarning``
    (``Explicitly requested dtype float64 requested in zeros is not available ...``);
    ``fun_name`` names the function asked. A dtype ferrax does not support is a
    ``TypeError``.
    """
    if dtype is float:
        return default_float()
    if dtype is int:
        return default_int()
    d = supported(dtype)
    narrow = canonical(d)
    if narrow != d:
        where = f" requested in {fun_name}" if fun_name else ""
        _warn_at_user_line(
            f"Explicitly requested dtype {d}{where} is not available, and will be truncated "
            f"to dtype {narrow}. To enable more dtypes, set the jax_enable_x64 configuration "
            "option (ferrax.config.update('jax_enable_x64', True)) or the JAX_ENABLE_X64 "
            "shell environment variable."
        )
    return narrow


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
_LATTICE_X64: dict[str, tuple[str, ...]] = {
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
# Without x64 no 64-bit type is formed from narrower ones: uint32 and int32 meet at int32.
_LATTICE_X32 = {**_LATTICE_X64, "uint32": ("uint64", "int32")}


def _upper_bounds(lattice: dict[str, tuple[str, ...]], node: str) -> frozenset[str]:
    seen = {node}
    pending = [node]
    while pending:
        for up in lattice[pending.pop()]:
            if up not in seen:
                seen.add(up)
                pending.append(up)
    return frozenset(seen)


def _join_table(lattice: dict[str, tuple[str, ...]]) -> dict[tuple[str, str], str]:
    bounds = {n: _upper_bounds(lattice, n) for n in lattice}
    table: dict[tuple[str, str], str] = {}
    for a in lattice:
        for b in lattice:
            common = bounds[a] & bounds[b]
            # The least upper bound: the common bound below all the others.
            (least,) = [n for n in common if common <= bounds[n]]
            table[a, b] = least
    return table


_JOIN_X64 = _join_table(_LATTICE_X64)
_JOIN_X32 = _join_table(_LATTICE_X32)
_NODE_DTYPE: dict[str, np.dtype[Any]] = {
    n: (bfloat16 if n == "bfloat16" else np.dtype(n)) for n in _LATTICE_X64 if not n.endswith("*")
}


def _node(d: np.dtype[Any], weak: bool) -> str:
    if weak and d != _bool:
        return "f*" if is_float(d) else "i*"
    return "bfloat16" if d == bfloat16 else d.name


def _node_dtype(node: str) -> np.dtype[Any]:
    if node == "i*":
        return default_int()
    if node == "f*":
        return default_float()
    return _NODE_DTYPE[node]


def to_inexact(d: np.dtype[Any]) -> np.dtype[Any]:
    """The floating dtype integer and bool values of dtype ``d`` compute in (``sin``,
    ``true_divide``): float32 for bool and integers up to 32 bits, float64 for 64-bit
    integers (JAX's rule, in both modes); floats are unchanged."""
    if is_float(d):
        return d
    return _F64 if d.itemsize == 8 else _F32


def promote(operands: Sequence[tuple[np.dtype[Any], bool]]) -> tuple[np.dtype[Any], bool]:
    """The dtype and weak flag of an operation on values of these ``(dtype, weak)`` types.

    JAX's rule for ``jax.numpy`` operations (``lattice_result_type``): the least upper
    bound in JAX's promotion lattice (the x32 or x64 one, by the mode), where a weakly
    typed value counts as ``i*`` or ``f*``, below every integer or float dtype; a result
    of ``i*`` or ``f*`` is weakly typed, of the default int or float dtype
    (``bool_array + 1`` is a weak int32, or int64 with x64). Operands all weak join their
    own dtypes and stay weak (two weak uint8 values give a weak uint8); one dtype with a
    strong operand is that dtype, strong. Bool is never weak.
    """
    if not operands:
        raise ValueError("promote needs at least one operand")
    first, first_weak = operands[0]
    if len(operands) == 1:
        return first, first_weak and first != _bool
    if all(d == first for d, _ in operands):
        return first, first != _bool and all(w for _, w in operands)
    join = _JOIN_X64 if _config._x64 else _JOIN_X32
    if all(w for _, w in operands):
        # All weak: the join of their dtypes, still weak.
        node = _node(first, False)
        for d, _ in operands[1:]:
            node = join[node, _node(d, False)]
        d = _node_dtype(node)  # uint64 and int64 meet at f*: the default float
        return d, d != _bool
    node = _node(first, first_weak)
    for d, w in operands[1:]:
        node = join[node, _node(d, w)]
    d = _node_dtype(node)
    return d, node.endswith("*")


def result_type(operands: Sequence[tuple[np.dtype[Any], bool]]) -> tuple[np.dtype[Any], bool]:
    """JAX's ``result_type``: as :func:`promote`, then a weakly typed result takes the
    default dtype of its kind (a weak uint8 join is a weak uint32, or uint64 with x64).

    Used where JAX uses ``result_type`` (``ferrax.numpy.result_type``, the dtype
    ``array`` infers from a sequence, ``arange``'s dtype); operations use :func:`promote`.
    """
    d, weak = promote(operands)
    if weak:
        if is_float(d):
            return default_float(), True
        return (default_uint() if d.kind == "u" else default_int()), True
    return d, False
