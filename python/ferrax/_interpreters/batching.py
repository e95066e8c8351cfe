"""Vectorization: the batching trace (``vmap``).

A :class:`BatchTracer` carries a value with an extra, batched axis at position ``bdim``
(``None``: the value is the same for every batch element, not mapped). A primitive whose
operands are all unmapped is applied as it is; otherwise its batching rule
``rule(values, bdims, **params) -> (outs, out_bdims)`` runs. Rules live next to their
primitives (``ferrax._lax``), written with the helpers here; the axis moves they need
(``moveaxis``, ``broadcast``) are registered by ``ferrax._lax`` with
:func:`register_axis_ops`, as this module knows the core, not the primitives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ferrax import _ir
from ferrax._core import ConcreteArray, Primitive, Trace, Tracer, aval_of, new_main, to_numpy, user_location
from ferrax._interpreters.axis_env import AxisFrame, bind_axes
from ferrax.errors import FerraxError

__all__ = [
    "BatchTrace", "BatchTracer", "BatchingError", "at_front", "batch_flat", "batch_jaxpr", "batch_jaxpr_axes",
    "register_axis_ops",
]


class BatchingError(FerraxError, NotImplementedError):
    """A primitive was vectorized that has no batching rule (JAX raises
    ``NotImplementedError`` for these)."""


_moveaxis: Callable[[Any, int, int], Any] | None = None
_broadcast: Callable[[Any, int, int], Any] | None = None


def register_axis_ops(moveaxis: Callable[[Any, int, int], Any], broadcast: Callable[[Any, int, int], Any]) -> None:
    """Sets ``moveaxis(x, src, dst)`` and ``broadcast(x, size, axis)`` (a new axis)."""
    global _moveaxis, _broadcast
    _moveaxis, _broadcast = moveaxis, broadcast


def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to ``dst``."""
    assert _moveaxis is not None
    return x if src == dst else _moveaxis(x, src, dst)


def broadcast(x: Any, size: int, axis: int) -> Any:
    """``x`` with a new axis of ``size`` at ``axis``."""
    assert _broadcast is not None
    return _broadcast(x, size, axis)


