"""Operands of ``ferrax.numpy``: what counts as an array, JAX's dtype promotion (weak
types included) and NumPy's broadcasting.

Every function of the package reads its operands through here, so the rules live once:
Python scalars are weakly typed, NumPy values are typed as JAX types them (64-bit
dtypes become 32-bit ones unless x64 is on, see :mod:`ferrax.dtypes`), and shapes that
do not broadcast are a :class:`~ferrax.TypeCheckError` pointing at the user's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias, cast

import numpy as np

from ferrax import _ir, dtypes, lax
from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, to_numpy, user_location
from ferrax.errors import ShapeError, TypeCheckError

__all__ = [
    "ArrayLike",
    "Axis",
    "as_array",
    "DTypeLike",
    "Shape",
    "broadcast_operands",
    "broadcast_shapes",
    "broadcast_to",
    "convert",
    "host_convert",
    "is_python_scalar",
    "operand_aval",
    "promote_args",
    "promote_args_inexact",
    "promote_dtypes",
    "result_type",
    "shape_error",
]

ArrayLike: TypeAlias = Array | np.ndarray[Any, Any] | np.bool_ | np.number[Any] | bool | int | float
"""What ``ferrax.numpy`` functions take as arrays: ferrax arrays, NumPy arrays and
scalars, Python scalars (weakly typed). Lists are not arrays (use :func:`asarray`)."""

DTypeLike: TypeAlias = dtypes.DTypeLike
"""Anything that names a dtype: ``"float32"``, ``np.float32``, ``np.dtype("f4")``, ``float``."""

Shape: TypeAlias = int | Sequence[int]
"""A shape: an int (one dimension) or a sequence of ints."""

Axis: TypeAlias = int | Sequence[int] | None
"""An axis, several axes, or ``None`` for all of them."""


def is_python_scalar(x: object) -> bool:
    """True for Python ``bool``, ``int`` and ``float`` (not NumPy scalars)."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def operand_aval(name: str, x: object, position: int = 0) -> _ir.ShapedArray:
    """The abstract value of an operand of ``name``; a ``TypeError`` for non-arrays."""
    if isinstance(x, (Array, np.ndarray, np.generic)) or is_python_scalar(x):
        try:
            return aval_of(x)
        except TypeError:
            pass
        except TypeCheckError:
            pass
    kind = type(x).__name__
    hint = " (convert it with ferrax.numpy.asarray)" if isinstance(x, (list, tuple)) else ""
    dtype = getattr(x, "dtype", None)
    what = f"dtype {dtype}" if dtype is not None else f"type {kind}"
    raise TypeError(
        f"{name} takes arrays and scalars; argument {position} has {what}{hint}, "
        f"at {user_location()}"
    )


def as_array(x: ArrayLike, name: str = "asarray", position: int = 0) -> Array:
    """An operand as an :class:`Array` (NumPy values and Python scalars wrapped, with
    their weak type); lists are refused."""
    aval = operand_aval(name, x, position)
    if isinstance(x, Array):
        return x
    # No copy: a NumPy operand used several times stays one constant when staged.
    return ConcreteArray(to_numpy(x), aval.weak_type)


def shape_error(message: str) -> TypeCheckError:
    """A :class:`~ferrax.TypeCheckError` for a shape mismatch, naming the user's line."""
    return TypeCheckError(f"{message}, at {user_location()}")


def broadcast_error(message: str) -> ShapeError:
    """Shapes that do not broadcast together: a :class:`~ferrax.errors.ShapeError`
    (a ``TypeCheckError`` and, as JAX raises, a ``ValueError``), naming the user's line."""
    return ShapeError(f"{message}, at {user_location()}")


def result_type(*args: ArrayLike | DTypeLike | None) -> np.dtype[Any]:
    """The dtype JAX's promotion gives these arrays, scalars and dtypes together
    (``jax.numpy.result_type``): a weakly typed result takes its kind's default dtype.

    The Python types ``int`` and ``float`` count as weakly typed, as Python scalars do;
    ``None`` is the default float. A 64-bit dtype without x64 is truncated with JAX's
    warning (an explicit request), a 64-bit NumPy value silently.
    """
    if not args:
        raise ValueError("at least one array or dtype is required")
    operands: list[tuple[np.dtype[Any], bool]] = []
    for i, a in enumerate(args):
        if a is None:
            operands.append((dtypes.default_float(), False))
        elif a is int or a is float:
            operands.append((dtypes.canonicalize(a), True))
        elif isinstance(a, (str, type, np.dtype)) and not is_python_scalar(a):
            operands.append((dtypes.canonicalize(a, "result_type"), False))
        else:
            av = operand_aval("result_type", a, i)
            operands.append((av.dtype, av.weak_type))
    return dtypes.result_type(operands)[0]


def convert(x: Any, dtype: np.dtype[Any], weak: bool = False) -> Array:
    """``x`` as an array of ``dtype`` (weakly typed if ``weak``).

    Python scalars and NumPy values are converted on the host, by XLA's rules (they
    become literals or constants when traced); ferrax arrays with
    ``convert_element_type`` when their type differs. A Python int that does not fit
    the default int type (int32, int64 with x64) is an ``OverflowError``, as in JAX;
    one that fits wraps to ``dtype``.
    """
    if is_python_scalar(x):
        # Typed first as JAX types it (an int must fit the default int type), then
        # converted (integers wrap: ``uint8_array + -1`` adds 255, as in JAX).
        value = host_convert(to_numpy(x), dtype)
        return ConcreteArray(value, weak and dtype != np.bool_)
    if isinstance(x, (np.ndarray, np.generic)):
        value = np.asarray(x)
        # Same dtype: no copy, so a NumPy operand used several times stays one constant
        # when staged (to_numpy converts a 64-bit one to its 32-bit type once).
        if value.dtype != dtype:
            canonical = to_numpy(value)
            value = canonical if canonical.dtype == dtype else host_convert(value, dtype)
        return ConcreteArray(value, weak and dtype != np.bool_)
    aval = aval_of(x)
    if aval.dtype == dtype and aval.weak_type == weak:
        return cast(Array, x)
    return lax.convert_element_type(x, dtype, weak)


