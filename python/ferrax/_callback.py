"""Host callbacks: calling Python from traced and compiled code, as JAX's
``debug_callback`` and ``pure_callback`` primitives.

``debug_callback`` (no outputs, an effect: never removed, kept in order) calls a Python
function for its side effects; ``ferrax.debug.callback`` binds it. ``debug_print`` (the
same, with JAX's params: the format string, the argument tree, the static arguments and
NumPy's print options) prints a line; ``ferrax.debug.print`` binds it. ``pure_callback`` (results of declared types, no effect: removed when unused) computes
values in Python; ``ferrax.pure_callback`` binds it. ``io_callback`` (results of declared
types and an effect, ordered or not) is both; ``ferrax.experimental.io_callback`` binds
it.

Eagerly (and in ``eval_jaxpr``) the callback runs at once. Staged (``jit``,
``make_jaxpr``, control-flow bodies) the equation stays in the jaxpr, and lowering makes
it a ``stablehlo.custom_call @xla_ffi_python_cpu_callback`` naming the callback by its
index in the list the module is compiled with (``_ir.lower_with_callbacks``), so that
XLA calls back into Python when the program runs (:func:`host_callable`). The Rust
reference evaluator cannot call Python: there a debug callback does nothing and a pure
callback is refused.

An ordered callback (``ordered=True``: ``debug.print``, ``debug.callback``,
``io_callback``) takes the program's token and returns it: the lowering threads one
token through the whole program (``@main``'s first argument and result, every call,
branch and loop with an ordered effect in it), and the runtime passes the token one run
returns to the next run (``ferrax._runtime``), so ordered callbacks run in program order
within a run and across runs, as JAX's.

Rules as JAX 0.10 has them: under ``jvp``/``grad`` a debug callback sees the primal
values; under ``vmap`` it is called once per element of the batch, in order. A pure
callback refuses ``jvp`` (and so ``grad``) with JAX's ``ValueError``; under ``vmap`` it
follows ``vmap_method`` (``"sequential"``, ``"sequential_unrolled"``, ``"expand_dims"``,
``"broadcast_all"``; ``None`` refuses with JAX's ``NotImplementedError``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._core import ConcreteArray, Primitive, aval_of
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = [
    "DebugCallback",
    "FlatCallback",
    "debug_callback_p",
    "debug_print_p",
    "format_print",
    "host_callable",
    "io_callback",
    "io_callback_p",
    "pure_callback",
    "pure_callback_p",
]

debug_callback_p = Primitive.builtin("debug_callback", multiple_results=True)
pure_callback_p = Primitive.builtin("pure_callback", multiple_results=True)
io_callback_p = Primitive.builtin("io_callback", multiple_results=True)
debug_print_p = Primitive.builtin("debug_print", multiple_results=True)
debug_print_p.impl_gets_arrays = True  # the printed values keep their weak types, as JAX's

_ADDRESS = re.compile(r" at 0x([0-9a-fA-F]+)")


def masked_repr(obj: Any) -> str:
    """``repr(obj)`` with memory addresses masked as JAX prints them in jaxprs
    (``<function f at 0xXXXXXXXXXXXX>``)."""
    return _ADDRESS.sub(lambda m: " at 0x" + "X" * len(m.group(1)), repr(obj))


class DebugCallback:
    """``debug_callback``'s ``callback`` param: calls ``fun`` with the equation's operands
    as ferrax arrays. Eagerly they keep their weak types (``weak_types``, one per
    operand); called by XLA they are not weak, as in JAX."""

    __slots__ = ("fun", "weak_types")

    def __init__(self, fun: Callable[..., None], weak_types: tuple[bool, ...]) -> None:
        self.fun = fun
        self.weak_types = weak_types

    def __call__(self, *values: Any) -> None:
        self.fun(*[ConcreteArray(np.asarray(v), w) for v, w in zip(values, self.weak_types)])

    def host(self, *arrays: np.ndarray[Any, Any]) -> tuple[()]:
        """What XLA calls: NumPy arrays in, no results."""
        self.fun(*[ConcreteArray(np.asarray(a), False) for a in arrays])
        return ()

    def __repr__(self) -> str:
        # The name JAX prints for its flat debug callback.
        return "<function debug_callback.<locals>._debug_callback.<locals>._flat_callback at 0xXXXXXXXXXXXX>"


class FlatCallback:
    """``pure_callback``'s and ``io_callback``'s ``callback`` param: calls ``callback_func`` with the argument
    tree rebuilt from the operands, and checks that what it returns has the declared
    number of results, shapes and dtypes (a ``RuntimeError`` worded as JAX's)."""

    __slots__ = ("callback_func", "in_tree", "result_avals")

    def __init__(self, callback_func: Callable[..., Any], in_tree: PyTreeDef, result_avals: tuple[_ir.ShapedArray, ...]) -> None:
        self.callback_func = callback_func
        self.in_tree = in_tree
        self.result_avals = result_avals

    def __call__(self, *values: Any) -> tuple[np.ndarray[Any, Any], ...]:
        args, kwargs = tree_unflatten(self.in_tree, list(values))
        outs, _ = tree_flatten(self.callback_func(*args, **kwargs))
        if len(outs) != len(self.result_avals):
            raise RuntimeError(
                "Mismatched number of outputs from callback. "
                f"Expected: {len(self.result_avals)}, Actual: {len(outs)}"
            )
        checked = []
        for i, (out, aval) in enumerate(zip(outs, self.result_avals)):
            value = np.asarray(out)
            value = value.astype(_canonical(value.dtype), copy=False)
            if value.shape != tuple(aval.shape):
                raise RuntimeError(
                    f"Incorrect output shape for return value #{i}: Expected: {tuple(aval.shape)}, Actual: {value.shape}"
                )
            if value.dtype != aval.dtype:
                raise RuntimeError(
                    f"Incorrect output dtype for return value #{i}: Expected: {aval.dtype}, Actual: {value.dtype}"
                )
            checked.append(value)
        return tuple(checked)

    def host(self, *arrays: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        """What XLA calls: NumPy arrays in and out."""
        return self(*[ConcreteArray(np.asarray(a), False) for a in arrays])

    def __repr__(self) -> str:
        return f"_FlatCallback(callback_func={masked_repr(self.callback_func)}, in_tree={self.in_tree!r})"


def _canonical(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a callback's result is read as (64-bit types narrowed without x64, as
    JAX canonicalizes)."""
    from ferrax import dtypes

    return dtypes.canonical(dtype)


def host_callable(callback: Any, token: bool = False) -> Callable[..., Any]:
    """The function XLA calls for a callback param of a lowered module (see
    ``_ir.lower_with_callbacks``): with ``token`` (an ordered callback), one that takes
    the token first and returns it first. A jaxpr read from text names its callbacks
    only and cannot be compiled."""
    if isinstance(callback, dict):
        # ``debug_print``'s params (the lowering gives them for its calls).
        callback = _PrintHost(callback)
    host: Callable[..., Any] | None = getattr(callback, "host", None)
    if host is None:
        from ferrax.errors import LoweringError

        raise LoweringError(
            f"the jaxpr calls the host callback {callback!r}, which has no Python function "
            "(a jaxpr read from text names its callbacks only): it cannot be compiled"
        )
    if not token:
        return host
    call = host

    def with_token(token: Any, *arrays: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        return (token, *call(*arrays))

    return with_token


# ----------------------------------------------------------------------- debug_callback


@debug_callback_p.def_impl
def _debug_callback_impl(*values: Any, callback: DebugCallback, effect: str, partitioned: bool = False) -> list[Any]:
    callback(*values)
    return []


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    # The callback sees the primal values only (JAX's rule).
    debug_callback_p.bind(*primals, **params)
    return [], []


@debug_callback_p.def_batch
def _debug_callback_batch(
    args: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, **params: Any
) -> tuple[list[Any], list[Any]]:
    # Once per element of the batch, in order, each lane sliced out and squeezed (as
    # JAX unrolls it).
    from ferrax import lax

    for i in range(axis_size):
        lane = [x if d is None else lax.squeeze(lax.slice_in_dim(x, i, i + 1, axis=d), (d,)) for x, d in zip(args, dims)]
        debug_callback_p.bind(*lane, **params)
    return [], []


# -------------------------------------------------------------------------- debug_print


def format_print(fmt: str, np_printoptions: dict[str, Any], has_placeholders: bool, *args: Any, **kwargs: Any) -> None:
    """Writes ``debug.print``'s line on standard output, as JAX formats it: ``fmt``
    formatted with NumPy's print options of the call, or (without placeholders) ``fmt``
    and the arguments joined by spaces."""
    if has_placeholders:
        with np.printoptions(**np_printoptions):
            message = fmt.format(*args, **kwargs)
    else:
        message = " ".join((fmt, *(str(a) for a in args)))
    sys.stdout.write(message + "\n")


def _print_params(values: Sequence[Any], params: Mapping[str, Any]) -> None:
    """Prints the line of a ``debug_print`` equation with these operand values (ferrax
    arrays): the argument tree rebuilt from them and the static arguments."""
    in_tree = params["in_tree"]
    if not isinstance(in_tree, PyTreeDef):
        from ferrax.errors import LoweringError

        raise LoweringError(
            f"debug_print's in_tree {in_tree!r} is a name only (a jaxpr read from text): it cannot be printed"
        )
    static = dict(params["static_args"])
    it = iter(values)
    leaves = [static[i] if i in static else next(it) for i in range(in_tree.num_leaves)]
    args, kwargs = tree_unflatten(in_tree, leaves)
    format_print(params["fmt"], dict(params["np_printoptions"]), bool(params["has_placeholders"]), *args, **kwargs)


class _PrintHost:
    """What XLA calls for a lowered ``debug_print``: NumPy arrays in, the line printed,
    no results."""

    __slots__ = ("params",)

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params

    def host(self, *arrays: np.ndarray[Any, Any]) -> tuple[()]:
        _print_params([ConcreteArray(np.asarray(a), False) for a in arrays], self.params)
        return ()


def _concrete(v: Any) -> Any:
    """An eager operand as a ferrax array, its weak type kept (a Python scalar's too)."""
    if isinstance(v, ConcreteArray):
        return v
    return ConcreteArray(np.asarray(v), bool(aval_of(v).weak_type))


@debug_print_p.def_impl
def _debug_print_impl(*values: Any, **params: Any) -> list[Any]:
    _print_params([_concrete(v) for v in values], params)
    return []


@debug_print_p.def_jvp
def _debug_print_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    # The primal values only are printed (JAX's rule).
    debug_print_p.bind(*primals, **params)
    return [], []


@debug_print_p.def_batch
def _debug_print_batch(
    args: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, **params: Any
) -> tuple[list[Any], list[Any]]:
    # One line per element of the batch, in order (as JAX unrolls it).
    from ferrax import lax

    for i in range(axis_size):
        lane = [x if d is None else lax.squeeze(lax.slice_in_dim(x, i, i + 1, axis=d), (d,)) for x, d in zip(args, dims)]
        debug_print_p.bind(*lane, **params)
    return [], []


# ------------------------------------------------------------------------ pure_callback


@pure_callback_p.def_impl
def _pure_callback_impl(*values: Any, callback: FlatCallback, **params: Any) -> list[Any]:
    return list(callback(*values))


@pure_callback_p.def_jvp
def _pure_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    raise ValueError(
        "Pure callbacks do not support JVP. Please use `ferrax.custom_jvp` to use callbacks while taking gradients."
    )


_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


@pure_callback_p.def_batch
def _pure_callback_batch(
    args: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, callback: FlatCallback,
    result_avals: tuple[_ir.ShapedArray, ...], vmap_method: str | None = None, **params: Any,
) -> tuple[list[Any], list[Any]]:
    from ferrax import lax
    from ferrax._interpreters import batching

    if vmap_method not in _VMAP_METHODS:
        raise NotImplementedError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', or 'broadcast_all'. "
            f"Got vmap_method={vmap_method}."
        )
    bound = dict(params, callback=callback, result_avals=result_avals, vmap_method=vmap_method)
    front = batching.at_front(list(args), list(dims))
    batched = [d is not None for d in dims]
    if vmap_method == "sequential_unrolled":
        lanes = [
            pure_callback_p.bind(*[x[i] if b else x for x, b in zip(front, batched)], **bound) for i in range(axis_size)
        ]
        import ferrax.numpy as fnp

        return [fnp.stack([lane[k] for lane in lanes]) for k in range(len(result_avals))], [0] * len(result_avals)
    if vmap_method == "sequential":
        # A loop over the batch (JAX's lax.map): a scan whose body calls back once per
        # element.
        mapped = [x for x, b in zip(front, batched) if b]
        fixed = [x for x, b in zip(front, batched) if not b]

        def body(carry: None, xs: list[Any]) -> tuple[None, list[Any]]:
            it_x, it_f = iter(xs), iter(fixed)
            operands = [next(it_x) if b else next(it_f) for b in batched]
            return None, list(pure_callback_p.bind(*operands, **bound))

        _, ys = lax.scan(body, None, mapped, length=axis_size)
        return list(ys), [0] * len(result_avals)
    # expand_dims: unbatched operands get a size-1 leading axis; broadcast_all: they are
    # broadcast to the batch size. The callback gets the whole batch at once.
    operands = []
    for x, b in zip(front, batched):
        if not b:
            shape = tuple(np.shape(x))
            lead = axis_size if vmap_method == "broadcast_all" else 1
            x = lax.broadcast_in_dim(x, (lead, *shape), tuple(range(1, len(shape) + 1)))
        operands.append(x)
    batched_avals = tuple(_ir.ShapedArray((axis_size, *a.shape), a.dtype) for a in result_avals)
    outs = pure_callback_p.bind(
        *operands, **dict(bound, result_avals=batched_avals, callback=FlatCallback(callback.callback_func, callback.in_tree, batched_avals))
    )
    return list(outs), [0] * len(result_avals)


# ---------------------------------------------------------------------------- user API


def pure_callback(
    callback: Callable[..., Any],
    result_shape_dtypes: Any,
    *args: Any,
    sharding: None = None,
    vmap_method: str | None = None,
    **kwargs: Any,
) -> Any:
    """Calls the Python function ``callback(*args, **kwargs)``, which must return arrays
    of the shapes and dtypes of ``result_shape_dtypes`` (a pytree of objects with
    ``shape`` and ``dtype``, e.g. :class:`ferrax.ShapeDtypeStruct`), from traced or
    compiled code, as ``jax.pure_callback``: the callback gets ferrax arrays and returns
    NumPy-convertible values; the call has no effect (it may be removed when its results
    are unused). Under ``vmap`` ``vmap_method`` says how (``"sequential"``,
    ``"sequential_unrolled"``, ``"expand_dims"``, ``"broadcast_all"``); ``jvp``/``grad``
    raise ``ValueError`` (wrap the call in :func:`ferrax.custom_jvp`). A result of the
    wrong shape or dtype raises ``RuntimeError`` (in a compiled program, jaxlib's
    ``JaxRuntimeError``, a ``RuntimeError``, as in JAX).
    """
    from ferrax import dtypes

    if vmap_method is not None and vmap_method not in (*_VMAP_METHODS, "legacy_vectorized"):
        raise ValueError(
            "vmap_method must be on of the allowed methods ['sequential', 'sequential_unrolled', "
            f"'expand_dims', 'broadcast_all', 'legacy_vectorized', None], but got: {vmap_method}"
        )
    if sharding is not None:
        raise NotImplementedError("ferrax.pure_callback: sharding= is not supported yet (pass None)")
    flat, in_tree = tree_flatten((args, kwargs))
    leaves, out_tree = tree_flatten(result_shape_dtypes)
    result_avals = tuple(_ir.ShapedArray(tuple(r.shape), dtypes.canonical(np.dtype(r.dtype))) for r in leaves)
    outs = pure_callback_p.bind(
        *flat,
        callback=FlatCallback(callback, in_tree, result_avals),
        result_avals=result_avals,
        sharding=None,
        vmap_method=vmap_method,
    )
    return tree_unflatten(out_tree, list(outs))


# -------------------------------------------------------------------------- io_callback


@io_callback_p.def_impl
def _io_callback_impl(*values: Any, callback: FlatCallback, **params: Any) -> list[Any]:
    return list(callback(*values))


@io_callback_p.def_jvp
def _io_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    raise ValueError("IO callbacks do not support JVP.")


@io_callback_p.def_batch
def _io_callback_batch(
    args: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, ordered: bool, **params: Any,
) -> tuple[list[Any], list[Any]]:
    # As JAX: an unordered one runs once per element, in a loop; an ordered one refuses.
    from ferrax import lax
    from ferrax._interpreters import batching

    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    front = batching.at_front(list(args), list(dims))
    batched = [d is not None for d in dims]
    mapped = [x for x, b in zip(front, batched) if b]
    fixed = [x for x, b in zip(front, batched) if not b]

    def body(carry: None, xs: list[Any]) -> tuple[None, list[Any]]:
        it_x, it_f = iter(xs), iter(fixed)
        operands = [next(it_x) if b else next(it_f) for b in batched]
        return None, list(io_callback_p.bind(*operands, ordered=ordered, **params))

    _, ys = lax.scan(body, None, mapped, length=axis_size)
    return list(ys), [0] * len(ys)


def io_callback(
    callback: Callable[..., Any],
    result_shape_dtypes: Any,
    *args: Any,
    sharding: None = None,
    ordered: bool = False,
    **kwargs: Any,
) -> Any:
    """Calls the Python function ``callback(*args, **kwargs)`` for its side effects and
    results (of the shapes and dtypes of ``result_shape_dtypes``, a pytree of objects
    with ``shape`` and ``dtype``, or ``None``), from traced or compiled code, as
    ``jax.experimental.io_callback``: the call is never removed; with ``ordered=True``
    calls run in program order (a token passed from one to the next) and ``vmap``
    refuses (``ValueError``); unordered, ``vmap`` calls once per element. ``jvp``/``grad``
    raise ``ValueError``. A result of the wrong shape or dtype raises ``RuntimeError``.
    """
    from ferrax import dtypes

    if sharding is not None:
        raise NotImplementedError("ferrax.experimental.io_callback: sharding= is not supported yet (pass None)")
    flat, in_tree = tree_flatten((args, kwargs))
    leaves, out_tree = tree_flatten(result_shape_dtypes)
    result_avals = tuple(_ir.ShapedArray(tuple(r.shape), dtypes.canonical(np.dtype(r.dtype))) for r in leaves)
    outs = io_callback_p.bind(
        *flat,
        callback=FlatCallback(callback, in_tree, result_avals),
        ordered=bool(ordered),
        result_avals=result_avals,
        sharding=None,
    )
    return tree_unflatten(out_tree, list(outs))
