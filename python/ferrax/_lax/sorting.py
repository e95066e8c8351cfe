"""``sort`` and the cumulative primitives (``cumsum``, ``cumprod``, ``cummax``,
``cummin``, ``cumlogsumexp``), with JAX 0.10.2's semantics and rules.

``sort`` orders floats as JAX's comparator does: -0.0 equals 0.0, NaNs (of any sign)
come last and equal each other; several operands sort together, lexicographically by
the first ``num_keys``. Its tangents follow the sorted positions (a sort of an iota
along with the operands, then a gather). ``cumsum`` is linear (reverse mode transposes
it to a ``cumsum`` the other way, in Rust); the others differentiate through a parallel
prefix scan written with ``lax`` operations (JAX's scheme, so the values and the ties
of ``cummax``/``cummin`` split as JAX's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import bind1, quiet, scalar
from ferrax.errors import ShapeError

__all__ = [
    "cumlogsumexp",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "sort",
    "sort_key_val",
    "top_k",
]

NDArray = np.ndarray[Any, Any]


# --------------------------------------------------------------------------- eager rules


def _sort_key(x: NDArray) -> NDArray:
    """A key NumPy orders as JAX's comparator: floats widened, -0.0 as 0.0 (NumPy puts
    NaNs last); 64-bit unsigned integers keep their order as they are."""
    if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
        wide = x.astype(np.float64)
        return np.where(wide == 0.0, 0.0, wide)
    return x


def _sort_impl(*operands: NDArray, dimension: int, is_stable: bool, num_keys: int) -> list[NDArray]:
    first = operands[0]
    n = first.shape[dimension]
    moved = [np.moveaxis(np.asarray(x), dimension, -1) for x in operands]
    lines = moved[0].reshape(-1, n).shape[0] if first.size else 0
    if first.size == 0:
        return [np.asarray(x).copy() for x in operands]
    keys = [_sort_key(m.reshape(lines, n)).reshape(-1) for m in moved[:num_keys]]
    rows = np.repeat(np.arange(lines), n)
    # np.lexsort is stable and sorts by its last key first: the row, then key 0, 1, ...
    order = np.lexsort([*reversed(keys), rows]).reshape(lines, n) - (np.arange(lines) * n)[:, None]
    out = []
    for m in moved:
        flat = m.reshape(lines, n)
        picked = np.take_along_axis(flat, order, axis=1).reshape(m.shape)
        out.append(np.moveaxis(picked, -1, dimension))
    return out


sort_p = Primitive.builtin("sort", multiple_results=True)
sort_p.def_impl(_sort_impl)


def _descending_key(x: NDArray) -> NDArray:
    """Unsigned keys whose ascending order is ``x``'s descending order in XLA's total
    order (+NaN first, 0.0 before -0.0, -NaN last)."""
    if x.dtype == np.bool_:
        return ~x.astype(np.uint8)
    width = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    top = np.array(1 << (width - 1), u.dtype)
    if x.dtype.kind == "u":
        order = u
    elif x.dtype.kind == "i":
        order = u ^ top
    else:  # floats: negative ones (sign set) reverse their bits' order
        order = np.where(u & top, ~u, u | top)
    return ~order


def _top_k_impl(x: NDArray, *, axis: int, k: int) -> list[NDArray]:
    x = np.asarray(x)
    positions = np.argsort(_descending_key(x), axis=axis, kind="stable")
    positions = np.take(positions, np.arange(k), axis=axis)
    return [np.take_along_axis(x, positions, axis=axis), positions.astype(np.int32)]


top_k_p = Primitive.builtin("top_k", multiple_results=True)
top_k_p.def_impl(_top_k_impl)


def _cumulative(name: str, accumulate: Callable[[NDArray, int], NDArray]) -> Primitive:
    p = Primitive.builtin(name)

    @p.def_impl
    @quiet
    def _impl(x: NDArray, *, axis: int, reverse: bool) -> Any:
        x = np.asarray(x)
        wide = x.dtype == ml_dtypes.bfloat16
        y = x.astype(np.float32) if wide else x
        if reverse:
            y = np.flip(y, axis)
        y = accumulate(y, axis)
        if reverse:
            y = np.flip(y, axis)
        return np.asarray(y).astype(x.dtype)

    return p


cumsum_p = _cumulative("cumsum", lambda x, a: np.cumsum(x, axis=a, dtype=x.dtype))
cumprod_p = _cumulative("cumprod", lambda x, a: np.cumprod(x, axis=a, dtype=x.dtype))
cummax_p = _cumulative("cummax", lambda x, a: np.maximum.accumulate(x, axis=a))
cummin_p = _cumulative("cummin", lambda x, a: np.minimum.accumulate(x, axis=a))
cumlogsumexp_p = _cumulative("cumlogsumexp", lambda x, a: np.logaddexp.accumulate(x, axis=a))


# ------------------------------------------------------------------------- functions


def _axis(axis: int, ndim: int, what: str) -> int:
    a = int(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{what}: axis {a} is out of bounds for array of dimension {ndim}, at {user_location()}")
    return a % ndim


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sorts ``operand`` along ``dimension`` (XLA's sort); a sequence of arrays of one
    shape sorts together, lexicographically by the first ``num_keys`` of them, and
    gives a tuple. Floats: -0.0 equals 0.0 and NaNs come last."""
    if isinstance(operand, (list, tuple)):
        if len(operand) == 0:
            raise TypeError(f"Sort requires at least one operand, at {user_location()}")
        if not 1 <= num_keys <= len(operand):
            raise ValueError(f"num_keys={num_keys} must be between 1 and len(operand)={len(operand)}, at {user_location()}")
        ops = [scalar(x) for x in operand]
        shapes = [tuple(aval_of(x).shape) for x in ops]
        if any(s != shapes[0] for s in shapes):
            raise TypeError(
                f"Arguments to sort must have equal shapes, got: {' '.join(str(s) for s in shapes)}, at {user_location()}"
            )
        dim = _axis(dimension, len(shapes[0]), "sort")
        return tuple(sort_p.bind(*ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys)))
    if num_keys != 1:
        raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand, at {user_location()}")
    x = scalar(operand)
    dim = _axis(dimension, len(aval_of(x).shape), "sort")
    return sort_p.bind(x, dimension=dim, is_stable=bool(is_stable), num_keys=1)[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Array, Array]:
    """Sorts ``keys`` along ``dimension`` and permutes ``values`` (of the same shape)
    the same way."""
    k, v = sort([keys, values], dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Array, Array]:
    """The ``k`` largest elements along ``axis``, largest first (+NaN above everything,
    -NaN below; ties by position), and their ``int32`` positions."""
    k = int(k)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}, at {user_location()}")
    x = scalar(operand)
    shape = tuple(aval_of(x).shape)
    if not shape:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {shape}, at {user_location()}")
    a = _axis(axis, len(shape), "top_k")
    if k > shape[a]:
        raise ValueError(
            f"k argument to top_k must be no larger than size along axis; got k={k} with shape={list(shape)} "
            f"and axis={a}, at {user_location()}"
        )
    values, positions = top_k_p.bind(x, k=k, axis=a)
    return values, positions