def host_convert(value: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A NumPy value converted as ``convert_element_type`` converts (XLA's rules, no
    warnings): floats to integers truncate toward zero and saturate, NaN becomes 0;
    overflowing floats become infinities; integers wrap. Always a copy."""
    with np.errstate(all="ignore"):
        if dtypes.is_float(value.dtype) and dtypes.is_int(dtype):
            info = np.iinfo(dtype)
            wide = np.trunc(np.nan_to_num(value.astype(np.float64), nan=0.0))
            # Compared in float64, where iinfo(int64).max rounds up to 2**63.
            high, low = wide >= float(info.max), wide <= float(info.min)
            inside = np.where(high | low, 0.0, wide).astype(dtype)
            top, bottom = dtype.type(info.max), dtype.type(info.min)
            return np.where(high, top, np.where(low, bottom, inside)).astype(dtype)
        return np.array(value, dtype=dtype)


def promote_dtypes(name: str, *args: Any) -> list[Any]:
    """The operands converted to their common dtype (JAX's promotion); shapes unchanged."""
    avals = [operand_aval(name, a, i) for i, a in enumerate(args)]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    return [convert(a, dtype, weak) for a in args]


def promote_args(name: str, *args: Any) -> list[Any]:
    """The operands converted to their common dtype and broadcast to their common shape.

    Rank-0 operands are left as they are: every elementwise primitive broadcasts scalars.
    """
    avals = [operand_aval(name, a, i) for i, a in enumerate(args)]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    converted = [convert(a, dtype, weak) for a in args]
    return broadcast_operands(name, converted, avals)


def promote_args_inexact(name: str, *args: Any) -> list[Any]:
    """As :func:`promote_args`, with integer and bool results promoted to a float
    (:func:`ferrax.dtypes.to_inexact`: float32, float64 for 64-bit integers), as for
    ``true_divide`` and ``sin``."""
    avals = [operand_aval(name, a, i) for i, a in enumerate(args)]
    dtype, weak = dtypes.promote([(a.dtype, a.weak_type) for a in avals])
    dtype = dtypes.to_inexact(dtype)
    converted = [convert(a, dtype, weak) for a in args]
    return broadcast_operands(name, converted, avals)


def broadcast_operands(name: str, xs: list[Any], avals: list[_ir.ShapedArray]) -> list[Any]:
    """Operands (of ``avals``) made ready for an elementwise primitive, as ``jax.numpy``
    stages them: shapes that do not broadcast are an error; an operand of lower non-zero
    rank gets leading size-1 dimensions (``broadcast_in_dim`` of ``f32[3]`` to
    ``f32[1,3]``); rank-0 operands and operands of the full rank stay as they are, since
    elementwise primitives broadcast scalars and size-1 dimensions themselves."""
    shapes = [a.shape for a in avals]
    nonscalar = {s for s in shapes if s != ()}
    if len(nonscalar) <= 1:
        return xs
    rank = len(_broadcast_shape(name, avals))
    return [x if len(s) in (0, rank) else _rank_promote(x, s, rank) for x, s in zip(xs, shapes)]


def _rank_promote(x: Any, shape: tuple[int, ...], rank: int) -> Array:
    """``x`` of ``shape`` with leading size-1 dimensions up to ``rank``."""
    lead = rank - len(shape)
    return lax.broadcast_in_dim(as_array(x), (1,) * lead + shape, tuple(range(lead, rank)))


def _broadcast_shape(name: str, avals: Sequence[_ir.ShapedArray]) -> tuple[int, ...]:
    # NumPy's rule, in Python: `np.broadcast_shapes` builds arrays and costs microseconds.
    shapes = [a.shape for a in avals]
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        lead = rank - len(s)
        for i, d in enumerate(s, lead):
            o = out[i]
            if d != o:
                if o == 1:
                    out[i] = d
                elif d != 1:
                    types = " and ".join(a.str_short() for a in avals)
                    raise broadcast_error(
                        f"{name}: shapes of {types} do not broadcast together (NumPy "
                        "broadcasting: aligned from the right, each dimension equal or 1)"
                    )
    return tuple(out)


def broadcast_shapes(*shapes: Shape) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives arrays of these shapes.

    Shapes that do not broadcast are a :class:`~ferrax.TypeCheckError`.
    """
    avals = [
        _ir.ShapedArray((s,) if isinstance(s, int) else tuple(s), np.float32) for s in shapes
    ]
    return _broadcast_shape("broadcast_shapes", avals)


def broadcast_to(array: ArrayLike, shape: Shape) -> Array:
    """``array`` broadcast to ``shape`` by NumPy's rules (``broadcast_in_dim``).

    A shape it does not broadcast to is a :class:`~ferrax.TypeCheckError`.
    """
    aval = operand_aval("broadcast_to", array)
    src = aval.shape
    dst = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if src == dst:
        return as_array(array)
    lead = len(dst) - len(src)
    if lead < 0 or any(s not in (1, d) for s, d in zip(src, dst[lead:])):
        raise broadcast_error(
            f"broadcast_to: {aval.str_short()} cannot be broadcast to shape {list(dst)}"
        )
    # broadcast_in_dim stretches size-1 dimensions itself.
    return lax.broadcast_in_dim(as_array(array), dst, tuple(range(lead, len(dst))))


