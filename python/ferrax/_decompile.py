"""Decompiling a jaxpr to Python source that traces back to it (``ferrax.core.to_python``).

:func:`to_python` writes a module defining one function; ``make_jaxpr`` of that function
on arguments of the jaxpr's input types prints the jaxpr's text again. Each equation
becomes the most readable call that records exactly that equation:

* an operator (``a + b``) or a ``ferrax.lax`` function (``lax.reduce_sum(a, axes=(0,))``)
  when tracing it alone, on operands of the equation's types, gives the same equation and
  output types (weak types included); else the generic ``core.bind("name", ...)``, which
  records any primitive with any params;
* ``cond`` as ``lax.cond``/``lax.switch``, ``while`` as ``lax.while_loop``, ``scan`` as
  ``lax.scan``, ``jit`` as a ``@ferrax.jit`` function and ``remat2`` as
  ``ferrax.checkpoint``, with nested functions, when what those functions record is the
  equation (the predicate's conversion, the closure-converted constants, the params);
  else ``core.bind`` with the sub-jaxprs traced from nested functions by
  ``core.trace_jaxpr``.

A sub-jaxpr held by several equations (printed once, as ``let name = ...``) is traced
once, at module level, and shared. Constants become module-level NumPy arrays the
function closes over (so they stay constants of the traced jaxpr); see :func:`to_python`.
After writing the source it is executed and traced once: when the trace differs, the
source is written again with every control-flow equation in the generic form.

The walks over nested jaxprs use explicit work lists (no recursion over the nesting).
"""

from __future__ import annotations

import inspect
import keyword
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._ir import TypeCheckError
from ferrax.errors import DecompileError

__all__ = ["DecompileError", "bind", "literal", "raw_keys", "to_python", "trace_jaxpr"]


# ----------------------------------------------------------------- runtime helpers
# What the generated source calls besides ferrax.lax and ferrax.numpy.


def bind(primitive: str, /, *args: Any, **params: Any) -> Any:
    """Applies the primitive called ``primitive`` (a built-in's name, or an extension
    primitive's) to ``args`` with these params, under the innermost active
    transformation, as ``eval_jaxpr`` applies an equation. Returns a list of outputs for
    a primitive with several results (``cond``, ``scan``, ...), else the output.

    An unknown name is a :class:`~ferrax.errors.TypeCheckError`.
    """
    from ferrax._lax.registry import primitive_named

    if not isinstance(primitive, str):
        raise TypeCheckError(f"bind: the primitive must be named by a str, got {type(primitive).__name__}")
    try:
        prim = primitive_named(primitive)
    except NotImplementedError:
        raise TypeCheckError(f"bind: no primitive is named '{primitive}'") from None
    return prim.bind(*args, **params)


def trace_jaxpr(fun: Callable[..., Any], in_avals: Sequence[_ir.ShapedArray]) -> _ir.ClosedJaxpr:
    """``fun`` staged on arguments of exactly these types (weak types included), one
    positional argument per type; its outputs (any pytree) are flattened. Arrays it
    closes over become the constants of the result."""
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_flatten

    avals = list(in_avals)
    for i, a in enumerate(avals):
        if not isinstance(a, _ir.ShapedArray):
            raise TypeError(f"trace_jaxpr: in_avals[{i}] must be a ShapedArray, got {type(a).__name__}")
    closed, _ = trace_to_jaxpr(fun, avals, tree_flatten(tuple(range(len(avals))))[1])
    return closed


def literal(value: bool | int | float, dtype: Any, weak_type: bool = False) -> Any:
    """The scalar ``value`` of this NumPy dtype and weak type. While a function is being
    staged it is the literal ``value:dtype[]`` holding ``value`` as given (a literal
    keeps the value it was written with, which a NumPy scalar would first round to its
    dtype); otherwise an array of that value."""
    from ferrax._core import ConcreteArray, trace_state
    from ferrax._staging import JaxprTracer, StagingTrace

    d = np.dtype(dtype)
    weak = bool(weak_type)
    dynamic = trace_state().dynamic
    if dynamic:
        trace = dynamic[-1].trace
        if isinstance(trace, StagingTrace):
            atom = trace.builder.literal(value, d, weak)
            return JaxprTracer(trace, atom, _ir.ShapedArray((), d, weak))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.asarray(value, dtype=d)
    if v.ndim != 0:
        raise TypeError(f"literal: the value must be a scalar, got shape {v.shape}")
    return ConcreteArray(v, weak)


def raw_keys(x: Any) -> Any:
    """The ``key<fry>`` array a :class:`ferrax.random.KeyArray` holds (what a jaxpr's
    key-typed variables are, and what ``lax`` functions and primitives take); any other
    value as it is. Records no equation."""
    from ferrax.random import KeyArray

    return x._keys if isinstance(x, KeyArray) else x


# ------------------------------------------------------------------- value rendering


def _float_text(value: float, dtype: np.dtype[Any]) -> str:
    """A float of ``dtype`` as the shortest Python float literal that converts back to
    the same ``dtype`` value (``float("nan")`` and ``float("inf")`` for those)."""
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    kind = dtype.type
    with np.errstate(all="ignore"):
        exact = float(kind(value))
        short = str(kind(value))
    if math.isinf(exact):
        return repr(value)
    try:
        if float(kind(float(short))) == exact and math.copysign(1.0, float(short)) == math.copysign(1.0, exact):
            return short if any(c in short for c in ".en") else short + ".0"
    except (ValueError, OverflowError):
        pass
    return repr(exact)


def _dtype_text(dtype: Any) -> str:
    """A dtype as the generated source names it: ``np.float32``, ``ferrax.dtypes.bfloat16``."""
    if dtypes.is_key(dtype):
        return "ferrax.dtypes.key_fry"
    d = np.dtype(dtype)
    if d == dtypes.bfloat16:
        return "ferrax.dtypes.bfloat16"
    name = d.name
    found = getattr(np, name, None)
    if isinstance(found, type) and name != "object":
        try:
            if np.dtype(found) == d:
                return f"np.{name}"
        except TypeError:
            pass
    return f"np.dtype({name!r})"


def _scalar_type_text(dtype: np.dtype[Any]) -> str:
    """The scalar type of a dtype, to make a NumPy scalar: ``np.float32``,
    ``ferrax.dtypes.bfloat16.type``."""
    text = _dtype_text(dtype)
    return text if text.startswith("np.") and not text.startswith("np.dtype(") else f"{text}.type"


def _aval_text(aval: _ir.ShapedArray) -> str:
    shape = aval.shape
    dims = "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    weak = ", weak_type=True" if aval.weak_type else ""
    return f"core.ShapedArray({dims}, {_dtype_text(aval.dtype)}{weak})"


def _opaque_name(param: str, value: Any) -> str:
    """The name an opaque param (a rule, a callback, a checkpoint policy) prints as."""
    if isinstance(value, str):
        return value
    if param == "policy":
        # A policy prints as its str, memory addresses masked (as the bindings name it).
        text = str(value)
        out, rest = [], text
        while " at 0x" in rest:
            head, tail = rest.split(" at 0x", 1)
            digits = len(tail) - len(tail.lstrip("0123456789abcdefABCDEF"))
            out.append(head + " at 0x" + "X" * digits)
            rest = tail[digits:]
        return "".join(out) + rest
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else repr(value)


