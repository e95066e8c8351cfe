"""Jaxprs between JAX and ferrax: :func:`from_jax` and :func:`to_jax` (an optional extra:
it needs ``jax`` installed, and imports it only when called).

``from_jax(closed_jaxpr)`` turns a JAX ``ClosedJaxpr`` (what ``jax.make_jaxpr`` returns)
into a ferrax :class:`~ferrax.core.ClosedJaxpr`: same equations, same primitives and
params (ferrax names them as JAX does), so every ferrax pass and transformation applies
to it. It walks JAX's objects and rebuilds each equation with a
:class:`~ferrax.core.JaxprBuilder` rather than printing JAX's text and parsing it: the
text is not a faithful serialization (a variable may be printed as ``in``, a keyword;
params print as ``np.int64(1)``; nested constants and the user's differentiation rules
do not print at all).

- Constants of nested jaxprs (JAX keeps those of an inner ``jit``) are hoisted into
  constants of the outer jaxpr passed as operands, as ferrax's own tracing does.
- ``custom_jvp_call`` keeps JAX's rule: its ``jvp`` param is a callable that, the first
  time ferrax differentiates the equation, has JAX trace the user's rule at the
  equation's types, converts that jaxpr, and evaluates it in ferrax from then on.
  ``custom_vjp_call``'s ``fwd`` and ``bwd`` do the same. Derivatives through them are
  therefore the user's rules, as in JAX (JAX is needed when they are first used).
- ``remat2``'s ``policy`` stays JAX's object (ferrax saves nothing either way).
- JAX's ``empty2`` (the filler of residuals in ``cond``'s reverse mode, whose value does
  not matter) becomes a zero: ``broadcast_in_dim`` of a ``0`` literal.

``to_jax(closed_jaxpr)`` returns a function evaluating a ferrax jaxpr with JAX: each
equation binds JAX's primitive of the same name (params converted back), nested jaxprs
become JAX jaxprs (``jit`` is ``jax.jit``, ``custom_jvp_call``/``custom_vjp_call`` are
``jax.custom_jvp``/``jax.custom_vjp`` whose rules are ferrax's, traced by ferrax and run
by JAX), so it runs under ``jax.jit``, ``jax.grad``, ``jax.vmap`` and the rest.

Neither direction takes host callbacks (``debug_print``, ``pure_callback``, ...) or the
SPMD primitives (``shard_map``, collectives, ``sharding_constraint``): their params are
host objects of one library; they raise :class:`UnsupportedPrimitiveError`, as does a
JAX primitive ferrax lacks.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from ferrax import _ir, dtypes
from ferrax.errors import FerraxError, TypeCheckError

__all__ = [
    "InteropError",
    "JaxNotInstalledError",
    "UnsupportedPrimitiveError",
    "from_jax",
    "to_jax",
]


class InteropError(FerraxError):
    """A program or value that cannot cross between JAX and ferrax as asked."""


class JaxNotInstalledError(InteropError, ImportError):
    """:mod:`ferrax.interop` was used without ``jax`` installed."""


class UnsupportedPrimitiveError(InteropError, NotImplementedError):
    """A primitive the conversion does not carry over (named in ``primitive``)."""

    primitive: str
    """The primitive's name."""

    def __init__(self, primitive: str, why: str) -> None:
        super().__init__(f"primitive '{primitive}' {why}")
        self.primitive = primitive


# Primitives ferrax has whose params are host objects of one library (callbacks) or
# which only make sense inside ferrax's and JAX's SPMD machinery.
_NOT_CARRIED = {
    **dict.fromkeys(
        ["debug_callback", "debug_print", "io_callback", "pure_callback"],
        "is a host callback, whose function is one library's; interop does not carry it",
    ),
    **dict.fromkeys(
        ["shard_map", "sharding_constraint", "psum", "pmax", "pmin", "ppermute", "pvary", "all_gather",
         "all_to_all", "reduce_scatter", "axis_index"],
        "is an SPMD primitive; interop does not carry meshes and shardings",
    ),
}


def _import_jax() -> ModuleType:
    try:
        return importlib.import_module("jax")
    except ImportError:
        raise JaxNotInstalledError(
            "ferrax.interop needs jax: install it (pip install jax) to convert jaxprs"
        ) from None


def _interop_name(direction: str, name: str) -> None:
    """Raises if the primitive ``name`` is one interop does not carry."""
    why = _NOT_CARRIED.get(name)
    if why is not None:
        raise UnsupportedPrimitiveError(name, why)
    if direction == "from_jax" and name not in _ferrax_primitives():
        raise UnsupportedPrimitiveError(name, "is a JAX primitive ferrax does not have")


@functools.cache
def _ferrax_primitives() -> frozenset[str]:
    return frozenset(_ir.builtin_primitives())


# ---------------------------------------------------------------------------- avals


def _key_dtype(jax: ModuleType, dtype: Any) -> bool:
    return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key))


def _aval_from_jax(jax: ModuleType, aval: Any) -> _ir.ShapedArray:
    """JAX's abstract value as ferrax's."""
    dtype = getattr(aval, "dtype", None)
    shape = getattr(aval, "shape", None)
    if dtype is None or shape is None:
        raise InteropError(f"JAX type {aval} has no ferrax counterpart (only arrays cross)")
    weak = bool(getattr(aval, "weak_type", False))
    if _key_dtype(jax, dtype):
        if str(dtype) != "key<fry>":
            raise InteropError(f"JAX key type {aval.str_short()} has no ferrax counterpart (only key<fry>)")
        return _ir.ShapedArray(shape, dtypes.key_fry, weak)
    try:
        return _ir.ShapedArray(shape, np.dtype(dtype), weak)
    except (TypeCheckError, TypeError):
        raise InteropError(f"JAX type {aval.str_short()} has no ferrax counterpart (its dtype)") from None


def _aval_to_jax(jax: ModuleType, aval: _ir.ShapedArray) -> Any:
    """A ``jax.ShapeDtypeStruct`` of ferrax's abstract value."""
    dtype = _key_dtype_of_jax(jax) if dtypes.is_key(aval.dtype) else aval.dtype
    return jax.ShapeDtypeStruct(aval.shape, dtype, weak_type=aval.weak_type)


@functools.cache
def _key_dtype_of_jax(jax: ModuleType) -> Any:
    return jax.random.key(0).dtype


