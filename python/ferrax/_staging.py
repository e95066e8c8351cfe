"""Staging: tracing a Python function into a jaxpr (``make_jaxpr``).

The staging trace records each primitive as an equation in a Rust ``JaxprBuilder``; the
output types come from the builder (Rust's shape rules). Constants met while tracing
become literals (scalars) or constvars (arrays, closed over by the ``ClosedJaxpr``).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._array import Array
from ferrax._core import (
    ConcreteArray,
    MainTrace,
    Primitive,
    Trace,
    Tracer,
    _dynamic,
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


_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)
_NO_PARAMS: dict[str, Any] = {}
_pack_f32 = struct.Struct("f")
# The abstract values of scalar literals, one object per (dtype, weak type).
_scalar_avals: dict[tuple[np.dtype[Any], bool], _ir.ShapedArray] = {}


def _scalar_aval(dtype: np.dtype[Any], weak: bool) -> _ir.ShapedArray:
    aval = _scalar_avals.get((dtype, weak))
    if aval is None:
        aval = _scalar_avals[dtype, weak] = _ir.ShapedArray((), dtype, weak)
    return aval


class _AvalKind:
    """What the operator fast paths of :class:`JaxprTracer` may do with a type.

    ``same``: two operands of exactly this type need no promotion or broadcasting (true
    for every type but weakly typed ones other than float32 and int32, which promotion
    changes). ``scalar``: ``"f"`` (float32) or ``"i"`` (int32) when a Python scalar
    operand becomes a literal of this dtype and weak type, else ``None``.
    """

    __slots__ = ("aval", "same", "scalar", "weak")

    def __init__(self, aval: _ir.ShapedArray) -> None:
        dtype, weak = aval.dtype, aval.weak_type
        self.aval = aval  # keeps id(aval) valid while this entry lives
        self.weak = weak
        self.scalar = "f" if dtype == _F32 else "i" if dtype == _I32 else None
        self.same = not weak or self.scalar is not None


class JaxprTracer(Tracer):
    """A value of the function being staged: a variable or literal of the jaxpr."""

    __slots__ = ("atom", "aval")
    _trace: StagingTrace
    aval: _ir.ShapedArray

    def __init__(self, trace: StagingTrace, atom: _ir.Var | _ir.Literal, aval: _ir.ShapedArray) -> None:
        self._trace = trace
        self.atom = atom
        self.aval = aval

    # Fast paths of the arithmetic operators: an operation on two tracers of one type, or
    # on a tracer and a Python scalar that becomes a literal of its dtype, is its primitive
    # applied directly, with no promotion or broadcasting to do (the result is the
    # equation ferrax.numpy would stage). Anything else goes through ferrax.numpy.

    def __add__(self, other: Any) -> Array:
        out = self._trace.binary("add", self, other, False, False)
        return Array.__add__(self, other) if out is None else out

    def __radd__(self, other: Any) -> Array:
        out = self._trace.binary("add", self, other, True, False)
        return Array.__radd__(self, other) if out is None else out

    def __sub__(self, other: Any) -> Array:
        out = self._trace.binary("sub", self, other, False, False)
        return Array.__sub__(self, other) if out is None else out

    def __rsub__(self, other: Any) -> Array:
        out = self._trace.binary("sub", self, other, True, False)
        return Array.__rsub__(self, other) if out is None else out

    def __mul__(self, other: Any) -> Array:
        out = self._trace.binary("mul", self, other, False, False)
        return Array.__mul__(self, other) if out is None else out

    def __rmul__(self, other: Any) -> Array:
        out = self._trace.binary("mul", self, other, True, False)
        return Array.__rmul__(self, other) if out is None else out

    def __truediv__(self, other: Any) -> Array:
        out = self._trace.binary("div", self, other, False, True)
        return Array.__truediv__(self, other) if out is None else out

    def __rtruediv__(self, other: Any) -> Array:
        out = self._trace.binary("div", self, other, True, True)
        return Array.__rtruediv__(self, other) if out is None else out


class StagingTrace(Trace):
    """Records primitives as equations of a jaxpr."""

    def __init__(self, main: MainTrace) -> None:
        super().__init__(main)
        self.state: _Staging = main.global_data
        self.builder = self.state.builder
        # id(aval) -> what the operator fast paths may do with values of that type.
        self._kinds: dict[int, _AvalKind] = {}
        # (Python scalar, weak type) -> its literal, for float32 and int32 (zero excluded:
        # 0.0 and -0.0 are equal keys).
        self._f32_literals: dict[tuple[float, bool], _ir.Literal] = {}
        self._i32_literals: dict[tuple[int, bool], _ir.Literal] = {}

    def pure(self, value: Any) -> JaxprTracer:
        state = self.state
        if isinstance(value, Tracer):
            # A value of an outer transformation: closed over as a constvar.
            return self._constvar(state, value, value.aval)
        if isinstance(value, ConcreteArray) and value._value.ndim == 0:
            # The common constant: a scalar (a Python scalar after promotion).
            dtype = value._value.dtype
            weak = value._weak
            lit = state.builder.literal(value._value.item(), dtype, weak)
            return JaxprTracer(self, lit, _scalar_aval(dtype, weak))
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
        try:
            outs = self.builder.add_eqn_typed(
                primitive.name if primitive._builtin else primitive.ir_primitive(),
                [t.atom for t in tracers],
                params,
            )
        except TypeCheckError as e:
            raise TypeCheckError(f"{e}\n  while tracing, at {user_location()}") from None
        return [JaxprTracer(self, v, a) for v, a in outs]

    # ----------------------------------------------------------- operator fast paths

    def _kind(self, aval: _ir.ShapedArray) -> _AvalKind:
        kind = self._kinds.get(id(aval))
        if kind is None:
            kind = self._kinds[id(aval)] = _AvalKind(aval)
        return kind

    def binary(self, name: str, x: JaxprTracer, other: Any, reflected: bool, divide: bool) -> JaxprTracer | None:
        """``x <op> other`` (``other <op> x`` if ``reflected``) as one ``name`` equation,
        when that is what ferrax.numpy would stage: ``other`` a tracer of this trace of
        the same type, or a Python scalar that becomes a literal of ``x``'s dtype. None
        otherwise (and when this trace is not the innermost one)."""
        if not _dynamic or _dynamic[-1] is not self.main:
            return None
        t = type(other)
        if t is JaxprTracer:
            if other._trace is not self or other.aval is not x.aval:
                return None
            kind = self._kind(x.aval)
            if not kind.same or (divide and kind.scalar != "f"):
                return None
            atom = other.atom
        elif t is float or t is int:
            kind = self._kind(x.aval)
            if kind.scalar == "f":
                lit = self._f32_literal(other, kind.weak)
            elif kind.scalar == "i" and t is int and not divide:
                lit = self._i32_literal(other, kind.weak)
            else:
                return None
            if lit is None:
                return None
            atom = lit
        else:
            return None
        inputs = [atom, x.atom] if reflected else [x.atom, atom]
        try:
            ((v, a),) = self.builder.add_eqn_typed(name, inputs, _NO_PARAMS)
        except TypeCheckError as e:
            raise TypeCheckError(f"{e}\n  while tracing, at {user_location()}") from None
        return JaxprTracer(self, v, a)

    def _f32_literal(self, value: float, weak: bool) -> _ir.Literal | None:
        """The float32 literal NumPy's conversion of ``value`` gives (None if it
        overflows, or for an int it might round differently)."""
        key = (value, weak)
        lit = self._f32_literals.get(key)
        if lit is None or not value:
            if type(value) is int and not -(2**24) <= value <= 2**24:
                return None
            try:
                (rounded,) = _pack_f32.unpack(_pack_f32.pack(value))
            except OverflowError:
                return None
            lit = self.builder.literal(rounded, _F32, weak)
            if value:
                if len(self._f32_literals) > 4096:
                    self._f32_literals.clear()
                self._f32_literals[key] = lit
        return lit

    def _i32_literal(self, value: int, weak: bool) -> _ir.Literal | None:
        if not -(2**31) <= value < 2**31:
            return None
        key = (value, weak)
        lit = self._i32_literals.get(key)
        if lit is None:
            lit = self.builder.literal(value, _I32, weak)
            if len(self._i32_literals) > 4096:
                self._i32_literals.clear()
            self._i32_literals[key] = lit
        return lit


def trace_to_jaxpr(
    f: Callable[..., Any], in_avals: Sequence[_ir.ShapedArray], in_tree: PyTreeDef
) -> tuple[_ir.ClosedJaxpr, PyTreeDef]:
    """Stages ``f`` applied to arguments of these types (flattened per ``in_tree``);
    returns the closed jaxpr and the structure of the outputs."""
    state = _Staging()
    with new_main(StagingTrace, state, dynamic=True) as main:
        trace = main.trace
        assert isinstance(trace, StagingTrace)
        # Equal input types share one aval object (as the builder's outputs do).
        shared: dict[_ir.ShapedArray, _ir.ShapedArray] = {}
        tracers = [
            JaxprTracer(trace, state.builder.add_invar(a), shared.setdefault(a, a)) for a in in_avals
        ]
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
