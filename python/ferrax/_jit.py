"""``jit``: trace once per signature, lower to StableHLO in Rust, compile with XLA, cache.

A jitted function called with no transformation active runs its compiled executable on
device arrays. Called while another function is being traced (``make_jaxpr``, an outer
``jit``), it stays a ``jit`` equation holding its jaxpr, which lowers to a ``func.call``.
"""

from __future__ import annotations

import functools
import inspect
import threading
import types
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

import numpy as np

from ferrax import _config, _core, _ir, dtypes
from ferrax._array import type_name
from ferrax._core import EvalTrace, Primitive, aval_of, find_top_trace, user_location
from ferrax._interpreters import ad
from ferrax._interpreters.partial_eval import partial_eval_rules, split_by_pass
from ferrax._callback import host_callable
from ferrax._runtime import DeviceArray, Executable, backend, buffer_of, compile_stablehlo
from ferrax.errors import LoweringError, ShardingError
from ferrax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding, collecting_meshes, note_mesh
from ferrax._staging import trace_to_jaxpr
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_structure, tree_unflatten


def _fun_name(fun: Any) -> str:
    """The name a jit of ``fun`` stages, as JAX's: ``__name__``, a
    ``functools.partial``'s function's, else ``<unnamed function>``."""
    name = getattr(fun, "__name__", None)
    if isinstance(name, str):
        return name
    if isinstance(fun, functools.partial):
        return _fun_name(fun.func)
    return "<unnamed function>"

__all__ = ["Compiled", "Jitted", "Lowered", "Traced", "eval_jaxpr", "jit", "jit_p"]

P = ParamSpec("P")
R = TypeVar("R")

jit_p = Primitive.builtin("jit", multiple_results=True)

_MISS = object()


@jit_p.def_impl
def _jit_impl(*args: Any, jaxpr: _ir.ClosedJaxpr, name: str = "jit") -> list[Any]:
    # A jit equation run eagerly (what vmap, jvp and reverse mode leave of a jitted call
    # when no trace is left above it) is compiled by XLA, as JAX compiles a pjit equation:
    # the values are XLA's, not the reference rules'. Executables are kept by the call's
    # text, so the new but equal jaxprs that partial evaluation and transposition make on
    # every call compile once. A program XLA cannot take (an extension primitive without
    # a lowering) or arguments laid out over several devices are evaluated equation by
    # equation, each equation by its own rule.
    if any(type(x) is DeviceArray and x._sharding is not None for x in args):
        return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
    exe = _eager_executable(jaxpr, name)
    if exe is None:
        return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)
    buffers = [buffer_of(c, aval_of(c)) for c in jaxpr.consts]
    buffers += [buffer_of(x, a) for x, a in zip(args, jaxpr.jaxpr.in_avals)]
    return list(exe(buffers))


_EAGER_CACHE_SIZE = 256
_eager_executables: dict[tuple[Any, ...], Executable | None] = {}
_eager_lock = threading.Lock()


def _eager_executable(closed: _ir.ClosedJaxpr, name: str) -> Executable | None:
    """The compiled program of a jit equation (None: XLA cannot take it)."""
    jaxpr = closed.jaxpr
    hoisted = _ir.consts_to_invars(jaxpr) if jaxpr.constvars else jaxpr
    out_avals = jaxpr.out_avals
    printed = str(hoisted)
    key: tuple[Any, ...] = (printed, name, tuple(a.weak_type for a in out_avals), _config.x64_enabled())
    lowered = None
    try:
        if "callback=" in printed:
            # Host callbacks print by name only: the callables themselves are in the key
            # (and kept alive by the cached entry, so their ids stay theirs).
            lowered = _ir.lower_with_callbacks(hoisted, f"jit_{name}")
            key += tuple((id(c), c) for c, _ in lowered[1])
        hit = _eager_executables.get(key, _MISS)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        text, callbacks = lowered if lowered is not None else _ir.lower_with_callbacks(hoisted, f"jit_{name}")
    except LoweringError as e:
        if "has no StableHLO lowering" not in str(e):
            raise
        exe = None  # an extension primitive: its own eager rule runs it
    else:
        exe = compile_stablehlo(text, out_avals, host_callbacks=[host_callable(c, t) for c, t in callbacks])
    with _eager_lock:  # threads may compile at once; eviction must not race
        if len(_eager_executables) >= _EAGER_CACHE_SIZE:
            _eager_executables.pop(next(iter(_eager_executables)), None)
        _eager_executables[key] = exe
    return exe


def _jit_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, jaxpr: _ir.ClosedJaxpr, name: str = "jit") -> tuple[list[Any], list[Any]]:
    # The call's jaxpr differentiated, still one call.
    return ad.call_jvp(jit_p, primals, tangents, jaxpr, name=name)


