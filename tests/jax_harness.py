"""Comparing ferrax's functions with JAX's: result types (dtype, weak type, shape) or the
exception raised, in both x64 modes. Shared by the test files that write each case once
as ``case(module, *operands)`` for a module of either library (``ferrax.nn`` and
``jax.nn``, ``ferrax.scipy.special`` and ``jax.scipy.special``, ...).

JAX is imported when used, so a test file that skips without JAX can import this module.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

import ferrax
from ferrax.tree_util import tree_leaves

Case = Callable[..., Any]
"""``case(module, *operands)``: one call of one library's function."""
TypeOf = tuple[np.dtype[Any], bool, tuple[int, ...]]
"""An array's dtype, weak type and shape."""


@contextmanager
def both_x64(x64: bool) -> Iterator[None]:
    """ferrax and JAX both in the x64 mode ``x64`` inside the block."""
    import jax

    with ferrax.enable_x64(x64), jax.enable_x64(x64):
        yield


def type_of(x: Any) -> TypeOf:
    """The dtype, weak type and shape of an array (or an abstract value) of either library."""
    return np.dtype(x.dtype), bool(x.weak_type), tuple(x.shape)


def outcome(run: Callable[[], Any]) -> list[TypeOf] | Exception:
    """The types of the leaves of ``run()``'s result, or the exception it raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [type_of(r) for r in tree_leaves(run())]
    except Exception as e:  # noqa: BLE001 - compared with the other library's
        return e


def jax_types(module: Any, cases: Mapping[str, Case], *xs: Any) -> dict[str, list[TypeOf] | Exception]:
    """JAX's result types of each ``case(module, *xs)``, or the exception it raised, all
    traced in one ``jax.eval_shape`` (nothing compiled).

    NumPy arrays among ``xs`` are passed as arguments, the rest (Python and NumPy
    scalars) closed over, so they keep their weak types. Arrays are not closed over:
    JAX 0.10.2 can reuse a custom_jvp function's trace made in the other x64 mode for a
    closed-over int64 array.
    """
    import jax

    arrays = [i for i, x in enumerate(xs) if isinstance(x, np.ndarray)]
    errors: dict[str, Exception] = {}

    def call(*arrs: Any) -> dict[str, Any]:
        full = list(xs)
        for i, a in zip(arrays, arrs, strict=True):
            full[i] = a
        out = {}
        for name, case in cases.items():
            try:
                out[name] = case(module, *full)
            except Exception as e:  # noqa: BLE001 - compared with ferrax's
                errors[name] = e
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shapes = jax.eval_shape(call, *[xs[i] for i in arrays])
    return {
        name: errors[name] if name in errors else [type_of(r) for r in tree_leaves(shapes[name])] for name in cases
    }


def assert_same_outcome(
    ours: list[TypeOf] | Exception,
    theirs: list[TypeOf] | Exception,
    what: str,
    renamed: Mapping[type[BaseException], type[BaseException]] | None = None,
) -> None:
    """The same result types, or both raised, ferrax an instance of JAX's exception class
    (or of ``renamed[JAX's class]`` where ferrax deliberately raises another)."""
    if isinstance(theirs, BaseException):
        want = (renamed or {}).get(type(theirs), type(theirs))
        assert isinstance(ours, want), (what, ours, theirs)
    else:
        assert not isinstance(ours, BaseException), (what, ours, theirs)
        assert ours == theirs, what


def three_ways(
    run: Callable[..., Callable[..., Any]], jax_args: tuple[Any, ...], ferrax_args: tuple[Any, ...], *operands: Any
) -> tuple[list[Any], list[Any], list[Any]]:
    """One program written once as ``run(*lib_args)`` (``lib_args`` naming one library's
    modules), on the same operands three ways: JAX's under ``jax.jit``, ferrax's under
    ``ferrax.jit`` and ferrax's eagerly. Each result is a list of the program's outputs."""
    import jax

    theirs = jax.jit(run(*jax_args))(*operands)
    compiled = ferrax.jit(run(*ferrax_args))(*operands)
    eager = run(*ferrax_args)(*operands)
    return list(theirs), list(compiled), list(eager)


def assert_close_to_jax(theirs: list[Any], *ours: list[Any], rtol: float, atol: float, scaled: bool = False) -> None:
    """Each of ``ours`` (lists of outputs) is close to JAX's outputs ``theirs``, output by
    output; with ``scaled``, ``atol`` is relative to the largest magnitude of JAX's output
    (at least 1)."""
    for results in ours:
        assert len(results) == len(theirs), (len(results), len(theirs))
        for i, (o, t) in enumerate(zip(results, theirs)):
            t = np.asarray(t)
            scale = max(1.0, float(np.max(np.abs(t), initial=0))) if scaled else 1.0
            np.testing.assert_allclose(np.asarray(o), t, rtol=rtol, atol=atol * scale, err_msg=f"output {i}")
