"""The interpreter core: primitives, traces and tracers, ``bind``.

As in JAX's core: every operation on arrays is a primitive applied with
:func:`bind`; ``bind`` finds the innermost active transformation among the arguments
(the trace with the highest level, or the dynamic trace a ``make_jaxpr`` installed),
raises the arguments into it and lets it process the primitive. The bottom of the stack
evaluates eagerly with NumPy.

Shape and dtype rules of built-in primitives live once, in Rust: eager evaluation asks
Rust for the result types, and staging gets them from the jaxpr builder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from ferrax import _ir, dtypes
from ferrax._user_frames import user_location
from ferrax._array import Array, array_repr
from ferrax.errors import (
    ConcretizationError,
    TracerBoolConversionError,
    TypeCheckError,
    UnexpectedTracerError,
    escaped_tracer_message,
)

__all__ = [
    "ConcreteArray",
    "EvalTrace",
    "MainTrace",
    "Primitive",
    "Trace",
    "Tracer",
    "bind",
    "new_main",
    "user_location",
]

F = TypeVar("F", bound=Callable[..., Any])

# ---------------------------------------------------------------------------- primitives


class Primitive:
    """A primitive operation: a name plus rules, one per transformation.

    Built-in primitives (those of the Rust catalogue) take their shape rule from Rust;
    an extension primitive defined here supplies it with :meth:`def_abstract_eval`,
    and Rust calls back into it when typechecking.
    """

    multiple_results: bool

    def __init__(self, name: str, *, multiple_results: bool = False) -> None:
        self.name = name
        self.multiple_results = multiple_results
        self._builtin = False
        self.impl_rule: Callable[..., Any] | None = None
        # Whether the impl rule receives ferrax arrays (weak types kept: what a printing
        # or host-calling primitive shows) rather than NumPy arrays.
        self.impl_gets_arrays = False
        self.abstract_eval_rule: Callable[..., Any] | None = None
        self.jvp_rule: Callable[..., Any] | None = None
        self.batch_rule: Callable[..., Any] | None = None
        self.transpose_rule: Callable[..., Any] | None = None
        self.transpose_jaxpr_rule: Callable[..., _ir.ClosedJaxpr] | None = None
        self.inline_transpose = False
        self.lowering_rule: Callable[..., Any] | None = None
        # Collectives (``ferrax._lax.parallel``): the axis names an application names
        # (from its params), and the batching rule used instead of ``batch_rule``:
        # ``rule(vals, dims, own_axis, size, params)``, ``own_axis`` the vmap's axis name
        # when the collective names it (its single-device meaning), else None (their
        # params may hold an ``axis_size``, so they are not keywords).
        self.collective_axes: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
        self.collective_batch_rule: Callable[..., Any] | None = None
        self._extension: _ir.ExtensionPrimitive | None = None

    @classmethod
    def builtin(cls, name: str, *, multiple_results: bool = False) -> Primitive:
        """A primitive of the Rust catalogue (its shape rule is Rust's)."""
        p = cls(name, multiple_results=multiple_results)
        p._builtin = True
        return p

    def __repr__(self) -> str:
        return self.name

    def bind(self, *args: Any, **params: Any) -> Any:
        """Applies the primitive under the innermost active transformation."""
        if args and isinstance(args[0], Tracer):
            # bind's fast path, inline: the first argument's trace is the innermost one
            # (the innermost dynamic trace, or a trace above it) and no other argument is
            # of a trace as high, so find_top_trace would pick it. Its tracers are taken
            # as they are; other arguments are raised into it as full_raise raises them
            # (constants by pure, tracers of lower traces by lift).
            trace = args[0]._trace
            main = trace.main
            if not main.innermost_dynamic:
                dynamic = _state.dynamic
                if dynamic and main.level <= dynamic[-1].level:
                    return bind(self, args, params)
            level = main.level
            mixed = False
            for a in args:
                if isinstance(a, Tracer):
                    other = a._trace.main
                    if other is not main:
                        if other.level >= level:
                            return bind(self, args, params)
                        mixed = True
                else:
                    mixed = True
            if mixed:
                tracers = []
                for a in args:
                    if isinstance(a, Tracer):
                        tracers.append(a if a._trace.main is main else trace.lift(a))
                    else:
                        tracers.append(trace.pure(a))
            else:
                tracers = list(args)
            outs = trace.process_primitive(self, tracers, params)
            return outs if self.multiple_results else outs[0]
        return bind(self, args, params)

    def def_impl(self, rule: F) -> F:
        """Eager evaluation: ``rule(*numpy_values, **params)`` returns NumPy values."""
        self.impl_rule = rule
        return rule

    def def_abstract_eval(self, rule: F) -> F:
        """Shape rule of an extension primitive: ``rule(*avals, **params)`` returns a
        :class:`~ferrax.core.ShapedArray` (or a sequence, with ``multiple_results``)."""
        if self._builtin:
            raise TypeError(f"{self.name} is built in: its shape rule is Rust's")
        self.abstract_eval_rule = rule
        self._extension = None
        return rule

    def def_jvp(self, rule: F) -> F:
        """Forward-mode rule: ``rule(primals, tangents, **params)``."""
        self.jvp_rule = rule
        return rule

    def def_batch(self, rule: F) -> F:
        """Batching rule: ``rule(batched_args, batch_dims, **params)``."""
        self.batch_rule = rule
        return rule

    def def_transpose(self, rule: F) -> F:
        """Transposition rule for primitives linear in some operands."""
        self.transpose_rule = rule
        return rule

    def def_transpose_jaxpr(self, rule: F, *, inline: bool = False) -> F:
        """Transposition of an extension primitive, as a jaxpr (what reverse mode uses).

        ``rule(avals, linear, **params)`` gets the operands' types and one flag per
        operand saying whether it is linear, and returns a ``ClosedJaxpr`` taking the
        non-linear operands (in order) then one cotangent per output, and returning one
        cotangent per linear operand (of its type); ``ferrax.make_jaxpr`` of a function
        makes one. The transpose pass calls it as a ``jit`` named ``transpose(<name>)``
        or, with ``inline``, copies its equations in place (as JAX runs a custom_vjp's
        backward function); an exception it raises becomes a
        :class:`~ferrax.errors.PassError`.
        """
        if self._builtin:
            raise TypeError(f"{self.name} is built in: its transpose rule is Rust's")
        self.transpose_jaxpr_rule = rule
        self.inline_transpose = inline
        self._extension = None
        return rule

    def def_lowering(self, rule: F) -> F:
        """Lowering by decomposition: ``rule(*args, **params)`` written with other primitives."""
        self.lowering_rule = rule
        return rule

    def ir_primitive(self) -> str | _ir.ExtensionPrimitive:
        """What the Rust builder takes: a built-in's name or an extension object."""
        if self._builtin:
            return self.name
        if self._extension is None:
            rule = self.abstract_eval_rule
            if rule is None:
                raise TypeCheckError(
                    f"primitive {self.name} has no abstract evaluation rule "
                    "(define one with def_abstract_eval to trace it)"
                )
            multiple = self.multiple_results

            def ir_rule(avals: list[_ir.ShapedArray], params: dict[str, Any]) -> Sequence[_ir.ShapedArray]:
                out = rule(*avals, **params)
                return list(out) if multiple else [out]

            tr = self.transpose_jaxpr_rule
            ir_transpose: Callable[[list[_ir.ShapedArray], list[bool], dict[str, Any]], _ir.ClosedJaxpr] | None = None
            if tr is not None:
                t_rule = tr

                def ir_transpose(
                    avals: list[_ir.ShapedArray], linear: list[bool], params: dict[str, Any]
                ) -> _ir.ClosedJaxpr:
                    return t_rule(avals, linear, **params)

            self._extension = _ir.ExtensionPrimitive(self.name, ir_rule, ir_transpose, self.inline_transpose)
            # Jaxprs name their primitives: interpreting one (eval_jaxpr) finds this
            # primitive by its name (the last defined wins).
            _extensions_by_name[self.name] = self
        return self._extension

    def abstract_eval(self, avals: Sequence[_ir.ShapedArray], params: dict[str, Any]) -> list[_ir.ShapedArray]:
        """The output types for these operand types (Rust's rule, or the extension's)."""
        if self.collective_axes is not None:
            from ferrax._interpreters.axis_env import axis_env

            return _ir.abstract_eval(self.ir_primitive(), avals, params, axis_env())
        return _ir.abstract_eval(self.ir_primitive(), avals, params)


_extensions_by_name: dict[str, Primitive] = {}


def extension_named(name: str) -> Primitive | None:
    """The extension primitive of this name that last reached the IR (jaxprs hold it by
    name), if any."""
    return _extensions_by_name.get(name)


# ------------------------------------------------------------------------ trace machinery


class MainTrace:
    """One active transformation: its level in the stack, its kind and its state.

    ``innermost_dynamic`` is true while this main is the innermost dynamic main of the
    thread that pushed it (so the staging fast paths need not look up the thread's
    state: a main, like its tracers, belongs to one thread).
    """

    __slots__ = ("level", "trace_type", "global_data", "trace", "innermost_dynamic")

    def __init__(self, level: int, trace_type: type[Trace], global_data: Any) -> None:
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data
        self.innermost_dynamic = False
        self.trace: Trace = trace_type(self)


class Trace:
    """How one transformation handles values and primitives."""

    def __init__(self, main: MainTrace) -> None:
        self.main = main

    def pure(self, value: Any) -> Tracer:
        """A value from outside any trace (a constant), as a tracer of this trace."""
        raise NotImplementedError

    def lift(self, tracer: Tracer) -> Tracer:
        """A tracer of a lower trace, as a tracer of this one."""
        return self.pure(tracer)

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        """Applies a primitive to tracers of this trace."""
        raise NotImplementedError

    def full_raise(self, value: Any) -> Any:
        """Brings an argument into this trace."""
        if isinstance(value, Tracer):
            level = value._trace.main.level
            if value._trace.main is self.main:
                return value
            if level < self.main.level:
                return self.lift(value)
            raise UnexpectedTracerError(escaped_tracer_message(value.aval.str_short(), user_location()))
        return self.pure(value)


class _TraceState(threading.local):
    """The transformations active in one thread: each thread traces on its own stack,
    so tracing, ``jit`` and ``grad`` may run in several threads at once (as in JAX,
    whose trace state is thread-local).

    ``stack``: every active main, the eval trace at the bottom (level 0); ``dynamic``:
    the dynamic (staging) mains among them, innermost last; ``canonical_copies``: see
    :func:`to_numpy`.
    """

    def __init__(self) -> None:
        self.stack: list[MainTrace] = [_eval_main]
        self.dynamic: list[MainTrace] = []
        self.canonical_copies: dict[int, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}


def trace_state() -> _TraceState:
    """This thread's trace state (its stack of active transformations)."""
    return _state


class new_main:  # noqa: N801 - a context manager used as a function
    """Pushes a new transformation on the stack for the duration of the block
    (``with new_main(...) as main``).

    A *dynamic* main (``make_jaxpr``'s staging) also receives primitives applied to plain
    constants, so closed-over values are captured instead of computed. (A class, not a
    ``contextlib`` generator: every trace enters one, and this runs fewer functions.)
    """

    __slots__ = ("_trace_type", "_global_data", "_dynamic", "_main", "_outer", "_state")

    def __init__(self, trace_type: type[Trace], global_data: Any = None, *, dynamic: bool = False) -> None:
        self._trace_type = trace_type
        self._global_data = global_data
        self._dynamic = dynamic
        self._state: _TraceState | None = None

    def __enter__(self) -> MainTrace:
        if self._state is not None:
            raise RuntimeError("new_main: this transformation is already on the stack")
        state = self._state = _state
        stack = state.stack
        main = self._main = MainTrace(len(stack), self._trace_type, self._global_data)
        stack.append(main)
        outer = self._outer = state.dynamic[-1] if state.dynamic else None
        if self._dynamic:
            if outer is not None:
                outer.innermost_dynamic = False
            main.innermost_dynamic = True
            state.dynamic.append(main)
        return main

    def __exit__(self, *exc: object) -> None:
        state = self._state
        assert state is not None
        if self._dynamic:
            state.dynamic.pop()
            self._main.innermost_dynamic = False
            outer = self._outer
            if outer is not None:
                outer.innermost_dynamic = True
            else:
                state.canonical_copies.clear()
        state.stack.pop()


class EvalTrace(Trace):
    """The bottom of the stack: evaluates eagerly with NumPy."""

    def pure(self, value: Any) -> Any:
        return value

    def full_raise(self, value: Any) -> Any:
        return value

    def process_primitive(self, primitive: Primitive, tracers: list[Any], params: dict[str, Any]) -> list[Any]:
        rule = primitive.impl_rule
        if rule is None:
            raise NotImplementedError(f"primitive {primitive.name} has no eager implementation")
        avals = [aval_of(x) for x in tracers]
        try:
            out_avals = primitive.abstract_eval(avals, params)
        except TypeCheckError as e:
            raise TypeCheckError(f"{e}\n  at {user_location()}") from None
        values: list[Any] = [to_numpy(x) for x in tracers]
        if primitive.impl_gets_arrays:
            values = [ConcreteArray(v, a.weak_type) for v, a in zip(values, avals)]
        out = rule(*values, **params)
        outs = list(out) if primitive.multiple_results else [out]
        results: list[ConcreteArray] = []
        for o, a in zip(outs, out_avals, strict=True):
            if dtypes.is_key(a.dtype):
                # PRNG keys: the eager rules compute on the packed words (see KeyValue).
                results.append(KeyValue(np.asarray(o, dtype=np.uint64)))
                continue
            value = np.asarray(o)
            if value.dtype != a.dtype:
                # Rules may compute wider (NumPy's integer sums); narrowing overflows
                # as XLA's conversions do, without NumPy's warnings.
                with np.errstate(over="ignore", invalid="ignore"):
                    value = value.astype(a.dtype)
            if value.shape != a.shape:
                raise TypeCheckError(
                    f"{primitive.name}: the eager implementation gave shape {value.shape}, "
                    f"its shape rule {a.str_short()}, at {user_location()}"
                )
            results.append(ConcreteArray(value, a.weak_type))
        return results


# The eval trace has no state: one main serves every thread.
_eval_main = MainTrace(0, EvalTrace, None)
_state = _TraceState()


def find_top_trace(args: Sequence[Any]) -> Trace:
    """The trace of the innermost transformation among the arguments (or the dynamic one)."""
    dynamic = _state.dynamic
    top = dynamic[-1] if dynamic else _eval_main
    for x in args:
        if isinstance(x, Tracer):
            main = x._trace.main
            if main.level > top.level:
                top = main
    return top.trace


def bind(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """Applies ``primitive`` to ``args`` under the innermost active transformation."""
    if primitive.collective_axes is not None:
        # A collective picks its trace by its axis names too (ferrax._lax.parallel).
        return primitive.bind(*args, **params)
    dynamic = _state.dynamic
    if dynamic:
        # Fast path (staging): every argument already a tracer of the dynamic trace, which
        # is then the innermost one and has nothing to raise.
        trace = dynamic[-1].trace
        for a in args:
            if not isinstance(a, Tracer) or a._trace is not trace:
                break
        else:
            outs = trace.process_primitive(primitive, list(args), params)
            return outs if primitive.multiple_results else outs[0]
    # find_top_trace and full_raise, inline: a tracer of the top trace is taken as it is.
    top = dynamic[-1] if dynamic else _eval_main
    level = top.level
    for a in args:
        if isinstance(a, Tracer):
            main = a._trace.main
            if main.level > level:
                top, level = main, main.level
    trace = top.trace
    tracers = [a if isinstance(a, Tracer) and a._trace.main is top else trace.full_raise(a) for a in args]
    outs = trace.process_primitive(primitive, tracers, params)
    return outs if primitive.multiple_results else outs[0]


# ------------------------------------------------------------------------------- values


class Tracer(Array):
    """A value being traced by some transformation; stands for an array in user code."""

    __slots__ = ("_trace",)
    _trace: Trace

    @property
    def aval(self) -> _ir.ShapedArray:
        """The abstract value (shape, dtype, weak type)."""
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.aval.dtype

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    def __bool__(self) -> bool:
        raise TracerBoolConversionError(
            f"the truth value of a traced array ({self.aval.str_short()}) is not known while "
            f"tracing, at {user_location()}. Python `if`/`while`/`and`/`or` on traced values "
            "cannot be staged: use ferrax.lax.cond, ferrax.lax.while_loop or ferrax.numpy.where, "
            "or mark the argument static (static_argnums)."
        )

    def _concrete_error(self, what: str) -> ConcretizationError:
        return ConcretizationError(
            f"{what} needs a concrete value, but this array ({self.aval.str_short()}) is traced, "
            f"at {user_location()}. Use ferrax.lax.cond/while_loop for value-dependent control "
            "flow, or mark the argument static (static_argnums)."
        )

    def __int__(self) -> int:
        raise self._concrete_error("int()")

    def __float__(self) -> float:
        raise self._concrete_error("float()")

    def __index__(self) -> int:
        raise self._concrete_error("using an array as an index (__index__)")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        raise self._concrete_error("converting to a NumPy array")

    def tolist(self) -> Any:
        raise self._concrete_error("tolist()")

    def item(self, *args: int) -> Any:
        raise self._concrete_error("item()")

    def __repr__(self) -> str:
        # As JAX 0.10 shows a tracer (``JitTracer(~float32[3])``, ``~`` for a weak type),
        # under a public name.
        aval = self.aval
        dims = ",".join(str(d) for d in aval.shape)
        weak = "~" if aval.weak_type else ""
        return f"Traced({weak}{aval.dtype.name}[{dims}])"


class ConcreteArray(Array):
    """An array with a known value on the host (eager results), with its weak type."""

    __slots__ = ("_value", "_weak")
    __array_priority__: ClassVar[int] = 100

    def __init__(self, value: np.ndarray[Any, Any], weak_type: bool = False) -> None:
        self._value = value
        self._weak = weak_type

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._value.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        dtype: np.dtype[Any] = self._value.dtype
        return dtype

    @property
    def weak_type(self) -> bool:
        return self._weak

    @property
    def aval(self) -> _ir.ShapedArray:
        """The abstract value (shape, dtype, weak type)."""
        return _ir.ShapedArray(self._value.shape, self._value.dtype, self._weak)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        # NumPy 2's protocol: copy=True always copies, copy=False never does (an error if
        # the dtype differs), None copies only to convert. Without a copy the result is
        # a read-only view: the array stays immutable.
        value = self._value
        if dtype is not None and np.dtype(dtype) != value.dtype:
            if copy is False:
                raise ValueError(
                    f"converting a ferrax.Array of dtype {value.dtype} to {np.dtype(dtype)} "
                    "needs a copy, but copy=False was requested"
                )
            return value.astype(dtype)
        if copy:
            return value.copy()
        view = value.view()
        view.flags.writeable = False
        return view

    def __bool__(self) -> bool:
        return bool(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __complex__(self) -> complex:
        return complex(self._value)

    def __index__(self) -> int:
        if not dtypes.is_int(self._value.dtype) or self._value.ndim != 0:
            raise TypeError("only integer scalar arrays can be used as an index")
        return int(self._value)

    def __repr__(self) -> str:
        return array_repr(self._value, self._weak)

    def __str__(self) -> str:
        # As NumPy prints it (JAX's str too).
        return str(self._value)

    def __format__(self, format_spec: str) -> str:
        # As JAX: a 0-d array formats as its NumPy scalar, others as NumPy arrays.
        value = self._value
        return format(value[()] if value.ndim == 0 else value, format_spec)

    def tolist(self) -> Any:
        """The value as nested Python lists."""
        return self._value.tolist()

    def item(self, *args: int) -> Any:
        """The value of a one-element array (or of element ``args``) as a Python scalar."""
        return self._value.item(*args)

    def copy(self) -> Array:
        """A copy of the array (an eager array, through host memory)."""
        return ConcreteArray(self._value.copy(), self._weak)


_U64 = np.dtype(np.uint64)
_U32 = np.dtype(np.uint32)



class PythonScalar(ConcreteArray):
    """A Python float as a (weakly typed) array value that remembers the float: staged,
    it is the literal of the Python value (``0.1:f32[]``), as JAX stages a Python scalar
    passed through a transformation, not of its float32 rounding."""

    __slots__ = ("_py",)

    def __init__(self, value: float) -> None:
        super().__init__(to_numpy(value), True)
        self._py = value

def pack_keys(data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Key data ``uint32[..., 2]`` as one ``uint64`` per key (the high word first)."""
    data = np.asarray(data, dtype=_U32)
    return (data[..., 0].astype(_U64) << np.uint64(32)) | data[..., 1].astype(_U64)


def unpack_keys(packed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Packed keys as their data, ``uint32[..., 2]``."""
    packed = np.asarray(packed, dtype=_U64)
    hi = (packed >> np.uint64(32)).astype(_U32)
    lo = (packed & np.uint64(0xFFFFFFFF)).astype(_U32)
    return np.stack([hi, lo], axis=-1)


def physical_aval(aval: _ir.ShapedArray) -> _ir.ShapedArray:
    """What a value of type ``aval`` is on a device: a key array ``key<fry>[s]`` is its
    data ``uint32[s, 2]`` (JAX's physical layout); other types are themselves."""
    if dtypes.is_key(aval.dtype):
        return _ir.ShapedArray((*aval.shape, 2), _U32, False)
    return aval


class KeyValue(ConcreteArray):
    """A known array of PRNG keys (dtype ``key<fry>``), as eager evaluation computes it.

    Its value holds one ``uint64`` per key, the two uint32 words of the key's data packed
    high word first: the layout the reference evaluator uses, so that the structural
    primitives (reshape, slicing, gathers, ...) evaluate keys as they evaluate integers.
    Users meet it inside a :class:`ferrax.random.KeyArray`.
    """

    __slots__ = ()

    @property
    def dtype(self) -> Any:
        return dtypes.key_fry

    @property
    def aval(self) -> _ir.ShapedArray:
        return _ir.ShapedArray(self._value.shape, dtypes.key_fry, False)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        # The packed words, for the eager rules (scan's, while's, ...), which pass values
        # on as NumPy arrays; users meet keys inside a KeyArray, which refuses conversion.
        if dtype is not None and np.dtype(dtype) != _U64:
            raise TypeError(
                "an array with PRNG key dtype cannot be converted to a NumPy array; use "
                f"ferrax.random.key_data(keys) for the underlying integers, at {user_location()}"
            )
        return self._value.copy() if copy else self._value

    def __bool__(self) -> bool:
        raise TypeError("key array cannot be converted to boolean.")

    def __int__(self) -> int:
        raise TypeError("a PRNG key array cannot be converted to int")

    def __float__(self) -> float:
        raise TypeError("a PRNG key array cannot be converted to float")

    def __index__(self) -> int:
        raise TypeError("a PRNG key array cannot be used as an index")

    def __repr__(self) -> str:
        return f"Array({self.shape}, dtype=key<fry>) overlaying:\n{unpack_keys(self._value)}"

    __str__ = __repr__

    def tolist(self) -> Any:
        raise TypeError("a PRNG key array has no list form; use ferrax.random.key_data")

    def item(self, *args: int) -> Any:
        raise TypeError("a PRNG key array has no scalar form; use ferrax.random.key_data")

    def copy(self) -> Array:
        return KeyValue(self._value.copy())


# (shape, NumPy dtype, x64) -> the type of NumPy values of that shape and dtype: one
# immutable object per type, interned as the builder interns its outputs' types.
_numpy_avals: dict[tuple[tuple[int, ...], np.dtype[Any], bool], _ir.ShapedArray] = {}


def aval_of(x: Any) -> _ir.ShapedArray:
    """The abstract value of any array-like: tracers, eager arrays, NumPy, Python scalars.

    NumPy values and Python scalars are typed as JAX types them in the current mode:
    64-bit NumPy dtypes are their 32-bit types unless x64 is on; a Python ``int`` is a
    weak int32 (int64 with x64), a ``float`` a weak float32 (float64). (``make_jaxpr``'s
    arguments are typed the same way in Rust, by ``JaxprBuilder.stage_args``.)
    """
    if isinstance(x, (Tracer, ConcreteArray)):
        return x.aval
    if isinstance(x, (np.ndarray, np.generic)):
        # Before the Python scalar types: np.float64 is a subclass of float.
        key = (x.shape, x.dtype, dtypes.x64_enabled())
        aval = _numpy_avals.get(key)
        if aval is None:
            if len(_numpy_avals) >= 1024:
                _numpy_avals.clear()
            aval = _numpy_avals[key] = _ir.ShapedArray(x.shape, dtypes.canonical(x.dtype), False)
        return aval
    if isinstance(x, bool):
        return _ir.ShapedArray((), np.bool_, False)
    if isinstance(x, int):
        return _ir.ShapedArray((), dtypes.default_int(), True)
    if isinstance(x, float):
        return _ir.ShapedArray((), dtypes.default_float(), True)
    raise TypeError(f"{type(x).__name__} is not an array type ferrax understands: {x!r}, at {user_location()}")



def to_numpy(x: Any) -> np.ndarray[Any, Any]:
    """A concrete value as a NumPy array of its ferrax dtype (NumPy values canonicalized
    and Python scalars typed as JAX types them, by :func:`aval_of`)."""
    if isinstance(x, ConcreteArray):
        return x._value
    if isinstance(x, np.ndarray):
        d = dtypes.canonical(x.dtype)
        if d == x.dtype:
            return x
        state = _state
        if state.dynamic:
            # While staging: NumPy array -> (the array, its copy in its ferrax dtype), so
            # that a float64 array used several times is converted once and stays one
            # constant of the jaxpr. Holding the array keeps its id its own; emptied when
            # staging ends (per thread, as the staging).
            copies = state.canonical_copies
            hit = copies.get(id(x))
            if hit is None or hit[1].dtype != d:
                with np.errstate(over="ignore"):
                    hit = copies[id(x)] = (x, x.astype(d))
            return hit[1]
    elif isinstance(x, Tracer):
        raise x._concrete_error("evaluating eagerly")
    else:
        d = aval_of(x).dtype
        t = type(x)
        # The common scalars convert without a check: an int within int32 fits either
        # default int, and a float within float32's range (or not finite) does not
        # overflow (NumPy's `iinfo` and `errstate` cost microseconds a call).
        if t is int and -_INT32_LIMIT <= x < _INT32_LIMIT:
            return np.asarray(x, dtype=d)
        if t is float and not _F32_MAX < abs(x) < _INF:
            return np.asarray(x, dtype=d)
        if isinstance(x, int) and not isinstance(x, bool) and d.kind == "i":
            # As JAX: a Python int must fit the default int type (int32 without x64).
            info = np.iinfo(d)
            if not info.min <= x <= info.max:
                raise OverflowError(f"Python int {x} too large to convert to {d}, at {user_location()}")
    # As XLA converts: float64 beyond float32's range is an infinity, int64 wraps.
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=d)


_INT32_LIMIT = 2**31
_F32_MAX = float(np.finfo(np.float32).max)
_INF = float("inf")
