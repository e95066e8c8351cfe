"""Index helpers of ``jax.numpy`` (issue 12 item 3): ``s_``/``index_exp`` (NumPy's, as
JAX re-exports them), ``r_``, ``c_``, ``mgrid``, ``ogrid``, ``ix_``, ``indices``,
``diag_indices`` (and ``_from``), ``tril_indices``/``triu_indices`` (and ``_from``),
``mask_indices``, ``ravel_multi_index``, ``unravel_index`` and ``fill_diagonal``.

Values, dtypes and weak types follow ``jax.numpy`` 0.10.2 in both x64 modes.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ferrax.numpy as fnp
from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import Tracer, user_location
from ferrax.errors import ConcretizationError
from ferrax.numpy._promotion import ArrayLike, DTypeLike, Shape, as_array, promote_dtypes

__all__ = [
    "c_", "diag_indices", "diag_indices_from", "fill_diagonal", "index_exp", "indices", "ix_",
    "mask_indices", "mgrid", "ogrid", "r_", "ravel_multi_index", "s_", "tril_indices",
    "tril_indices_from", "triu_indices", "triu_indices_from", "unravel_index",
]

s_ = np.s_
"""NumPy's ``s_``: ``s_[1:3, ::2]`` is the tuple of slices (as ``jax.numpy.s_``)."""
index_exp = np.index_exp
"""NumPy's ``index_exp``: as ``s_``, always a tuple (as ``jax.numpy.index_exp``)."""


def _concrete(x: Any, what: str) -> Any:
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"Abstract tracer value encountered where concrete value is expected: {what} "
            f"({x.aval.str_short()}) must be concrete, at {user_location()}"
        )
    return x


def _grid_from_slice(s: slice, name: str) -> Array:
    start = _concrete(s.start, f"slice start of jnp.{name}") or 0
    stop = _concrete(s.stop, f"slice stop of jnp.{name}")
    step = _concrete(s.step, f"slice step of jnp.{name}") or 1
    if isinstance(step, complex) or np.iscomplexobj(step):
        # A complex step counts points, endpoints included (NumPy's convention).
        return fnp.linspace(start, stop, int(abs(step)))
    return fnp.arange(start, stop, step)


class _Mgrid:
    """``mgrid[0:3, 0:4]``: dense coordinate arrays stacked (as ``jax.numpy.mgrid``)."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Array:
        if isinstance(key, slice):
            return _grid_from_slice(key, "mgrid")
        axes = promote_dtypes("mgrid", *(_grid_from_slice(k, "mgrid") for k in key))
        if not axes:
            return fnp.arange(0)
        return fnp.stack(fnp.meshgrid(*axes, indexing="ij", sparse=False), 0)


class _Ogrid:
    """``ogrid[0:3, 0:4]``: open (broadcastable) coordinate arrays (as ``jax.numpy.ogrid``)."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Array | list[Array]:
        if isinstance(key, slice):
            return _grid_from_slice(key, "ogrid")
        axes = promote_dtypes("ogrid", *(_grid_from_slice(k, "ogrid") for k in key))
        return fnp.meshgrid(*axes, indexing="ij", sparse=True)


mgrid = _Mgrid()
"""Dense grids from slices: ``mgrid[0:2, 0:3]`` has shape (2, 2, 3)."""
ogrid = _Ogrid()
"""Open grids from slices: ``ogrid[0:2, 0:3]`` is a list of shapes (2, 1) and (1, 3)."""


