"""Printing and calling back into Python from transformed code, as ``jax.debug``.

``ferrax.debug.callback`` binds ``debug_callback`` and ``ferrax.debug.print`` binds
``debug_print`` (see ``ferrax._callback``), as JAX 0.10 does: primitives with no outputs
and an effect (never removed, kept in order). Eagerly it calls the callback at once with the values (as
ferrax arrays, weak types kept); under ``grad``/``jvp`` it sees the primal values, and
under ``vmap`` it is called once per element of the batch (in order), as JAX's. Inside
``jit``, ``make_jaxpr`` and traced control-flow bodies it stays in the jaxpr and XLA
calls back into Python when the compiled program runs (a host callback), as in JAX.

``debug_print``'s params are JAX's: the format string, whether it has placeholders, the
tree of the arguments, their static (non-array) leaves by position, NumPy's print
options at the call, ``ordered`` and ``partitioned``; a jaxpr of ``debug.print`` prints
as JAX's. The printed lines are JAX's.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ferrax._callback import DebugCallback, debug_callback_p, debug_print_p
from ferrax._core import Tracer, aval_of
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["callback", "print"]


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


def _bind(flat_callback: Callable[..., None], args: tuple[Any, ...], kwargs: Mapping[str, Any], ordered: bool) -> None:
    leaves, tree = tree_flatten((args, dict(kwargs)))
    dynamic = [x for x in leaves if _is_dynamic(x)]
    static = {i: x for i, x in enumerate(leaves) if not _is_dynamic(x)}
    debug_callback_p.bind(
        *dynamic,
        callback=DebugCallback(
            _Rebuild(flat_callback, tree, static), tuple(bool(aval_of(x).weak_type) for x in dynamic)
        ),
        effect="OrderedDebug" if ordered else "Debug",
        partitioned=False,
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
    of the arguments as ferrax arrays (their values eagerly and when a compiled program
    runs; primal values under ``grad``; once per batch element under ``vmap``). Without
    ``callback`` it returns a function taking the callback and its arguments
    (``callback(ordered=True)(f, x)``).
    """
    if callback is not None:
        _bind(callback, args, kwargs, ordered)
        return None
    if args or kwargs:
        raise TypeError(f"debug_callback received unexpected arguments in the two-call form: args={args} kwargs={kwargs}")

    def call(fun: Callable[..., None], *c_args: Any, **c_kwargs: Any) -> None:
        _bind(fun, c_args, c_kwargs, ordered)

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
        leaves, in_tree = tree_flatten((p_args, dict(p_kwargs)))
        debug_print_p.bind(
            *[x for x in leaves if _is_dynamic(x)],
            fmt=fmt,
            has_placeholders=has_placeholders,
            in_tree=in_tree,
            logging_record=None,
            np_printoptions=tuple(np.get_printoptions().items()),
            ordered=bool(ordered),
            partitioned=bool(partitioned),
            static_args=tuple((i, x) for i, x in enumerate(leaves) if not _is_dynamic(x)),
        )

    if fmt is not None:
        debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug_print received unexpected arguments in the two-call form: args={args} kwargs={kwargs}")
    return debug_print