jit_p.def_jvp(_jit_jvp)
# With some operands known and others not (reverse mode), the call splits in two.
partial_eval_rules["jit"] = split_by_pass


def _jit_batch(vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, jaxpr: _ir.ClosedJaxpr, name: str = "jit") -> tuple[list[Any], list[int | None]]:
    # The call's jaxpr vectorized, still one call: batched operands and outputs with their
    # batch axis first; outputs that do not depend on a batched operand stay unbatched.
    from ferrax._interpreters import batching

    closed, out_batched = batching.batch_jaxpr(jaxpr, axis_size, [d is not None for d in dims], False)
    body, consts = ad.hoist_consts(closed)
    outs = jit_p.bind(*consts, *batching.at_front(vals, dims), jaxpr=body, name=name)
    return list(outs), [0 if b else None for b in out_batched]


jit_p.def_batch(_jit_batch)


def eval_jaxpr(jaxpr: _ir.Jaxpr, consts: Sequence[Any], *args: Any) -> list[Any]:
    """Evaluates a jaxpr by binding its equations' primitives, so it runs under whatever
    transformation is active (eagerly when none is)."""
    from ferrax._lax.registry import primitive_named
    from ferrax._core import ConcreteArray, bind

    import numpy as np

    if len(consts) != len(jaxpr.constvars) or len(args) != len(jaxpr.invars):
        raise TypeError(
            f"the jaxpr takes {len(jaxpr.constvars)} constants and {len(jaxpr.invars)} arguments, "
            f"got {len(consts)} and {len(args)}"
        )
    from ferrax._core import KeyValue

    env: dict[_ir.Var, Any] = {}
    for v, x in zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]):
        if isinstance(x, np.ndarray) and dtypes.is_key(v.aval.dtype):
            # Eager rules (scan's, while's, cond's) pass keys on as their packed words.
            x = KeyValue(np.asarray(x, dtype=np.uint64))
        env[v] = x

    def read(a: _ir.Var | _ir.Literal) -> Any:
        if isinstance(a, _ir.Literal):
            aval = a.aval
            return ConcreteArray(np.asarray(a.val, dtype=aval.dtype), aval.weak_type)
        return env[a]

    for eqn in jaxpr.eqns:
        prim = primitive_named(eqn.primitive)
        outs = bind(prim, [read(a) for a in eqn.inputs], eqn.params)
        if not prim.multiple_results:
            outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(a) for a in jaxpr.outvars]


class _Signature:
    """How a call's arguments split into static values and traced leaves."""

    __slots__ = ("static_argnums", "static_argnames")

    def __init__(self, static_argnums: tuple[int, ...], static_argnames: tuple[str, ...]) -> None:
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames

    def split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], PyTreeDef, Hashable, Callable[..., Any]]:
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        statics: list[tuple[Any, Any]] = []
        for i in sorted(static_pos):
            statics.append((i, _hashable(args[i], f"static argument {i}")))
        for k in self.static_argnames:
            if k in kwargs:
                statics.append((k, _hashable(kwargs[k], f"static argument '{k}'")))
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        flat, tree = tree_flatten((dyn_args, dyn_kwargs))
        key = tuple(statics)

        def rebuild(f: Callable[..., Any]) -> Callable[..., Any]:
            def call(d_args: tuple[Any, ...], d_kwargs: dict[str, Any]) -> Any:
                it = iter(d_args)
                full = [args[i] if i in static_pos else next(it) for i in range(n)]
                kw = dict(d_kwargs)
                for k in self.static_argnames:
                    if k in kwargs:
                        kw[k] = kwargs[k]
                return f(*full, **kw)

            return call

        return flat, tree, key, rebuild


def _hashable(x: Any, what: str) -> Any:
    try:
        hash(x)
    except TypeError:
        raise ValueError(f"{what} of type {type_name(x)} is not hashable, at {user_location()}") from None
    return x