class _Opaque(Exception):
    """A param value with no Python literal: the caller renders its printed name."""


def _value_text(value: Any) -> str:
    """A param value as a Python expression that evaluates to an equal value (params
    nest a few levels at most: tuples of tuples)."""
    from ferrax._lax.convolution import ConvDimensionNumbers
    from ferrax._lax.slicing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers

    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, np.integer):  # a NumPy int JAX's rules leave in params
        return f"np.{value.dtype.name}({int(value)})"
    if isinstance(value, float):
        return _float_text(value, np.dtype(np.float64))
    if isinstance(value, np.dtype) or dtypes.is_key(value):
        return _dtype_text(value)
    if isinstance(value, GatherScatterMode):
        return f"lax.GatherScatterMode.{value.name}"
    if isinstance(value, (GatherDimensionNumbers, ScatterDimensionNumbers, ConvDimensionNumbers)):
        fields = ", ".join(f"{k}={_value_text(getattr(value, k))}" for k in value._fields)
        return f"lax.{type(value).__name__}({fields})"
    if isinstance(value, _ir.ShapedArray):
        return _aval_text(value)
    if isinstance(value, frozenset):
        items = sorted(value, key=repr)
        return "frozenset({" + ", ".join(_value_text(v) for v in items) + "})" if items else "frozenset()"
    if isinstance(value, tuple):
        items = [_value_text(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    raise _Opaque()


def _literal_text(lit: _ir.Literal) -> str:
    """A literal as the Python value staging turns back into it, value and type exactly
    (a literal keeps the value it was made with, printed as a float64): a Python scalar
    for the weak default types, a NumPy scalar for a strong type that holds the value
    exactly, else ``core.literal``."""
    aval = lit.aval
    d = np.dtype(aval.dtype)
    v = lit.val
    weak = aval.weak_type
    if d == np.bool_:
        text = repr(bool(v))
        return text if not weak else f"core.literal({text}, np.bool_, weak_type=True)"
    if dtypes.is_float(d):
        value = float(v)
        num = _float_text(value, np.dtype(np.float64))
        with np.errstate(all="ignore"):
            held = math.isnan(value) or float(d.type(value)) == value
    else:
        num, held = repr(int(v)), True
    if weak and d in (dtypes.default_float(), dtypes.default_int()):
        return num
    if not weak and held:
        if dtypes.is_float(d):
            num = _float_text(float(v), d)
            # NumPy scalar types read "nan", "inf" and "-inf".
            num = {'float("nan")': '"nan"', 'float("inf")': '"inf"', '-float("inf")': '"-inf"'}.get(num, num)
        return f"{_scalar_type_text(d)}({num})"
    weak_text = ", weak_type=True" if weak else ""
    return f"core.literal({num}, {_dtype_text(d)}{weak_text})"


# --------------------------------------------------------------------------- names

_RESERVED = frozenset(
    [*keyword.kwlist, *keyword.softkwlist, "np", "fnp", "lax", "core", "ferrax", "carry", "x", "float", "frozenset"]
)


def _alphabetic(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ...: the jaxpr printer's variable names."""
    s = ""
    while True:
        s = chr(97 + n % 26) + s
        n //= 26
        if n == 0:
            return s


class _Names:
    """One namespace for the whole module: variables, functions, constants."""

    def __init__(self, reserved: set[str], claimable: set[str]) -> None:
        self.taken = set(_RESERVED) | reserved
        # Names kept for functions (jit names): no variable takes them.
        self.claimable = {n for n in claimable if _is_identifier(n) and n not in self.taken}
        self.counter = 0
        self.bases: dict[str, int] = {}

    def var(self) -> str:
        while True:
            name = _alphabetic(self.counter)
            self.counter += 1
            if name not in self.taken and name not in self.claimable:
                self.taken.add(name)
                return name

    def unique(self, base: str) -> str:
        k = self.bases.get(base, 0)
        while True:
            k += 1
            name = base if k == 1 else f"{base}_{k}"
            if name not in self.taken and name not in self.claimable:
                self.bases[base] = k
                self.taken.add(name)
                return name

    def numbered(self, base: str) -> str:
        """``base_0``, ``base_1``, ...: the next free one."""
        k = self.bases.get("#" + base, 0)
        while True:
            name = f"{base}_{k}"
            k += 1
            if name not in self.taken and name not in self.claimable:
                self.bases["#" + base] = k
                self.taken.add(name)
                return name

    def claim(self, wanted: str) -> str:
        """``wanted`` itself if it was set aside for a function (a jit's name) and is
        still free, else a fresh name from it."""
        if wanted in self.claimable:
            self.claimable.discard(wanted)
            self.taken.add(wanted)
            return wanted
        return self.unique(wanted if _is_identifier(wanted) else "jitted")


def _is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


# ------------------------------------------------------------------- the plan


# Nested defs deeper than this go to module level (Python's indentation limit is 100).
_MAX_INLINE_DEPTH = 24
# The functions of a generic equation's sub-jaxprs are named after the param, else the
# primitive.
_FN_NAMES = {
    "branches": "branch", "cond_jaxpr": "cond_fn", "body_jaxpr": "body_fn", "call_jaxpr": "custom_fn",
    "scan": "body_fn", "jit": "jitted", "remat2": "checkpointed", "reduce_window": "combine",
    "update_jaxpr": "combine", "shard_map": "body_fn",
}
# Params holding Python functions (rules, callbacks, policies): source has only their names.
_RULE_PARAMS = frozenset(["jvp", "fwd", "bwd", "callback", "policy"])
# Control-flow and call primitives with readable forms.
_FORMS = frozenset(["cond", "while", "scan", "jit", "remat2"])


class _Fn:
    """One Python function of the output: a (sub-)jaxpr's body."""

    def __init__(self, jaxpr: _ir.Jaxpr, pyname: str, style: str, depth: int, module_level: bool) -> None:
        self.jaxpr = jaxpr
        self.pyname = pyname
        # "flat" (one parameter per input), "while_cond" / "while_body" (one tuple
        # argument, the carry), "scan" (the carry tuple and the x tuple).
        self.style = style
        self.depth = depth
        self.module_level = module_level
        # Leading inputs bound to the enclosing function's names (closure conversion).
        self.closure = 0
        self.num_carry = 0
        self.names: dict[_ir.Var, str] = {}
        self.plans: list[_Plan] = []
        self.lines: list[str] = []
        # A @ferrax.jit function (the jit's name), a shared jaxpr's module-level name.
        self.jit_name: str | None = None
        self.traced_as: str | None = None


class _Plan:
    """How one equation is written."""

    def __init__(self, kind: str, fns: list[_Fn] | None = None, text: str = "", struct: str = "") -> None:
        self.kind = kind  # simple, bind, cond, switch, while, scan, jit, checkpoint, skip
        self.fns = fns or []
        self.text = text  # the expression, for "simple"
        self.struct = struct  # "single" or "seq": what the expression returns
        self.index: _ir.Var | _ir.Literal | None = None  # cond's predicate / switch's index
        self.params: dict[str, Any] = {}  # bind: params, sub-jaxprs as _Fn / tuples of _Fn
        self.comments: list[str] = []


class _Const:
    def __init__(self, name: str, aval: _ir.ShapedArray, value: np.ndarray[Any, Any] | None) -> None:
        self.name = name
        self.aval = aval
        self.value = value


class _Refs:
    """What the whole nesting holds: each sub-jaxpr's holders, the jit names, whether
    64-bit types appear."""

    def __init__(self, top: _ir.Jaxpr) -> None:
        self.holders: dict[_ir.Jaxpr, list[tuple[str, Any, bool]]] = {}
        self.jit_names: set[str] = set()
        self.wide = False
        seen = {top}
        stack = [top]
        while stack:
            j = stack.pop()
            for v in [*j.constvars, *j.invars]:
                self._note(v.aval)
            for eqn in j.eqns:
                for v in eqn.outvars:
                    self._note(v.aval)
                if eqn.primitive == "shard_map":
                    raise DecompileError(
                        "to_python: shard_map equations are not supported (their bodies' types carry "
                        "varying manual axes, which Python code cannot state)"
                    )
                params = eqn.params
                if eqn.primitive == "jit" and isinstance(params.get("name"), str):
                    self.jit_names.add(params["name"])
                for sub in _sub_jaxprs(params):
                    ok = eqn.primitive == "jit" and _jit_form_ok(eqn)
                    self.holders.setdefault(sub.jaxpr, []).append((eqn.primitive, params.get("name"), ok))
                    if sub.jaxpr not in seen:
                        seen.add(sub.jaxpr)
                        stack.append(sub.jaxpr)

    def _note(self, aval: _ir.ShapedArray) -> None:
        if not dtypes.is_key(aval.dtype):
            d = np.dtype(aval.dtype)
            if (d.kind in "iuf" and d.itemsize == 8) or (d.kind == "c" and d.itemsize == 16):
                self.wide = True

    def shared(self, j: _ir.Jaxpr) -> bool:
        return len(self.holders.get(j, [])) > 1

    def shared_jit(self, j: _ir.Jaxpr) -> bool:
        """Held only by jit equations of one name that a @ferrax.jit function reproduces."""
        holders = self.holders.get(j, [])
        return all(p == "jit" and ok for p, _, ok in holders) and len({n for _, n, _ in holders}) == 1


def _sub_jaxprs(params: dict[str, Any]) -> list[_ir.ClosedJaxpr]:
    out: list[_ir.ClosedJaxpr] = []
    for v in params.values():
        if isinstance(v, _ir.ClosedJaxpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, _ir.ClosedJaxpr))
    return out


def _atom_aval(a: _ir.Var | _ir.Literal) -> _ir.ShapedArray:
    return a.aval


def _jit_form_ok(eqn: _ir.JaxprEqn) -> bool:
    """Whether a @ferrax.jit function called on the operands records this equation."""
    params = eqn.params
    inner = params.get("jaxpr")
    if set(params) != {"jaxpr", "name"} or not isinstance(inner, _ir.ClosedJaxpr) or not isinstance(params["name"], str):
        return False
    if inner.jaxpr.constvars:
        return False
    return [_atom_aval(a) for a in eqn.inputs] == list(inner.jaxpr.in_avals)


def _use_counts(j: _ir.Jaxpr) -> dict[_ir.Var, int]:
    counts: dict[_ir.Var, int] = {}
    for eqn in j.eqns:
        for a in eqn.inputs:
            if isinstance(a, _ir.Var):
                counts[a] = counts.get(a, 0) + 1
    for a in j.outvars:
        if isinstance(a, _ir.Var):
            counts[a] = counts.get(a, 0) + 1
    return counts


def _closure_ok(inner: _ir.Jaxpr, k: int, operands: Sequence[_ir.Var | _ir.Literal]) -> bool:
    """Whether the first ``k`` inputs of ``inner``, bound to ``operands``, come out of
    closure conversion: distinct variables of the enclosing function, each used, first
    used in this order (tracing makes constants in the order it meets them)."""
    if k == 0:
        return True
    if len(operands) != k or not all(isinstance(a, _ir.Var) for a in operands):
        return False
    if len(set(operands)) != k:
        return False
    if [a.aval for a in operands] != list(inner.in_avals[:k]):
        return False
    position = {v: i for i, v in enumerate(inner.invars[:k])}
    order: list[int] = []
    seen: set[int] = set()
    atoms: list[_ir.Var | _ir.Literal] = [a for eqn in inner.eqns for a in eqn.inputs]
    atoms.extend(inner.outvars)
    for a in atoms:
        if isinstance(a, _ir.Var) and a in position:
            i = position[a]
            if i not in seen:
                seen.add(i)
                order.append(i)
    return order == list(range(k))


def _consts_closable(j: _ir.Jaxpr) -> bool:
    """Whether constants closed over as NumPy arrays make exactly ``j``'s constvars:
    arrays (a scalar would be a literal; a key has no NumPy form), first used in order."""
    k = len(j.constvars)
    if k == 0:
        return True
    for v in j.constvars:
        if v.aval.shape == () or dtypes.is_key(v.aval.dtype):
            return False
    position = {v: i for i, v in enumerate(j.constvars)}
    order: list[int] = []
    seen: set[int] = set()
    atoms: list[_ir.Var | _ir.Literal] = [a for eqn in j.eqns for a in eqn.inputs]
    atoms.extend(j.outvars)
    for a in atoms:
        if isinstance(a, _ir.Var) and a in position and position[a] not in seen:
            seen.add(position[a])
            order.append(position[a])
    return order == list(range(k))


def _const_value(value: Any, aval: _ir.ShapedArray) -> np.ndarray[Any, Any] | None:
    """A constant's value as a NumPy array of its type, None when unknown."""
    if value is None:
        return None
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    if arr.shape != aval.shape:
        return None
    if arr.dtype != np.dtype(aval.dtype):
        with np.errstate(all="ignore"):
            arr = arr.astype(aval.dtype)
    return arr


# ------------------------------------------------------- checking one equation's form

_BINARY = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "dot_general": "@",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
    "and": "&", "or": "|", "xor": "^", "shift_left": "<<", "shift_right_arithmetic": ">>",
}
_UNARY = {"neg": "-", "not": "~"}
_LAX_NAMES = {"and": "bitwise_and", "or": "bitwise_or", "not": "bitwise_not", "xor": "bitwise_xor"}
# Primitives whose lax function takes a sequence of operands first.
_SEQUENCE_FIRST = frozenset(["concatenate", "stack", "sort"])

_checked: dict[tuple[Any, ...], str | None] = {}
_CHECKED_MAX = 20000


def _operand_text(text: str) -> str:
    return f"({text})" if text.startswith("-") else text


_candidates_cache: dict[tuple[Any, ...], list[Callable[[list[str]], str]]] = {}
_signatures: dict[str, inspect.Signature | None] = {}


def _signature(fn: Callable[..., Any], key: str) -> inspect.Signature | None:
    if key not in _signatures:
        try:
            _signatures[key] = inspect.signature(fn)
        except (TypeError, ValueError):
            _signatures[key] = None
    return _signatures[key]


def _candidates(eqn: _ir.JaxprEqn, params: dict[str, Any], params_key: tuple[Any, ...]) -> list[Callable[[list[str]], str]]:
    """Readable ways to write a first-order equation, most readable first (cached by
    primitive, operand count and params)."""
    in_dtypes = tuple(a.aval.dtype for a in eqn.inputs)
    key = (eqn.primitive, in_dtypes, params_key)
    found = _candidates_cache.get(key)
    if found is None:
        if len(_candidates_cache) >= _CHECKED_MAX:
            _candidates_cache.clear()
        found = _candidates_cache[key] = _make_candidates(eqn.primitive, params, in_dtypes)
    return found


def _make_candidates(prim: str, params: dict[str, Any], in_dtypes: tuple[Any, ...]) -> list[Callable[[list[str]], str]]:
    from ferrax import lax
    from ferrax._core import Primitive

    n = len(in_dtypes)
    out: list[Callable[[list[str]], str]] = []
    if (not params or prim == "dot_general") and n == 2 and prim in _BINARY:
        op = _BINARY[prim]
        out.append(lambda t: f"{_operand_text(t[0])} {op} {_operand_text(t[1])}")
    if not params and n == 1 and prim in _UNARY:
        uop = _UNARY[prim]
        out.append(lambda t: f"{uop}{_operand_text(t[0])}")
    if prim == "broadcast_in_dim" and params.get("broadcast_dimensions") == () and set(params) <= {
        "shape", "broadcast_dimensions", "sharding"
    } and params.get("sharding") is None:
        # A filled array, as NumPy-style code writes it.
        filled_shape = _value_text(params["shape"])
        filled_dtype = _dtype_text(in_dtypes[0])

        def filled(t: list[str]) -> str:
            fill = {"0": "zeros", "0.0": "zeros", "False": "zeros", "1": "ones", "1.0": "ones", "True": "ones"}.get(t[0])
            if fill:
                return f"fnp.{fill}({filled_shape}, {filled_dtype})"
            return f"fnp.full({filled_shape}, {t[0]}, {filled_dtype})"

        out.append(filled)
    if prim == "iota":
        shape, dim, dt = params.get("shape"), params.get("dimension"), params.get("dtype")
        if isinstance(shape, tuple) and len(shape) == 1 and dim == 0 and dt is not None:
            out.append(lambda t: f"lax.iota({_dtype_text(dt)}, {shape[0]})")
        if isinstance(shape, tuple) and dt is not None:
            out.append(lambda t: f"lax.broadcasted_iota({_dtype_text(dt)}, {_value_text(shape)}, {dim})")
        return out
    if prim in ("argmax", "argmin"):
        axes = params.get("axes")
        if isinstance(axes, tuple) and len(axes) == 1 and set(params) == {"axes", "index_dtype"}:
            dt = params["index_dtype"]
            out.append(lambda t: f"lax.{prim}({t[0]}, axis={axes[0]}, index_dtype={_dtype_text(dt)})")
        return out
    attr = _LAX_NAMES.get(prim, prim.replace("-", "_"))
    if prim in _FORMS:
        return out
    module = "lax"
    fn = getattr(lax, attr, None)
    if fn is None:
        fn, module = getattr(lax.linalg, attr, None), "lax.linalg"
    if fn is None or isinstance(fn, Primitive) or not callable(fn):
        return out
    sig = _signature(fn, f"{module}.{attr}")
    if sig is None:
        return out
    kwargs: list[str] = []
    for p in sig.parameters.values():
        if p.name not in params or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        value = params[p.name]
        default = p.default
        if default is not p.empty and type(default) is type(value) and _equal(default, value):
            continue
        try:
            kwargs.append(f"{p.name}={_value_text(value)}")
        except _Opaque:
            return out
    keywords = "".join(", " + k for k in kwargs)

    def call(t: list[str]) -> str:
        if prim in _SEQUENCE_FIRST:
            args = "[" + ", ".join(t) + "]"
        elif prim == "dynamic_slice":
            args = f"{t[0]}, ({', '.join(t[1:])}{',' if len(t) == 2 else ''})"
        elif prim == "dynamic_update_slice":
            args = f"{t[0]}, {t[1]}, ({', '.join(t[2:])}{',' if len(t) == 3 else ''})"
        else:
            args = ", ".join(t)
        if not args:
            return f"{module}.{attr}({keywords[2:]})"
        return f"{module}.{attr}({args}{keywords})"

    out.append(call)
    return out


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _probe_namespace() -> dict[str, Any]:
    import ferrax
    from ferrax import core, lax

    import ferrax.numpy as fnp

    return {"np": np, "ferrax": ferrax, "lax": lax, "core": core, "fnp": fnp}


def _form_of(eqn: _ir.JaxprEqn, texts: list[str], kinds: list[str]) -> tuple[str, str] | None:
    """The first readable candidate that, traced alone on operands of the equation's
    types, records the same equation: ``(expression, "single" | "seq")``, or None.

    ``kinds[i]``: ``"var"`` (a traced value), ``"const"`` (a module-level NumPy array) or
    ``"lit"`` (``texts[i]`` is the literal's source) for each input."""
    params = eqn.params
    # The expression need not show every param (those the function sets itself).
    params_key = tuple(sorted((k, repr(v)) for k, v in params.items()))
    candidates = _candidates(eqn, params, params_key)
    if not candidates:
        return None
    slots: dict[_ir.Var, str] = {}
    var_avals: list[_ir.ShapedArray] = []
    const_avals: list[tuple[str, _ir.ShapedArray]] = []
    probe_texts: list[str] = []
    key_inputs: list[Any] = []
    for a, text, kind in zip(eqn.inputs, texts, kinds):
        if isinstance(a, _ir.Literal):
            probe_texts.append(text)
            key_inputs.append(("lit", text, a.aval))
            continue
        slot = slots.get(a)
        if slot is None:
            if kind == "const":
                slot = slots[a] = f"_k{len(const_avals)}"
                const_avals.append((slot, a.aval))
            else:
                slot = slots[a] = f"_v{len(var_avals)}"
                var_avals.append(a.aval)
        probe_texts.append(slot)
        key_inputs.append((slot, a.aval))
    x64 = dtypes.x64_enabled()
    # Literals as plain Python numbers read best; the exact form is the fallback.
    plain = [_plain_literal_text(a) if isinstance(a, _ir.Literal) else t for a, t in zip(eqn.inputs, texts)]
    plain_probe = [_plain_literal_text(a) if isinstance(a, _ir.Literal) else t for a, t in zip(eqn.inputs, probe_texts)]
    variants = [(plain, plain_probe)] if plain != texts else []
    variants.append((texts, probe_texts))
    for build in candidates:
        for real, probe in variants:
            try:
                probe_expr = build(probe)
            except Exception:
                continue
            key = (eqn.primitive, probe_expr, tuple(key_inputs), params_key, x64)
            if key in _checked:
                struct = _checked[key]
            else:
                struct = _probe(eqn, probe_expr, var_avals, const_avals, probe)
                if len(_checked) >= _CHECKED_MAX:
                    _checked.clear()
                _checked[key] = struct
            if struct is not None:
                return build(real), struct
    return None


def _plain_literal_text(lit: _ir.Literal) -> str:
    """A literal as a plain Python number (or bool), whatever its dtype and weak type."""
    d = np.dtype(lit.aval.dtype)
    if d == np.bool_:
        return repr(bool(lit.val))
    if dtypes.is_float(d):
        return _float_text(float(lit.val), d)
    return repr(int(lit.val))


def _trace_probe(
    expr: str, args: str, namespace: dict[str, Any], var_avals: list[_ir.ShapedArray], struct: list[str]
) -> _ir.ClosedJaxpr:
    """``expr`` traced as the body of a function of ``args``; ``struct`` gets what it
    returned ("seq" or "single")."""
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_flatten

    exec(compile(f"def _probe({args}):\n    return {expr}\n", "<to_python probe>", "exec"), namespace)
    probe = namespace["_probe"]

    def run(*xs: Any) -> Any:
        out = probe(*xs)
        struct.append("seq" if isinstance(out, (list, tuple)) else "single")
        return out

    closed, _ = trace_to_jaxpr(run, var_avals, tree_flatten(tuple(range(len(var_avals))))[1])
    return closed


def _probe(
    eqn: _ir.JaxprEqn,
    expr: str,
    var_avals: list[_ir.ShapedArray],
    const_avals: list[tuple[str, _ir.ShapedArray]],
    slots: list[str],
) -> str | None:
    """Traces ``expr`` alone; "single"/"seq" (what it returned) if it recorded exactly
    ``eqn`` (printed text and output types), else None. ``slots[i]`` names input ``i``
    in ``expr`` (``_v<k>``: the probe's argument k, ``_k<k>``: a constant array)."""
    args = ", ".join(f"_v{i}" for i in range(len(var_avals)))
    namespace = _probe_namespace()
    for name, aval in const_avals:
        namespace[name] = np.zeros(aval.shape, aval.dtype)
    struct: list[str] = []
    try:
        with warnings.catch_warnings():
            # A form that warns is not taken (and its warning is not the user's).
            warnings.simplefilter("error")
            got = _trace_probe(expr, args, namespace, var_avals, struct)
        b = _ir.JaxprBuilder()
        by_slot: dict[str, _ir.Var] = {name: b.add_constvar(aval) for name, aval in const_avals}
        by_slot.update({f"_v{i}": b.add_invar(a) for i, a in enumerate(var_avals)})
        atoms: list[_ir.Var | _ir.Literal] = [
            b.literal(a.val, a.aval.dtype, a.aval.weak_type) if isinstance(a, _ir.Literal) else by_slot[slot]
            for a, slot in zip(eqn.inputs, slots)
        ]
        want = b.build(b.add_eqn(eqn.primitive, atoms, eqn.params))
    except Exception:
        return None
    if str(got.jaxpr) != str(want) or got.jaxpr.out_avals != want.out_avals:
        return None
    if not struct or (struct[0] == "single" and len(eqn.outvars) != 1):
        return None
    return struct[0]


# ------------------------------------------------------------------ the decompiler


def _tuple_text(items: Sequence[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _targets(names: Sequence[str], struct: str) -> str:
    """The assignment's left side (with `` = ``) for a result of this structure."""
    if struct == "single":
        return f"{names[0]} = "
    if not names:
        return ""
    if len(names) == 1:
        return f"({names[0]},) = "
    return ", ".join(names) + " = "


def _kwargs_text(pairs: Sequence[tuple[str, str]]) -> str:
    plain = [f"{k}={v}" for k, v in pairs if _is_identifier(k)]
    other = [f"{k!r}: {v}" for k, v in pairs if not _is_identifier(k)]
    if other:
        plain.append("**{" + ", ".join(other) + "}")
    return ", ".join(plain)


class _Decompiler:
    """Plans the functions of the output (one per jaxpr), then writes them innermost
    first; both walks use work lists."""

    def __init__(self, closed: _ir.ClosedJaxpr, name: str, readable: bool) -> None:
        top = closed.jaxpr
        self.readable = readable
        self.refs = _Refs(top)
        if self.refs.wide and not dtypes.x64_enabled():
            raise DecompileError(
                "to_python: the jaxpr has 64-bit types; decompile it (and run the result) with "
                "ferrax.config.update('jax_enable_x64', True)"
            )
        self.names = _Names({name}, self.refs.jit_names)
        self.consts: list[_Const] = []
        self.const_names: set[str] = set()
        self.shared: dict[_ir.Jaxpr, _Fn] = {}
        self.children: dict[_Fn, list[_Fn]] = {}
        self.top = _Fn(top, name, "flat", 0, True)
        # Constants the function cannot close over (scalars, keys, out of first-use
        # order) make the function take them first, as consts_to_invars does.
        self.consts_as_args = not _consts_closable(top)
        if not self.consts_as_args:
            for v, c in zip(top.constvars, closed.consts):
                self.top.names[v] = self._module_const(v.aval, c)
        self._plan_all()

    # ----------------------------------------------------------------- planning

    def _module_const(self, aval: _ir.ShapedArray, value: Any) -> str:
        name = self.names.numbered("const")
        self.consts.append(_Const(name, aval, _const_value(value, aval)))
        self.const_names.add(name)
        return name

    def _plan_all(self) -> None:
        stack = [self.top]
        while stack:
            fn = stack.pop()
            self.children[fn] = []
            self._plan(fn, stack)

    def _new_fn(
        self, parent: _Fn, sub: _ir.ClosedJaxpr, base: str, style: str, stack: list[_Fn], jit_name: str | None = None
    ) -> _Fn:
        """The function writing ``sub`` (a shared jaxpr's one function)."""
        j = sub.jaxpr
        fn = self.shared.get(j)
        if fn is None:
            shared = self.refs.shared(j)
            depth = parent.depth + 1
            module_level = shared or depth > _MAX_INLINE_DEPTH
            pyname = self.names.claim(jit_name) if jit_name is not None else self.names.unique(base)
            fn = _Fn(j, pyname, style, 0 if module_level else depth, module_level)
            fn.jit_name = jit_name
            if shared:
                self.shared[j] = fn
                if jit_name is None:
                    fn.traced_as = self.names.numbered("jaxpr")
            if j.constvars:
                if not _consts_closable(j):
                    raise DecompileError(
                        "to_python: a nested jaxpr has constants that closing over NumPy arrays cannot "
                        "reproduce (a scalar or key constant, or constants out of first-use order)"
                    )
                for v, c in zip(j.constvars, sub.consts):
                    fn.names[v] = self._module_const(v.aval, c)
            stack.append(fn)
        self.children[parent].append(fn)
        return fn

    def _text(self, fn: _Fn, a: _ir.Var | _ir.Literal) -> str:
        return _literal_text(a) if isinstance(a, _ir.Literal) else fn.names[a]

    def _plan(self, fn: _Fn, stack: list[_Fn]) -> None:
        j = fn.jaxpr
        if fn is self.top and self.consts_as_args:
            for v in j.constvars:
                fn.names[v] = self.names.var()
        for v in j.invars:
            if v not in fn.names:
                fn.names[v] = self.names.var()
        eqns = j.eqns
        for eqn in eqns:
            for v in eqn.outvars:
                fn.names[v] = self.names.var()
        uses = _use_counts(j)
        for i, eqn in enumerate(eqns):
            plan = None
            if self.readable and eqn.primitive in _FORMS:
                plan = self._readable_form(fn, eqns, i, uses, stack)
            if plan is None:
                plan = self._simple_or_bind(fn, eqn, stack)
            fn.plans.append(plan)

    def _simple_or_bind(self, fn: _Fn, eqn: _ir.JaxprEqn, stack: list[_Fn]) -> _Plan:
        from ferrax._lax.registry import primitive_named

        params = eqn.params
        if not _sub_jaxprs(params):
            texts = [self._text(fn, a) for a in eqn.inputs]
            kinds = [
                "lit" if isinstance(a, _ir.Literal) else "const" if fn.names[a] in self.const_names else "var"
                for a in eqn.inputs
            ]
            form = _form_of(eqn, texts, kinds)
            if form is not None:
                return _Plan("simple", text=form[0], struct=form[1])
        try:
            prim = primitive_named(eqn.primitive)
        except NotImplementedError:
            raise DecompileError(
                f"to_python: no Python primitive is named '{eqn.primitive}' (an extension primitive "
                "must be defined in this process)"
            ) from None
        plan = _Plan("bind", struct="seq" if prim.multiple_results else "single")
        for key, value in params.items():
            base = _FN_NAMES.get(key, _FN_NAMES.get(eqn.primitive, "fn"))
            if isinstance(value, _ir.ClosedJaxpr):
                plan.params[key] = self._new_fn(fn, value, base, "flat", stack)
                plan.fns.append(plan.params[key])
            elif isinstance(value, tuple) and value and all(isinstance(x, _ir.ClosedJaxpr) for x in value):
                plan.params[key] = tuple(self._new_fn(fn, x, f"{base}_{k}", "flat", stack) for k, x in enumerate(value))
                plan.fns.extend(plan.params[key])
            else:
                try:
                    if key in _RULE_PARAMS and value is not None:
                        raise _Opaque()
                    plan.params[key] = _value_text(value)
                except _Opaque:
                    text = _opaque_name(key, value)
                    plan.params[key] = repr(text)
                    plan.comments.append(
                        f"# {eqn.primitive}: its {key} is a Python object; written as its name, {text!r}, "
                        "it traces the same but does not run"
                    )
        return plan

    def _readable_form(
        self, fn: _Fn, eqns: list[_ir.JaxprEqn], i: int, uses: dict[_ir.Var, int], stack: list[_Fn]
    ) -> _Plan | None:
        eqn = eqns[i]
        prim = eqn.primitive
        params = eqn.params
        subs = _sub_jaxprs(params)
        if any(s.jaxpr.constvars or s.consts for s in subs):
            return None
        shared = [self.refs.shared(s.jaxpr) for s in subs]
        inline = fn.depth + 1 <= _MAX_INLINE_DEPTH
        ops = eqn.inputs
        if prim == "jit":
            inner = params.get("jaxpr")
            if not _jit_form_ok(eqn) or not isinstance(inner, _ir.ClosedJaxpr):
                return None
            if shared[0] and not self.refs.shared_jit(inner.jaxpr):
                return None
            child = self._new_fn(fn, inner, "", "flat", stack, jit_name=params["name"])
            return _Plan("jit", [child])
        if any(shared):
            return None
        op_avals = [_atom_aval(a) for a in ops]
        if prim == "remat2":
            inner = params.get("jaxpr")
            if (
                set(params) != {"jaxpr", "prevent_cse", "differentiated", "policy"}
                or params["differentiated"] is not False
                or params["policy"] is not None
                or not isinstance(params["prevent_cse"], bool)
                or not isinstance(inner, _ir.ClosedJaxpr)
                or op_avals != list(inner.jaxpr.in_avals)
            ):
                return None
            plan = _Plan("checkpoint", [self._new_fn(fn, inner, "checkpointed", "flat", stack)])
            plan.params["prevent_cse"] = params["prevent_cse"]
            return plan
        if prim == "cond":
            return self._cond_form(fn, eqns, i, uses, stack)
        if prim == "while":
            if set(params) != {"cond_jaxpr", "body_jaxpr", "cond_nconsts", "body_nconsts"}:
                return None
            cj, bj = params["cond_jaxpr"], params["body_jaxpr"]
            cc, bc = params["cond_nconsts"], params["body_nconsts"]
            if (cc or bc) and not inline:
                return None
            init = op_avals[cc + bc :]
            if init != list(cj.jaxpr.in_avals[cc:]) or init != list(bj.jaxpr.in_avals[bc:]):
                return None
            if not (_closure_ok(cj.jaxpr, cc, ops[:cc]) and _closure_ok(bj.jaxpr, bc, ops[cc : cc + bc])):
                return None
            cond_fn = self._closure_fn(fn, cj, "cond_fn", "while_cond", ops[:cc], stack)
            body_fn = self._closure_fn(fn, bj, "body_fn", "while_body", ops[cc : cc + bc], stack)
            return _Plan("while", [cond_fn, body_fn])
        if prim == "scan":
            if set(params) != {"jaxpr", "length", "reverse", "num_consts", "num_carry", "linear", "unroll"}:
                return None
            body = params["jaxpr"]
            k, nc = params["num_consts"], params["num_carry"]
            linear, unroll = params["linear"], params["unroll"]
            if not isinstance(linear, tuple) or any(linear) or unroll != 1 or isinstance(unroll, bool):
                return None
            if not isinstance(params["reverse"], bool) or (k and not inline):
                return None
            in_avals = list(body.jaxpr.in_avals)
            xs = op_avals[k + nc :]
            if op_avals[k : k + nc] != in_avals[k : k + nc]:
                return None
            if [_ir.ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in xs] != in_avals[k + nc :]:
                return None
            if not _closure_ok(body.jaxpr, k, ops[:k]):
                return None
            body_fn = self._closure_fn(fn, body, "body_fn", "scan", ops[:k], stack)
            body_fn.num_carry = nc
            plan = _Plan("scan", [body_fn])
            plan.params = {"length": params["length"], "reverse": params["reverse"], "num_carry": nc, "num_consts": k}
            return plan
        return None

    def _closure_fn(
        self, fn: _Fn, sub: _ir.ClosedJaxpr, base: str, style: str, consts: Sequence[_ir.Var | _ir.Literal], stack: list[_Fn]
    ) -> _Fn:
        child = self._new_fn(fn, sub, base, style, stack)
        child.closure = len(consts)
        for v, outer in zip(sub.jaxpr.invars, consts):
            assert isinstance(outer, _ir.Var)
            child.names[v] = fn.names[outer]
        return child

    def _cond_form(
        self, fn: _Fn, eqns: list[_ir.JaxprEqn], i: int, uses: dict[_ir.Var, int], stack: list[_Fn]
    ) -> _Plan | None:
        """``lax.cond`` (the index converted from a bool just before) or ``lax.switch``
        (the index clamped just before, converted to int32 before that if need be)."""
        eqn = eqns[i]
        params = eqn.params
        if set(params) != {"branches"}:
            return None
        branches = params["branches"]
        index, ops = eqn.inputs[0], eqn.inputs[1:]
        op_avals = [_atom_aval(a) for a in ops]
        if any(list(b.jaxpr.in_avals) != op_avals for b in branches) or not isinstance(index, _ir.Var):
            return None
        plans = fn.plans

        def produced(k: int, var: _ir.Var | _ir.Literal, prim: str) -> bool:
            return (
                isinstance(var, _ir.Var)
                and k >= 0
                and plans[k].kind in ("simple", "bind")
                and eqns[k].primitive == prim
                and len(eqns[k].outvars) == 1
                and eqns[k].outvars[0] == var
                and uses.get(var, 0) == 1
            )

        def to_int32(k: int) -> bool:
            p = eqns[k].params
            return set(p) == {"new_dtype", "weak_type"} and p["new_dtype"] == np.dtype(np.int32) and p["weak_type"] is False

        int32 = _ir.ShapedArray((), np.int32)
        if len(branches) == 2 and produced(i - 1, index, "convert_element_type") and to_int32(i - 1):
            pred = eqns[i - 1].inputs[0]
            if pred.aval.shape == () and np.dtype(pred.aval.dtype) == np.bool_:
                plans[i - 1] = _Plan("skip")
                false_fn = self._new_fn(fn, branches[0], "false_fn", "flat", stack)
                true_fn = self._new_fn(fn, branches[1], "true_fn", "flat", stack)
                plan = _Plan("cond", [false_fn, true_fn])
                plan.index = pred
                return plan
        if not produced(i - 1, index, "clamp"):
            return None
        lo, x, hi = eqns[i - 1].inputs
        if not (
            isinstance(lo, _ir.Literal) and isinstance(hi, _ir.Literal) and lo.aval == int32 and hi.aval == int32
            and lo.val == 0 and hi.val == len(branches) - 1 and isinstance(x, _ir.Var)
        ):
            return None
        switch_index: _ir.Var | _ir.Literal = x
        if x.aval == int32:
            start = i - 1
        elif produced(i - 2, x, "convert_element_type") and to_int32(i - 2):
            y = eqns[i - 2].inputs[0]
            if y.aval.shape != () or np.dtype(y.aval.dtype).kind not in "iu" or y.aval == int32:
                return None
            start, switch_index = i - 2, y
        else:
            return None
        for k in range(start, i):
            plans[k] = _Plan("skip")
        plan = _Plan("switch", [self._new_fn(fn, b, f"branch_{n}", "flat", stack) for n, b in enumerate(branches)])
        plan.index = switch_index
        return plan

    # ------------------------------------------------------------------ writing

    def _order(self) -> list[_Fn]:
        """Every function after the functions it refers to (post-order, work list)."""
        order: list[_Fn] = []
        done: set[_Fn] = set()
        stack: list[tuple[_Fn, int]] = [(self.top, 0)]
        entered = {self.top}
        while stack:
            fn, k = stack.pop()
            kids = self.children[fn]
            if k < len(kids):
                stack.append((fn, k + 1))
                kid = kids[k]
                if kid not in entered:
                    entered.add(kid)
                    stack.append((kid, 0))
                continue
            if fn not in done:
                done.add(fn)
                order.append(fn)
        return order

    def source(self) -> str:
        order = self._order()
        for fn in order:
            fn.lines = self._write(fn)
        body: list[str] = []
        for fn in order:
            if fn.module_level:
                body.append("")
                body.append("")
                body.extend(fn.lines)
        text = "\n" + "\n".join(body)
        head = ["# Written by ferrax.core.to_python."]
        if self.refs.wide:
            head.append("# Its 64-bit types need ferrax.config.update('jax_enable_x64', True).")
        if self.consts_as_args and self.top.jaxpr.constvars:
            names = ", ".join(self.top.names[v] for v in self.top.jaxpr.constvars)
            head.append(
                f"# The jaxpr's constants are {self.top.pyname}'s first parameters ({names}), "
                "inputs of the traced jaxpr."
            )
        imports = []
        if "np." in text or self.consts:
            imports.append("import numpy as np")
            imports.append("")
        imports.append("import ferrax")
        if "fnp." in text:
            imports.append("import ferrax.numpy as fnp")
        used = [m for m in ("core", "lax") if f"{m}." in text]
        if used:
            imports.append(f"from ferrax import {', '.join(used)}")
        lines = head + imports
        if self.consts:
            lines.append("")
        for c in self.consts:
            if c.value is None:
                lines.append(f"# {c.name}: its value is unknown (the jaxpr was read from text); zeros stand in for it.")
                lines.append(f"{c.name} = np.zeros({_value_text(c.aval.shape)}, dtype={_dtype_text(c.aval.dtype)})")
            else:
                lines.append(f"{c.name} = {_array_text(c.value)}")
        return "\n".join(lines) + text + "\n"

    def _write(self, fn: _Fn) -> list[str]:
        j = fn.jaxpr
        names = fn.names
        lines: list[str] = []
        own = j.invars[fn.closure :]
        if fn is self.top and self.consts_as_args:
            own = [*j.constvars, *own]
        params = [names[v] for v in own]
        if fn.jit_name is not None and fn.pyname == fn.jit_name:
            lines.append("@ferrax.jit")
        body: list[str] = []
        if fn.style in ("while_cond", "while_body"):
            lines.append(f"def {fn.pyname}(carry):")
            if params:
                body.append(_targets(params, "seq") + "carry")
        elif fn.style == "scan":
            lines.append(f"def {fn.pyname}(carry, x):")
            carry, xs = params[: fn.num_carry], params[fn.num_carry :]
            if carry:
                body.append(_targets(carry, "seq") + "carry")
            if xs:
                body.append(_targets(xs, "seq") + "x")
        else:
            lines.append(f"def {fn.pyname}({', '.join(params)}):")
            if fn is self.top:
                # Keys arrive as ferrax.random.KeyArray; the jaxpr's variables are their keys.
                body.extend(f"{names[v]} = core.raw_keys({names[v]})" for v in own if dtypes.is_key(v.aval.dtype))
        for eqn, plan in zip(j.eqns, fn.plans):
            if plan.kind == "skip":
                continue
            for child in plan.fns:
                if not child.module_level and child.lines:
                    body.extend(child.lines)
                    child.lines = []  # written once, where it is used
            body.extend(plan.comments)
            body.append(self._statement(fn, eqn, plan))
        outs = [self._text(fn, a) for a in j.outvars]
        if fn.style == "while_cond":
            body.append(f"return {outs[0]}")
        elif fn.style == "while_body":
            body.append(f"return {_tuple_text(outs)}")
        elif fn.style == "scan":
            body.append(f"return {_tuple_text(outs[: fn.num_carry])}, {_tuple_text(outs[fn.num_carry :])}")
        else:
            body.append("return " + (outs[0] if len(outs) == 1 else ", ".join(outs) if outs else "()"))
        lines.extend("    " + line if line else line for line in body)
        if fn.jit_name is not None and fn.pyname != fn.jit_name:
            lines.append(f"{fn.pyname}.__name__ = {fn.jit_name!r}")
            lines.append(f"{fn.pyname} = ferrax.jit({fn.pyname})")
        if fn.traced_as is not None:
            avals = ", ".join(_aval_text(a) for a in j.in_avals)
            lines.append(f"{fn.traced_as} = core.trace_jaxpr({fn.pyname}, [{avals}])")
        return lines

    def _ref(self, fn: _Fn) -> str:
        """A sub-jaxpr as a bind param: its function traced (or its shared trace)."""
        if fn.traced_as is not None:
            return fn.traced_as
        avals = ", ".join(_aval_text(a) for a in fn.jaxpr.in_avals)
        return f"core.trace_jaxpr({fn.pyname}, [{avals}])"

    def _statement(self, fn: _Fn, eqn: _ir.JaxprEqn, plan: _Plan) -> str:
        outs = [fn.names[v] for v in eqn.outvars]
        texts = [self._text(fn, a) for a in eqn.inputs]
        flat = "single" if len(outs) == 1 else "seq"
        kind = plan.kind
        if kind == "simple":
            return _targets(outs, plan.struct) + plan.text
        if kind == "bind":
            pairs: list[tuple[str, str]] = []
            for key, value in plan.params.items():
                if isinstance(value, _Fn):
                    pairs.append((key, self._ref(value)))
                elif isinstance(value, tuple):
                    pairs.append((key, _tuple_text([self._ref(v) for v in value])))
                else:
                    pairs.append((key, value))
            args = ", ".join([repr(eqn.primitive), *texts])
            kw = _kwargs_text(pairs)
            return _targets(outs, plan.struct) + f"core.bind({args}{', ' + kw if kw else ''})"
        if kind == "jit":
            return _targets(outs, flat) + f"{plan.fns[0].pyname}({', '.join(texts)})"
        if kind == "checkpoint":
            keep = "" if plan.params["prevent_cse"] else ", prevent_cse=False"
            return _targets(outs, flat) + f"ferrax.checkpoint({plan.fns[0].pyname}{keep})({', '.join(texts)})"
        if kind == "cond":
            assert plan.index is not None
            false_fn, true_fn = plan.fns
            args = ", ".join([self._text(fn, plan.index), true_fn.pyname, false_fn.pyname, *texts[1:]])
            return _targets(outs, flat) + f"lax.cond({args})"
        if kind == "switch":
            assert plan.index is not None
            branches = _tuple_text([b.pyname for b in plan.fns])
            args = ", ".join([self._text(fn, plan.index), branches, *texts[1:]])
            return _targets(outs, flat) + f"lax.switch({args})"
        if kind == "while":
            cond_fn, body_fn = plan.fns
            cc, bc = cond_fn.closure, body_fn.closure
            init = _tuple_text(texts[cc + bc :])
            return _targets(outs, "seq") + f"lax.while_loop({cond_fn.pyname}, {body_fn.pyname}, {init})"
        if kind == "scan":
            (body_fn,) = plan.fns
            k, nc = plan.params["num_consts"], plan.params["num_carry"]
            carry_in, xs = texts[k : k + nc], texts[k + nc :]
            scan_args = [body_fn.pyname, _tuple_text(carry_in), _tuple_text(xs) if xs else "None"]
            if not xs:
                scan_args.append(f"length={plan.params['length']}")
            if plan.params["reverse"]:
                scan_args.append("reverse=True")
            carry_out, ys = outs[:nc], outs[nc:]
            target = "" if not outs else f"{_tuple_text(carry_out)}, {_tuple_text(ys)} = "
            return target + f"lax.scan({', '.join(scan_args)})"
        raise AssertionError(kind)


def _array_text(value: np.ndarray[Any, Any]) -> str:
    """A NumPy array as ``np.array(<nested lists>, dtype=...)`` of exactly its values."""
    d = value.dtype
    flat = value.reshape(-1)
    if d == np.bool_:
        items = [repr(bool(v)) for v in flat]
    elif dtypes.is_float(d):
        items = [_float_text(float(v), d).replace('float("nan")', "np.nan").replace('float("inf")', "np.inf") for v in flat]
    elif d.kind in "iu":
        items = [repr(int(v)) for v in flat]
    else:
        items = [repr(v.item()) for v in flat]
    # Nest the flat items by the shape, innermost dimension first (no recursion).
    groups = items
    for size in reversed(value.shape[1:]):
        groups = ["[" + ", ".join(groups[k : k + size]) + "]" for k in range(0, len(groups), size)] if size else []
    if value.ndim == 0:
        text = groups[0]
    else:
        text = "[" + ", ".join(groups) + "]"
    if value.size == 0:
        return f"np.zeros({_value_text(value.shape)}, dtype={_dtype_text(d)})"
    return f"np.array({text}, dtype={_dtype_text(d)})"


def _first_difference(want: str, got: str) -> str:
    for a, b in zip(want.splitlines(), got.splitlines()):
        if a != b:
            return f"{a.strip()!r} became {b.strip()!r}"
    return "the lengths differ"


def _retrace_mismatch(source: str, name: str, closed: _ir.ClosedJaxpr, consts_as_args: bool) -> str | None:
    """None if executing ``source`` and tracing its function gives ``closed``'s jaxpr,
    else what went wrong."""
    top = closed.jaxpr
    want = _ir.consts_to_invars(top) if consts_as_args and top.constvars else top
    namespace: dict[str, Any] = {"__name__": "ferrax_to_python"}
    try:
        exec(compile(source, f"<to_python {name}>", "exec"), namespace)
        got = trace_jaxpr(namespace[name], list(want.in_avals)).jaxpr
    except Exception as e:
        return f"tracing it raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    want_text, got_text = str(want), str(got)
    if want_text != got_text:
        return "it traces to another jaxpr: " + _first_difference(want_text, got_text)
    return None


def to_python(jaxpr: _ir.ClosedJaxpr | _ir.Jaxpr, name: str = "f", *, check: bool = True) -> str:
    """Python source (a module) defining the function ``name`` that traces back to
    ``jaxpr``: ``make_jaxpr`` of it, on arguments of the jaxpr's input types, prints the
    same text.

    It calls ``ferrax.lax`` functions and operators where they record exactly the
    equation, ``lax.cond``/``switch``/``while_loop``/``scan`` with nested functions,
    ``@ferrax.jit`` functions for ``jit`` and ``ferrax.checkpoint`` for ``remat2``, and
    ``ferrax.core.bind`` (with sub-jaxprs traced by ``ferrax.core.trace_jaxpr``) for
    anything else, so that every primitive round-trips.

    Constants: each constant of the jaxpr is a module-level NumPy array of its exact dtype
    and values, closed over by the function (so it is a constant of the traced jaxpr
    again); a constant whose value is unknown (a jaxpr read from text) is written as
    zeros with a comment. Constants that no closure reproduces (scalars, which tracing
    makes literals; PRNG keys; constants first used out of their order) become instead
    the function's first parameters, and the traced jaxpr takes them as inputs (the form
    ``consts_to_invars`` gives). Rules held as Python objects (``custom_jvp_call``'s
    ``jvp``, callbacks, checkpoint policies) are written as their printed names, which
    trace to the same text but cannot run those rules.

    The source is for the current x64 mode (64-bit types need x64 on). With ``check``
    (the default) the source is executed and traced once; if that gives another jaxpr it
    is written again with control flow in the generic ``core.bind`` form, and if that
    differs too, :class:`DecompileError` is raised. A ``shard_map`` equation is a
    :class:`DecompileError`, as is an argument that is not a jaxpr or a ``name`` that is
    not an identifier.
    """
    if isinstance(jaxpr, _ir.Jaxpr):
        closed = _ir.ClosedJaxpr(jaxpr, [None] * len(jaxpr.constvars))
    elif isinstance(jaxpr, _ir.ClosedJaxpr):
        closed = jaxpr
    else:
        raise DecompileError(f"to_python expects a ClosedJaxpr or a Jaxpr, got {type(jaxpr).__name__}")
    if not isinstance(name, str) or not _is_identifier(name) or name in _RESERVED:
        raise DecompileError(f"to_python: the function name must be a Python identifier, not {name!r}")
    failure = ""
    for readable in (True, False):
        d = _Decompiler(closed, name, readable)
        source = d.source()
        if not check:
            return source
        mismatch = _retrace_mismatch(source, name, closed, d.consts_as_args)
        if mismatch is None:
            return source
        failure = mismatch
    raise DecompileError(f"to_python: the source written for this jaxpr does not trace back to it: {failure}")
