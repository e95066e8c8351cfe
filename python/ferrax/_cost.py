"""``cost_analysis``: the operations a function performs and the bytes it moves, counted
from its jaxpr in Rust (``ferrax-ir``'s ``passes::cost``), with the data-dependent control
flow of concrete arguments counted by running it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._core import ConcreteArray, KeyValue, Tracer, bind
from ferrax._staging import make_jaxpr
from ferrax.dtypes import is_key
from ferrax.tree_util import tree_leaves

__all__ = ["cost_analysis"]

# How deep concrete costing follows `cond` branches and `jit` calls into one another
# before counting the rest statically.
_MAX_DEPTH = 16

_Report = dict[str, Any]
_COUNTS = ("flops", "transcendentals", "bytes_accessed")


def cost_analysis(f: Callable[..., Any]) -> Callable[..., _Report]:
    """A function that traces ``f`` on the given arguments and returns its cost:
    ``{"flops", "transcendentals", "bytes_accessed", "while_loops", "by_primitive"}``,
    ``by_primitive`` mapping each primitive's name to its share of the first three.

    Counted as XLA's cost analysis counts the same program: one flop per element of every
    elementwise operation whatever its dtype, transcendental functions apart (one per
    element), ``dot_general`` two per multiply-add, reductions one per combined element;
    bytes are each equation's operands plus its outputs. Dead code is removed first.
    ``scan`` counts its body ``length`` times (XLA: once); the other deliberate
    differences are listed in the docs of ``ferrax-ir``'s ``passes::cost``.

    With concrete arguments (not tracers) the program is run eagerly to count its
    data-dependent control flow: a ``cond`` (at top level or in ``jit`` calls) counts the
    branch it takes, and a ``while`` loop its actual trips (found by running only the part
    of the loop its predicate depends on): ``trips`` times its body and ``trips + 1`` times
    its predicate. Otherwise (and inside ``scan`` bodies) ``cond`` counts its costliest
    branch and ``while`` one iteration; ``while_loops`` says how many loops were counted
    so.
    """

    def analyse(*args: Any) -> _Report:
        closed = make_jaxpr(f)(*args)
        # Dead code does not run (JAX's lowering drops it too).
        jaxpr, used = _ir.dce(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
        leaves = tree_leaves(args)
        if any(isinstance(x, Tracer) for x in leaves):
            return _ir.cost_analysis(jaxpr)
        kept = [x for x, u in zip(leaves, used) if u]
        _, report = _run_and_count(jaxpr, closed.consts, kept, 0)
        return report

    return analyse


def _empty() -> _Report:
    return {"flops": 0.0, "transcendentals": 0.0, "bytes_accessed": 0.0, "while_loops": 0, "by_primitive": {}}


def _add(total: _Report, part: _Report, times: int = 1) -> None:
    """Adds ``times`` times ``part`` into ``total`` (``while_loops`` not scaled)."""
    for k in _COUNTS:
        total[k] += times * part[k]
    total["while_loops"] += part["while_loops"]
    for name, c in part["by_primitive"].items():
        mine = total["by_primitive"].setdefault(name, dict.fromkeys(_COUNTS, 0.0))
        for k in _COUNTS:
            mine[k] += times * c[k]


def _value(x: Any, aval: _ir.ShapedArray) -> Any:
    """An argument as the eager rules take it (keys as their packed words)."""
    if isinstance(x, np.ndarray) and is_key(aval.dtype):
        return KeyValue(np.asarray(x, dtype=np.uint64))
    if isinstance(x, (bool, int, float, complex)):
        return ConcreteArray(np.asarray(x, dtype=aval.dtype), aval.weak_type)
    return x


def _open(cj: Any) -> tuple[_ir.Jaxpr, list[Any]]:
    """A ``jaxpr`` param as a jaxpr and its constants."""
    if isinstance(cj, _ir.ClosedJaxpr):
        return cj.jaxpr, list(cj.consts)
    assert isinstance(cj, _ir.Jaxpr)
    return cj, []


def _run_and_count(jaxpr: _ir.Jaxpr, consts: Sequence[Any], args: Sequence[Any], depth: int) -> tuple[list[Any], _Report]:
    """Evaluates ``jaxpr`` eagerly, equation by equation, returning its outputs and its
    cost, with ``cond`` and ``while`` equations counted as they run."""
    from ferrax._lax.registry import primitive_named

    env: dict[_ir.Var, Any] = {}
    for v, x in zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]):
        env[v] = _value(x, v.aval)

    def read(a: _ir.Var | _ir.Literal) -> Any:
        if isinstance(a, _ir.Literal):
            return ConcreteArray(np.asarray(a.val, dtype=a.aval.dtype), a.aval.weak_type)
        return env[a]

    report = _empty()
    for eqn, static in zip(jaxpr.eqns, _ir.equation_costs(jaxpr)):
        ins = [read(a) for a in eqn.inputs]
        name, params = eqn.primitive, eqn.params
        if name == "cond" and depth < _MAX_DEPTH:
            branches = params["branches"]
            index = min(max(int(np.asarray(ins[0])), 0), len(branches) - 1)
            outs, cost = _run_and_count(*_open(branches[index]), ins[1:], depth + 1)
        elif name in ("jit", "pjit") and depth < _MAX_DEPTH:
            outs, cost = _run_and_count(*_open(params["jaxpr"]), ins, depth + 1)
        else:
            prim = primitive_named(name)
            result = bind(prim, ins, params)
            outs = list(result) if prim.multiple_results else [result]
            cost = _while_cost(params, ins) if name == "while" else static
        _add(report, cost)
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(a) for a in jaxpr.outvars], report


def _while_cost(params: dict[str, Any], ins: Sequence[Any]) -> _Report:
    """A ``while`` loop's cost over its actual trips: ``trips`` bodies and ``trips + 1``
    predicates (each counted statically)."""
    trips = _while_trips(params, ins)
    report = _empty()
    _add(report, _ir.cost_analysis(_open(params["body_jaxpr"])[0]), trips)
    _add(report, _ir.cost_analysis(_open(params["cond_jaxpr"])[0]), trips + 1)
    return report


def _closed_as_inputs(cj: Any) -> tuple[_ir.Jaxpr, list[Any]]:
    """A closed jaxpr with its constants turned into leading inputs, and the constants."""
    jaxpr, consts = _open(cj)
    return (_ir.consts_to_invars(jaxpr), consts) if consts else (jaxpr, [])


def _while_trips(params: dict[str, Any], ins: Sequence[Any]) -> int:
    """How many times a ``while`` loop runs its body, found by running only the slice of
    the loop its predicate depends on: the carries the predicate reads, closed under the
    body's dependencies."""
    from ferrax._jit import eval_jaxpr

    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]
    cond, cond_consts = _closed_as_inputs(params["cond_jaxpr"])
    body, body_consts = _closed_as_inputs(params["body_jaxpr"])
    c_args = [*cond_consts, *ins[:n_cond]]
    b_args = [*body_consts, *ins[n_cond : n_cond + n_body]]
    carry = list(ins[n_cond + n_body :])
    n = len(carry)

    cond_slice, cond_used = _ir.dce(cond, [True])
    needed = {i for i in range(n) if cond_used[len(c_args) + i]}
    while True:  # a fixpoint: carries the needed carries' next values read
        _, body_used = _ir.dce(body, [i in needed for i in range(n)])
        more = needed | {i for i in range(n) if body_used[len(b_args) + i]}
        if more == needed:
            break
        needed = more
    body_slice, body_used = _ir.dce(body, [i in needed for i in range(n)])
    kept = sorted(needed)

    def pick(values: Sequence[Any], used: Sequence[bool]) -> list[Any]:
        return [x for x, u in zip(values, used) if u]

    state = {i: carry[i] for i in kept}
    trips = 0
    while True:
        (go,) = eval_jaxpr(cond_slice, [], *pick([*c_args, *[state.get(i) for i in range(n)]], cond_used))
        if not bool(np.asarray(go)):
            return trips
        new = eval_jaxpr(body_slice, [], *pick([*b_args, *[state.get(i) for i in range(n)]], body_used))
        state = dict(zip(kept, new))
        trips += 1