def _const_from_jax(jax: ModuleType, value: Any, aval: _ir.ShapedArray) -> Any:
    """A JAX constant as ferrax holds it: a NumPy array (keys as their packed words)."""
    from ferrax._core import KeyValue, pack_keys

    if dtypes.is_key(aval.dtype):
        return KeyValue(np.asarray(pack_keys(np.asarray(jax.random.key_data(value)))))
    return np.asarray(value)


def _const_to_jax(jax: ModuleType, value: Any, aval: _ir.ShapedArray) -> Any:
    """A ferrax constant as a value JAX takes."""
    from ferrax._core import KeyValue, unpack_keys

    if value is None:
        raise InteropError(
            f"a constant of type {aval.str_short()} has no value (a jaxpr read from text): give "
            "the ClosedJaxpr its constants"
        )
    if dtypes.is_key(aval.dtype):
        from ferrax.random._keys import KeyArray

        if isinstance(value, KeyArray):
            value = value._keys
        if isinstance(value, KeyValue):
            value = value._value
        # The keys' packed words: one uint64 per key.
        return jax.random.wrap_key_data(unpack_keys(np.asarray(value, dtype=np.uint64)))
    return np.asarray(value)


# ------------------------------------------------------------------------- from_jax


def from_jax(closed_jaxpr: Any) -> _ir.ClosedJaxpr:
    """JAX's ``ClosedJaxpr`` (``jax.make_jaxpr(f)(*args)``) as a ferrax
    :class:`~ferrax.core.ClosedJaxpr` with the same equations.

    Constants become NumPy arrays (keys ferrax's key values); constants of nested
    jaxprs are hoisted to the top (as operands of the equations holding them). The
    custom derivative rules of ``custom_jvp_call`` / ``custom_vjp_call`` stay JAX's:
    ferrax has JAX trace them when it first differentiates the equation.

    Raises :class:`UnsupportedPrimitiveError` for a primitive ferrax does not have (or
    one interop does not carry: callbacks, SPMD), :class:`InteropError` for a type ferrax
    lacks (complex, float0, other key implementations) and for anything that is not a
    JAX jaxpr, :class:`JaxNotInstalledError` without JAX.
    """
    jax = _import_jax()
    from jax.extend import core as jcore

    if isinstance(closed_jaxpr, jcore.Jaxpr):
        if closed_jaxpr.constvars:
            raise InteropError("from_jax takes a ClosedJaxpr: this Jaxpr has constvars but no constants")
        closed_jaxpr = jcore.ClosedJaxpr(closed_jaxpr, [])
    if not isinstance(closed_jaxpr, jcore.ClosedJaxpr):
        raise InteropError(
            f"from_jax takes JAX's ClosedJaxpr (jax.make_jaxpr(f)(*args)), got {type(closed_jaxpr).__name__}"
        )
    jaxpr, consts = _FromJax(jax).closed(closed_jaxpr)
    return _ir.ClosedJaxpr(jaxpr, consts)


class _Scope:
    """The jaxpr being built: its builder and the values of its constvars so far."""

    def __init__(self) -> None:
        self.builder = _ir.JaxprBuilder()
        self.const_values: list[Any] = []

    def constvar(self, value: Any, aval: _ir.ShapedArray) -> _ir.Var:
        self.const_values.append(value)
        return self.builder.add_constvar(aval)


def _literal_value(val: Any) -> bool | int | float:
    scalar = np.asarray(val)
    if scalar.dtype.kind == "b":
        return bool(scalar)
    if scalar.dtype.kind in "iu":
        return int(scalar)
    return float(scalar)


# JAX's params that ferrax's primitives do not have, with the value they must have.
_JAX_ONLY_PARAMS: dict[str, dict[str, Any]] = {
    "mul": {"out_dtype": None},
}


