"""Forward-mode differentiation: the JVP trace, symbolic zeros, and rule helpers.

A :class:`JVPTracer` carries a primal value and its tangent. The tangent is either a
value or a :class:`Zero` (a symbolic zero: known to be zero, never materialized). A
primitive whose tangents are all zero is applied to the primals alone, so unused and
integer tangents cost nothing and never reach a jaxpr. Otherwise the primitive's
``jvp_rule(primals, tangents, **params) -> (primal_outs, tangent_outs)`` runs; rules live
next to their primitives (``ferrax._lax``), written with the helpers here.

This module knows the core, not the primitives: the two tangent operations it needs
(adding tangents, materializing a zero) are registered by ``ferrax._lax`` with
:func:`register_tangent_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import operator
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._core import ConcreteArray, Primitive, PythonScalar, Trace, Tracer, aval_of, to_numpy, user_location
from ferrax.errors import DifferentiationError

__all__ = [
    "JVPTrace",
    "JVPTracer",
    "Zero",
    "add_tangents",
    "defjvp",
    "deflinear",
    "float0",
    "instantiate",
    "is_differentiable",
    "jvp_flat",
    "jvp_jaxpr",
    "register_tangent_ops",
]

#: The dtype of the tangent of an integer or boolean value (JAX's ``float0``): no data.
float0: np.dtype[Any] = np.dtype([("float0", np.void, 0)])


def is_differentiable(dtype: np.dtype[Any]) -> bool:
    """Whether values of this dtype have tangents (floating and complex types)."""
    known = _differentiable.get(dtype)
    if known is None:
        known = _differentiable[dtype] = dtypes.is_float(dtype) or dtype.kind == "c"
    return known


# dtype -> whether it has tangents (asked once per primitive application).
_differentiable: dict[np.dtype[Any], bool] = {}


class Zero:
    """A symbolic zero tangent for a value of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: _ir.ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"


# The tangent operations, registered by ferrax._lax (which owns the primitives).
_add: Callable[[Any, Any], Any] | None = None
_zeros: Callable[[_ir.ShapedArray], Any] | None = None


def register_tangent_ops(add: Callable[[Any, Any], Any], zeros: Callable[[_ir.ShapedArray], Any]) -> None:
    """Sets how tangents are added (``add_any``) and how a zero is materialized."""
    global _add, _zeros
    _add, _zeros = add, zeros


def instantiate(t: Any) -> Any:
    """A tangent as a value: a symbolic zero becomes an array of zeros."""
    if type(t) is Zero:
        if dtypes.is_key(t.aval.dtype):
            return zeros_float0(t.aval)
        assert _zeros is not None
        return _zeros(t.aval)
    return t


