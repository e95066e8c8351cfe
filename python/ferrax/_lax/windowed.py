"""Windowed reductions (pooling) with JAX 0.10.2's primitives and rules:
``reduce_window_sum``, ``reduce_window_max``, ``reduce_window_min``, the generic
``reduce_window`` (a reducer jaxpr over several operands), and the primitives of their
derivatives, ``select_and_gather_add`` (the tangent at each window's max or min: the jvp
of max/min pooling) and ``select_and_scatter_add`` (its transpose: the gradient of max
pooling).

``lax.reduce_window`` binds the specific primitives when the computation is ``lax.add``,
``lax.max`` or ``lax.min`` with its identity as the (concrete, scalar) initial value,
and the generic one otherwise, as JAX does. Shape rules, lowering and transposition are
Rust's; the eager rules below read every window of a padded, dilated copy of the
operand with NumPy.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ferrax import _ir
from ferrax._core import Primitive, Tracer, aval_of, to_numpy, user_location
from ferrax._interpreters import ad
from ferrax._lax._operands import quiet, scalar

__all__ = [
    "PaddingType",
    "padtype_to_pads",
    "reduce_window",
    "reduce_window_max_p",
    "reduce_window_min_p",
    "reduce_window_p",
    "reduce_window_shape_tuple",
    "reduce_window_sum_p",
    "select_and_gather_add_p",
    "select_and_scatter_add_p",
]

NDArray = np.ndarray[Any, Any]
Pads = tuple[tuple[int, int], ...]

reduce_window_sum_p = Primitive.builtin("reduce_window_sum")
reduce_window_max_p = Primitive.builtin("reduce_window_max")
reduce_window_min_p = Primitive.builtin("reduce_window_min")
reduce_window_p = Primitive.builtin("reduce_window", multiple_results=True)
select_and_gather_add_p = Primitive.builtin("select_and_gather_add")
select_and_scatter_add_p = Primitive.builtin("select_and_scatter_add")


# ---------------------------------------------------------------------- shapes, padding


class PaddingType(enum.Enum):
    """The padding strings ``reduce_window`` and convolutions take (JAX's)."""

    VALID = 1
    SAME = 2
    SAME_LOWER = 3


def _dilate(d: int, k: int) -> int:
    """A size ``d`` dilated by ``k`` (JAX's ``dilate_dim``): ``1 + k * (d - 1)``, 0 for
    an empty dimension (and for a dilation that leaves nothing)."""
    return 0 if d == 0 else max(0, 1 + k * (d - 1))


def padtype_to_pads(
    in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int], padding: str | PaddingType
) -> list[tuple[int, int]]:
    """The ``(low, high)`` padding per dimension that ``padding`` means: none for
    ``'VALID'``; for ``'SAME'`` enough for ``ceil(in / stride)`` windows, the odd one at
    the end (``'SAME_LOWER'``: at the start)."""
    if isinstance(padding, str):
        try:
            padding = PaddingType[padding.upper()]
        except KeyError:
            raise RuntimeError(
                f"Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', got {padding}, "
                f"at {user_location()}"
            ) from None
    if padding in (PaddingType.SAME, PaddingType.SAME_LOWER):
        pads = []
        for d, w, s in zip(in_shape, window_shape, window_strides):
            out = -(-int(d) // int(s))
            size = max((out - 1) * int(s) + int(w) - int(d), 0)
            lo, hi = size // 2, size - size // 2
            pads.append((lo, hi) if padding == PaddingType.SAME else (hi, lo))
        return pads
    if padding == PaddingType.VALID:
        return [(0, 0)] * len(in_shape)
    raise TypeError(f"Unknown padding type: {padding}.")


def reduce_window_shape_tuple(
    operand_shape: Sequence[int],
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
    base_dilation: Sequence[int] | None = None,
    window_dilation: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """The output shape of a windowed reduction (JAX's ``reduce_window_shape_tuple``)."""
    n = len(operand_shape)
    bd = tuple(base_dilation) if base_dilation is not None else (1,) * n
    wd = tuple(window_dilation) if window_dilation is not None else (1,) * n
    out = []
    for d, w, s, (lo, hi), b, k in zip(operand_shape, window_dimensions, window_strides, padding, bd, wd):
        padded = _dilate(int(d), int(b)) + int(lo) + int(hi)
        window = _dilate(int(w), int(k))
        out.append(max(0, (padded - window) // int(s) + 1) if padded >= window else 0)
    return tuple(out)


# --------------------------------------------------------------------------- eager rules


def _windows(
    x: NDArray,
    fill: Any,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
    base_dilation: Sequence[int],
    window_dilation: Sequence[int],
) -> NDArray:
    """Every window of ``x`` (dilated, then padded with ``fill``; negative padding
    crops), as an array of the output's shape plus one axis of the window's positions
    in row-major order."""
    x = np.asarray(x)
    rank = x.ndim
    dilated = np.full([_dilate(d, b) for d, b in zip(x.shape, base_dilation)], fill, x.dtype)
    if x.size:
        dilated[tuple(slice(None, None, b) for b in base_dilation)] = x
    crop = tuple(slice(max(-lo, 0), dilated.shape[a] - max(-hi, 0)) for a, (lo, hi) in enumerate(padding))
    cropped = dilated[crop]
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.full([d + lo + hi for d, (lo, hi) in zip(cropped.shape, grow)], fill, x.dtype)
    padded[tuple(slice(lo, lo + d) for d, (lo, _) in zip(cropped.shape, grow))] = cropped
    out = reduce_window_shape_tuple(padded.shape, window_dimensions, window_strides, [(0, 0)] * rank, None, window_dilation)
    parts = []
    for k in np.ndindex(*window_dimensions):
        starts = [kk * wd for kk, wd in zip(k, window_dilation)]
        parts.append(
            padded[tuple(slice(s0, s0 + (n - 1) * st + 1, st) if n else slice(0, 0) for s0, n, st in zip(starts, out, window_strides))]
        )
    if not parts:  # a rank-0 operand: one window of one element
        return padded[..., None]
    return np.stack(parts, axis=-1)


def _identity(dtype: np.dtype[Any], greatest: bool) -> Any:
    """The identity of max (``greatest=False``: the least value) or min."""
    if dtype == np.bool_:
        return greatest
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        return np.inf if greatest else -np.inf
    info = np.iinfo(dtype)
    return info.max if greatest else info.min


def _window_params(params: dict[str, Any], rank: int) -> tuple[Any, ...]:
    ones = (1,) * rank
    return (
        params["window_dimensions"],
        params["window_strides"],
        params["padding"],
        params.get("base_dilation", ones),
        params.get("window_dilation", ones),
    )


def _monoid_impl(kind: str) -> Callable[..., NDArray]:
    @quiet
    def impl(x: NDArray, **params: Any) -> NDArray:
        x = np.asarray(x)
        half = x.dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
        if kind == "sum":
            w = _windows(x, np.zeros((), x.dtype), *_window_params(params, x.ndim))
            out = w.astype(np.float32).sum(-1) if half else w.sum(-1, dtype=x.dtype)
        elif x.dtype == np.bool_:
            w = _windows(x, kind == "min", *_window_params(params, x.ndim))
            out = w.any(-1) if kind == "max" else w.all(-1)
        else:
            w = _windows(x, _identity(x.dtype, kind == "min"), *_window_params(params, x.ndim))
            out = w.max(-1) if kind == "max" else w.min(-1)
        return np.asarray(out).astype(x.dtype)

    return impl


reduce_window_sum_p.def_impl(_monoid_impl("sum"))
reduce_window_max_p.def_impl(_monoid_impl("max"))
reduce_window_min_p.def_impl(_monoid_impl("min"))


def _picks(values: NDArray, ge: bool) -> NDArray:
    """Per window, the position XLA's selection keeps: the first, replaced by each later
    one the comparison (``>=`` or ``<=``, false with a NaN) does not keep it against."""
    best = np.zeros(values.shape[:-1], np.intp)
    best_v = values[..., 0]
    for k in range(1, values.shape[-1]):
        v = values[..., k]
        keep = best_v >= v if ge else best_v <= v
        best = np.where(keep, best, k)
        best_v = np.where(keep, best_v, v)
    return best


@quiet
def _select_and_gather_add_impl(t: NDArray, x: NDArray, *, select_prim: str, **params: Any) -> NDArray:
    t, x = np.asarray(t), np.asarray(x)
    ge = select_prim == "ge"
    wp = _window_params(params, x.ndim)
    xs = _windows(x, _identity(x.dtype, not ge), *wp)
    ts = _windows(t, np.zeros((), t.dtype), *wp)
    pick = _picks(xs, ge)
    return np.take_along_axis(ts, pick[..., None], axis=-1)[..., 0]


select_and_gather_add_p.def_impl(_select_and_gather_add_impl)


@quiet
def _select_and_scatter_add_impl(
    source: NDArray, x: NDArray, *, select_prim: str, window_dimensions: Any, window_strides: Any, padding: Any
) -> NDArray:
    source, x = np.asarray(source), np.asarray(x)
    ge = select_prim == "ge"
    ones = (1,) * x.ndim
    wp = (window_dimensions, window_strides, padding, ones, ones)
    xs = _windows(x, _identity(x.dtype, not ge), *wp)
    where = _windows(np.arange(x.size).reshape(x.shape), -1, *wp)
    pick = _picks(xs, ge)
    target = np.take_along_axis(where, pick[..., None], axis=-1)[..., 0].reshape(-1)
    src = source.reshape(-1)
    real = target >= 0
    if source.dtype == np.bool_:
        out = np.zeros(x.size, np.bool_)
        np.logical_or.at(out, target[real], src[real])
    else:
        wide = source.dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
        out = np.zeros(x.size, np.float32 if wide else source.dtype)
        np.add.at(out, target[real], src[real].astype(out.dtype))
    return out.reshape(x.shape).astype(source.dtype)


select_and_scatter_add_p.def_impl(_select_and_scatter_add_impl)


def _reduce_window_impl(*args: Any, jaxpr: _ir.ClosedJaxpr, consts: Any, **params: Any) -> list[NDArray]:
    """The reducer applied position by position, over all windows at once (the reducer
    works on scalars; its element-wise primitives take whole arrays alike)."""
    from ferrax._jit import eval_jaxpr

    n = len(args) // 2
    operands = [np.asarray(a) for a in args[:n]]
    inits = [np.asarray(a) for a in args[n:]]
    wp = _window_params(params, operands[0].ndim)
    windows = [_windows(x, i, *wp) for x, i in zip(operands, inits)]
    out_shape = windows[0].shape[:-1]
    acc: list[Any] = [np.broadcast_to(i, out_shape).copy() for i in inits]
    with np.errstate(all="ignore"):
        for k in range(windows[0].shape[-1]):
            outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *acc, *[w[..., k] for w in windows])
            acc = [np.broadcast_to(np.asarray(o), out_shape).astype(x.dtype) for o, x in zip(outs, operands)]
    return [np.asarray(a) for a in acc]


reduce_window_p.def_impl(_reduce_window_impl)


# ----------------------------------------------------------------------- derivatives

ad.deflinear(reduce_window_sum_p)
# Linear in the tangents/source (operand 0); the operand only chooses positions.
ad.deflinear(select_and_gather_add_p, [0])
ad.deflinear(select_and_scatter_add_p, [0])


def _chooser_jvp(select_prim: str) -> Callable[..., Any]:
    def rule(t: Any, ans: Any, x: Any, **params: Any) -> Any:
        return select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)

    return rule


ad.defjvp(reduce_window_max_p, _chooser_jvp("ge"))
ad.defjvp(reduce_window_min_p, _chooser_jvp("le"))


def _reduce_window_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, jaxpr: _ir.ClosedJaxpr, consts: Any, **params: Any) -> tuple[list[Any], list[Any]]:
    """JAX's rule: one reduce_window over the operands and the tangents of the float
    ones, whose reducer is the jvp of the reducer (the init values' tangents are zero)."""
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_flatten

    n = len(primals) // 2
    operands, inits = list(primals[:n]), list(primals[n:])
    if any(type(t) is not ad.Zero for t in tangents[n:]):
        raise TypeError(f"reduce_window jvp does not support non-zero init_value tangents, at {user_location()}")
    avals = [aval_of(x) for x in operands]
    diff = [ad.is_differentiable(a.dtype) for a in avals]
    jvp_closed, _ = ad.jvp_jaxpr(jaxpr, diff + diff, diff)
    m = sum(diff)

    def reducer(*args: Any) -> list[Any]:
        # (acc primals, acc tangents, element primals, element tangents) -> jvp's order.
        ap, at, ep, et = args[:n], args[n : n + m], args[n + m : 2 * n + m], args[2 * n + m :]
        return list(ad.eval_closed(jvp_closed, *ap, *ep, *at, *et))

    scalars = [_ir.ShapedArray((), a.dtype) for a in avals]
    diff_scalars = [s for s, d in zip(scalars, diff) if d]
    in_avals = scalars + diff_scalars + scalars + diff_scalars
    _, tree = tree_flatten(tuple(range(len(in_avals))))
    closed, _ = trace_to_jaxpr(reducer, in_avals, tree)
    t_ops = [ad.instantiate(t) for t, d in zip(tangents[:n], diff) if d]
    zeros = [np.zeros((), a.dtype) for a, d in zip(avals, diff) if d]
    outs = reduce_window_p.bind(*operands, *t_ops, *inits, *zeros, jaxpr=closed, consts=(), **params)
    ys, ts = list(outs[:n]), iter(outs[n:])
    return ys, [next(ts) if d else ad.Zero(aval_of(y)) for y, d in zip(ys, diff)]


reduce_window_p.def_jvp(_reduce_window_jvp)


# ----------------------------------------------------------------------------- batching


def _insert(values: tuple[Any, ...], at: int, value: Any) -> tuple[Any, ...]:
    return (*values[:at], value, *values[at:])


def _monoid_batch(prim: Primitive) -> Callable[..., Any]:
    def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
        (x,), (d,) = vals, dims
        new = {
            k: _insert(tuple(v), d, (0, 0) if k == "padding" else 1)
            for k, v in params.items()
        }
        return prim.bind(x, **new), d

    return rule


for _p in (reduce_window_sum_p, reduce_window_max_p, reduce_window_min_p):
    _p.def_batch(_monoid_batch(_p))


def _front(params: dict[str, Any]) -> dict[str, Any]:
    """Window params for operands with a new leading (batch) axis."""
    out = dict(params)
    for k in ("window_dimensions", "window_strides", "base_dilation", "window_dilation"):
        if k in out:
            out[k] = (1, *out[k])
    out["padding"] = ((0, 0), *out["padding"])
    return out


def _pair_batch(prim: Primitive) -> Callable[..., Any]:
    def rule(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
        from ferrax._interpreters import batching

        a, b = (batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims))
        return prim.bind(a, b, **_front(params)), 0

    return rule


select_and_gather_add_p.def_batch(_pair_batch(select_and_gather_add_p))
select_and_scatter_add_p.def_batch(_pair_batch(select_and_scatter_add_p))


def _reduce_window_batch(vals: Any, dims: Any, *, axis_size: int, **params: Any) -> Any:
    from ferrax._interpreters import batching

    n = len(vals) // 2
    if any(d is not None for d in dims[n:]):
        raise batching.BatchingError(
            f"reduce_window batching is not implemented for initial values, at {user_location()}"
        )
    ops = [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals[:n], dims[:n])]
    outs = reduce_window_p.bind(*ops, *vals[n:], **_front(params))
    return list(outs), [0] * n


