"""Staging: tracing a Python function into a jaxpr (``make_jaxpr``).

The staging trace records each primitive as an equation in a Rust ``JaxprBuilder``; the
output types come from the builder (Rust's shape rules). Constants met while tracing
become literals (scalars) or constvars (arrays, closed over by the ``ClosedJaxpr``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._core import (
    ConcreteArray,
    Primitive,
    Trace,
    Tracer,
    aval_of,
    new_main,
    to_numpy,
    user_location,
)
from ferrax.errors import TypeCheckError
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["JaxprTracer", "StagingTrace", "make_jaxpr", "trace_to_jaxpr"]


class _Staging:
    """The state of one staging: the builder and the constants captured so far."""

    __slots__ = ("builder", "consts", "const_vars")

    def __init__(self) -> None:
        self.builder = _ir.JaxprBuilder()
        self.consts: list[Any] = []
        # id(constant) -> its constvar (the constant is kept alive in `consts`).
        self.const_vars: dict[int, _ir.Var] = {}


class JaxprTracer(Tracer):
    """A value of the function being staged: a variable or literal of the jaxpr."""

    __slots__ = ("atom", "_aval")

    def __init__(self, trace: Trace, atom: _ir.Var | _ir.Literal, aval: _ir.ShapedArray) -> None:
        self._trace = trace
        self.atom = atom
        self._aval = aval

    @property
    def aval(self) -> _ir.ShapedArray:
        return self._aval


class StagingTrace(Trace):
    """Records primitives as equations of a jaxpr."""

    def pure(self, value: Any) -> JaxprTracer:
        state: _Staging = self.main.global_data
        if isinstance(value, Tracer):
            # A value of an outer transformation: closed over as a constvar.
            return self._constvar(state, value, value.aval)
        aval = aval_of(value)
        if aval.shape == ():
            if isinstance(value, ConcreteArray) or isinstance(value, (np.ndarray, np.generic)):
                scalar = to_numpy(value).item()
            else:
                scalar = value
            lit = state.builder.literal(scalar, aval.dtype, aval.weak_type)
            return JaxprTracer(self, lit, aval)
        return self._constvar(state, value, aval)

    def _constvar(self, state: _Staging, value: Any, aval: _ir.ShapedArray) -> JaxprTracer:
        key = id(value)
        var = state.const_vars.get(key)
        if var is None:
            var = state.builder.add_constvar(aval)
            state.const_vars[key] = var
            state.consts.append(value)
        return JaxprTracer(self, var, aval)

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        state: _Staging = self.main.global_data
        try:
            outvars = state.builder.add_eqn(
                primitive.ir_primitive(), [t.atom for t in tracers], params
            )
        except TypeCheckError as e:
            raise TypeCheckError(f"{e}\n  while tracing, at {user_location()}") from None
        return [JaxprTracer(self, v, v.aval) for v in outvars]


def trace_to_jaxpr(
    f: Callable[..., Any], in_avals: Sequence[_ir.ShapedArray], in_tree: PyTreeDef
) -> tuple[_ir.ClosedJaxpr, PyTreeDef]:
    """Stages ``f`` applied to arguments of these types (flattened per ``in_tree``);
    returns the closed jaxpr and the structure of the outputs."""
    state = _Staging()
    with new_main(StagingTrace, state, dynamic=True) as main:
        trace = main.trace
        tracers = [JaxprTracer(trace, state.builder.add_invar(a), a) for a in in_avals]
        args = tree_unflatten(in_tree, tracers)
        out = f(*args)
        flat_out, out_tree = tree_flatten(out)
        out_atoms = [trace.full_raise(x).atom for x in flat_out]
        jaxpr = state.builder.build(out_atoms)
    return _ir.ClosedJaxpr(jaxpr, state.consts), out_tree


def _static_key(x: Any, index: int) -> Hashable:
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"static argument {index} ({type(x).__name__}) must be hashable, at {user_location()}"
        ) from None
    return x  # type: ignore[no-any-return]


def make_jaxpr(
    f: Callable[..., Any], static_argnums: int | Sequence[int] = ()
) -> Callable[..., _ir.ClosedJaxpr]:
    """A function that traces ``f`` on the given arguments and returns its jaxpr.

    Arguments are pytrees of arrays (NumPy arrays, Python scalars, ferrax arrays);
    those in ``static_argnums`` are passed to ``f`` as they are (they must be hashable)
    and do not appear in the jaxpr.
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(f)
    def make(*args: Any) -> _ir.ClosedJaxpr:
        n = len(args)
        fixed = {(i % n if n else i): _static_key(args[i], i) for i in static if -n <= i < n}
        dynamic = [a for i, a in enumerate(args) if i not in fixed]

        def call(*dyn: Any) -> Any:
            it = iter(dyn)
            full = [fixed[i] if i in fixed else next(it) for i in range(n)]
            return f(*full)

        flat, in_tree = tree_flatten(tuple(dynamic))
        avals = [_arg_aval(x, i) for i, x in enumerate(flat)]
        closed, _ = trace_to_jaxpr(call, avals, in_tree)
        return closed

    return make


def _arg_aval(x: Any, index: int) -> _ir.ShapedArray:
    try:
        return aval_of(x)
    except TypeError:
        raise TypeError(
            f"argument leaf {index} of type {type(x).__name__} is not an array "
            f"(arrays, NumPy values and Python scalars are), at {user_location()}"
        ) from None