def _cum(prim: Primitive) -> Callable[..., Array]:
    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
        x = scalar(operand)
        a = _axis(axis, len(aval_of(x).shape), prim.name)
        return bind1(prim, x, axis=a, reverse=bool(reverse))

    return fn


_cumsum, _cumprod, _cummax, _cummin, _cumlogsumexp = (
    _cum(p) for p in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p)
)


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
    """The running sum along ``axis`` (from the end when ``reverse``); numbers only."""
    return _cumsum(operand, axis, reverse)


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
    """The running product along ``axis`` (from the end when ``reverse``)."""
    return _cumprod(operand, axis, reverse)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
    """The running maximum along ``axis`` (NaN from the first NaN on)."""
    return _cummax(operand, axis, reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
    """The running minimum along ``axis`` (NaN from the first NaN on)."""
    return _cummin(operand, axis, reverse)


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Array:
    """The running ``log(sum(exp(x)))`` along ``axis``, computed stably; floats."""
    return _cumlogsumexp(operand, axis, reverse)


# -------------------------------------------------------------------------- derivatives


def _index_dtype(shape: Sequence[int]) -> np.dtype[Any]:
    return np.dtype(np.uint64 if any(d > np.iinfo(np.uint32).max for d in shape) else np.uint32)


def _sort_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, dimension: int, is_stable: bool, num_keys: int) -> tuple[Any, Any]:
    """JAX's rule: sort an iota along with the operands; each tangent is gathered at
    the sorted positions."""
    from ferrax._lax.slicing import GatherDimensionNumbers, gather
    from ferrax._lax.structural import broadcast_in_dim, broadcasted_iota

    shape = tuple(aval_of(primals[0]).shape)
    iota = broadcasted_iota(_index_dtype(shape), shape, dimension)
    *out, idx = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    batch = tuple(d for d in range(len(shape)) if d != dimension)
    dnums = GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=(dimension,),
        start_index_map=(dimension,),
        operand_batching_dims=batch,
        start_indices_batching_dims=batch,
    )
    where = broadcast_in_dim(idx, (*shape, 1), tuple(range(len(shape))))  # JAX's expand_dims
    outs = [
        t if type(t) is ad.Zero else gather(t, where, dnums, (1,) * len(shape), mode="promise_in_bounds")
        for t in tangents
    ]
    return out, outs


