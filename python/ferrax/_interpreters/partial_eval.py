"""Partial evaluation at trace time: known values computed now, unknown ones recorded.

This is how ``linearize`` (and so ``vjp`` and ``grad``) splits a JVP: the primal values
are known and computed eagerly (or by whatever transformation is below), the tangents
are unknown and their operations are recorded into a Rust jaxpr builder, the recipe of
the linear function. A known value an unknown operation uses becomes a constant of the
recipe: a residual. Only operations touching an unknown value reach this trace, so the
recipe holds exactly the tangent computation.

Primitives whose operands mix known and unknown values and that hold sub-jaxprs
(``jit``, control flow) register a rule in :data:`partial_eval_rules` that splits them
into a known part, run now, and an unknown part, recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ferrax import _ir
from ferrax._core import ConcreteArray, MainTrace, Primitive, Tracer, new_main
from ferrax._staging import JaxprTracer, StagingTrace, _Staging

__all__ = ["KnownTracer", "PartialEvalTrace", "Recipe", "partial_eval_rules", "split_by_pass", "trace_linear"]


class KnownTracer(JaxprTracer):
    """A known value entering the recipe: its residual (or literal) and the value."""

    __slots__ = ("known",)

    def __init__(self, trace: StagingTrace, atom: _ir.Var | _ir.Literal, aval: _ir.ShapedArray, known: Any) -> None:
        self._trace = trace
        self.atom = atom
        self.aval = aval
        self.known = known


PartialEvalRule = Callable[["PartialEvalTrace", Primitive, list[Any], dict[str, Any]], list[Any]]

#: Rules of primitives that split into a known and an unknown part, by name:
#: ``rule(trace, primitive, tracers, params) -> outputs`` (known outputs as values,
#: unknown ones as tracers of ``trace``).
partial_eval_rules: dict[str, PartialEvalRule] = {}


class PartialEvalTrace(StagingTrace):
    """Records the operations on unknown values; known operands become residuals."""

    def __init__(self, main: MainTrace) -> None:
        super().__init__(main)
        # id of an eager array (immutable) -> it and the known tracer pure made of it: an
        # array met again (a Python scalar's cached float32 value in x * 1.5) is the same
        # literal or constvar, as pure would make it.
        self._known_consts: dict[int, tuple[Any, KnownTracer]] = {}

    def pure(self, value: Any) -> JaxprTracer:
        if type(value) is ConcreteArray:
            hit = self._known_consts.get(id(value))
            if hit is not None:
                return hit[1]
            t = StagingTrace.pure(self, value)
            known = KnownTracer(self, t.atom, t.aval, value)
            self._known_consts[id(value)] = (value, known)
            return known
        t = StagingTrace.pure(self, value)
        return KnownTracer(self, t.atom, t.aval, value)

    def lift(self, tracer: Tracer) -> JaxprTracer:
        # A value of an outer transformation (a primal): a residual, as pure makes it.
        aval = tracer.aval
        return KnownTracer(self, self._constvar(self.state, tracer, aval), aval, tracer)

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        rule = partial_eval_rules.get(primitive.name)
        if rule is not None:
            return rule(self, primitive, tracers, params)
        return StagingTrace.process_primitive(self, primitive, tracers, params)

    def is_known(self, t: Any) -> bool:
        """Whether a tracer of this trace holds a known value."""
        return isinstance(t, KnownTracer)


def split_by_pass(trace: PartialEvalTrace, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
    """The partial-evaluation rule of primitives holding sub-jaxprs: the equation is split
    by the Rust pass (``_ir.partial_eval``, which knows ``jit``, ``cond``, ``scan`` and
    ``while``); the known part runs now on the known operands, giving known outputs and
    residuals; the unknown part is recorded, taking the residuals and unknown operands."""
    from ferrax._jit import eval_jaxpr

    unknowns = [not isinstance(t, KnownTracer) for t in tracers]
    key = _split_key(primitive, tracers, unknowns, params)
    split = _split_cache.get(key) if key is not None else None
    if split is None:
        b = _ir.JaxprBuilder()
        ins = [b.add_invar(t.aval) for t in tracers]
        outs = b.add_eqn(primitive.name, ins, params)
        split = _ir.partial_eval(b.build(outs), unknowns, [False] * len(outs))
        if key is not None:
            if len(_split_cache) >= 4096:
                _split_cache.pop(next(iter(_split_cache)))
            _split_cache[key] = split
    known, unknown, out_unknowns, n_res = split
    known_outs = eval_jaxpr(known, [], *[t.known for t in tracers if isinstance(t, KnownTracer)])
    n_known = len(known_outs) - n_res
    residuals = known_outs[n_known:]
    recorded = _record(trace, unknown, [*residuals, *[t for t, u in zip(tracers, unknowns) if u]])
    known_it, unknown_it = iter(known_outs[:n_known]), iter(recorded)
    return [next(unknown_it) if u else next(known_it) for u in out_unknowns]


# The splits of `jit` equations, by jaxpr (held, so its address is not reused), name,
# operand types and which operands are unknown: calls of one jitted function split into
# the same two jaxprs, shared as JAX shares them (printed once, as `let` definitions).
_split_cache: dict[Any, tuple[_ir.Jaxpr, _ir.Jaxpr, list[bool], int]] = {}


def _split_key(primitive: Primitive, tracers: Sequence[Any], unknowns: list[bool], params: dict[str, Any]) -> Any:
    if primitive.name != "jit" or set(params) != {"jaxpr", "name"}:
        return None
    return (params["jaxpr"], params["name"], tuple(t.aval for t in tracers), tuple(unknowns))


def _record(trace: PartialEvalTrace, jaxpr: _ir.Jaxpr, args: Sequence[Any]) -> list[Any]:
    """Records the equations of ``jaxpr`` applied to ``args`` in the trace's recipe (as
    they are: no partial-evaluation rule runs again on them)."""
    from ferrax._lax.registry import primitive_named

    import numpy as np

    env: dict[_ir.Var, Any] = dict(zip(jaxpr.invars, args))

    def read(a: _ir.Var | _ir.Literal) -> Any:
        if isinstance(a, _ir.Literal):
            return ConcreteArray(np.asarray(a.val, dtype=a.aval.dtype), a.aval.weak_type)
        return env[a]

    for eqn in jaxpr.eqns:
        prim = primitive_named(eqn.primitive)
        tracers = [trace.full_raise(read(a)) for a in eqn.inputs]
        outs = StagingTrace.process_primitive(trace, prim, tracers, eqn.params)
        env.update(zip(eqn.outvars, outs))
    return [trace.full_raise(read(a)) for a in jaxpr.outvars]


class Recipe:
    """The recorded linear function: residuals (known values) as constants, the unknown
    inputs as inputs, the unknown outputs as outputs."""

    __slots__ = ("jaxpr", "residuals")

    def __init__(self, jaxpr: _ir.Jaxpr, residuals: list[Any]) -> None:
        self.jaxpr = jaxpr
        self.residuals = residuals


def trace_linear(
    fun: Callable[[list[Any]], tuple[list[Any], list[Any]]], unknown_avals: Sequence[_ir.ShapedArray]
) -> tuple[list[Any], list[Any], list[bool], Recipe]:
    """Runs ``fun`` on unknown inputs of these types under a partial-evaluation trace.

    ``fun(unknowns) -> (known_outputs, maybe_unknown_outputs)``. Returns the known
    outputs, the other outputs (each either a known value, or None where it is unknown),
    flags saying which of those are unknown, and the recipe computing the unknown ones
    from the unknown inputs.
    """
    state = _Staging()
    main: MainTrace
    with new_main(PartialEvalTrace, state) as main:
        trace = main.trace
        assert isinstance(trace, PartialEvalTrace)
        shared: dict[_ir.ShapedArray, _ir.ShapedArray] = {}
        ins = [JaxprTracer(trace, state.builder.add_invar(a), shared.setdefault(a, a)) for a in unknown_avals]
        known_outs, outs = fun(ins)
        unknown = [
            isinstance(o, Tracer) and not isinstance(o, KnownTracer) and getattr(o, "_trace", None) is trace
            for o in outs
        ]
        atoms = [o.atom for o, u in zip(outs, unknown) if u]
        jaxpr = state.builder.build(atoms)
    values = [None if u else o for o, u in zip(outs, unknown)]
    return known_outs, values, unknown, Recipe(jaxpr, list(state.consts))