class _Entry:
    """One compiled signature: the executable, the constants' buffers, the output tree."""

    __slots__ = (
        "jaxpr", "executable", "const_buffers", "out_tree", "in_avals", "text", "x64", "float0",
        "out_template", "staged", "placed", "laid_out", "meshes", "host_callbacks",
    )

    def __init__(
        self, jaxpr: _ir.ClosedJaxpr, out_tree: PyTreeDef, in_avals: list[_ir.ShapedArray],
        float0: dict[int, Any] | None = None,
    ) -> None:
        self.jaxpr = jaxpr
        self.out_tree = out_tree
        # Output leaves of dtype float0 (the tangents of integers, which hold no data): not
        # outputs of the jaxpr, put back in their places by `unflatten`.
        self.float0 = float0 or {}
        self.in_avals = in_avals
        self.executable: Executable | None = None
        self.const_buffers: list[Any] = []
        self.text: str | None = None
        # The host callbacks the lowered module calls by index (debug and pure callbacks),
        # each with whether its call passes a token (ordered ones).
        self.host_callbacks: list[tuple[Any, bool]] = []
        # The jaxpr a call staged into an outer trace holds (constants as inputs): one
        # per signature, so that calls of one jitted function share it, as in JAX.
        self.staged: _ir.ClosedJaxpr | None = None
        # Executables for calls on other devices than the default one, by layout.
        self.placed: dict[Hashable, tuple[Executable, list[Any], list[Sharding]]] = {}
        # Per placement, the arguments' shardings of a call that needed no copy: a call
        # whose arguments carry the same ones (the steady state of a loop) passes its
        # buffers as they are, without comparing layouts.
        self.laid_out: dict[Hashable, tuple[Sharding, ...]] = {}
        # The meshes the traced function uses inside (sharding constraints, shard_map).
        self.meshes: frozenset[Mesh] = frozenset()
        # The mode it was traced in: defaults and constants' dtypes depend on it.
        self.x64 = _config._x64
        # What the hit path rebuilds the outputs from (`_out_template`), made once.
        self.out_template: Any = _UNSET


def _out_template(entry: _Entry) -> Any:
    """The output tree with each leaf's index as the leaf, for the hit path to rebuild;
    ``_NO_TEMPLATE`` when the tree does not give its ints back as they went in (a
    registered class that checks or converts its leaves): the hit path then calls
    ``_unflatten``."""
    if entry.out_template is not _UNSET:
        return entry.out_template
    n = entry.out_tree.num_leaves
    template: Any = _NO_TEMPLATE
    try:
        candidate = tree_unflatten(entry.out_tree, range(n))
        leaves, tree = tree_flatten(candidate)
    except Exception:  # a registered class's unflatten refusing ints
        pass
    else:
        if tree == entry.out_tree and len(leaves) == n and all(type(x) is int and x == i for i, x in enumerate(leaves)):
            template = candidate
    entry.out_template = template
    return template


_NO_TEMPLATE = object()
_UNSET = object()


def _unflatten(entry: _Entry, outs: Sequence[Any]) -> Any:
    """The outputs of a call of ``entry`` in the function's output structure."""
    if not entry.float0:
        return tree_unflatten(entry.out_tree, outs)
    it = iter(outs)
    n = entry.out_tree.num_leaves
    return tree_unflatten(entry.out_tree, [entry.float0[i] if i in entry.float0 else next(it) for i in range(n)])


class Lowered:
    """A jitted function lowered for one signature (and layout over devices)."""

    def __init__(self, jitted: Jitted[Any, Any], entry: _Entry, placement: _Placement | None = None) -> None:
        self._jitted = jitted
        self._entry = entry
        self._placement = placement

    def as_text(self) -> str:
        """The StableHLO module (MLIR text)."""
        return self._jitted._lower(self._entry, self._placement)

    def compile(self) -> Compiled:
        """Compiles the module with XLA."""
        if self._placement is None:
            self._jitted._compile(self._entry)
        else:
            self._jitted._compile_placed(self._entry, self._placement)
        return Compiled(self._jitted, self._entry, self._placement)


class Traced:
    """A jitted function traced for one signature (``jit(f).trace(*args)``, as JAX's
    ``Traced``): its jaxpr, its output types, and :meth:`lower`."""

    def __init__(self, jitted: Jitted[Any, Any], entry: _Entry) -> None:
        self._jitted = jitted
        self._entry = entry

    @property
    def jaxpr(self) -> _ir.ClosedJaxpr:
        """The traced jaxpr, with its constants."""
        return self._entry.jaxpr

    @property
    def in_avals(self) -> list[_ir.ShapedArray]:
        """The types of the (non-static) argument leaves."""
        return list(self._entry.in_avals)

    @property
    def out_avals(self) -> list[_ir.ShapedArray]:
        """The types of the output leaves."""
        return list(self._entry.jaxpr.out_avals)

    @property
    def out_info(self) -> Any:
        """The output's types, in the output's pytree structure."""
        return _unflatten(self._entry, self.out_avals)

    @property
    def fun_name(self) -> str:
        """The traced function's name."""
        return self._jitted._name

    def lower(self) -> Lowered:
        """The lowering of this trace (its StableHLO text and compilation)."""
        return Lowered(self._jitted, self._entry)


