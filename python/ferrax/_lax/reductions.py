"""Reductions: sum, max, min, prod over axes; argmax and argmin."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import Primitive
from ferrax._lax._operands import bind1, canonical_dtype, quiet, scalar

__all__ = ["argmax", "argmin", "reduce_max", "reduce_min", "reduce_prod", "reduce_sum"]

NDArray = np.ndarray[Any, Any]


def _lowest(d: np.dtype[Any]) -> Any:
    if d == np.bool_:
        return False
    return -np.inf if dtypes.is_float(d) else np.iinfo(d).min


def _highest(d: np.dtype[Any]) -> Any:
    if d == np.bool_:
        return True
    return np.inf if dtypes.is_float(d) else np.iinfo(d).max


def _reduction(name: str, reduce: Callable[..., Any], identity: Callable[[np.dtype[Any]], Any] | None) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    @quiet
    def _impl(x: NDArray, *, axes: tuple[int, ...], out_sharding: None = None) -> Any:
        if identity is not None and x.size == 0:
            # Reducing nothing gives the identity (-inf for max), as in XLA.
            return reduce(x, axis=tuple(axes), initial=identity(x.dtype))
        # Integer sums and products may widen in NumPy; the result is cast back, which
        # wraps as XLA's do.
        return reduce(x, axis=tuple(axes))

    return p


reduce_sum_p = _reduction("reduce_sum", np.sum, None)
reduce_prod_p = _reduction("reduce_prod", np.prod, None)
reduce_max_p = _reduction("reduce_max", np.max, _lowest)
reduce_min_p = _reduction("reduce_min", np.min, _highest)


def _arg(name: str, pick: Callable[..., Any]) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    def _impl(x: NDArray, *, axes: tuple[int, ...], index_dtype: np.dtype[Any]) -> Any:
        (axis,) = axes
        if x.shape[axis] == 0:
            return np.zeros(x.shape[:axis] + x.shape[axis + 1 :], index_dtype)
        # The first extremum; NaN counts as both the maximum and the minimum (NumPy's
        # argmax/argmin return the first NaN, as JAX's do).
        return pick(x, axis=axis).astype(index_dtype)

    return p


argmax_p = _arg("argmax", np.argmax)
argmin_p = _arg("argmin", np.argmin)


def _axes(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(a) for a in axes)


def reduce_sum(operand: Any, axes: Sequence[int]) -> Array:
    """Sum over ``axes`` (numbers; integers wrap)."""
    return bind1(reduce_sum_p, scalar(operand), axes=_axes(axes), out_sharding=None)


def reduce_prod(operand: Any, axes: Sequence[int]) -> Array:
    """Product over ``axes`` (numbers; integers wrap)."""
    return bind1(reduce_prod_p, scalar(operand), axes=_axes(axes))


def reduce_max(operand: Any, axes: Sequence[int]) -> Array:
    """Maximum over ``axes`` (NaN if any is NaN; the lowest value, -inf for floats, over
    zero elements)."""
    return bind1(reduce_max_p, scalar(operand), axes=_axes(axes))


def reduce_min(operand: Any, axes: Sequence[int]) -> Array:
    """Minimum over ``axes`` (NaN if any is NaN; the highest value, inf for floats, over
    zero elements)."""
    return bind1(reduce_min_p, scalar(operand), axes=_axes(axes))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the maximum along ``axis``: the first one on ties, the first NaN if any."""
    return bind1(argmax_p, scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype, "argmax"))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the minimum along ``axis``: the first one on ties, the first NaN if any."""
    return bind1(argmin_p, scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype, "argmin"))