def _jax_defaults() -> dict[str, dict[str, Any]]:
    """The params ferrax's primitives may leave out (ferrax's own tracing does), with the
    value JAX's primitives then take, and the JAX-only params."""
    scatter = {"indices_are_sorted": False, "unique_indices": False, "update_consts": ()}
    dot = {"precision": None, "preferred_element_type": None, "out_sharding": None}
    table: dict[str, dict[str, Any]] = {
        **dict.fromkeys(
            ["exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "logistic", "sqrt", "rsqrt", "exp2", "cbrt"],
            {"accuracy": None},
        ),
        "reduce_sum": {"out_sharding": None},
        **dict.fromkeys(["scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max"], scatter),
        **dict.fromkeys(["eigh", "svd"], {"subset_by_index": None, "algorithm": None}),
        **dict.fromkeys(["qr", "geqp3"], {"use_magma": None}),
        "convert_element_type": {"weak_type": False, "sharding": None},
        "broadcast_in_dim": {"sharding": None},
        "reshape": {"dimensions": None, "sharding": None},
        "iota": {"sharding": None},
        "slice": {"strides": None},
        "dot_general": dot,
        "conv_general_dilated": dot,
        "gather": {"indices_are_sorted": False, "unique_indices": False, "fill_value": None},
    }
    for prim, params in _JAX_ONLY_PARAMS.items():
        table[prim] = {**table.get(prim, {}), **params}
    return table


_JAX_DEFAULTS = _jax_defaults()

# Params ferrax's primitives may carry (always None) that JAX's do not have.
_JAX_LACKS: dict[str, frozenset[str]] = dict.fromkeys(["reduce_max", "reduce_min", "reduce_prod"], frozenset({"out_sharding"}))


# What a rule makes of a JAX equation: ferrax's primitive, its operands and params.
_Converted = tuple[str, list[Any], dict[str, Any]]


class _Sub(NamedTuple):
    """A converted nested jaxpr: its constants turned into leading inputs (``closed``
    has none), their values and their types."""

    closed: _ir.ClosedJaxpr
    consts: list[Any]
    avals: list[_ir.ShapedArray]


class _FromJax:
    """Converts JAX jaxprs, nested ones first (their constants then hoisted). A nested
    jaxpr JAX shares between equations is converted once, and so stays shared."""

    def __init__(self, jax: ModuleType) -> None:
        self.jax = jax
        from jax.extend import core as jcore

        self.jcore = jcore
        # Converted nested jaxprs by the identity of JAX's jaxpr and constants (each entry
        # keeps JAX's object alive, so that the ids stay theirs).
        self._subs: dict[tuple[int, ...], tuple[_Sub, Any]] = {}

    def aval(self, aval: Any) -> _ir.ShapedArray:
        return _aval_from_jax(self.jax, aval)

    def closed(self, closed: Any) -> tuple[_ir.Jaxpr, list[Any]]:
        """A JAX ClosedJaxpr (or open Jaxpr without constvars) as a ferrax jaxpr and the
        values of its constvars."""
        if isinstance(closed, self.jcore.Jaxpr):
            if closed.constvars:
                raise InteropError("a nested JAX Jaxpr has constvars but no constants")
            jaxpr, consts = closed, []
        else:
            jaxpr, consts = closed.jaxpr, list(closed.consts)
        scope = _Scope()
        b = scope.builder
        env: dict[Any, _ir.Var | _ir.Literal] = {}
        for v, c in zip(jaxpr.constvars, consts):
            aval = self.aval(v.aval)
            env[v] = scope.constvar(_const_from_jax(self.jax, c, aval), aval)
        for v in jaxpr.invars:
            env[v] = b.add_invar(self.aval(v.aval))

        def atom(x: Any) -> _ir.Var | _ir.Literal:
            if isinstance(x, self.jcore.Literal):
                aval = self.aval(x.aval)
                if aval.shape == () and not dtypes.is_key(aval.dtype):
                    return b.literal(_literal_value(x.val), aval.dtype, aval.weak_type)
                return scope.constvar(_const_from_jax(self.jax, x.val, aval), aval)
            return env[x]

        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name not in _FROM_JAX_RULES:
                _interop_name("from_jax", name)
            inputs = [atom(x) for x in eqn.invars]
            rule: _FromJaxRule = _FROM_JAX_RULES.get(name, _FromJax.generic)
            prim, inputs, params = rule(self, eqn, inputs, scope)
            outs = b.add_eqn(prim, inputs, params)
            env.update(zip(eqn.outvars, outs))
        return b.build([atom(x) for x in jaxpr.outvars]), scope.const_values

    def sub(self, closed: Any) -> _Sub:
        """A nested jaxpr, converted once however many equations hold it."""
        if isinstance(closed, self.jcore.Jaxpr):
            key: tuple[int, ...] = (id(closed),)
        else:
            key = (id(closed.jaxpr), *map(id, closed.consts))
        hit = self._subs.get(key)
        if hit is not None:
            return hit[0]
        jaxpr, consts = self.closed(closed)
        avals = [v.aval for v in jaxpr.constvars]
        sub = _Sub(_ir.ClosedJaxpr(_ir.consts_to_invars(jaxpr) if consts else jaxpr, []), consts, avals)
        self._subs[key] = (sub, closed)
        return sub

    # -- params

    def generic(self, eqn: Any, inputs: list[_ir.Var | _ir.Literal], scope: _Scope) -> _Converted:
        name = eqn.primitive.name
        only_jax = _JAX_ONLY_PARAMS.get(name, {})
        params: dict[str, Any] = {}
        for k, v in eqn.params.items():
            if k in only_jax:
                if v != only_jax[k]:
                    raise InteropError(f"'{name}' with {k}={v} has no ferrax counterpart")
                continue
            params[k] = self.param(name, k, v)
        return eqn.primitive.name, inputs, params

    def param(self, prim: str, key: str, value: Any) -> Any:
        if key == "precision":
            from ferrax._lax.convolution import _precision

            return _precision(value)
        if key == "impl":  # a PRNG implementation: ferrax names it as JAX prints it
            return str(value)
        if key == "select_prim":
            return value.name
        if isinstance(value, (self.jcore.Jaxpr, self.jcore.ClosedJaxpr)):
            sub = self.sub(value)
            if sub.consts:
                raise InteropError(f"the {key} of '{prim}' closes over constants, which ferrax cannot hold there")
            return sub.closed
        return value

    def hoist(self, sub: _Sub, scope: _Scope) -> list[_ir.Var]:
        """Constvars of the jaxpr being built holding a nested jaxpr's constants."""
        return [scope.constvar(c, a) for c, a in zip(sub.consts, sub.avals)]

    # -- rules of the primitives holding jaxprs, and of those ferrax spells otherwise

    def empty(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        # JAX's `empty2` (a scalar whose value does not matter: JAX's reverse mode of
        # `cond` fills the residuals a branch does not make with it) is a zero.
        aval = self.aval(eqn.outvars[0].aval)
        zero = scope.builder.literal(False if aval.dtype == np.bool_ else 0, aval.dtype)
        return "broadcast_in_dim", [zero], {"shape": (), "broadcast_dimensions": ()}

    def jit(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        sub = self.sub(eqn.params["jaxpr"])
        return "jit", [*self.hoist(sub, scope), *inputs], {"jaxpr": sub.closed, "name": eqn.params["name"]}

    def custom_jvp(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        p = eqn.params
        sub = self.sub(p["call_jaxpr"])
        num_consts = p["num_consts"]
        in_avals = [self.aval(v.aval) for v in eqn.invars[num_consts:]]
        params = {
            "name": p["call_jaxpr"].jaxpr.debug_info.func_name,
            "call_jaxpr": sub.closed,
            "jvp": _JaxJvpRule(p["jvp_jaxpr_fun"], in_avals),
            "num_consts": num_consts + len(sub.consts),
            "symbolic_zeros": p["symbolic_zeros"],
        }
        return eqn.primitive.name, [*self.hoist(sub, scope), *inputs], params

    def custom_vjp(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        p = eqn.params
        sub = self.sub(p["call_jaxpr"])
        num_consts = p["num_consts"]
        in_avals = [self.aval(v.aval) for v in eqn.invars[num_consts:]]
        rules = _JaxVjpRules(p["fwd_jaxpr_thunk"], p["bwd"], p["out_trees"], num_consts, in_avals)
        params = {
            "name": p["call_jaxpr"].jaxpr.debug_info.func_name,
            "call_jaxpr": sub.closed,
            "fwd": rules.fwd,
            "bwd": rules.bwd,
            "num_consts": num_consts + len(sub.consts),
            "symbolic_zeros": p["symbolic_zeros"],
        }
        return eqn.primitive.name, [*self.hoist(sub, scope), *inputs], params

    def remat(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        sub = self.sub(eqn.params["jaxpr"])
        params = {k: v for k, v in eqn.params.items() if k != "jaxpr"}
        return "remat2", [*self.hoist(sub, scope), *inputs], {**params, "jaxpr": sub.closed}

    def scan(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        p = eqn.params
        sub = self.sub(p["jaxpr"])
        params = {k: self.param("scan", k, v) for k, v in p.items() if k != "jaxpr"}
        params.update(jaxpr=sub.closed, num_consts=p["num_consts"] + len(sub.consts))
        return eqn.primitive.name, [*self.hoist(sub, scope), *inputs], params

    def while_(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        p = eqn.params
        cond, body = self.sub(p["cond_jaxpr"]), self.sub(p["body_jaxpr"])
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        operands = [
            *self.hoist(cond, scope), *inputs[:nc], *self.hoist(body, scope), *inputs[nc : nc + nb], *inputs[nc + nb :]
        ]
        params = {
            "cond_jaxpr": cond.closed,
            "body_jaxpr": body.closed,
            "cond_nconsts": nc + len(cond.consts),
            "body_nconsts": nb + len(body.consts),
        }
        return "while", operands, params

    def cond(self, eqn: Any, inputs: list[Any], scope: _Scope) -> _Converted:
        subs = [self.sub(br) for br in eqn.params["branches"]]
        hoisted = [v for sub in subs for v in self.hoist(sub, scope)]
        if not hoisted:
            return "cond", inputs, {"branches": tuple(sub.closed for sub in subs)}
        # Every branch takes every branch's constants (each using its own), then the operands.
        all_avals = [a for sub in subs for a in sub.avals]
        branches = []
        start = 0
        for sub in subs:
            jaxpr, k = sub.closed.jaxpr, len(sub.consts)
            n_ops = len(jaxpr.invars) - k
            positions = [*range(start, start + k), *range(len(all_avals), len(all_avals) + n_ops)]
            padded = _with_invars(jaxpr, [*all_avals, *jaxpr.in_avals[k:]], positions)
            branches.append(_ir.ClosedJaxpr(padded, []))
            start += k
        return "cond", [inputs[0], *hoisted, *inputs[1:]], {"branches": tuple(branches)}


_FromJaxRule = Callable[[_FromJax, Any, list[Any], _Scope], _Converted]
_FROM_JAX_RULES: dict[str, _FromJaxRule] = {
    "jit": _FromJax.jit,
    "custom_jvp_call": _FromJax.custom_jvp,
    "custom_vjp_call": _FromJax.custom_vjp,
    "remat2": _FromJax.remat,
    "scan": _FromJax.scan,
    "while": _FromJax.while_,
    "cond": _FromJax.cond,
    "empty2": _FromJax.empty,
}


def _with_invars(jaxpr: _ir.Jaxpr, avals: Sequence[_ir.ShapedArray], positions: Sequence[int]) -> _ir.Jaxpr:
    """``jaxpr`` (no constvars) taking inputs of types ``avals``, its own input ``i``
    being input ``positions[i]`` (the others unused)."""
    b = _ir.JaxprBuilder()
    new = [b.add_invar(a) for a in avals]
    env: dict[_ir.Var, _ir.Var | _ir.Literal] = {v: new[p] for v, p in zip(jaxpr.invars, positions)}

    def read(a: _ir.Var | _ir.Literal) -> _ir.Var | _ir.Literal:
        return a if isinstance(a, _ir.Literal) else env[a]

    for eqn in jaxpr.eqns:
        outs = b.add_eqn(eqn.primitive, [read(a) for a in eqn.inputs], eqn.params)
        env.update(zip(eqn.outvars, outs))
    return b.build([read(a) for a in jaxpr.outvars])


# ------------------------------------------------------- JAX's custom rules in ferrax


def _eval(closed: _ir.ClosedJaxpr, args: Sequence[Any]) -> list[Any]:
    from ferrax._jit import eval_jaxpr

    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _differentiable(aval: _ir.ShapedArray) -> bool:
    from ferrax._interpreters import ad

    return not dtypes.is_key(aval.dtype) and ad.is_differentiable(aval.dtype)


class _JaxJvpRule:
    """A ``custom_jvp_call``'s rule as ferrax calls it (``rule(primals, tangents)``): JAX
    traces the user's rule (once) with the tangents of non-float inputs known zero; the
    converted jaxpr then runs in ferrax."""

    def __init__(self, jvp_jaxpr_fun: Any, in_avals: list[_ir.ShapedArray]) -> None:
        self.fun = jvp_jaxpr_fun
        self.in_avals = in_avals
        self.__name__ = _fun_name(jvp_jaxpr_fun, "jvp")
        self._lock = threading.Lock()
        self._converted: tuple[_ir.ClosedJaxpr, list[bool]] | None = None

    def converted(self) -> tuple[_ir.ClosedJaxpr, list[bool]]:
        with self._lock:
            if self._converted is None:
                zeros = [not _differentiable(a) for a in self.in_avals]
                jaxpr, consts, out_zeros = self.fun.call_wrapped(*zeros)
                from jax.extend import core as jcore

                self._converted = from_jax(jcore.ClosedJaxpr(jaxpr, consts)), list(out_zeros)
            return self._converted

    def __call__(self, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        from ferrax._core import aval_of
        from ferrax._interpreters import ad

        closed, out_zeros = self.converted()
        nonzero = [t for t, a in zip(tangents, self.in_avals) if _differentiable(a)]
        outs = _eval(closed, [*primals, *nonzero])
        n = len(out_zeros)
        primals_out, rest = outs[:n], iter(outs[n:])
        tangents_out = [ad.instantiate(ad.Zero(aval_of(p))) if z else next(rest) for p, z in zip(primals_out, out_zeros)]
        return primals_out, tangents_out


class _JaxVjpRules:
    """A ``custom_vjp_call``'s ``fwd`` and ``bwd`` as ferrax calls them, from JAX's: the
    forward jaxpr JAX traces (once) converted and run in ferrax; the backward function
    traced by JAX at the residuals' and cotangents' types, converted, run in ferrax."""

    def __init__(self, fwd_jaxpr_thunk: Any, bwd_fun: Any, out_trees: Callable[[], Any], num_consts: int,
                 in_avals: list[_ir.ShapedArray]) -> None:
        self.thunk, self.bwd_fun, self.out_trees = fwd_jaxpr_thunk, bwd_fun, out_trees
        self.num_consts, self.in_avals = num_consts, in_avals
        self._lock = threading.Lock()
        self._fwd: tuple[_ir.ClosedJaxpr, list[int | None], int] | None = None
        # Traced backward functions by the residuals' and cotangents' types.
        self._bwd: dict[tuple[tuple[_ir.ShapedArray, ...], ...], tuple[_ir.ClosedJaxpr, list[bool]]] = {}

        def fwd(*primals: Any) -> tuple[list[Any], tuple[Any, ...]]:
            return self.run_fwd(primals)

        def bwd(res: tuple[Any, ...], cts: Sequence[Any]) -> list[Any]:
            return self.run_bwd(res, cts)

        fwd.__name__ = _fun_name(fwd_jaxpr_thunk, "fwd")
        bwd.__name__ = _fun_name(bwd_fun, "bwd")
        self.fwd, self.bwd = fwd, bwd

    def forward(self) -> tuple[_ir.ClosedJaxpr, list[int | None], int]:
        with self._lock:
            if self._fwd is None:
                from jax.extend import core as jcore

                nonzeros = [_differentiable(a) for a in self.in_avals]
                jaxpr, consts = self.thunk.call_wrapped(*nonzeros)
                _, res_tree, input_fwds = self.out_trees()
                fwds = [None if f is None else f - self.num_consts for f in input_fwds]
                n_res_out = res_tree.num_leaves - sum(f is not None for f in fwds)
                self._fwd = from_jax(jcore.ClosedJaxpr(jaxpr, consts)), fwds, n_res_out
            return self._fwd

    def run_fwd(self, primals: Sequence[Any]) -> tuple[list[Any], tuple[Any, ...]]:
        closed, fwds, n_res_out = self.forward()
        outs = _eval(closed, primals)
        res_out = iter(outs[:n_res_out])
        res = tuple(next(res_out) if f is None else primals[f] for f in fwds)
        return outs[n_res_out:], res

    def backward(self, res_avals: tuple[_ir.ShapedArray, ...], out_avals: list[_ir.ShapedArray]) -> tuple[_ir.ClosedJaxpr, list[bool]]:
        key = (res_avals, tuple(out_avals))
        with self._lock:
            hit = self._bwd.get(key)
            if hit is not None:
                return hit
        jax = _import_jax()
        from jax.interpreters.ad import Zero

        float0 = jax.dtypes.float0
        diff_out = [_differentiable(a) for a in out_avals]
        kept: list[bool] = []

        def bwd(*args: Any) -> list[Any]:
            res, cts_iter = args[: len(res_avals)], iter(args[len(res_avals) :])
            cts = [next(cts_iter) if d else np.zeros(a.shape, float0) for a, d in zip(out_avals, diff_out)]
            got = self.bwd_fun.call_wrapped(*res, *cts)
            kept[:] = [
                _differentiable(a) and not isinstance(g, Zero) and g is not None
                and getattr(g, "dtype", None) != float0
                for g, a in zip(got, self.in_avals)
            ]
            return [g for g, k in zip(got, kept) if k]

        ct_avals = [a.update(weak_type=False) for a, d in zip(out_avals, diff_out) if d]
        sds = [_aval_to_jax(jax, a) for a in [*res_avals, *ct_avals]]
        closed = from_jax(jax.make_jaxpr(bwd)(*sds))
        with self._lock:
            self._bwd[key] = (closed, list(kept))
        return closed, list(kept)

    def run_bwd(self, res: tuple[Any, ...], cts: Sequence[Any]) -> list[Any]:
        from ferrax._core import aval_of

        res_avals = tuple(aval_of(r) for r in res)
        out_avals = [aval_of(c) for c in cts]
        closed, kept = self.backward(res_avals, out_avals)
        diff_cts = [c for c, a in zip(cts, out_avals) if _differentiable(a)]
        got = iter(_eval(closed, [*res, *diff_cts]))
        return [next(got) if k else None for k in kept]


def _fun_name(fun: Any, default: str) -> str:
    """The name of the user's function a JAX ``WrappedFun`` wraps (as JAX prints it)."""
    name = getattr(getattr(fun, "debug_info", None), "func_name", None)
    return name if isinstance(name, str) else default


# --------------------------------------------------------------------------- to_jax


def to_jax(closed_jaxpr: _ir.ClosedJaxpr) -> Callable[..., list[Any]]:
    """A function evaluating ``closed_jaxpr`` with JAX: called with one JAX (or NumPy)
    array per input, it returns the list of outputs, binding JAX's primitives, so it runs
    eagerly and under ``jax.jit``, ``jax.grad``, ``jax.vmap`` and JAX's other
    transformations (as far as the primitives allow, as in JAX).

    ``custom_jvp_call`` and ``custom_vjp_call`` become ``jax.custom_jvp`` /
    ``jax.custom_vjp`` whose rules are the equation's (ferrax traces them when JAX first
    needs them). Raises :class:`UnsupportedPrimitiveError` for a primitive JAX has no
    counterpart of (an extension primitive, ferrax's ``custom_lin``) or interop does not
    carry (callbacks, SPMD), :class:`InteropError` for a constant without a value (a
    jaxpr read from text) and, when called, for arguments not of the jaxpr's types.
    """
    if not isinstance(closed_jaxpr, _ir.ClosedJaxpr):
        raise InteropError(f"to_jax takes a ferrax ClosedJaxpr, got {type(closed_jaxpr).__name__}")
    jax = _import_jax()
    runner = _ToJax(jax)
    runner.check(closed_jaxpr.jaxpr)
    jaxpr = closed_jaxpr.jaxpr
    consts = runner.consts(closed_jaxpr)
    in_avals = closed_jaxpr.in_avals

    def run(*args: Any) -> list[Any]:
        if len(args) != len(in_avals):
            raise InteropError(f"the jaxpr takes {len(in_avals)} arguments, got {len(args)}")
        for i, (x, aval) in enumerate(zip(args, in_avals)):
            got = _aval_from_jax(jax, jax.typeof(x))
            if got.shape != aval.shape or got.dtype != aval.dtype:
                raise InteropError(
                    f"argument {i} is {got.str_short()}, the jaxpr takes {aval.str_short()}"
                )
        return runner.eval(jaxpr, consts, args)

    run.__name__ = run.__qualname__ = "ferrax_jaxpr"
    return run


@functools.cache
def _jax_primitives(jax: ModuleType) -> dict[str, Any]:
    """JAX's primitives by name: those of the modules of JAX's that define them."""
    for public in ("jax.lax", "jax.lax.linalg", "jax.numpy", "jax.random", "jax.nn", "jax.scipy.special"):
        importlib.import_module(public)
    from jax.extend import core as jcore

    found: dict[str, Any] = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("jax") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, jcore.Primitive):
                found.setdefault(value.name, value)
    return found


def _rule_name(rule: Any) -> str:
    name = rule if isinstance(rule, str) else getattr(rule, "__name__", None)
    return name if isinstance(name, str) else type(rule).__name__


_PRECISION_NAME = re.compile(r"[A-Za-z_0-9]+")


class _ToJax:
    """Evaluates ferrax jaxprs by binding JAX's primitives; nested jaxprs are traced by
    JAX once per callable (kept by the ferrax jaxpr they come from)."""

    def __init__(self, jax: ModuleType) -> None:
        self.jax = jax
        self.prims = _jax_primitives(jax)
        self._closed: dict[_ir.ClosedJaxpr, Any] = {}
        self._jitted: dict[_ir.ClosedJaxpr, Callable[..., Any]] = {}
        # Traced rules by the rule's id and the types, each with its rule (kept alive, so
        # that its id stays its own).
        self._rules: dict[tuple[int, tuple[_ir.ShapedArray, ...]], tuple[tuple[_ir.ClosedJaxpr, int, list[bool]], Any]] = {}
        self._threefry: Any = None
        self._combiners: dict[tuple[str, np.dtype[Any]], Any] = {}
        self._lock = threading.Lock()

    # -- checking before running

    def check(self, jaxpr: _ir.Jaxpr, seen: set[_ir.Jaxpr] | None = None) -> None:
        """Raises for a primitive (at any depth) JAX has no counterpart of."""
        seen = set() if seen is None else seen
        if jaxpr in seen:
            return
        seen.add(jaxpr)
        for eqn in jaxpr.eqns:
            name = eqn.primitive
            _interop_name("to_jax", name)
            if name not in _TO_JAX_RULES:
                self.prim(name)
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple) else (value,):
                    if isinstance(sub, _ir.ClosedJaxpr):
                        self.check(sub.jaxpr, seen)

    def consts(self, closed: _ir.ClosedJaxpr) -> list[Any]:
        return [_const_to_jax(self.jax, c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]

    # -- evaluation

    def eval(self, jaxpr: _ir.Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        env: dict[_ir.Var, Any] = {}
        for v, x in zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]):
            env[v] = x

        def read(a: _ir.Var | _ir.Literal) -> Any:
            if isinstance(a, _ir.Literal):
                return self.literal(a)
            return env[a]

        for eqn in jaxpr.eqns:
            ins = [read(a) for a in eqn.inputs]
            rule = _TO_JAX_RULES.get(eqn.primitive)
            if rule is not None:
                outs = rule(self, eqn, ins)
            else:
                prim = self.prim(eqn.primitive)
                params = self.params(eqn.primitive, eqn.params)
                if eqn.primitive.startswith("scatter"):
                    params["update_jaxpr"] = self.scatter_combiner(eqn.primitive, eqn.inputs[0].aval.dtype)
                out = prim.bind(*ins, **params)
                outs = list(out) if prim.multiple_results else [out]
            env.update(zip(eqn.outvars, outs))
        return [read(a) for a in jaxpr.outvars]

    def literal(self, literal: _ir.Literal) -> Any:
        """A literal as JAX's: weakly typed ones as JAX's own weak scalars (a weak
        operand can make an equation differ: ``convert_element_type`` of a strong value
        to its own type is dropped)."""
        aval = literal.aval
        if not aval.weak_type:
            return np.asarray(literal.val, dtype=aval.dtype)[()]
        from jax._src.literals import TypedFloat, TypedInt

        if isinstance(literal.val, float):
            return TypedFloat(literal.val, aval.dtype)
        return TypedInt(int(literal.val), aval.dtype)

    def closed(self, closed: _ir.ClosedJaxpr) -> Any:
        """The nested jaxpr as JAX's ClosedJaxpr (traced by JAX once)."""
        with self._lock:
            hit = self._closed.get(closed)
        if hit is not None:
            return hit
        consts = self.consts(closed)

        def body(*xs: Any) -> list[Any]:
            return self.eval(closed.jaxpr, consts, xs)

        traced = self.jax.make_jaxpr(body)(*[_aval_to_jax(self.jax, a) for a in closed.in_avals])
        with self._lock:
            self._closed[closed] = traced
        return traced

    # -- params

    def params(self, prim: str, params: dict[str, Any]) -> dict[str, Any]:
        out = {k: self.param(prim, k, v) for k, v in params.items() if k not in _JAX_LACKS.get(prim, ())}
        for k, v in _JAX_DEFAULTS.get(prim, {}).items():
            out.setdefault(k, v)
        return out

    def scatter_combiner(self, prim: str, dtype: np.dtype[Any]) -> Any:
        """The ``update_jaxpr`` JAX's scatters carry (their lowering combines with it):
        two scalars to one, by the scatter's operation; ``None`` for ``scatter``."""
        if prim == "scatter":
            return None
        key = (prim, np.dtype(dtype))
        with self._lock:
            hit = self._combiners.get(key)
        if hit is None:
            name = prim.removeprefix("scatter-")
            combine, params = self.prim(name), self.params(name, {})
            scalar = self.jax.ShapeDtypeStruct((), dtype)
            hit = self.jax.make_jaxpr(lambda a, b: combine.bind(a, b, **params))(scalar, scalar).jaxpr
            with self._lock:
                self._combiners[key] = hit
        return hit

    def prim(self, name: str) -> Any:
        """JAX's primitive called ``name``."""
        found = self.prims.get(name)
        if found is None:
            raise UnsupportedPrimitiveError(name, "has no JAX primitive of that name")
        return found

    def param(self, prim: str, key: str, value: Any) -> Any:
        lax = self.jax.lax
        if key == "precision":
            if value is None:
                return None
            names = [n for n in _PRECISION_NAME.findall(str(value)) if n != "Precision"]
            return tuple(lax.Precision(n.lower()) if n.islower() else lax.Precision[n] for n in (names * 2)[:2])
        if key == "mode" and value is not None:
            name = getattr(value, "name", None) or str(value).rsplit(".", 1)[-1]
            return lax.GatherScatterMode[name]
        if key == "dimension_numbers" and prim != "dot_general":
            cls = {"gather": lax.GatherDimensionNumbers, "conv_general_dilated": lax.ConvDimensionNumbers}.get(
                prim, lax.ScatterDimensionNumbers
            )
            fields = cls._fields
            if isinstance(value, dict):
                return cls(**{f: tuple(value[f]) for f in fields})
            return cls(**{f: tuple(getattr(value, f)) for f in fields})
        if key == "impl":
            return self.prng_impl(value)
        if key == "select_prim":
            return self.prim(value)
        if key == "rounding_method":
            return lax.RoundingMethod(int(value))
        if key == "jaxpr" and isinstance(value, _ir.ClosedJaxpr):  # reduce_window's
            traced = self.closed(value)
            return traced.jaxpr if not traced.consts else traced
        if key in ("sharding", "out_sharding", "accuracy") and value is not None:
            raise InteropError(f"'{prim}' with {key}={value} has no JAX counterpart through interop")
        return value

    def prng_impl(self, name: str) -> Any:
        if name != "fry":
            raise InteropError(f"PRNG implementation '{name}' has no JAX counterpart through interop (only fry)")
        if self._threefry is None:
            # JAX's threefry implementation object, as its own random_seed equation holds it.
            self._threefry = self.jax.make_jaxpr(lambda: self.jax.random.key(0))().jaxpr.eqns[0].params["impl"]
        return self._threefry

    # -- primitives holding jaxprs

    def jit(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        closed: _ir.ClosedJaxpr = eqn.params["jaxpr"]
        with self._lock:
            fn = self._jitted.get(closed)
        if fn is None:
            consts = self.consts(closed)

            def call(*xs: Any) -> list[Any]:
                return self.eval(closed.jaxpr, consts, xs)

            call.__name__ = call.__qualname__ = eqn.params["name"]
            fn = self.jax.jit(call)
            with self._lock:
                self._jitted[closed] = fn
        return list(fn(*ins))

    def cond(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        branches = tuple(self.closed(b) for b in eqn.params["branches"])
        return list(self.prims["cond"].bind(*ins, branches=branches))

    def while_(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        p = eqn.params
        return list(self.prims["while"].bind(
            *ins, cond_jaxpr=self.closed(p["cond_jaxpr"]), body_jaxpr=self.closed(p["body_jaxpr"]),
            cond_nconsts=p["cond_nconsts"], body_nconsts=p["body_nconsts"],
        ))

    def scan(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        p = eqn.params
        unroll = p.get("unroll", 1)
        if isinstance(unroll, bool):  # True: fully unrolled, as lax.scan reads it
            unroll = p["length"] if unroll else 1
        return list(self.prims["scan"].bind(
            *ins, jaxpr=self.closed(p["jaxpr"]), length=p["length"], reverse=p["reverse"],
            num_consts=p["num_consts"], num_carry=p["num_carry"], unroll=unroll,
        ))

    def remat(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        p = eqn.params
        policy = self.policy(p["policy"])
        traced = self.closed(p["jaxpr"])
        if traced.consts:
            # JAX's remat2 holds an open jaxpr: jax.checkpoint closes over the constants.
            closed: _ir.ClosedJaxpr = p["jaxpr"]
            consts = self.consts(closed)

            def body(*xs: Any) -> list[Any]:
                return self.eval(closed.jaxpr, consts, xs)

            return list(self.jax.checkpoint(body, prevent_cse=p["prevent_cse"], policy=policy)(*ins))
        return list(self.prims["remat2"].bind(
            *ins, jaxpr=traced.jaxpr, prevent_cse=p["prevent_cse"], differentiated=p["differentiated"], policy=policy
        ))

    def policy(self, policy: Any) -> Any:
        if isinstance(policy, str):
            # A policy read from text is its name: JAX's policy of that name, if any
            # (the policy decides what is saved, never the values).
            found = getattr(self.jax.checkpoint_policies, policy, None)
            return found if callable(found) and policy.endswith("saveable") else None
        return policy

    def expand_dims(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        return [self.jax.lax.expand_dims(ins[0], eqn.params["dimensions"])]

    def custom_jvp(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        p = eqn.params
        nc = p.get("num_consts", 0)
        call: _ir.ClosedJaxpr = p["call_jaxpr"]
        consts, args = ins[:nc], ins[nc:]
        call_consts = self.consts(call)
        rule = p["jvp"]
        in_avals = call.in_avals[nc:]
        jax = self.jax

        def fun(*xs: Any) -> list[Any]:
            return self.eval(call.jaxpr, call_consts, [*consts, *xs])

        def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            traced, n_out, keep = self.traced_jvp_rule(rule, p["name"], in_avals)
            nonzero = [self.instantiate(t) for t, a in zip(tangents, in_avals) if _differentiable(a)]
            outs = self.eval(traced.jaxpr, self.consts(traced), [*primals, *nonzero])
            rest = iter(outs[n_out:])
            tangents_out = [
                next(rest) if k else np.zeros(np.shape(o), jax.dtypes.float0) for o, k in zip(outs[:n_out], keep)
            ]
            return outs[:n_out], tangents_out

        fun.__name__ = fun.__qualname__ = p["name"]
        jvp.__name__ = jvp.__qualname__ = _rule_name(rule)
        custom = jax.custom_jvp(fun)
        custom.defjvp(jvp, symbolic_zeros=p["symbolic_zeros"])
        return list(custom(*args))

    def instantiate(self, t: Any) -> Any:
        """A tangent as an array (JAX's symbolic zeros made zeros)."""
        if isinstance(t, self.jax.custom_derivatives.SymbolicZero):
            return self.jax.numpy.zeros(t.shape, t.dtype)
        return t

    def traced_jvp_rule(self, rule: Any, name: str, in_avals: list[_ir.ShapedArray]) -> tuple[_ir.ClosedJaxpr, int, list[bool]]:
        """ferrax's ``rule(primals, tangents)`` traced by ferrax at these types: primals
        and non-zero tangents in, primals and float outputs' tangents out."""
        if isinstance(rule, str):
            raise InteropError(
                f"custom_jvp_call '{name}' was read from text: its rule is only a name and cannot be differentiated"
            )
        key = (id(rule), tuple(in_avals))
        with self._lock:
            hit = self._rules.get(key)
        if hit is not None:
            return hit[0]
        from ferrax._core import aval_of
        from ferrax._interpreters import ad

        diff = [_differentiable(a) for a in in_avals]
        tangent_avals = [a.update(weak_type=False) for a, d in zip(in_avals, diff) if d]
        n = len(in_avals)
        keep: list[bool] = []

        def flat(*xs: Any) -> list[Any]:
            rest = iter(xs[n:])
            tangents = [next(rest) if d else ad.zeros_float0(a) for a, d in zip(in_avals, diff)]
            p_out, t_out = rule(list(xs[:n]), tangents)
            p_out, t_out = list(p_out), list(t_out)
            keep[:] = [_differentiable(aval_of(o)) for o in p_out]
            return [*p_out, *(ad.instantiate(t) for t, k in zip(t_out, keep) if k)]

        traced = _trace(flat, [*in_avals, *tangent_avals])
        self.check(traced.jaxpr)
        result = (traced, len(keep), list(keep))
        with self._lock:
            self._rules[key] = (result, rule)
        return result

    def custom_vjp(self, eqn: _ir.JaxprEqn, ins: list[Any]) -> list[Any]:
        p = eqn.params
        nc = p.get("num_consts", 0)
        call: _ir.ClosedJaxpr = p["call_jaxpr"]
        consts, args = ins[:nc], ins[nc:]
        call_consts = self.consts(call)
        fwd_rule, bwd_rule = p["fwd"], p["bwd"]
        in_avals = call.in_avals[nc:]
        out_avals = call.out_avals
        symbolic = p["symbolic_zeros"]
        jax = self.jax
        if isinstance(fwd_rule, str) or isinstance(bwd_rule, str):
            fwd_rule = bwd_rule = None

        def fun(*xs: Any) -> list[Any]:
            return self.eval(call.jaxpr, call_consts, [*consts, *xs])

        state: dict[str, Any] = {}

        def fwd(*primals: Any) -> tuple[list[Any], tuple[Any, ...]]:
            if fwd_rule is None:
                raise InteropError(
                    f"custom_vjp_call '{p['name']}' was read from text: its rules are only names and cannot be differentiated"
                )
            if symbolic:
                primals = tuple(x.value for x in primals)
            traced, n_out, res_tree = self.traced_fwd(fwd_rule, in_avals)
            state["res_tree"], state["res_avals"] = res_tree, traced.out_avals[n_out:]
            outs = self.eval(traced.jaxpr, self.consts(traced), primals)
            return outs[:n_out], tuple(outs[n_out:])

        def bwd(res: tuple[Any, ...], cts: Sequence[Any]) -> tuple[Any, ...]:
            traced, kept = self.traced_bwd(bwd_rule, state["res_tree"], state["res_avals"], out_avals, in_avals)
            nonzero = [self.instantiate(c) for c, a in zip(cts, out_avals) if _differentiable(a)]
            got = iter(self.eval(traced.jaxpr, self.consts(traced), [*res, *nonzero]))
            return tuple(next(got) if k else None for k in kept)

        fun.__name__ = fun.__qualname__ = p["name"]
        fwd.__name__ = fwd.__qualname__ = _rule_name(p["fwd"])
        bwd.__name__ = bwd.__qualname__ = _rule_name(p["bwd"])
        custom = jax.custom_vjp(fun)
        custom.defvjp(fwd, bwd, symbolic_zeros=symbolic)
        return list(custom(*args))

    def traced_fwd(self, rule: Any, in_avals: list[_ir.ShapedArray]) -> tuple[_ir.ClosedJaxpr, int, Any]:
        """ferrax's ``fwd(*primals) -> (outputs, residuals)`` traced: primals in, outputs
        then residual leaves out."""
        from ferrax.tree_util import tree_flatten

        layout: list[Any] = []

        def flat(*xs: Any) -> list[Any]:
            out, res = rule(*xs)
            leaves, tree = tree_flatten(res)
            layout[:] = [len(out), tree]
            return [*out, *leaves]

        traced = _trace(flat, in_avals)
        self.check(traced.jaxpr)
        return traced, layout[0], layout[1]

    def traced_bwd(self, rule: Any, res_tree: Any, res_avals: list[_ir.ShapedArray], out_avals: list[_ir.ShapedArray],
                   in_avals: list[_ir.ShapedArray]) -> tuple[_ir.ClosedJaxpr, list[bool]]:
        """ferrax's ``bwd(residuals, cotangents) -> cotangents`` traced: residual leaves
        and float outputs' cotangents in, the cotangents it gives of float inputs out."""
        from ferrax.tree_util import tree_unflatten

        diff_out = [_differentiable(a) for a in out_avals]
        ct_avals = [a.update(weak_type=False) for a, d in zip(out_avals, diff_out) if d]
        n_res = len(res_avals)
        kept: list[bool] = []

        def flat(*xs: Any) -> list[Any]:
            rest = iter(xs[n_res:])
            cts = [next(rest) if d else np.zeros(a.shape, a.dtype) for a, d in zip(out_avals, diff_out)]
            got = list(rule(tree_unflatten(res_tree, list(xs[:n_res])), cts))
            kept[:] = [g is not None and _differentiable(a) for g, a in zip(got, in_avals)]
            return [g for g, k in zip(got, kept) if k]

        traced = _trace(flat, [*res_avals, *ct_avals])
        self.check(traced.jaxpr)
        return traced, list(kept)


def _trace(fun: Callable[..., list[Any]], avals: Sequence[_ir.ShapedArray]) -> _ir.ClosedJaxpr:
    """``fun`` traced by ferrax at these types."""
    from ferrax._staging import trace_to_jaxpr
    from ferrax.tree_util import tree_structure

    closed, _ = trace_to_jaxpr(fun, list(avals), tree_structure(tuple(range(len(avals)))))
    return closed


_ToJaxRule = Callable[[_ToJax, _ir.JaxprEqn, list[Any]], list[Any]]
_TO_JAX_RULES: dict[str, _ToJaxRule] = {
    "jit": _ToJax.jit,
    "cond": _ToJax.cond,
    "while": _ToJax.while_,
    "scan": _ToJax.scan,
    "remat2": _ToJax.remat,
    "custom_jvp_call": _ToJax.custom_jvp,
    "custom_vjp_call": _ToJax.custom_vjp,
    "expand_dims": _ToJax.expand_dims,
}