class Compiled:
    """A compiled signature of a jitted function; callable with matching arguments."""

    def __init__(self, jitted: Jitted[Any, Any], entry: _Entry, placement: _Placement | None = None) -> None:
        self._jitted = jitted
        self._entry = entry
        self._placement = placement

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted(*args, **kwargs)

    def as_text(self) -> str:
        """The StableHLO module it was compiled from."""
        return self._jitted._lower(self._entry, self._placement)


# The hit path (``_ir.Dispatcher``, Jitted's base class) builds DeviceArrays and reads
# the trace state and x64 flag itself.
_ir.set_dispatch_runtime(device_array=DeviceArray, config=_config, trace_state=_core.trace_state())


class Jitted(_ir.Dispatcher, Generic[P, R]):
    """A function compiled with XLA for each signature it is called with.

    A call whose signature ran before (device arrays in tuples, lists, dicts, no static
    arguments, on the default device) is done by the base class in Rust, ``__call__``;
    any other call, and the first of each signature, by :meth:`_call`.
    """

    def __init__(
        self, fun: Callable[P, R], static_argnums: tuple[int, ...], static_argnames: tuple[str, ...],
        in_shardings: Any = None, out_shardings: Any = None,
    ) -> None:
        if not callable(fun):
            raise TypeError(
                f"jit expects a callable (a function to compile), got {fun!r} of type "
                f"{type_name(fun)}, at {user_location()}"
            )
        self._fun = fun
        self._signature = _Signature(static_argnums, static_argnames)
        self._cache: dict[Hashable, _Entry] = {}
        self._name = _fun_name(fun)
        self._in_shardings = in_shardings
        self._out_shardings = out_shardings
        # Whether a call may need several devices (then the hit path is off).
        self._placed = in_shardings is not None or out_shardings is not None
        self._placements: dict[Hashable, Any] = {}
        functools.update_wrapper(self, fun)

    if TYPE_CHECKING:
        # At run time, the base class's: the hit path, else `_call`.
        def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call the hit path did not take: traces and compiles a new signature, stages
        into an outer trace, places over devices, or runs what the hit path cannot."""
        flat, tree, static_key, rebuild = self._signature.split(args, kwargs)
        trace = find_top_trace(flat)
        if not isinstance(trace, EvalTrace):
            return self._stage(flat, tree, static_key, rebuild)
        entry = self._entry(flat, tree, static_key, rebuild)
        if self._placed or entry.meshes or any(type(x) is DeviceArray and x._sharding is not None for x in flat):
            # The placement depends on the signature and the arguments' layouts only.
            pkey = (id(entry), tuple(x._sharding if type(x) is DeviceArray else None for x in flat))
            placement = self._placements.get(pkey, _MISS)
            if placement is _MISS:
                placement = self._placements[pkey] = _placement(self, flat, tree, entry)
            if placement is not None:
                return self._call_placed(entry, flat, placement)
        exe = entry.executable
        if exe is None:
            self._compile(entry)
            exe = entry.executable
            assert exe is not None
        buffers = entry.const_buffers + [buffer_of(x, a) for x, a in zip(flat, entry.in_avals)]
        outs = exe(buffers)
        if self._hit_path_takes(entry, flat):
            program = exe.hit_path()
            if program is not None:
                self._register(
                    args, kwargs, flat, x64=entry.x64, consts=entry.const_buffers, program=program,
                    out_template=_out_template(entry), unflatten=functools.partial(_unflatten, entry),
                )
        return _unflatten(entry, outs)

    def _hit_path_takes(self, entry: _Entry, flat: list[Any]) -> bool:
        """Whether the hit path can repeat a call of ``entry`` on these leaves exactly:
        device arrays on the default device, no static arguments (their values are part
        of the signature), no layouts asked for, no float0 outputs to put back."""
        sig = self._signature
        return (
            not self._placed and not sig.static_argnums and not sig.static_argnames
            and not entry.meshes and not entry.float0
            and all(type(x) is DeviceArray and x._sharding is None for x in flat)
        )

    @overload
    def __get__(self, obj: None, objtype: type[Any] | None = None) -> Jitted[P, R]: ...

    @overload
    def __get__(self, obj: object, objtype: type[Any] | None = None) -> Callable[..., R]: ...

    def __get__(self, obj: object, objtype: type[Any] | None = None) -> Jitted[P, R] | Callable[..., R]:
        """As a function's: ``@jit`` on a method binds the instance as the first argument
        (traced as a pytree, or static with ``static_argnums=0``)."""
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def _entry(self, flat: list[Any], tree: PyTreeDef, static_key: Hashable, rebuild: Callable[..., Callable[..., Any]]) -> _Entry:
        avals = [_arg_aval(x, i) for i, x in enumerate(flat)]
        key = (tree, tuple(avals), static_key, _config._x64)
        entry = self._cache.get(key)
        if entry is None:
            fun = rebuild(self._fun)
            holes: dict[int, Any] = {}
            trees: list[PyTreeDef] = []

            def without_float0(*a: Any) -> list[Any]:
                leaves, out_tree = tree_flatten(fun(*a))
                trees.append(out_tree)
                kept = []
                for i, x in enumerate(leaves):
                    if isinstance(x, np.ndarray) and x.dtype == ad.float0:
                        holes[i] = x
                    else:
                        kept.append(x)
                return kept

            with collecting_meshes() as meshes:
                closed, _ = trace_to_jaxpr(without_float0, avals, tree)
            entry = _Entry(closed, trees[0], avals, holes)
            entry.meshes = frozenset(meshes)
            self._cache[key] = entry
        return entry

    def _stage(self, flat: list[Any], tree: PyTreeDef, static_key: Hashable, rebuild: Callable[..., Callable[..., Any]]) -> Any:
        entry = self._entry(flat, tree, static_key, rebuild)
        for mesh in entry.meshes:  # the enclosing trace runs on them too
            note_mesh(mesh)
        closed = entry.jaxpr
        inner = entry.staged
        if inner is None:
            inner = entry.staged = _ir.ClosedJaxpr(_ir.consts_to_invars(closed.jaxpr), [])
        if self._placed:
            # Staged into an outer trace, the layouts asked for stay requests to XLA (as
            # the shardings of JAX's pjit equation do): constraints around the call.
            ins, want_out = _requested(self, flat, tree, entry)
            flat = [_constrained(x, s) for x, s in zip(flat, ins)]
            outs = jit_p.bind(*closed.consts, *flat, jaxpr=inner, name=self._name)
            outs = [_constrained(x, s) for x, s in zip(outs, want_out)]
        else:
            outs = jit_p.bind(*closed.consts, *flat, jaxpr=inner, name=self._name)
        return _unflatten(entry, outs)

    def _lower(self, entry: _Entry, placement: _Placement | None = None) -> str:
        if placement is not None:
            return self._lower_placed(entry, placement)
        if entry.text is None:
            hoisted = _ir.consts_to_invars(entry.jaxpr.jaxpr)
            entry.text, entry.host_callbacks = _ir.lower_with_callbacks(hoisted, f"jit_{self._name}")
        return entry.text

    def _lower_placed(self, entry: _Entry, placement: _Placement) -> str:
        hoisted = _ir.consts_to_invars(entry.jaxpr.jaxpr)
        mesh = placement.mesh
        if mesh is None:
            return _ir.lower_to_stablehlo(hoisted, f"jit_{self._name}")
        n_consts = len(entry.jaxpr.consts)
        args = [()] * n_consts + [_spec_entries(s) for s in placement.in_shardings]
        results = [_spec_entries(s) for s in placement.out_shardings]
        return _ir.lower_to_stablehlo(
            hoisted, f"jit_{self._name}", mesh=mesh.shape_tuple, arg_specs=args, result_specs=results,
        )

    def _call_placed(self, entry: _Entry, flat: list[Any], placement: _Placement) -> Any:
        """A call on several devices (or one that is not the default): compiled once per
        layout of the arguments, arguments laid out as the executable expects."""
        exe, consts, arg_shardings = self._compile_placed(entry, placement)
        shardings = tuple([x._sharding if type(x) is DeviceArray else None for x in flat])
        if entry.laid_out.get(placement.key) == shardings:
            buffers = consts + [x._buffer for x in flat]
        else:
            buffers = list(consts)
            copied = False
            for i, (x, aval, want) in enumerate(zip(flat, entry.in_avals, arg_shardings)):
                b = _place(x, aval, want, i)
                copied = copied or type(x) is not DeviceArray or b is not x._buffer
                buffers.append(b)
            if not copied and None not in shardings:
                entry.laid_out[placement.key] = shardings  # type: ignore[assignment]
        return _unflatten(entry, exe(buffers))

    def _compile_placed(self, entry: _Entry, placement: _Placement) -> tuple[Executable, list[Any], list[Sharding]]:
        compiled = entry.placed.get(placement.key)
        if compiled is None:
            text = self._lower_placed(entry, placement)
            exe = compile_stablehlo(
                text, entry.jaxpr.out_avals, devices=placement.devices, mesh=placement.mesh,
                host_callbacks=_placed_callbacks(entry, placement, self._name),
            )
            ranks = [len(aval_of(c).shape) for c in entry.jaxpr.consts] + [len(a.shape) for a in entry.in_avals]
            params = exe.parameter_shardings(ranks, placement.mesh)
            n_consts = len(entry.jaxpr.consts)
            consts = [
                _place(c, aval_of(c), params[i], None) for i, c in enumerate(entry.jaxpr.consts)
            ]
            compiled = entry.placed[placement.key] = (exe, consts, params[n_consts:])
        return compiled

    def _compile(self, entry: _Entry) -> None:
        if entry.executable is not None:
            return
        text = self._lower(entry)
        executable = compile_stablehlo(
            text, entry.jaxpr.out_avals, host_callbacks=[host_callable(c, t) for c, t in entry.host_callbacks]
        )
        # The buffers before the executable: another thread may call the entry as soon
        # as its executable is set.
        entry.const_buffers = [buffer_of(c, aval_of(c)) for c in entry.jaxpr.consts]
        entry.executable = executable

    def lower(self, *args: P.args, **kwargs: P.kwargs) -> Lowered:
        """Traces for these arguments' signature; the result gives the StableHLO text
        (with the layouts over devices, when the call has some)."""
        flat, tree, static_key, rebuild = self._signature.split(tuple(args), dict(kwargs))
        entry = self._entry(flat, tree, static_key, rebuild)
        placement = None
        if self._placed or entry.meshes or any(type(x) is DeviceArray and x._sharding is not None for x in flat):
            placement = _placement(self, flat, tree, entry)
        return Lowered(self, entry, placement)

    def trace(self, *args: P.args, **kwargs: P.kwargs) -> Traced:
        """Traces for these arguments' signature: the :class:`Traced` has the jaxpr
        (``.jaxpr``), the output types and ``.lower()``."""
        flat, tree, static_key, rebuild = self._signature.split(tuple(args), dict(kwargs))
        return Traced(self, self._entry(flat, tree, static_key, rebuild))

    def _cache_size(self) -> int:
        """How many signatures have been traced."""
        return len(self._cache)


def _placed_callbacks(entry: _Entry, placement: _Placement, name: str) -> list[Callable[..., Any]]:
    """The host callbacks of a call placed on devices: those of its one-device lowering
    (the lowering numbers them in the same order whatever the layouts). On several
    devices each would run once per device (JAX pins them to one with a maximal
    sharding): refused for now."""
    _, callbacks = _ir.lower_with_callbacks(_ir.consts_to_invars(entry.jaxpr.jaxpr), f"jit_{name}")
    if callbacks and len(placement.devices) > 1:
        raise LoweringError(
            f"jit of {name} calls back into Python (debug.print, debug.callback or pure_callback) "
            f"and runs on {len(placement.devices)} devices: host callbacks in programs over several "
            f"devices are not supported yet (call it on one device), at {user_location()}"
        )
    return [host_callable(c, t) for c, t in callbacks]


class _Placement:
    """Where a call runs: the devices in partition order, the mesh, and the layout of
    each argument leaf and output leaf (None: XLA decides)."""

    __slots__ = ("devices", "mesh", "in_shardings", "out_shardings", "key")

    def __init__(
        self, devices: tuple[Any, ...], mesh: Mesh | None,
        in_shardings: list[Sharding | None], out_shardings: list[Sharding | None],
    ) -> None:
        self.devices = devices
        self.mesh = mesh
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.key = _HashedKey((tuple(d.id for d in devices), mesh, tuple(in_shardings), tuple(out_shardings)))


class _HashedKey:
    """A tuple key whose hash is computed once (a placement's key is looked up on every
    call, and hashing its shardings each time costs more than the rest of the lookup)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _HashedKey):
            return NotImplemented
        return self._hash == other._hash and self.value == other.value