sort_p.def_jvp(_sort_jvp)


def _top_k_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, k: int, axis: int) -> tuple[Any, Any]:
    """JAX's rule: the tangent gathered at the positions found."""
    from ferrax._lax.slicing import GatherDimensionNumbers, gather
    from ferrax._lax.structural import reshape

    (x,), (t,) = primals, tangents
    values, positions = top_k_p.bind(x, k=k, axis=axis)
    if type(t) is ad.Zero:
        return [values, positions], [ad.Zero(aval_of(values)), ad.Zero(aval_of(positions))]
    shape = tuple(aval_of(positions).shape)
    rank = len(shape)
    batch = tuple(d for d in range(rank) if d != axis)
    dnums = GatherDimensionNumbers(
        offset_dims=(),
        collapsed_slice_dims=(axis,),
        start_index_map=(axis,),
        operand_batching_dims=batch,
        start_indices_batching_dims=batch,
    )
    out = gather(t, reshape(positions, (*shape, 1)), dnums, (1,) * rank, mode="promise_in_bounds")
    return [values, positions], [out, ad.Zero(aval_of(positions))]


top_k_p.def_jvp(_top_k_jvp)
ad.deflinear(cumsum_p)


def _scan_axis(fn: Callable[[Any, Any], Any], x: Any, axis: int) -> Any:
    """The inclusive prefix combination of ``x`` along ``axis`` by ``fn`` (associative),
    in a parallel scheme of depth ``2 log2(n)``: combine neighbouring pairs, scan those
    (half as many), then fill in the even positions."""
    from ferrax._lax.elementwise import add
    from ferrax._lax.structural import concatenate, pad, slice

    def take(a: Any, start: int, stop: int, step: int = 1) -> Any:
        shape = aval_of(a).shape
        lo = [0] * len(shape)
        hi = list(shape)
        st = [1] * len(shape)
        lo[axis], hi[axis], st[axis] = start, stop, step
        return slice(a, lo, hi, st)

    n = aval_of(x).shape[axis]
    if n < 2:
        return x
    pairs = fn(take(x, 0, n - 1, 2), take(x, 1, n, 2))
    odd = _scan_axis(fn, pairs, axis)
    m = aval_of(odd).shape[axis]
    rest = take(x, 2, n, 2)
    even = fn(take(odd, 0, m - 1) if n % 2 == 0 else odd, rest)
    even = concatenate([take(x, 0, 1), even], axis)
    # Interleave: even positions from `even`, odd ones from `odd` (zeros padded between).
    zero = np.zeros((), aval_of(x).dtype)
    rank = len(aval_of(x).shape)
    cfg_even = [(0, 0, 0)] * rank
    cfg_odd = [(0, 0, 0)] * rank
    cfg_even[axis] = (0, 1 if n % 2 == 0 else 0, 1)
    cfg_odd[axis] = (1, 0 if n % 2 == 0 else 1, 1)
    return add(pad(even, zero, cfg_even), pad(odd, zero, cfg_odd))


