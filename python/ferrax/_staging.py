"""Staging: tracing a Python function into a jaxpr (``make_jaxpr``).

The staging trace records each primitive as an equation in a Rust ``JaxprBuilder``; the
output types come from the builder (Rust's shape rules). Constants met while tracing
become literals (scalars) or constvars (arrays, closed over by the ``ClosedJaxpr``).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from ferrax import _config, _ir, dtypes, tree_util
from ferrax._array import Array, type_name
from ferrax._core import (
    ConcreteArray,
    MainTrace,
    Primitive,
    PythonScalar,
    Trace,
    Tracer,
    aval_of,
    new_main,
    to_numpy,
    user_location,
)
from ferrax._interpreters.axis_env import axis_env
from ferrax.errors import BuilderError, FerraxError, TypeCheckError, UnexpectedTracerError, escaped_tracer_message
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["JaxprTracer", "StagingTrace", "make_jaxpr", "staged_float_unary", "trace_to_jaxpr"]


class _Staging:
    """The state of one staging: the builder and the constants captured so far."""

    __slots__ = ("builder", "consts", "const_vars")

    def __init__(self) -> None:
        # Inside a shard_map body or a named vmap the collectives' axes are known: the
        # builder checks them (and gets all_gather's and all_to_all's sizes).
        env = axis_env()
        self.builder = _ir.JaxprBuilder() if env is None else _ir.JaxprBuilder(axis_env=env)
        self.consts: list[Any] = []
        # (id of the constant's storage, its type) -> its constvar; the constant is kept
        # alive in `consts`, so the id stays its own.
        self.const_vars: dict[tuple[int, _ir.ShapedArray], _ir.Var] = {}


F = TypeVar("F", bound=Callable[..., Any])

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)
_NO_PARAMS: dict[str, Any] = {}
_LEAF_TREE = tree_flatten(0)[1]
_pack_f32 = struct.Struct("f")
# The abstract values of scalar literals, one object per (dtype, weak type).
_scalar_avals: dict[tuple[np.dtype[Any], bool], _ir.ShapedArray] = {}


def _scalar_aval(dtype: np.dtype[Any], weak: bool) -> _ir.ShapedArray:
    aval = _scalar_avals.get((dtype, weak))
    if aval is None:
        aval = _scalar_avals[dtype, weak] = _ir.ShapedArray((), dtype, weak)
    return aval


def _weak_f32(value: float) -> float:
    """A weakly typed float32 literal's value as JAX writes it: a weak literal is a Python
    float there (``0.9``), not its float32 value (0.8999999761581421). Ferrax keeps the
    float32 value; the shortest decimal that reads back as it is the Python float the
    user wrote (for up to 7 significant digits), and the same float32."""
    return float(str(np.float32(value)))


class _AvalKind:
    """What the operator fast paths of :class:`JaxprTracer` may do with one type.

    ``same``: two operands of exactly this type need no promotion or broadcasting (true
    for numeric types, strong or weakly typed float32/int32: promotion changes bools,
    and weakly typed values of other dtypes); nor do two of this dtype and weak type
    whose shapes broadcast. ``float``: a floating dtype (what float functions such as
    ``sin`` take as it is). ``scalar``: ``"f"`` (float32) or ``"i"``
    (int32) when a Python scalar operand becomes a literal of this dtype and weak type,
    else ``None``; ``literals`` caches those literals by value (shared by the types of
    one dtype and weak type).
    """

    __slots__ = ("aval", "same", "scalar", "weak", "float", "literals")

    def __init__(self, aval: _ir.ShapedArray, trace: StagingTrace) -> None:
        """The kind of ``aval``, recorded in ``trace._kinds``."""
        trace._kinds[id(aval)] = self
        dtype, weak = aval.dtype, aval.weak_type
        self.aval = aval  # keeps id(aval) valid while this entry lives
        self.weak = weak
        # (dtypes.is_float and dtypes.x64_enabled, inline: one call fewer each per type.)
        self.float = dtype.kind == "f" or dtype == dtypes.bfloat16
        self.scalar = "f" if dtype == _F32 else "i" if dtype == _I32 else None
        if weak and _config._x64:
            # With x64 a Python scalar is a weak 64-bit value: with a weak 32-bit one it
            # promotes to 64 bits, so no literal of this dtype.
            self.scalar = None
        self.same = dtype != np.bool_ and (not weak or self.scalar is not None)
        self.literals = trace._literals.setdefault((self.scalar, weak), {})


# How the operator fast paths stage two tracers of different types, ``x <op> other``
# (see StagingTrace._broadcast_plan): ``(self_low, params)``, where the lower-rank operand
# (``x``, the one the operator is a method of, if ``self_low``; else ``other``) is first
# rank-promoted by ``broadcast_in_dim`` with ``params`` (None: neither is). Falsy
# (``_NO_PLAN``) when the general way must decide.
_BroadcastPlan = tuple[bool, _ir.Params | None] | tuple[()]
_NO_PLAN: _BroadcastPlan = ()
# (leading axes added, the lower-rank shape) -> the broadcast_in_dim params of that rank
# promotion, converted once.
_promotions: dict[tuple[int, tuple[int, ...]], _ir.Params] = {}

K = TypeVar("K")


def params_once(cache: dict[K, _ir.Params], key: K, primitive: str, params: dict[str, Any]) -> _ir.Params:
    """``params`` of ``primitive`` converted for the builder, kept in ``cache`` under
    ``key`` (a miss of ``cache.get(key)``; at most 4096 kept): the staging fast paths
    convert the params they record once per process."""
    if len(cache) >= 4096:
        cache.clear()
    converted = cache[key] = _ir.Params(primitive, params)
    return converted


def _promotion(lead: int, low: tuple[int, ...]) -> _ir.Params:
    return _promotions.get((lead, low)) or params_once(
        _promotions,
        (lead, low),
        "broadcast_in_dim",
        {"shape": (1,) * lead + low, "broadcast_dimensions": tuple(range(lead, len(low) + lead))},
    )


def _staged_operator(
    name: str, reflected: bool, divide: bool, general: Callable[[Any, Any], Array]
) -> Callable[[JaxprTracer, Any], Array]:
    """An arithmetic operator of :class:`JaxprTracer` with a fast path.

    ``x <op> other`` (``other <op> x`` if ``reflected``) is one ``name`` equation when
    that is what ferrax.numpy would stage, with no promotion or broadcasting to do:
    ``other`` a tracer of the same trace and the same type (one shared aval object), or a
    Python scalar that becomes a literal of ``x``'s dtype (float32, or int32 but not to
    divide). A tracer of the same dtype and weak type whose shape broadcasts with
    ``x``'s is staged as ferrax.numpy stages it (a lower-rank operand first gets leading
    size-1 axes by ``broadcast_in_dim``). Anything else, and a trace that is not the
    innermost one, goes the general way, ``general(x, other)`` (the ``ferrax.Array``
    operator, through ferrax.numpy), which also reports shapes that do not broadcast.
    """

    def operator(self: JaxprTracer, other: Any) -> Array:
        trace = self._trace
        if trace.main.innermost_dynamic:
            aval = self.aval
            kind = trace._kinds.get(id(aval)) or _AvalKind(aval, trace)
            t = type(other)
            operand: Any = None
            # The broadcast_in_dim params of a rank promotion first (of x if self_low).
            promote: _ir.Params | None = None
            self_low = False
            if t is JaxprTracer:
                if other._trace is trace and kind.same and (not divide or kind.scalar == "f"):
                    if other.aval is aval:
                        operand = other
                    else:
                        plan = trace._broadcasts.get((id(aval), id(other.aval), reflected))
                        if plan is None:
                            plan = trace._broadcast_plan(aval, other.aval, reflected)
                        if plan:
                            operand = other
                            self_low, promote = plan
            elif t is float or t is int:
                scalar = kind.scalar
                if scalar == "f" or (scalar == "i" and t is int and not divide):
                    operand = kind.literals.get(other)
                    if operand is None or not other:
                        operand = trace._literal(kind, other)
            if operand is not None:
                # Recorded as StagingTrace.record records them (inline: operators are hot).
                x = self
                builder = trace.builder
                try:
                    if promote is not None:
                        if self_low:
                            x = builder.add_eqn_traced_one("broadcast_in_dim", [x], promote, JaxprTracer, trace)
                        else:
                            operand = builder.add_eqn_traced_one("broadcast_in_dim", [operand], promote, JaxprTracer, trace)
                    return builder.add_eqn_traced_one(
                        name, [operand, x] if reflected else [x, operand], _NO_PARAMS, JaxprTracer, trace
                    )
                except (TypeCheckError, BuilderError) as e:
                    raise _tracing_error(e, [self, other]) from None
        return general(self, other)

    operator.__name__ = operator.__qualname__ = general.__name__
    operator.__doc__ = general.__doc__
    return operator


class JaxprTracer(Tracer):
    """A value of the function being staged: a variable or literal of the jaxpr."""

    __slots__ = ("atom", "aval")
    _trace: StagingTrace
    aval: _ir.ShapedArray

    def __init__(self, trace: StagingTrace, atom: _ir.Var | _ir.Literal, aval: _ir.ShapedArray) -> None:
        # JaxprBuilder.add_eqn_traced (equation outputs) and stage_args (inputs) make
        # tracers without calling __init__, setting these three attributes: keep them in
        # step.
        self._trace = trace
        self.atom = atom
        self.aval = aval

    def __matmul__(self, other: Any) -> Array:
        # The staged product at once (as ferrax.numpy.matmul would record it), else the
        # general way.
        out = _staged_product(self, other)
        if out is None:
            from ferrax.numpy._products import matmul_general  # (imports this module)

            return matmul_general(self, other)
        return out

    # Fast paths of the arithmetic operators (see _staged_operator).
    __add__ = _staged_operator("add", False, False, Array.__add__)
    __radd__ = _staged_operator("add", True, False, Array.__radd__)
    __sub__ = _staged_operator("sub", False, False, Array.__sub__)
    __rsub__ = _staged_operator("sub", True, False, Array.__rsub__)
    __mul__ = _staged_operator("mul", False, False, Array.__mul__)
    __rmul__ = _staged_operator("mul", True, False, Array.__rmul__)
    __truediv__ = _staged_operator("div", False, True, Array.__truediv__)
    __rtruediv__ = _staged_operator("div", True, True, Array.__rtruediv__)


class StagingTrace(Trace):
    """Records primitives as equations of a jaxpr."""

    def __init__(self, main: MainTrace) -> None:
        self.main = main  # (Trace.__init__'s one line, inline: one call fewer per trace)
        self.state: _Staging = main.global_data
        self.builder: _ir.JaxprBuilder = self.state.builder
        # id(aval) -> what the operator fast paths may do with values of that type.
        self._kinds: dict[int, _AvalKind] = {}
        # (dtype kind, weak type) -> Python scalar -> its literal (see _AvalKind).
        self._literals: dict[tuple[str | None, bool], dict[float, _ir.Literal]] = {}
        # (id(aval), id(other aval), reflected) -> how the operator fast paths stage two
        # tracers of these types (see _broadcast_plan).
        self._broadcasts: dict[tuple[int, int, bool], _BroadcastPlan] = {}

    def pure(self, value: Any) -> JaxprTracer:
        state = self.state
        if isinstance(value, Tracer):
            # A value of an outer transformation: closed over as a constvar.
            aval = value.aval
            return JaxprTracer(self, self._constvar(state, value, aval), aval)
        if type(value) is ConcreteArray and value._value.ndim == 0:
            # The common constant: a scalar (a Python scalar after promotion). Not for
            # subclasses (a DeviceArray's _value copies it to the host).
            dtype = value._value.dtype
            weak = value._weak
            item = value._value.item()
            lit = state.builder.literal(_weak_f32(item) if weak and dtype == _F32 else item, dtype, weak)
            return JaxprTracer(self, lit, _scalar_avals.get((dtype, weak)) or _scalar_aval(dtype, weak))
        aval = aval_of(value)
        if aval.shape == () and not dtypes.is_key(aval.dtype):
            # (A key is never a literal: jaxprs have no key literals, as JAX's.)
            if isinstance(value, PythonScalar):
                scalar = value._py
            elif isinstance(value, ConcreteArray) or isinstance(value, (np.ndarray, np.generic)):
                scalar = to_numpy(value).item()
            else:
                scalar = value
            lit = state.builder.literal(scalar, aval.dtype, aval.weak_type)
            return JaxprTracer(self, lit, aval)
        return JaxprTracer(self, self._constvar(state, value, aval), aval)

    def _constvar(self, state: _Staging, value: Any, aval: _ir.ShapedArray) -> _ir.Var:
        """The constvar of a constant (one per constant and type)."""
        # A NumPy array wrapped anew at each use (ferrax.numpy wraps its operands) is
        # still one constant: key plain eager arrays by the array they wrap.
        storage = value._value if type(value) is ConcreteArray else value
        if isinstance(value, np.ndarray):
            # In its ferrax dtype (float64 -> float32 without x64): converted once while
            # staging, so wrapped or not it is the same constant.
            storage = value = to_numpy(value)
        key = (id(storage), aval)
        var = state.const_vars.get(key)
        if var is None:
            var = state.builder.add_constvar(aval)
            state.const_vars[key] = var
            state.consts.append(value)
        return var

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        try:
            # The builder reads each tracer's atom and makes the output tracers itself.
            return self.builder.add_eqn_traced(
                primitive.name if primitive._builtin else primitive.ir_primitive(), tracers, params, JaxprTracer, self
            )
        except (TypeCheckError, BuilderError) as e:
            raise _tracing_error(e, tracers) from None

    def record(self, name: str, tracers: list[Any], params: dict[str, Any] | _ir.Params) -> JaxprTracer:
        """``process_primitive`` of the built-in primitive ``name`` of one output, with its
        params as a dict or converted once (the staging fast paths' equations); its
        output's tracer."""
        try:
            return self.builder.add_eqn_traced_one(name, tracers, params, JaxprTracer, self)
        except (TypeCheckError, BuilderError) as e:
            raise _tracing_error(e, tracers) from None

    # ----------------------------------------------------------- operator fast paths

    def _broadcast_plan(self, aval: _ir.ShapedArray, other: _ir.ShapedArray, reflected: bool) -> _BroadcastPlan:
        """How ``x <op> y`` (``y <op> x`` if ``reflected``) of two types of one dtype and
        weak type is staged, as ferrax.numpy's ``broadcast_operands`` stages it:
        ``_NO_PLAN`` when the general way must decide (other dtypes or weak types,
        equal shapes in distinct aval objects, shapes that do not broadcast)."""
        plan = _NO_PLAN
        a, b = aval.shape, other.shape
        if other.dtype == aval.dtype and other.weak_type == aval.weak_type and a != b:
            # Whether the shapes broadcast together (NumPy's rule), trailing axes first.
            for m, n in zip(reversed(a), reversed(b)):
                if m != n and m != 1 and n != 1:
                    break
            else:
                lead = abs(len(a) - len(b))
                if not a or not b or lead == 0:
                    # Scalars and operands of equal rank go to the primitive as they are.
                    plan = (False, None)
                else:
                    # The lower-rank operand gets leading size-1 axes (_rank_promote).
                    plan = (len(a) < len(b), _promotion(lead, b if len(a) > len(b) else a))
        self._broadcasts[id(aval), id(other), reflected] = plan
        # The ids stay valid while the avals live: the kinds keep them.
        if id(other) not in self._kinds:
            _AvalKind(other, self)
        return plan

    def _literal(self, kind: _AvalKind, value: float) -> _ir.Literal | None:
        """The literal ``value`` becomes next to a value of this type, as NumPy converts
        it (None when there is no fast path: other dtypes, overflow, large ints)."""
        if kind.scalar == "f":
            if type(value) is int and not -(2**24) <= value <= 2**24:
                return None
            try:
                (rounded,) = _pack_f32.unpack(_pack_f32.pack(value))
            except OverflowError:
                return None
            lit = self.builder.literal(_weak_f32(rounded) if kind.weak else rounded, _F32, kind.weak)
        else:  # int32, an int, not to divide (checked by the caller)
            if not -(2**31) <= value < 2**31:
                return None
            lit = self.builder.literal(value, _I32, kind.weak)
        # Zero is not cached: 0.0 and -0.0 are equal keys.
        if value:
            if len(kind.literals) > 4096:
                kind.literals.clear()
            kind.literals[value] = lit
        return lit


def _tracing_error(e: TypeCheckError | BuilderError, tracers: Sequence[Any]) -> FerraxError:
    """The error to raise for the builder's refusal of an equation of these tracers: a
    shape rule's ``TypeCheckError`` naming the user's line, or, when the jaxpr was built,
    ``UnexpectedTracerError`` (the tracers escaped their tracing)."""
    if isinstance(e, TypeCheckError):
        return TypeCheckError(f"{e}\n  while tracing, at {user_location()}")
    avals = ", ".join(t.aval.str_short() for t in tracers if isinstance(t, JaxprTracer))
    return UnexpectedTracerError(escaped_tracer_message(avals, user_location()))


def staged_float_unary(primitive: Primitive) -> Callable[[F], F]:
    """A fast path for a ferrax.numpy function of one operand that applies ``primitive``
    (no params) to a floating operand as it is (``sin``, ``tanh``, ...): a float tracer
    of the innermost staging trace is recorded at once, as ``primitive.bind`` records
    it; another float tracer (of a JVP or batching trace, ...) is bound at once; any
    other operand calls the function."""

    assert primitive._builtin, "the fast path records built-in primitives by name"

    def wrap(fun: F) -> F:
        @functools.wraps(fun)
        def call(x: Any, /) -> Any:
            if type(x) is JaxprTracer:
                trace = x._trace
                if trace.main.innermost_dynamic:
                    aval = x.aval
                    kind = trace._kinds.get(id(aval)) or _AvalKind(aval, trace)
                    if kind.float:
                        # Recorded as StagingTrace.record records it (inline: hot).
                        try:
                            return trace.builder.add_eqn_traced_one(primitive.name, [x], _NO_PARAMS, JaxprTracer, trace)
                        except (TypeCheckError, BuilderError) as e:
                            raise _tracing_error(e, [x]) from None
            elif isinstance(x, Tracer) and ((dtype := x.aval.dtype) is _F32 or dtypes.is_float(dtype)):
                # What the function does with it: no promotion, then the primitive
                # (bind's own fast path finds the tracer's trace as the top one).
                return primitive.bind(x)
            return fun(x)

        return cast(F, call)

    return wrap


# (contracted axis of x, of y, dtype, x64) -> dot_general's params (see
# _staged_product), converted once.
_product_params: dict[tuple[int, int, Any, bool], _ir.Params] = {}


def _staged_product(a: Any, b: Any) -> Array | None:
    """``dot``/``matmul`` (and ``@``) of two tracers of the innermost staging trace of one
    strong dtype, ``b`` of rank 1 or 2 and contraction sizes equal: their one
    ``dot_general`` equation, recorded as the general way records it (None for anything
    else, which the general way stages or reports)."""
    if type(a) is not JaxprTracer or type(b) is not JaxprTracer:
        return None
    trace = a._trace
    if trace is not b._trace or not trace.main.innermost_dynamic:
        return None
    x, y = a.aval, b.aval
    dtype = x.dtype
    if y.dtype != dtype or x.weak_type or y.weak_type:
        return None
    xs, ys = x.shape, y.shape
    if not xs or len(ys) not in (1, 2):
        return None
    xc, yc = len(xs) - 1, 0
    if xs[xc] != ys[yc]:
        return None
    key = (xc, yc, dtype, _config._x64)
    params = _product_params.get(key) or params_once(
        _product_params,
        key,
        "dot_general",
        {
            "dimension_numbers": (((xc,), (yc,)), ((), ())),
            "preferred_element_type": dtypes.canonicalize(dtype, "dot_general"),
        },
    )
    return trace.record("dot_general", [a, b], params)


def trace_to_jaxpr(
    f: Callable[..., Any], in_avals: Sequence[_ir.ShapedArray], in_tree: PyTreeDef
) -> tuple[_ir.ClosedJaxpr, PyTreeDef]:
    """Stages ``f`` applied to arguments of these types (flattened per ``in_tree``);
    returns the closed jaxpr and the structure of the outputs."""
    state = _Staging()
    with new_main(StagingTrace, state, dynamic=True) as main:
        trace = main.trace
        assert isinstance(trace, StagingTrace)
        args = tree_unflatten(in_tree, _input_tracers(state, trace, in_avals))
        return _stage_call(f, args, state, trace)


def _input_tracers(state: _Staging, trace: StagingTrace, in_avals: Sequence[_ir.ShapedArray]) -> list[JaxprTracer]:
    """A tracer of a new input variable per type."""
    # Equal input types share one aval object (as the builder's outputs do).
    shared: dict[_ir.ShapedArray, _ir.ShapedArray] = {}
    return [JaxprTracer(trace, state.builder.add_invar(a), shared.setdefault(a, a)) for a in in_avals]


def _stage_call(
    f: Callable[..., Any], args: Sequence[Any], state: _Staging, trace: StagingTrace
) -> tuple[_ir.ClosedJaxpr, PyTreeDef]:
    """Stages ``f(*args)`` (``args`` holding the input tracers) and builds the jaxpr."""
    out = f(*args)
    if type(out) is JaxprTracer and out._trace is trace:
        # The common result, one tracer of this trace: nothing to flatten or raise.
        out_atoms, out_tree = [out.atom], _LEAF_TREE
    else:
        flat_out, out_tree = tree_flatten(out)
        out_atoms = [trace.full_raise(x).atom for x in flat_out]
    jaxpr = state.builder.build(out_atoms)
    return _ir.ClosedJaxpr(jaxpr, state.consts), out_tree


def _static_key(f: Callable[..., Any], x: Any, index: int, nargs: int) -> Hashable:
    try:
        hash(x)
    except TypeError:
        # ValueError, as JAX raises for an unhashable static argument.
        raise ValueError(
            f"static argument {_describe_arg(f, index, nargs)}, {_short_repr(x)} of type "
            f"{type_name(x)}, must be hashable (a tuple instead of a list, ...), "
            f"at {user_location()}"
        ) from None
    return x  # type: ignore[no-any-return]


def _describe_arg(f: Callable[..., Any], index: int, nargs: int) -> str:
    """``1 ('n')``: the position and, when the signature says, the parameter's name."""
    import inspect

    try:
        params = list(inspect.signature(f).parameters.values())
        param = params[index % nargs]
        name = param.name if param.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
        ) else None
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        name = None
    return f"{index} ({name!r})" if name else str(index)