def _broadcast_prefix(prefix: Any, value: Any, what: str) -> list[Sharding | None]:
    """``prefix`` (a sharding, None, or a tuple/list/dict of them matching the top of
    ``value``'s structure) spread over ``value``'s leaves."""
    if prefix is None or isinstance(prefix, Sharding):
        return [prefix] * len(tree_flatten(value)[0])
    if isinstance(prefix, (tuple, list)) and isinstance(value, (tuple, list)) and len(prefix) == len(value):
        return [s for p, v in zip(prefix, value) for s in _broadcast_prefix(p, v, what)]
    if isinstance(prefix, dict) and isinstance(value, dict) and set(prefix) == set(value):
        return [s for k in sorted(value) for s in _broadcast_prefix(prefix[k], value[k], what)]
    raise ValueError(
        f"{what} {prefix!r} is not a prefix of the structure it applies to "
        f"({tree_structure(value)}), at {user_location()}"
    )


def _requested(jitted: Jitted[Any, Any], flat: list[Any], tree: PyTreeDef, entry: _Entry) -> tuple[list[Sharding | None], list[Sharding | None]]:
    """The layouts ``in_shardings``/``out_shardings`` ask for, per argument leaf and per
    output leaf (None: not said)."""
    n_leaves = len(flat)
    if jitted._in_shardings is None:
        ins: list[Sharding | None] = [None] * n_leaves
    else:
        dyn_args, dyn_kwargs = tree_unflatten(tree, flat)
        spec = jitted._in_shardings
        if isinstance(spec, (Sharding, type(None))):
            spec = (spec,) * len(dyn_args)
        if isinstance(spec, list):
            spec = tuple(spec)
        if not isinstance(spec, tuple) or len(spec) != len(dyn_args):
            raise ValueError(
                f"jit's in_shardings has {len(spec) if isinstance(spec, tuple) else 1} entries "
                f"but the function was called with {len(dyn_args)} positional arguments, at "
                f"{user_location()}"
            )
        ins = _broadcast_prefix(spec, tuple(dyn_args), "in_shardings")
        ins += [None] * (n_leaves - len(ins))  # keyword arguments: XLA decides
    n_out = len(entry.jaxpr.out_avals)
    if jitted._out_shardings is None:
        outs: list[Sharding | None] = [None] * n_out
    elif isinstance(jitted._out_shardings, Sharding):
        outs = [jitted._out_shardings] * n_out
    else:
        shape = tree_unflatten(entry.out_tree, [0] * entry.out_tree.num_leaves)
        outs = _broadcast_prefix(jitted._out_shardings, shape, "out_shardings")
        if entry.float0:
            outs = [s for i, s in enumerate(outs) if i not in entry.float0]
    return ins, outs