def _prefix_scan(fn: Callable[[Any, Any], Any], x: Any, axis: int, reverse: bool) -> Any:
    from ferrax._lax.slicing import rev

    if reverse:
        return rev(_scan_axis(fn, rev(x, (axis,)), axis), (axis,))
    return _scan_axis(fn, x, axis)


def _logaddexp(a: Any, b: Any) -> Any:
    from ferrax.nn.functions import logaddexp

    return logaddexp(a, b)


def _scan_jvp(combine: Callable[[Any, Any], Any]) -> Callable[..., tuple[Any, Any]]:
    def rule(primals: Sequence[Any], tangents: Sequence[Any], *, axis: int, reverse: bool) -> tuple[Any, Any]:
        from ferrax._autodiff import jvp

        (x,), (t,) = primals, tangents
        return jvp(lambda v: _prefix_scan(combine, v, axis, reverse), (x,), (ad.instantiate(t),))

    return rule


def _install_jvps() -> None:
    from ferrax._lax.elementwise import max, min, mul

    cumprod_p.def_jvp(_scan_jvp(mul))
    cummax_p.def_jvp(_scan_jvp(max))
    cummin_p.def_jvp(_scan_jvp(min))
    cumlogsumexp_p.def_jvp(_scan_jvp(_logaddexp))


_install_jvps()


# ----------------------------------------------------------------------------- batching


def _sort_batch(vals: Any, dims: Any, *, axis_size: int, dimension: int, is_stable: bool, num_keys: int) -> tuple[list[Any], list[int]]:
    """JAX's rule: every operand's batch axis where the first batched one has it
    (unbatched operands broadcast there); the sorted dimension shifts past it."""
    from ferrax._interpreters import batching
    from ferrax._lax.structural import broadcast_in_dim

    proto, bdim = next((v, d) for v, d in zip(vals, dims) if d is not None)
    shape = tuple(aval_of(proto).shape)
    args = []
    for v, d in zip(vals, dims):
        if d is None:
            args.append(broadcast_in_dim(v, shape, [i for i in range(len(shape)) if i != bdim]))
        else:
            args.append(batching.moveaxis(v, d, bdim))
    new_dim = dimension + (bdim <= dimension)
    out = sort_p.bind(*args, dimension=new_dim, is_stable=is_stable, num_keys=num_keys)
    return list(out), [bdim] * len(out)


def _install_batching() -> None:
    def rule_for(prim: Primitive) -> None:
        def rule(vals: Any, dims: Any, *, axis_size: int, axis: int, reverse: bool) -> Any:
            (x,), (d,) = vals, dims
            return bind1(prim, x, axis=axis if axis < d else axis + 1, reverse=reverse), d

        prim.def_batch(rule)

    for prim in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
        rule_for(prim)
    sort_p.def_batch(_sort_batch)

    def top_k_rule(vals: Any, dims: Any, *, axis_size: int, k: int, axis: int) -> Any:
        (x,), (d,) = vals, dims
        out = top_k_p.bind(x, k=k, axis=axis + 1 if d <= axis else axis)
        return list(out), [d, d]

    top_k_p.def_batch(top_k_rule)


_install_batching()
