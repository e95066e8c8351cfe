"""Reductions: sum, max, min, prod over axes; the logical reductions and, or, xor;
argmax and argmin."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array
from ferrax._core import ConcreteArray, Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, canonical_dtype, quiet, scalar
from ferrax._lax.elementwise import convert_element_type, div, eq, mul
from ferrax._lax.elementwise import _zero_rule as zero_rule
from ferrax._lax.structural import broadcast_in_dim, pad, reshape, slice, squeeze

__all__ = [
    "argmax", "argmin", "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod", "reduce_sum",
    "reduce_xor",
]

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


def _logical(name: str, ufunc: np.ufunc, identity: int) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    def _impl(x: NDArray, *, axes: tuple[int, ...]) -> Any:
        # XLA's identities over no elements: all ones for and (True), zero for or, xor.
        return ufunc.reduce(x, axis=tuple(axes), initial=np.array(identity).astype(x.dtype)[()])

    return p


reduce_and_p = _logical("reduce_and", np.bitwise_and, -1)
reduce_or_p = _logical("reduce_or", np.bitwise_or, 0)
reduce_xor_p = _logical("reduce_xor", np.bitwise_xor, 0)


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


def _logical_axes(name: str, x: Any, axes: Sequence[int]) -> tuple[int, ...]:
    """``axes`` checked as JAX's errors go: an axis outside ``-rank..rank`` is an
    IndexError (JAX's shape rule); a negative or repeated one a ValueError (JAX accepts
    them while tracing and fails to lower them)."""
    aval = aval_of(x)
    rank = len(aval.shape)
    out = tuple(operator.index(a) for a in axes)
    if dtypes.is_float(aval.dtype):
        return out  # the shape rule refuses the dtype first, as JAX's does
    for a in out:
        if not -rank <= a < rank:
            raise IndexError(f"{name}: axis {a} is out of bounds for an operand of rank {rank}, at {user_location()}")
    if any(a < 0 for a in out) or len(set(out)) != len(out):
        raise ValueError(f"{name}: axes {out} must be distinct and in [0, {rank}), at {user_location()}")
    return out


def reduce_and(operand: Any, axes: Sequence[int]) -> Array:
    """Bitwise and over ``axes`` (bool or integer operands: ``all`` for bools; all ones,
    True, over zero elements). Never weakly typed."""
    x = scalar(operand)
    return bind1(reduce_and_p, x, axes=_logical_axes("reduce_and", x, axes))


def reduce_or(operand: Any, axes: Sequence[int]) -> Array:
    """Bitwise or over ``axes`` (bool or integer operands: ``any`` for bools; zero,
    False, over zero elements). Never weakly typed."""
    x = scalar(operand)
    return bind1(reduce_or_p, x, axes=_logical_axes("reduce_or", x, axes))


def reduce_xor(operand: Any, axes: Sequence[int]) -> Array:
    """Bitwise exclusive or over ``axes`` (bool or integer operands: parity for bools;
    zero, False, over zero elements). Never weakly typed."""
    x = scalar(operand)
    return bind1(reduce_xor_p, x, axes=_logical_axes("reduce_xor", x, axes))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the maximum along ``axis``: the first one on ties, the first NaN if any."""
    return bind1(argmax_p, scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype, "argmax"))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Array:
    """Index of the minimum along ``axis``: the first one on ties, the first NaN if any."""
    return bind1(argmin_p, scalar(operand), axes=(int(axis),), index_dtype=canonical_dtype(index_dtype, "argmin"))


# -------------------------------------------------------------------------- derivatives
# Forward-mode rules (``ferrax._interpreters.ad``), written with the ``lax`` functions so
# that they differentiate again and stage like user code.

ad.deflinear(reduce_sum_p)