class _Concatenator:
    """``r_``/``c_``: slices, arrays and scalars joined along an axis, with NumPy's
    leading string directive (``"axis[,ndmin[,trans1d]]"``, ``"r"``, ``"c"``)."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str) -> None:
        self.axis, self.ndmin, self.trans1d, self.name = axis, ndmin, trans1d, name

    def __getitem__(self, key: Any) -> Array:
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, -1
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = 0 if directive == "r" else 1
            else:
                fields = directive.split(",")[:3]
                try:
                    numbers = [int(f) for f in fields]
                except ValueError:
                    raise ValueError(f"could not understand directive {directive!r}, at {user_location()}") from None
                axis, ndmin, trans1d = (numbers + [axis, ndmin, trans1d][len(numbers):])[:3]
        parts = []
        for item in items:
            if isinstance(item, slice):
                part, item_ndim = _grid_from_slice(item, self.name), 0
            elif isinstance(item, str):
                raise ValueError(f"string directive must be placed at the beginning, at {user_location()}")
            else:
                part = fnp.array(item, copy=False)
                item_ndim = part.ndim
            part = fnp.array(part, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                order = list(range(ndmin))
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                part = fnp.transpose(part, order[shift:] + order[:shift])
            parts.append(part)
        out = fnp.concatenate(parts, axis=axis)
        if matrix != -1 and out.ndim == 1:
            out = fnp.expand_dims(out, matrix)
        return out

    def __len__(self) -> int:
        return 0


r_ = _Concatenator(0, 1, -1, "r_")
"""Row-wise concatenation by indexing: ``r_[1:4, 0, np.array([7, 8])]``."""
c_ = _Concatenator(-1, 2, 0, "c_")
"""Column-wise concatenation by indexing: ``c_[np.array([1, 2]), np.array([3, 4])]``."""


def ix_(*args: ArrayLike) -> tuple[Array, ...]:
    """Open-mesh index arrays from 1-d sequences: ``x[ix_(rows, cols)]`` is a cross product."""
    arrays = [as_array(a, "ix", i) for i, a in enumerate(args)]
    out = []
    for i, a in enumerate(arrays):
        if a.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {a.shape}, at {user_location()}")
        if a.dtype == np.bool_:
            raise NotImplementedError(f"Boolean arguments to jax.numpy.ix_ are not implemented, at {user_location()}")
        shape = [1] * len(arrays)
        shape[i] = a.shape[0]
        if a.shape[0] == 0:
            out.append(fnp.zeros(tuple(shape), np.intp))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (i,)))
    return tuple(out)


def indices(dimensions: Sequence[int], dtype: DTypeLike | None = None, sparse: bool = False) -> Any:
    """The index grid of an array of shape ``dimensions``: one array per axis, stacked
    (shape ``(len(dimensions), *dimensions)``), or a tuple of open arrays if ``sparse``."""
    d = dtypes.canonicalize(int if dtype is None else dtype, "indices")
    dims = tuple(operator.index(_concrete(n, "dimensions argument of jnp.indices")) for n in dimensions)
    out = []
    for i, n in enumerate(dims):
        shape = (1,) * i + (n,) + (1,) * (len(dims) - i - 1) if sparse else dims
        out.append(lax.broadcast_in_dim(lax.iota(d, n), shape, (i,)))
    if sparse:
        return tuple(out)
    return fnp.stack(out, 0) if out else fnp.array([], dtype=d)


def diag_indices(n: int, ndim: int = 2) -> tuple[Array, ...]:
    """The indices of the main diagonal of an ``n``-sided ``ndim``-d array."""
    n = operator.index(_concrete(n, "'n' argument of jnp.diag_indices()"))
    ndim = operator.index(_concrete(ndim, "'ndim' argument of jnp.diag_indices()"))
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}, at {user_location()}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}, at {user_location()}")
    index = dtypes.default_int() if n <= np.iinfo(np.int32).max else np.dtype(np.int64)
    return (lax.iota(index, n),) * ndim


def diag_indices_from(arr: ArrayLike) -> tuple[Array, ...]:
    """The indices of the main diagonal of ``arr`` (at least 2-d, all sides equal)."""
    a = as_array(arr, "diag_indices_from")
    if a.ndim < 2:
        raise ValueError(f"input array must be at least 2-d, at {user_location()}")
    if len(set(a.shape)) != 1:
        raise ValueError(f"All dimensions of input must be of equal length, at {user_location()}")
    return diag_indices(a.shape[0], a.ndim)


def _triangle_indices(name: str, n: int, k: int, m: int | None, lower: bool) -> tuple[Array, Array]:
    n = operator.index(_concrete(n, f"n argument of jnp.{name}"))
    k = operator.index(_concrete(k, f"k argument of jnp.{name}"))
    m = n if m is None else operator.index(_concrete(m, f"m argument of jnp.{name}"))
    ones = fnp.ones((n, m))
    mask = fnp.tril(ones, k=k) if lower else fnp.triu(ones, k=k)
    count = int(np.count_nonzero(np.tril(np.ones((n, m)), k) if lower else np.triu(np.ones((n, m)), k)))
    i, j = fnp.nonzero(mask, size=count)
    return i, j


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """The row and column indices of the lower triangle (on and below diagonal ``k``)
    of an ``n`` by ``m`` matrix."""
    return _triangle_indices("tril_indices", n, k, m, True)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """The row and column indices of the upper triangle (on and above diagonal ``k``)
    of an ``n`` by ``m`` matrix."""
    return _triangle_indices("triu_indices", n, k, m, False)


def _from_2d(name: str, arr: ArrayLike) -> tuple[int, int]:
    a = as_array(arr, name)
    if a.ndim != 2:
        raise ValueError(f"input array must be 2-d, at {user_location()}")
    return a.shape[0], a.shape[1]


def tril_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, Array]:
    """:func:`tril_indices` for the shape of the 2-d ``arr``."""
    n, m = _from_2d("tril_indices_from", arr)
    return tril_indices(n, k=k, m=m)


def triu_indices_from(arr: ArrayLike, k: int = 0) -> tuple[Array, Array]:
    """:func:`triu_indices` for the shape of the 2-d ``arr``."""
    n, m = _from_2d("triu_indices_from", arr)
    return triu_indices(n, k=k, m=m)


def mask_indices(
    n: int, mask_func: Callable[[Array, int], Array], k: int = 0, *, size: int | None = None
) -> tuple[Array, Array]:
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero (``size=`` as in
    :func:`ferrax.numpy.nonzero`)."""
    i, j = fnp.nonzero(mask_func(fnp.ones((n, n)), k), size=size)
    return i, j


