"""Printing and calling back into Python from transformed code, as ``jax.debug``.

``ferrax.debug.print`` and ``ferrax.debug.callback`` bind one primitive,
``debug_callback``, with no outputs. Eagerly it calls the callback at once with the
values (as ferrax arrays, weak types kept); under ``grad``/``jvp`` it sees the primal
values, and under ``vmap`` it is called once per element of the batch (in order), as
JAX's. Inside ``jit``, ``make_jaxpr`` and traced control-flow bodies the values exist
only when the compiled program runs, and calling back into Python from XLA needs a
host-callback primitive the IR does not have yet: there the call is skipped with a
``UserWarning`` naming the user's line.
"""

from __future__ import annotations

import string
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ferrax._core import ConcreteArray, Primitive, Tracer, aval_of, trace_state, user_location
from ferrax._user_frames import user_stacklevel
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["callback", "print"]

debug_callback_p = Primitive("debug_callback", multiple_results=True)


@debug_callback_p.def_impl
def _debug_callback_impl(*values: Any, callback: Callable[..., None], weak_types: tuple[bool, ...], **_: Any) -> list[Any]:
    callback(*[ConcreteArray(np.asarray(v), w) for v, w in zip(values, weak_types)])
    return []


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract_eval(*avals: Any, **params: Any) -> list[Any]:
    return []


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    # The callback sees the primal values only.
    debug_callback_p.bind(*primals, **params)
    return [], []


@debug_callback_p.def_batch
def _debug_callback_batch(
    args: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, **params: Any
) -> tuple[list[Any], list[Any]]:
    # Once per element of the batch, in order (JAX unrolls the same way).
    import ferrax.numpy as fnp

    for i in range(axis_size):
        debug_callback_p.bind(*[x if d is None else fnp.moveaxis(x, d, 0)[i] for x, d in zip(args, dims)], **params)
    return [], []


def _is_dynamic(x: Any) -> bool:
    """Whether a leaf is an array the callback receives as a ferrax array (else it is
    passed as it is, as JAX passes leaves it cannot read as arrays)."""
    if isinstance(x, Tracer):
        return True
    try:
        aval_of(x)
    except TypeError:
        return False
    return True


def _staged_warning(what: str) -> None:
    warnings.warn(
        f"ferrax.debug.{what} inside jit, make_jaxpr or a traced control-flow body does "
        "nothing yet: the values exist only when the compiled program runs, and ferrax "
        "cannot yet call back into Python from XLA; call it outside jit (eagerly, under "
        f"grad or vmap it runs), at {user_location()}",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def _bind(what: str, flat_callback: Callable[..., None], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    leaves, tree = tree_flatten((args, dict(kwargs)))
    dynamic = [x for x in leaves if _is_dynamic(x)]
    static = {i: x for i, x in enumerate(leaves) if not _is_dynamic(x)}
    if trace_state().dynamic:
        _staged_warning(what)
        return
    debug_callback_p.bind(
        *dynamic,
        callback=_Rebuild(flat_callback, tree, static),
        weak_types=tuple(bool(aval_of(x).weak_type) for x in dynamic),
    )


class _Rebuild:
    """Calls ``fun(*args, **kwargs)`` with the tree of arguments rebuilt from the
    dynamic values it is given and the static leaves it holds."""

    def __init__(self, fun: Callable[..., None], tree: PyTreeDef, static: dict[int, Any]) -> None:
        self.fun = fun
        self.tree = tree
        self.static = static

    def __call__(self, *dynamic: Any) -> None:
        it = iter(dynamic)
        leaves = [self.static[i] if i in self.static else next(it) for i in range(self.tree.num_leaves)]
        args, kwargs = tree_unflatten(self.tree, leaves)
        self.fun(*args, **kwargs)

    def __repr__(self) -> str:
        return getattr(self.fun, "__name__", "callback")


def callback(
    callback: Callable[..., None] | None = None,
    *args: Any,
    ordered: bool = False,
    partitioned: bool = False,
    **kwargs: Any,
) -> Callable[..., None] | None:
    """Calls ``callback(*args, **kwargs)`` for its side effects, with the array leaves
    of the arguments as ferrax arrays (their values eagerly; primal values under
    ``grad``; once per batch element under ``vmap``). Without ``callback`` it returns a
    function taking the callback and its arguments (``callback(ordered=True)(f, x)``).
    """
    if callback is not None:
        _bind("callback", callback, args, kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug_callback received unexpected arguments in the two-call form: args={args} kwargs={kwargs}")

    def call(fun: Callable[..., None], *c_args: Any, **c_kwargs: Any) -> None:
        _bind("callback", fun, c_args, c_kwargs)

    return call


class _FormatChecker(string.Formatter):
    """Checks that a format string uses exactly the arguments given (formats nothing)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        return ""

    def check_unused_args(self, used_args: set[int | str], args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        unused_args = [a for i, a in enumerate(args) if i not in used_args]
        unused_kwargs = [k for k in kwargs if k not in used_args]
        if unused_args:
            raise ValueError(f"Unused positional arguments to `ferrax.debug.print`: {unused_args}")
        if unused_kwargs:
            raise ValueError(
                f"Unused keyword arguments to `ferrax.debug.print`: {unused_kwargs}. You may be passing "
                'an f-string (i.e, `f"{x}"`) into `ferrax.debug.print` and instead should pass in a '
                "regular string."
            )


def _print_line(fmt: str, np_printoptions: dict[str, Any], has_placeholders: bool, *args: Any, **kwargs: Any) -> None:
    if has_placeholders:
        with np.printoptions(**np_printoptions):
            message = fmt.format(*args, **kwargs)
    else:
        message = " ".join((fmt, *(str(a) for a in args)))
    sys.stdout.write(message + "\n")


def print(  # noqa: A001 (jax.debug.print's name)
    fmt: str | None = None,
    *args: Any,
    ordered: bool = False,
    partitioned: bool = False,
    skip_format_check: bool = False,
    **kwargs: Any,
) -> Callable[..., None] | None:
    """Prints ``fmt.format(*args, **kwargs)`` on standard output, with the array leaves
    of the arguments as ferrax arrays: their values eagerly, the primal values under
    ``grad``, one line per batch element under ``vmap``. A format string that leaves
    arguments unused is a ``ValueError``, one that names missing ones a ``KeyError`` or
    ``IndexError`` (unless ``skip_format_check``). Without ``fmt`` it returns a function
    taking the format string and the arguments.
    """

    def debug_print(fmt: str, *p_args: Any, **p_kwargs: Any) -> None:
        if not skip_format_check:
            _FormatChecker().format(fmt, *p_args, **p_kwargs)
        has_placeholders = False
        if fmt:
            _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field_name is not None
        options = dict(np.get_printoptions())

        def line(*c_args: Any, **c_kwargs: Any) -> None:
            _print_line(fmt, options, has_placeholders, *c_args, **c_kwargs)

        _bind("print", line, p_args, p_kwargs)

    if fmt is not None:
        debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug_print received unexpected arguments in the two-call form: args={args} kwargs={kwargs}")
    return debug_print