def _placement(jitted: Jitted[Any, Any], flat: list[Any], tree: PyTreeDef, entry: _Entry) -> _Placement | None:
    """The placement of a call, or None for the default device."""
    ins, outs = _requested(jitted, flat, tree, entry)
    # Arguments laid out already keep their layout; an explicit one must agree.
    for i, x in enumerate(flat):
        if type(x) is DeviceArray and x._sharding is not None:
            asked = ins[i]
            if asked is None:
                ins[i] = x._sharding
            elif not _same_layout(asked, x._sharding, len(x.shape)):
                raise ShardingError(
                    f"argument leaf {i} of jit is laid out as {x._sharding!r} but in_shardings "
                    f"asks for {ins[i]!r}; device_put it with that sharding first, at {user_location()}"
                )
    given: list[Sharding] = [s for s in ins + outs if s is not None]
    # A mesh used inside (a sharding constraint, a shard_map) places the call on it too.
    given += [NamedSharding(m, PartitionSpec()) for m in entry.meshes]
    if not given:
        return None
    devices = given[0]._device_assignment
    for s in given[1:]:
        if [d.id for d in s._device_assignment] != [d.id for d in devices]:
            raise ShardingError(
                f"Received incompatible devices for jitted computation: {given[0]!r} and {s!r} "
                f"(every argument and output of one call must be laid out over the same devices "
                f"in the same order), at {user_location()}"
            )
    meshes = {s.mesh for s in given if isinstance(s, NamedSharding)}
    if len(meshes) > 1:
        raise ShardingError(f"the shardings of one jit call use different meshes: {meshes}, at {user_location()}")
    mesh = next(iter(meshes)) if meshes else None
    if mesh is None and len(devices) == 1 and devices[0] is backend().device:
        return None
    if mesh is None and len(devices) > 1:
        raise ShardingError(
            f"jit over several devices needs NamedShardings (got {given[0]!r}), at {user_location()}"
        )
    for i, si in enumerate(ins):
        if si is not None and not isinstance(si, NamedSharding) and mesh is not None:
            if si.num_devices == 1 and mesh.size == 1:
                ins[i] = None
                continue
            raise ShardingError(f"argument leaf {i}'s layout {si!r} is not a NamedSharding of {mesh}, at {user_location()}")
    for i, (si, aval) in enumerate(zip(ins, entry.in_avals)):
        if si is not None:
            try:
                si.shard_shape(aval.shape)
            except ShardingError as e:
                raise ShardingError(f"argument leaf {i} of jit: {e}, at {user_location()}") from None
    for i, (so, aval) in enumerate(zip(outs, entry.jaxpr.out_avals)):
        if so is not None:
            try:
                so.shard_shape(aval.shape)
            except ShardingError as e:
                raise ShardingError(f"output leaf {i} of jit: {e}, at {user_location()}") from None
    return _Placement(tuple(devices), mesh, ins, outs)