def _chooser_jvp(g: Any, ans: Any, operand: Any, *, axes: tuple[int, ...]) -> Any:
    """max/min: the tangent averaged over the positions equal to the result (JAX's rule:
    ties share the derivative evenly)."""
    kept = [1 if i in axes else d for i, d in enumerate(operand.shape)]
    where = convert_element_type(eq(operand, reshape(ans, kept)), g.dtype)
    counts = reduce_sum(where, axes)
    return div(reduce_sum(mul(g, where), axes), counts)


ad.defjvp(reduce_max_p, _chooser_jvp)
ad.defjvp(reduce_min_p, _chooser_jvp)


def _scalar(value: int, like: Any) -> Any:
    return ConcreteArray(np.asarray(value, like.dtype), False)


def _filled(value: int, like: Any, shape: Sequence[int]) -> Any:
    """An array of ``shape`` and ``like``'s dtype full of ``value``."""
    return broadcast_in_dim(ConcreteArray(np.asarray(value, like.dtype), False), shape, ())


def _reduce_prod_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[int, ...]) -> tuple[Any, Any]:
    """The product and its tangent by a balanced tree of pairwise products (JAX's
    scheme): each level is ``(p1 p2, t1 p2 + p1 t2)``, exact where elements are zero
    (unlike ``prod / x``), with depth log2 of the reduced size."""
    (x,), (t,) = primals, tangents
    t = ad.instantiate(t)
    rest = [d for d in range(x.ndim) if d not in axes]
    rest_shape = [x.shape[d] for d in rest]
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    perm = [*axes, *rest]
    dims = None if perm == list(range(x.ndim)) else perm
    p, tp = reshape(x, [n, *rest_shape], dims), reshape(t, [n, *rest_shape], dims)
    if n == 0:
        return _filled(1, x, rest_shape), _filled(0, x, rest_shape)
    while p.shape[0] > 1:
        n = p.shape[0]
        half = (n + 1) // 2
        full_dims = len(rest_shape)
        # JAX's slice_in_dim: unit strides, spelled out.
        lo, hi, unit = [0] * (full_dims + 1), [n, *rest_shape], [1] * (full_dims + 1)
        p1 = slice(p, lo, [half, *rest_shape], unit)
        t1 = slice(tp, lo, [half, *rest_shape], unit)
        p2 = slice(p, [half] + [0] * full_dims, hi, unit)
        t2 = slice(tp, [half] + [0] * full_dims, hi, unit)
        if n - half != half:  # odd: the second half gets a 1 (tangent 0) at its end
            config = [(0, 1, 0)] + [(0, 0, 0)] * full_dims
            p2 = pad(p2, _scalar(1, x), config)
            t2 = pad(t2, _scalar(0, x), config)
        p, tp = mul(p1, p2), ad.add_tangents(mul(t1, p2), mul(p1, t2))
    return squeeze(p, (0,)), squeeze(tp, (0,))


reduce_prod_p.def_jvp(_reduce_prod_jvp)
zero_rule(argmax_p)
zero_rule(argmin_p)
# Integer and bool results: zero (float0) tangents, as JAX's.
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    zero_rule(_p)


# ---------------------------------------------------------------------------- batching
# Rules for ``vmap``, as JAX's: the batch axis stays where it is, the reduced axes at or
# after it shift by one (NumPy integers, as JAX computes them with NumPy).


def _install_batching() -> None:
    def rule_for(prim: Primitive) -> None:
        def rule(vals: Any, dims: Any, *, axis_size: int, axes: tuple[int, ...], **params: Any) -> Any:
            x, d = vals[0], dims[0]
            shifted = tuple(np.where(np.less(axes, d), axes, np.add(axes, 1))) if axes else ()
            kept = [i for i in range(len(x.shape)) if i not in shifted]
            return bind1(prim, x, axes=shifted, **params), kept.index(d)

        prim.def_batch(rule)

    for prim in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, argmax_p, argmin_p):
        rule_for(prim)
    for prim in (reduce_and_p, reduce_or_p, reduce_xor_p):
        rule_for(prim)


_install_batching()