def _short_repr(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def make_jaxpr(
    f: Callable[..., Any], static_argnums: int | Sequence[int] = ()
) -> Callable[..., _ir.ClosedJaxpr]:
    """A function that traces ``f`` on the given arguments and returns its jaxpr.

    Arguments are pytrees of arrays (NumPy arrays, Python scalars, ferrax arrays);
    those in ``static_argnums`` are passed to ``f`` as they are (they must be hashable)
    and do not appear in the jaxpr.
    """
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    def make(*args: Any) -> _ir.ClosedJaxpr:
        if not static:
            # trace_to_jaxpr of the arguments' flattened types. The builder makes the
            # input tracers of trees of built-in containers and NumPy or Python scalar
            # leaves in one call (unless such leaves were registered as pytree nodes);
            # other trees are flattened outside the trace, as trace_to_jaxpr's callers
            # do (a registered node's flatten may compute).
            if not tree_util._leaf_types_registered:
                state = _Staging()
                with new_main(StagingTrace, state, dynamic=True) as main:
                    trace = main.trace
                    assert isinstance(trace, StagingTrace)
                    staged = state.builder.stage_args(args, JaxprTracer, trace, _config._x64)
                    if staged is not None:
                        return _stage_call(f, staged, state, trace)[0]
            flat, in_tree = tree_flatten(args)
            return trace_to_jaxpr(f, [_arg_aval(x, i) for i, x in enumerate(flat)], in_tree)[0]
        n = len(args)
        fixed = {(i % n if n else i): _static_key(f, args[i], i, n) for i in static if -n <= i < n}
        dynamic = [a for i, a in enumerate(args) if i not in fixed]

        def call(*dyn: Any) -> Any:
            it = iter(dyn)
            full = [fixed[i] if i in fixed else next(it) for i in range(n)]
            return f(*full)

        flat, in_tree = tree_flatten(tuple(dynamic))
        avals = [_arg_aval(x, i) for i, x in enumerate(flat)]
        closed, _ = trace_to_jaxpr(call, avals, in_tree)
        return closed

    # Named as JAX names it, ``make_jaxpr(f)``, and wrapping ``f``: set here rather than by
    # functools.wraps, which runs several functions on each call of make_jaxpr.
    name = getattr(f, "__name__", "<unnamed function>")
    make.__name__ = f"make_jaxpr({name})"
    make.__qualname__ = f"make_jaxpr({getattr(f, '__qualname__', name)})"
    make.__doc__ = getattr(f, "__doc__", None)
    make.__wrapped__ = f  # type: ignore[attr-defined]
    return make


def _arg_aval(x: Any, index: int) -> _ir.ShapedArray:
    try:
        return aval_of(x)
    except TypeError:
        raise TypeError(
            f"argument leaf {index}, {_short_repr(x)} of type {type(x).__name__}, is not an "
            "array (arrays, NumPy values and Python scalars are; mark the argument static "
            f"with static_argnums if it is configuration), at {user_location()}"
        ) from None