def _constrained(x: Any, s: Sharding | None) -> Any:
    if not isinstance(s, NamedSharding):
        return x
    from ferrax._lax.layout import with_sharding_constraint

    return with_sharding_constraint(x, s)


def _same_layout(a: Sharding, b: Sharding, rank: int) -> bool:
    if a is b or a == b:
        return True
    return [d.id for d in a._device_assignment] == [d.id for d in b._device_assignment] and a._tiling(rank) == b._tiling(rank)


def _spec_entries(s: Sharding | None) -> Any:
    """A layout as the lowering takes it: a NamedSharding's spec entries, None for XLA's
    choice."""
    if s is None:
        return None
    assert isinstance(s, NamedSharding)
    return tuple(s.spec)


def _place(x: Any, aval: _ir.ShapedArray, want: Sharding, index: int | None) -> Any:
    """The buffer of ``x`` laid out as ``want`` (copied there when it is not)."""
    if type(x) is DeviceArray and x._sharding is not None and _same_layout(x._sharding, want, len(aval.shape)):
        return x._buffer
    value = np.asarray(x)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    return backend().put_sharded(np.asarray(value, order="C"), aval, want)


def _arg_aval(x: Any, index: int) -> _ir.ShapedArray:
    if isinstance(x, DeviceArray):
        return x._aval
    try:
        return aval_of(x)
    except TypeError:
        raise TypeError(
            f"argument leaf {index} of type {type(x).__name__} is not an array "
            f"(arrays, NumPy values and Python scalars are), at {user_location()}"
        ) from None