def add_tangents(a: Any, b: Any) -> Any:
    """The sum of two tangents of the same type, zeros kept symbolic."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    assert _add is not None
    return _add(a, b)


# -------------------------------------------------------------------------- the trace


class JVPTracer(Tracer):
    """A value being differentiated forward: a primal and its tangent."""

    __slots__ = ("primal", "tangent", "aval")
    aval: _ir.ShapedArray

    def __init__(self, trace: JVPTrace, primal: Any, tangent: Any, aval: _ir.ShapedArray | None = None) -> None:
        self._trace = trace
        self.primal = primal
        self.tangent = tangent
        # The primal's type (given when the caller has read it), read once (tracers are
        # immutable).
        if aval is None:
            aval = primal.aval if isinstance(primal, (Tracer, ConcreteArray)) else aval_of(primal)
        self.aval = aval

    # Python control flow on concrete primal values works (as in JAX): the concrete
    # conversions read the primal, and fail as it fails when it is itself traced.
    def __bool__(self) -> bool:
        return bool(self.primal)

    def __int__(self) -> int:
        return int(self.primal)

    def __float__(self) -> float:
        return float(self.primal)

    def __index__(self) -> int:
        return operator.index(self.primal)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        return np.asarray(self.primal, dtype=dtype)

    def tolist(self) -> Any:
        return np.asarray(self.primal).tolist()

    def item(self, *args: int) -> Any:
        return np.asarray(self.primal).item(*args)


def _as_value(x: Any) -> Any:
    """A constant as an array value (Python and NumPy scalars keep JAX's typing)."""
    if isinstance(x, (Tracer, ConcreteArray)):
        return x
    if type(x) is float:
        return PythonScalar(x)
    return ConcreteArray(to_numpy(x), aval_of(x).weak_type)


class JVPTrace(Trace):
    """Applies primitives to (primal, tangent) pairs with each primitive's JVP rule."""

    def pure(self, value: Any) -> JVPTracer:
        value = _as_value(value)
        aval = value.aval
        return JVPTracer(self, value, Zero(aval), aval)

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        primals = []
        tangents = []
        nonzero = False
        for tracer in tracers:
            primals.append(tracer.primal)
            t = tracer.tangent
            tangents.append(t)
            if type(t) is not Zero:
                nonzero = True
        return self.apply(primitive, primals, tangents, nonzero, params)

    def apply(
        self, primitive: Primitive, primals: list[Any], tangents: list[Any], nonzero: bool, params: dict[str, Any]
    ) -> list[Any]:
        """``primitive`` applied to (primal, tangent) pairs, as tracers of this trace;
        ``nonzero`` says whether some tangent is not a :class:`Zero`."""
        if not nonzero:
            outs = primitive.bind(*primals, **params)
            if not primitive.multiple_results:
                aval = aval_of(outs)
                return [JVPTracer(self, outs, Zero(aval), aval)]
            results = []
            for o in outs:
                aval = aval_of(o)
                results.append(JVPTracer(self, o, Zero(aval), aval))
            return results
        rule = primitive.jvp_rule
        if rule is None:
            raise DifferentiationError(
                f"Differentiation rule for '{primitive.name}' not implemented, at {user_location()}"
            )
        primal_out, tangent_out = rule(primals, tangents, **params)
        if not primitive.multiple_results:
            # _output, inline (the common case).
            aval = primal_out.aval if isinstance(primal_out, (Tracer, ConcreteArray)) else aval_of(primal_out)
            if type(tangent_out) is not Zero and (
                tangent_out is None or not (_differentiable.get(aval.dtype) or is_differentiable(aval.dtype))
            ):
                tangent_out = Zero(aval)
            return [JVPTracer(self, primal_out, tangent_out, aval)]
        return [self._output(p, t) for p, t in zip(primal_out, tangent_out, strict=True)]

    def _output(self, primal: Any, tangent: Any) -> JVPTracer:
        """A rule's output pair as a tracer: no tangent (None), or one of a type that has
        none (integers), is a symbolic zero."""
        aval = primal.aval if isinstance(primal, (Tracer, ConcreteArray)) else aval_of(primal)
        if type(tangent) is not Zero and (tangent is None or not is_differentiable(aval.dtype)):
            tangent = Zero(aval)
        return JVPTracer(self, primal, tangent, aval)


# ---------------------------------------------------------------------- rule helpers

JvpFn = Callable[..., Any]


def defjvp(primitive: Primitive, *fns: JvpFn | None) -> None:
    """Defines ``primitive``'s JVP one operand at a time: ``fns[i](t, ans, *primals,
    **params)`` is the output tangent's part due to operand ``i``'s tangent ``t`` (``ans``
    the primal output); ``None`` for an operand with no derivative. The parts of nonzero
    tangents are added."""
    only = fns[0] if len(fns) == 1 else None
    if only is not None:
        # One operand (sin, exp, ...): its part is the tangent (the rule runs only when
        # some tangent is not a symbolic zero).
        fn: JvpFn = only

        def unary_rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
            ans = primitive.bind(*primals, **params)
            t = tangents[0]
            if type(t) is Zero:
                return ans, Zero(aval_of(ans))
            return ans, fn(t, ans, *primals, **params)

        primitive.def_jvp(unary_rule)
        return

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        # Every part first, then their sum (JAX's standard_jvp: the adds come last).
        parts = []
        for fn, t in zip(fns, tangents):
            if fn is not None and type(t) is not Zero:
                parts.append(fn(t, ans, *primals, **params))
        if len(parts) == 1:
            return ans, parts[0]
        out: Any = Zero(aval_of(ans))
        for part in parts:
            out = add_tangents(out, part)
        return ans, out

    primitive.def_jvp(rule)


def deflinear(primitive: Primitive, linear: Sequence[int] | None = None) -> None:
    """``primitive`` is linear in the operands at positions ``linear`` (all when None)
    jointly: its tangent is the primitive applied to those operands' tangents (zeros
    materialized) and the other operands' primal values."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        positions = range(len(primals)) if linear is None else linear
        args = list(primals)
        for i in positions:
            args[i] = instantiate(tangents[i])
        return ans, primitive.bind(*args, **params)

    primitive.def_jvp(rule)


def zeros_float0(aval: _ir.ShapedArray) -> np.ndarray[Any, Any]:
    """The tangent of an integer value: a float0 array of its shape."""
    return np.zeros(aval.shape, dtype=float0)


# ------------------------------------------------------------- jvp of a closed jaxpr

_JvpKey = tuple[_ir.ClosedJaxpr, tuple[bool, ...], tuple[bool, ...], tuple[int, ...], tuple[int, ...]]
_jvp_cache: dict[_JvpKey, tuple[_ir.ClosedJaxpr, list[bool]]] = {}


def _interleave(groups: Sequence[int], primals: Sequence[Any], tangents: Sequence[Any], flags: Sequence[bool]) -> list[Any]:
    """Each group of primals followed by the flagged tangents of that group."""
    out: list[Any] = []
    i = 0
    for n in groups:
        out.extend(primals[i : i + n])
        out.extend(t for t, f in zip(tangents[i : i + n], flags[i : i + n]) if f)
        i += n
    return out


def jvp_jaxpr(
    closed: _ir.ClosedJaxpr,
    nonzeros: Sequence[bool],
    instantiate: Sequence[bool] | bool,
    in_groups: Sequence[int] | None = None,
    out_groups: Sequence[int] | None = None,
) -> tuple[_ir.ClosedJaxpr, list[bool]]:
    """The JVP of a jaxpr, as a jaxpr.

    It takes the primal inputs, then the tangents of the inputs flagged in ``nonzeros``,
    and returns the primal outputs, then the tangents of the outputs that are not
    symbolically zero (flagged in the second result). An output flagged in
    ``instantiate`` always gets a tangent (zeros if need be) unless its type has none
    (integers). With ``in_groups`` (sizes summing to the input count) each group of
    primal inputs is followed by its own tangents (a scan's consts, carry and xs); the
    same for outputs with ``out_groups``.
    """
    in_avals = closed.in_avals
    n_in, n_out = len(in_avals), len(closed.out_avals)
    inst = (instantiate,) * n_out if isinstance(instantiate, bool) else tuple(instantiate)
    gin = tuple(in_groups) if in_groups is not None else (n_in,)
    gout = tuple(out_groups) if out_groups is not None else (n_out,)
    key = (closed, tuple(nonzeros), inst, gin, gout)
    hit = _jvp_cache.get(key)
    if hit is not None:
        return hit
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_flatten

    out_nz: list[bool] = []
    # Where each primal and each flagged tangent sits among the inputs.
    slots = _interleave(gin, [("p", i) for i in range(n_in)], [("t", i) for i in range(n_in)], nonzeros)

    def fun(*args: Any) -> list[Any]:
        primals: list[Any] = [None] * n_in
        tangents: list[Any] = [Zero(a) for a in in_avals]
        for (kind, i), x in zip(slots, args):
            if kind == "p":
                primals[i] = x
            else:
                tangents[i] = x
        ps, ts = jvp_flat(lambda *xs: eval_closed(closed, *xs), primals, tangents)
        out_nz.clear()
        for k, (t, p) in enumerate(zip(ts, ps)):
            if type(t) is Zero and inst[k] and is_differentiable(aval_of(p).dtype):
                ts[k] = instantiate_zero(t)
            out_nz.append(type(ts[k]) is not Zero)
        return _interleave(gout, ps, ts, out_nz)

    avals = [in_avals[i] for _, i in slots]
    _, tree = tree_flatten(tuple(range(len(avals))))
    jvp_closed, _ = trace_to_jaxpr(fun, avals, tree)
    result = (jvp_closed, list(out_nz))
    if len(_jvp_cache) > 4096:
        _jvp_cache.clear()
    _jvp_cache[key] = result
    return result


def hoist_consts(closed: _ir.ClosedJaxpr) -> tuple[_ir.ClosedJaxpr, list[Any]]:
    """A closed jaxpr whose constants became leading inputs, and those constants (the
    sub-jaxprs of calls and control flow take no constants)."""
    if not closed.consts:
        return closed, []
    return _ir.ClosedJaxpr(_ir.consts_to_invars(closed.jaxpr), []), list(closed.consts)


def call_jvp(
    primitive: Primitive, primals: Sequence[Any], tangents: Sequence[Any], jaxpr: _ir.ClosedJaxpr, **params: Any
) -> tuple[list[Any], list[Any]]:
    """The JVP of a call-like primitive (``jit``, ``remat2``): one equation of the same
    primitive over the JVP of its jaxpr, taking the primals and the nonzero tangents and
    returning the primal outputs and the nonzero tangents; ``params`` are the new
    equation's other params."""
    jvp_closed, out_nz = jvp_jaxpr(jaxpr, [type(t) is not Zero for t in tangents], False)
    body, consts = hoist_consts(jvp_closed)
    outs = primitive.bind(*consts, *primals, *[t for t in tangents if type(t) is not Zero], jaxpr=body, **params)
    n = len(jaxpr.out_avals)
    rest = iter(outs[n:])
    return list(outs[:n]), [next(rest) if nz else Zero(a) for nz, a in zip(out_nz, jaxpr.out_avals)]


def instantiate_zero(t: Any) -> Any:
    """Alias of :func:`instantiate` for readability in rules."""
    return instantiate(t)


def eval_closed(closed: _ir.ClosedJaxpr, *args: Any) -> list[Any]:
    """Evaluates a closed jaxpr under the active transformations."""
    from ferrax._jit import eval_jaxpr

    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def jvp_flat(fun: Callable[..., Sequence[Any]], primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
    """Runs ``fun`` on (primal, tangent) pairs under a new JVP trace; returns the primal
    outputs and their tangents (symbolic zeros kept as :class:`Zero`)."""
    from ferrax._core import new_main

    with new_main(JVPTrace) as main:
        trace = main.trace
        assert isinstance(trace, JVPTrace)
        tracers = []
        for p, t in zip(primals, tangents, strict=True):
            p = _as_value(p)
            if type(t) is not Zero and not is_differentiable(aval_of(p).dtype):
                t = Zero(aval_of(p))
            tracers.append(JVPTracer(trace, p, t))
        outs = fun(*tracers)
        raised = [trace.full_raise(o) for o in outs]
        primal_out = [r.primal for r in raised]
        tangent_out = [r.tangent for r in raised]
    return primal_out, tangent_out
