"""Reductions: sum, max, min, prod over axes; argmax and argmin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive
from ferrax._lax._operands import canonical_dtype, scalar

__all__ = ["argmax", "argmin", "reduce_max", "reduce_min", "reduce_prod", "reduce_sum"]


def _reduction(name: str, impl: Any) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    def _impl(x: np.ndarray[Any, Any], *, axes: tuple[int, ...], out_sharding: None = None) -> Any:
        return impl(x, axis=tuple(axes))

    return p


reduce_sum_p = _reduction("reduce_sum", np.sum)
reduce_prod_p = _reduction("reduce_prod", np.prod)
reduce_max_p = _reduction("reduce_max", np.max)
reduce_min_p = _reduction("reduce_min", np.min)


def _arg(name: str, pick: Any) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    def _impl(x: np.ndarray[Any, Any], *, axes: tuple[int, ...], index_dtype: np.dtype[Any]) -> Any:
        return pick(x, axis=axes[0]).astype(index_dtype)

    return p


argmax_p = _arg("argmax", np.argmax)
argmin_p = _arg("argmin", np.argmin)


def _axes(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(a) for a in axes)


def reduce_sum(operand: Any, axes: Sequence[int]) -> Array:
    """Sum over ``axes``."""
    return reduce_sum_p.bind(scalar(operand), axes=_axes(axes))  # type: ignore[no-any-return]


def reduce_prod(operand: Any, axes: Sequence[int]) -> Array:
    """Product over ``axes``."""
    return reduce_prod_p.bind(scalar(operand), axes=_axes(axes))  # type: ignore[no-any-return]


def reduce_max(operand: Any, axes: Sequence[int]) -> Array:
    """Maximum over ``axes``."""
    return reduce_max_p.bind(scalar(operand), axes=_axes(axes))  # type: ignore[no-any-return]


def reduce_min(operand: Any, axes: Sequence[int]) -> Array:
    """Minimum over ``axes``."""
    return reduce_min_p.bind(scalar(operand), axes=_axes(axes))  # type: ignore[no-any-return]


def argmax(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the maximum along ``axis`` (the first one on ties)."""
    return argmax_p.bind(  # type: ignore[no-any-return]
        scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype)
    )


def argmin(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the minimum along ``axis`` (the first one on ties)."""
    return argmin_p.bind(  # type: ignore[no-any-return]
        scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype)
    )