def ravel_multi_index(
    multi_index: Sequence[ArrayLike],
    dims: Sequence[int],
    mode: str = "raise",
    order: str = "C",
    *,
    dtype: DTypeLike | None = None,
) -> Array:
    """Flat indices into an array of shape ``dims`` from one index array per axis;
    ``mode`` ('raise', 'wrap', 'clip', 'ignore') handles indices out of range ('raise'
    needs concrete indices)."""
    if len(multi_index) != len(dims):
        raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}, at {user_location()}")
    sizes = tuple(operator.index(_concrete(d, "in `dims` argument of ravel_multi_index()")) for d in dims)
    parts = [as_array(i, "ravel_multi_index", p) for p, i in enumerate(multi_index)]
    if dtype is None:
        d = fnp.result_type(int, *parts)
    else:
        d = dtypes.canonicalize(dtype, "ravel_multi_index")
    if not dtypes.is_int(d):
        raise ValueError(f"dtype={d} is not an integer type, at {user_location()}")
    if math.prod(sizes) - 1 > np.iinfo(d).max:
        raise ValueError(
            f"jnp.ravel_multi_index: dtype={d} not large enough to hold flattened index for dims={sizes}, "
            f"at {user_location()}"
        )
    for p in parts:
        if mode == "raise" and isinstance(p, Tracer):
            raise ConcretizationError(
                "Abstract tracer value encountered where concrete value is expected: ravel_multi_index "
                f"was jit-compiled with mode='raise'. Use mode='wrap' or mode='clip' instead, at {user_location()}"
            )
        if not dtypes.is_int(np.dtype(p.dtype)):
            raise TypeError(f"only int indices permitted, at {user_location()}")
    if mode == "raise":
        if any(bool(np.any((np.asarray(p) < 0) | (np.asarray(p) >= n))) for p, n in zip(parts, sizes)):
            raise ValueError(f"invalid entry in coordinates array, at {user_location()}")
    elif mode == "clip":
        parts = [fnp.clip(p, 0, n - 1) for p, n in zip(parts, sizes)]
    elif mode == "wrap":
        parts = [fnp.remainder(p, n) for p, n in zip(parts, sizes)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore', at {user_location()}")
    if order == "F":
        strides = np.cumprod((1, *sizes[:-1]))
    elif order == "C":
        strides = np.cumprod((1, *sizes[1:][::-1]))[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F', at {user_location()}")
    result = fnp.array(0, dtype=d)
    for p, s in zip(parts, strides):
        result = fnp.add(result, fnp.multiply(fnp.astype(p, d), int(s)))
    return result


def unravel_index(indices: ArrayLike, shape: Shape) -> tuple[Array, ...]:
    """The per-axis indices of the flat ``indices`` into an array of ``shape``; indices
    out of range are clipped to the first or last element."""
    flat = as_array(indices, "unravel_index")
    sizes: list[Any]
    try:
        sizes = list(shape)  # type: ignore[arg-type]
    except TypeError:
        sizes = [shape]
    if any(np.ndim(s) != 0 for s in sizes):
        raise ValueError(f"unravel_index: shape should be a scalar or 1D sequence, at {user_location()}")
    out: list[Any] = [0] * len(sizes)
    for i in reversed(range(len(sizes))):
        flat, out[i] = fnp.divmod(flat, sizes[i])
    above = fnp.greater(flat, 0)
    below = fnp.asarray(False) if np.dtype(flat.dtype).kind == "u" else fnp.less(flat, -1)
    return tuple(fnp.where(above, fnp.subtract(s, 1), fnp.where(below, 0, i)) for s, i in zip(sizes, out))


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *, inplace: bool = True) -> Array:
    """``a`` with its main diagonal set to ``val`` (a scalar, or values repeated along
    the diagonal). Arrays are immutable: pass ``inplace=False``, as in JAX."""
    if inplace:
        raise NotImplementedError(f"JAX arrays are immutable, must use inplace=False, at {user_location()}")
    if wrap:
        raise NotImplementedError(f"wrap=True is not implemented, must use wrap=False, at {user_location()}")
    arr, v = as_array(a, "fill_diagonal"), as_array(val, "fill_diagonal", 1)
    if arr.ndim < 2:
        raise ValueError(f"array must be at least 2-d, at {user_location()}")
    if arr.ndim > 2 and len(set(arr.shape)) != 1:
        raise ValueError(f"All dimensions of input must be of equal length, at {user_location()}")
    n = min(arr.shape)
    idx = diag_indices(n, arr.ndim)
    if v.ndim:
        flat = fnp.ravel(v)
        v = fnp.tile(flat, -(-n // flat.shape[0]))[:n] if flat.shape[0] else flat
    return arr.at[idx].set(v)