def jit(
    fun: Callable[P, R],
    /,
    *,
    in_shardings: Any = None,
    out_shardings: Any = None,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
) -> Jitted[P, R]:
    """``fun`` compiled with XLA: traced once per signature (argument types, static
    arguments and pytree structure), lowered to StableHLO, compiled and cached.

    ``in_shardings``/``out_shardings`` (a :class:`~ferrax.sharding.Sharding`, or one per
    positional argument / output, as pytree prefixes; None leaves it to XLA) lay the
    computation out over several devices with XLA's SPMD partitioner. Arguments already
    laid out (``device_put`` with a sharding, results of such calls) keep their layout."""
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    positional, var_positional = _positional_params(fun)
    if names and not nums:
        # Static names given positionally count too (as JAX resolves them).
        nums = tuple(positional.index(n) for n in names if n in positional)
    n = len(positional)
    if callable(fun) and not var_positional and any(not -n <= i < n for i in nums):
        raise ValueError(
            f"jitted function has static_argnums={nums}, but only accepts {n} positional "
            f"arguments, at {user_location()}"
        )
    return Jitted(fun, nums, names, in_shardings, out_shardings)


def _positional_params(fun: Any) -> tuple[list[str], bool]:
    """The names of ``fun``'s positional parameters, and whether it takes ``*args``
    (which, like a signature that cannot be read, allows any static position)."""
    try:
        params = inspect.signature(fun).parameters
    except (TypeError, ValueError):
        return [], True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [name for name, p in params.items() if p.kind in positional]
    return names, any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params.values())


F = TypeVar("F", bound=Callable[..., Any])


def staged(name: str | None = None, *, static_argnames: Sequence[str] = ()) -> Callable[[F], F]:
    """Stages a library function as JAX's ``@jit`` on it does (``jnp.where`` as a nested
    ``jit`` equation named ``_where``, ...), so that ferrax's jaxprs read as JAX's.

    Under a staging trace (``make_jaxpr``, an outer ``jit``) a call becomes a ``jit``
    equation named ``name`` (the function's own by default), traced once per signature
    and shared between calls, as JAX's nested jits are. ``static_argnames`` are the
    parameters JAX holds static (by name or position). Called eagerly, with no staging
    trace (also under an eager ``grad`` or ``vmap``), the function runs as written, one
    primitive at a time. A call whose static arguments cannot be hashed (a list for an
    axis) is not staged either: it traces inline."""

    def wrap(fun: F) -> F:
        positional, _ = _positional_params(fun)
        names = tuple(static_argnames)
        nums = tuple(positional.index(n) for n in names if n in positional)
        jitted = Jitted(fun, nums, names)
        if name is not None:
            jitted._name = name

        @functools.wraps(fun)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not _core._state.dynamic:
                return fun(*args, **kwargs)
            for i in nums:
                if i < len(args) and not _is_hashable(args[i]):
                    return fun(*args, **kwargs)
            for k in names:
                if k in kwargs and not _is_hashable(kwargs[k]):
                    return fun(*args, **kwargs)
            return jitted(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def _is_hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True