def bdim_at_front(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` with its batch axis first (broadcast to ``size`` if it has none)."""
    assert _broadcast is not None
    if bdim is None:
        return _broadcast(x, size, 0)
    return moveaxis(x, bdim, 0)


class BatchTracer(Tracer):
    """A value of a vectorized function: one array holding every batch element."""

    __slots__ = ("val", "bdim", "aval")
    aval: _ir.ShapedArray

    def __init__(self, trace: BatchTrace, val: Any, bdim: int | None) -> None:
        self._trace = trace
        self.val = val
        self.bdim = bdim
        a = val.aval if isinstance(val, (Tracer, ConcreteArray)) else aval_of(val)
        if bdim is not None:
            shape = a.shape
            a = _ir.ShapedArray(shape[1:] if bdim == 0 else shape[:bdim] + shape[bdim + 1 :], a.dtype, a.weak_type)
        self.aval = a


class BatchTrace(Trace):
    """Applies primitives to batched values with each primitive's batching rule."""

    #: The name ``vmap(..., axis_name=)`` gave this trace's axis, if any: collectives
    #: naming it take their single-device meaning here.
    axis_name: Hashable | None = None

    def pure(self, value: Any) -> BatchTracer:
        if not isinstance(value, (Tracer, ConcreteArray)):
            value = ConcreteArray(to_numpy(value), aval_of(value).weak_type)
        return BatchTracer(self, value, None)

    @property
    def axis_size(self) -> int:
        size: int = self.main.global_data
        return size

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        vals = []
        dims = []
        batched = False
        for t in tracers:
            vals.append(t.val)
            d = t.bdim
            dims.append(d)
            if d is not None:
                batched = True
        name = self.axis_name
        axes_of = primitive.collective_axes
        if axes_of is not None:
            own = name if name is not None and name in axes_of(params) else None
            if own is not None or batched:
                crule = primitive.collective_batch_rule
                assert crule is not None
                out, out_dims = crule(vals, dims, own, self.main.global_data, params)
                if not primitive.multiple_results:
                    return [BatchTracer(self, out, out_dims)]
                return [BatchTracer(self, o, d) for o, d in zip(out, out_dims, strict=True)]
        if not batched:
            outs = primitive.bind(*vals, **params)
            outs = list(outs) if primitive.multiple_results else [outs]
            return [BatchTracer(self, o, None) for o in outs]
        rule = primitive.batch_rule
        if rule is None:
            raise BatchingError(f"Batching rule for '{primitive.name}' not implemented, at {user_location()}")
        if name is None:
            out, out_dims = rule(vals, dims, axis_size=self.main.global_data, **params)
        else:
            # A named axis: sub-jaxprs the rule vectorizes (batch_jaxpr) keep its name,
            # so collectives over it inside calls and control flow keep their meaning.
            outer = _rule_axis.name
            _rule_axis.name = name
            try:
                out, out_dims = rule(vals, dims, axis_size=self.main.global_data, **params)
            finally:
                _rule_axis.name = outer
        if not primitive.multiple_results:
            return [BatchTracer(self, out, out_dims)]
        return [BatchTracer(self, o, d) for o, d in zip(out, out_dims, strict=True)]


class _RuleAxis(threading.local):
    name: Hashable | None = None


#: The axis name of the batching trace whose rule is running (per thread).
_rule_axis = _RuleAxis()


def batch_flat(
    fun: Callable[..., Sequence[Any]], args: list[Any], in_dims: list[int | None], size: int, axis_name: Hashable | None = None
) -> tuple[list[Any], list[int | None]]:
    """Runs ``fun`` on batched arguments (batch axis ``in_dims[i]`` of ``args[i]``, or
    none) under a new batching trace of ``size``; returns the outputs' values and batch
    axes (None: the same for every element). ``axis_name`` names the batch axis for the
    collectives ``fun`` applies (``vmap``'s ``axis_name``)."""
    with new_main(BatchTrace, size) as main:
        trace = main.trace
        assert isinstance(trace, BatchTrace)
        tracers = [BatchTracer(trace, a, d) if d is not None else a for a, d in zip(args, in_dims)]
        if axis_name is None:
            outs = fun(*tracers)
        else:
            # A collective naming the axis goes to this trace even when its operand is
            # not batched here (psum of an unbatched value is size times it).
            trace.axis_name = axis_name
            with bind_axes([AxisFrame(axis_name, size, main)]):
                outs = fun(*tracers)
        raised = [trace.full_raise(o) for o in outs]
        return [r.val for r in raised], [r.bdim for r in raised]


# --------------------------------------------------------------------------- rule helpers


def defvectorized(primitive: Primitive) -> None:
    """An elementwise primitive of one operand: applied to the batched value as it is."""

    def rule(vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, **params: Any) -> tuple[Any, Any]:
        return primitive.bind(*vals, **params), dims[0]

    primitive.def_batch(rule)


_batch_cache: dict[tuple[Any, ...], tuple[_ir.ClosedJaxpr, list[bool]]] = {}


def batch_jaxpr(
    closed: _ir.ClosedJaxpr, axis_size: int, in_batched: Sequence[bool], instantiate: Sequence[bool] | bool
) -> tuple[_ir.ClosedJaxpr, list[bool]]:
    """A jaxpr vectorized, for the sub-jaxprs of calls and control flow.

    Inputs flagged in ``in_batched`` take an extra leading axis of ``axis_size``; the
    outputs that depend on them get one too (flagged in the second result), and so do
    those flagged in ``instantiate`` (broadcast when they would not). Memoized: a shared
    sub-jaxpr is vectorized once per batching pattern.
    """
    n_out = len(closed.out_avals)
    inst = (instantiate,) * n_out if isinstance(instantiate, bool) else tuple(instantiate)
    axis_name = _rule_axis.name
    key = (closed, axis_size, tuple(in_batched), inst, axis_name)
    hit = _batch_cache.get(key)
    if hit is not None:
        return hit
    from ferrax._interpreters.ad import eval_closed
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_structure

    avals = [
        _ir.ShapedArray((axis_size, *a.shape), a.dtype, a.weak_type) if b else a
        for a, b in zip(closed.in_avals, in_batched, strict=True)
    ]
    out_batched: list[bool] = []

    def fun(*xs: Any) -> list[Any]:
        dims = [0 if b else None for b in in_batched]
        outs, out_dims = batch_flat(lambda *ys: eval_closed(closed, *ys), list(xs), dims, axis_size, axis_name)
        out_batched[:] = [d is not None or i for d, i in zip(out_dims, inst)]
        return [bdim_at_front(o, d, axis_size) if b else o for o, d, b in zip(outs, out_dims, out_batched)]

    batched, _ = trace_to_jaxpr(fun, avals, tree_structure(tuple(range(len(avals)))))
    result = (batched, list(out_batched))
    _batch_cache[key] = result
    return result


_batch_axes_cache: dict[tuple[Any, ...], _ir.ClosedJaxpr] = {}


def batch_jaxpr_axes(
    closed: _ir.ClosedJaxpr, axis_size: int, in_dims: Sequence[int | None], out_dims: Sequence[int | None]
) -> _ir.ClosedJaxpr:
    """A jaxpr vectorized with its batch axes where the caller wants them: input ``i``
    takes a batch axis of ``axis_size`` at position ``in_dims[i]`` (``None``: unbatched),
    and output ``k`` returns one at ``out_dims[k]`` (broadcast there if the output does
    not depend on a batched input); ``out_dims[k] is None`` means the output must not be
    batched (a :class:`BatchingError` if it is). Memoized like :func:`batch_jaxpr`."""
    axis_name = _rule_axis.name
    key = (closed, axis_size, tuple(in_dims), tuple(out_dims), axis_name)
    hit = _batch_axes_cache.get(key)
    if hit is not None:
        return hit
    from ferrax._interpreters.ad import eval_closed
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_structure

    avals = [
        a if d is None else _ir.ShapedArray((*a.shape[:d], axis_size, *a.shape[d:]), a.dtype, a.weak_type)
        for a, d in zip(closed.in_avals, in_dims, strict=True)
    ]

    def fun(*xs: Any) -> list[Any]:
        outs, got = batch_flat(lambda *ys: eval_closed(closed, *ys), list(xs), list(in_dims), axis_size, axis_name)
        placed = []
        for o, d, want in zip(outs, got, out_dims, strict=True):
            if want is None:
                if d is not None:
                    raise BatchingError("an output that must stay unbatched depends on a batched input")
                placed.append(o)
            elif d is None:
                placed.append(broadcast(o, axis_size, want))
            else:
                placed.append(moveaxis(o, d, want))
        return placed

    batched, _ = trace_to_jaxpr(fun, avals, tree_structure(tuple(range(len(avals)))))
    _batch_axes_cache[key] = batched
    return batched


def at_front(vals: Sequence[Any], dims: Sequence[int | None]) -> list[Any]:
    """Each batched value with its batch axis first (unbatched ones as they are)."""
    return [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