reduce_window_p.def_batch(_reduce_window_batch)


# ------------------------------------------------------------------------- lax function


def _is_concrete(x: Any) -> bool:
    return not isinstance(x, Tracer)


def _monoid(computation: Any, init: Any) -> str | None:
    """``"sum"``, ``"max"`` or ``"min"`` when ``computation`` is ``lax.add``, ``lax.max``
    or ``lax.min`` and ``init`` a concrete scalar equal to its identity (JAX's test)."""
    from ferrax._lax.elementwise import add, max, min

    if not _is_concrete(init):
        return None
    aval = aval_of(init)
    if tuple(aval.shape) != ():
        return None
    value = np.asarray(to_numpy(init))
    dtype = np.dtype(aval.dtype)
    if computation is add:
        return "sum" if value == 0 else None
    if computation is max:
        return "max" if value == _identity(dtype, False) else None
    if computation is min:
        return "min" if value == _identity(dtype, True) else None
    return None


_MONOIDS = {"sum": reduce_window_sum_p, "max": reduce_window_max_p, "min": reduce_window_min_p}


def reduce_window(
    operand: Any,
    init_value: Any,
    computation: Callable[..., Any],
    window_dimensions: Sequence[int],
    window_strides: Sequence[int] | None = None,
    padding: str | Sequence[tuple[int, int]] = "VALID",
    base_dilation: Sequence[int] | None = None,
    window_dilation: Sequence[int] | None = None,
) -> Any:
    """Reduces every window of ``operand`` (a pytree of arrays of one shape) with
    ``computation`` from ``init_value`` (a matching pytree of scalars): XLA's
    ReduceWindow. ``padding`` is ``'VALID'``, ``'SAME'``, ``'SAME_LOWER'`` or
    ``(low, high)`` pairs; strides and dilations default to 1. ``lax.add``, ``lax.max``
    and ``lax.min`` with their identity bind ``reduce_window_sum``/``max``/``min``."""
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_flatten, tree_unflatten

    flat_ops, op_tree = tree_flatten(operand)
    flat_inits, init_tree = tree_flatten(init_value)
    if op_tree != init_tree:
        raise ValueError(
            f"Operands must have the same tree structure as init_values: {op_tree} vs. {init_tree}, "
            f"at {user_location()}"
        )
    if len(flat_ops) == 0:
        raise ValueError(f"reduce_window must have at least one operand, at {user_location()}")
    ops = [scalar(x) for x in flat_ops]
    wdims = tuple(int(d) for d in window_dimensions)
    if isinstance(padding, str):
        dilated = wdims if window_dilation is None else tuple(
            _dilate(w, int(k)) for w, k in zip(wdims, window_dilation)
        )
        strides_for_pads = tuple(window_strides) if window_strides is not None else ()
        pads: Pads = tuple(
            (int(lo), int(hi))
            for lo, hi in padtype_to_pads(tuple(aval_of(ops[0]).shape), dilated, strides_for_pads, padding)
        )
    else:
        pads = tuple((int(lo), int(hi)) for lo, hi in padding)
    rank = len(wdims)
    op_rank = len(aval_of(ops[0]).shape)
    if rank == op_rank and len(pads) != rank:
        # JAX's shape rule zips the padding with the shape (a ValueError).
        raise ValueError(
            f"reduce_window got {len(pads)} padding pairs for an operand of rank {rank}, at {user_location()}"
        )
    params = dict(
        window_dimensions=wdims,
        window_strides=tuple(int(s) for s in window_strides) if window_strides is not None else (1,) * rank,
        padding=pads,
        base_dilation=tuple(int(b) for b in base_dilation) if base_dilation is not None else (1,) * rank,
        window_dilation=tuple(int(k) for k in window_dilation) if window_dilation is not None else (1,) * rank,
    )
    if len(flat_ops) == 1:
        kind = _monoid(computation, scalar(flat_inits[0]))
        if kind is not None:
            return tree_unflatten(op_tree, [_MONOIDS[kind].bind(ops[0], **params)])
    inits = [scalar(x) for x in flat_inits]
    init_avals = [aval_of(i) for i in inits]
    if any(tuple(a.shape) != () for a in init_avals):
        raise TypeError(
            "reduce_window expected init_values to be scalars but init_values have shapes "
            f"{[tuple(a.shape) for a in init_avals]}, at {user_location()}"
        )
    op_dtypes = [np.dtype(aval_of(x).dtype) for x in ops]
    init_dtypes = [np.dtype(a.dtype) for a in init_avals]
    if op_dtypes != init_dtypes:
        raise TypeError(
            "reduce_window got inconsistent dtypes for operands and init_values: got operand dtypes "
            f"{op_dtypes} and init_value dtypes {init_dtypes}, at {user_location()}"
        )
    n = len(inits)
    scalars = [_ir.ShapedArray((), a.dtype) for a in init_avals]
    out_trees: list[Any] = []

    def reducer(*args: Any) -> list[Any]:
        out = computation(tree_unflatten(init_tree, list(args[:n])), tree_unflatten(init_tree, list(args[n:])))
        flat, tree = tree_flatten(out)
        out_trees.append(tree)
        return [scalar(x) for x in flat]

    _, in_tree = tree_flatten(tuple(range(2 * n)))
    closed, _ = trace_to_jaxpr(reducer, scalars + scalars, in_tree)
    if out_trees and out_trees[0] != op_tree:
        raise ValueError(
            f"reduce_window output must have the same tree structure as the operands {op_tree} vs. "
            f"{out_trees[0]}, at {user_location()}"
        )
    if closed.consts:
        raise TypeError(
            "reduce_window's computation closes over arrays; pass them as operands or use "
            f"Python scalars, at {user_location()}"
        )
    outs = reduce_window_p.bind(*ops, *inits, jaxpr=closed, consts=(), **params)
    return tree_unflatten(op_tree, list(outs))


# JAX's internal helpers (the jvp of max pooling and its transpose), for callers that
# bind the primitives directly.
def _select_and_gather_add(
    tangents: Any,
    operand: Any,
    select_prim: str,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
    base_dilation: Sequence[int],
    window_dilation: Sequence[int],
) -> Any:
    return select_and_gather_add_p.bind(
        tangents,
        operand,
        select_prim=select_prim,
        window_dimensions=tuple(window_dimensions),
        window_strides=tuple(window_strides),
        padding=tuple(tuple(p) for p in padding),
        base_dilation=tuple(base_dilation),
        window_dilation=tuple(window_dilation),
    )


def _select_and_scatter_add(
    source: Any,
    operand: Any,
    select_prim: str,
    window_dimensions: Sequence[int],
    window_strides: Sequence[int],
    padding: Sequence[tuple[int, int]],
) -> Any:
    return select_and_scatter_add_p.bind(
        source,
        operand,
        select_prim=select_prim,
        window_dimensions=tuple(window_dimensions),
        window_strides=tuple(window_strides),
        padding=tuple(tuple(p) for p in padding),
    )
