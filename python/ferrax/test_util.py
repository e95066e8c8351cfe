"""``ferrax.test_util``: checking derivatives against finite differences, as
``jax.test_util`` does (same functions, defaults and semantics).

``check_grads(f, args, order)`` checks forward mode (``ferrax.jvp``) against central
differences along one random direction, and reverse mode (``ferrax.vjp``) against
forward differences by the inner-product identity ``<ct, J t> = <J^T ct, t>``, up to
``order`` (each higher order checks the derivative of the one below). The direction is
drawn from ``numpy.random.RandomState(0)``, so a check is reproducible. ``args`` must be
floating arrays: close over integer operands (indices) instead.

Tolerances scale with the number of elements compared, as JAX's do: an array of ``n``
elements is compared with ``atol * n`` and ``rtol * n``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

from ferrax import dtypes
from ferrax._autodiff import jvp, linearize, vjp
from ferrax._core import aval_of
from ferrax._interpreters.ad import float0
from ferrax.tree_util import tree_leaves, tree_map

__all__ = ["check_grads", "check_jvp", "check_vjp"]

#: The default step of the finite differences.
EPS = 1e-4

Tolerance: TypeAlias = float | dict[Any, float] | None
NDArray: TypeAlias = np.ndarray[Any, Any]

# Exact dtypes compare exactly; floating ones with JAX's per-dtype tolerances.
_DEFAULT_TOLERANCE: dict[np.dtype[Any], float] = {
    float0: 0,
    np.dtype(np.bool_): 0,
    **{np.dtype(t): 0 for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)},
    dtypes.bfloat16: 1e-2,
    np.dtype(np.float16): 1e-3,
    np.dtype(np.float32): 1e-6,
    np.dtype(np.float64): 1e-15,
    np.dtype(np.complex64): 1e-6,
    np.dtype(np.complex128): 1e-15,
}

_DEFAULT_GRADIENT_TOLERANCE: dict[np.dtype[Any], float] = {
    dtypes.bfloat16: 1e-1,
    np.dtype(np.float16): 1e-2,
    np.dtype(np.float32): 2e-3,
    np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3,
    np.dtype(np.complex128): 1e-5,
}


def _is_python_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def _dtype(x: Any) -> np.dtype[Any]:
    if hasattr(x, "dtype"):
        d: np.dtype[Any] = np.dtype(x.dtype)
        return d
    if isinstance(x, complex):
        return np.dtype(np.complex128 if dtypes.default_float() == np.float64 else np.complex64)
    if _is_python_scalar(x):
        return np.dtype(aval_of(x).dtype)
    return np.asarray(x).dtype


def _tolerance(dtype: np.dtype[Any], tol: Tolerance) -> float:
    if tol is not None and not isinstance(tol, dict):
        return tol
    table = {} if tol is None else {np.dtype(k): v for k, v in tol.items()}
    d = dtypes.canonical(np.dtype(dtype))
    return table.get(d, _DEFAULT_TOLERANCE[d])


def _assert_allclose(a: NDArray, b: NDArray, atol: float, rtol: float, err_msg: str) -> None:
    if a.dtype == b.dtype == float0:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    if a.dtype == dtypes.bfloat16:
        a = a.astype(np.float32)
    if b.dtype == dtypes.bfloat16:
        b = b.astype(np.float32)
    # A zero tolerance means NumPy's default (JAX's rule).
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(a, b, atol=atol or 0.0, rtol=rtol or 1e-7, err_msg=err_msg)


def _assert_close(x: Any, y: Any, atol: Tolerance, rtol: Tolerance, err_msg: str) -> None:
    a, b = np.asarray(x), np.asarray(y)
    assert a.shape == b.shape, f"{err_msg}: shapes {a.shape} and {b.shape} differ"
    at = max(_tolerance(a.dtype, atol), _tolerance(b.dtype, atol))
    rt = max(_tolerance(a.dtype, rtol), _tolerance(b.dtype, rtol))
    _assert_allclose(a, b, at * a.size, rt * b.size, err_msg)


def _check_close(xs: Any, ys: Any, atol: Tolerance, rtol: Tolerance, err_msg: str) -> None:
    tree_map(lambda x, y: _assert_close(x, y, atol, rtol, err_msg), xs, ys)


def _check_dtypes_match(xs: Any, ys: Any) -> None:
    def match(x: Any, y: Any) -> None:
        dx, dy = dtypes.canonical(_dtype(x)), dtypes.canonical(_dtype(y))
        assert dx == dy, f"dtypes differ: {dx} and {dy}"

    tree_map(match, xs, ys)


def _inner_prod(xs: Any, ys: Any) -> Any:
    def contract(x: Any, y: Any) -> Any:
        return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))

    return functools.reduce(np.add, tree_leaves(tree_map(contract, xs, ys)))


def _keeping_type(op: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` with the first argument's dtype kept (and Python scalars kept scalars)."""

    def wrapped(*args: Any) -> Any:
        result = np.array(op(*args), dtype=_dtype(args[0]))
        if all(_is_python_scalar(a) for a in args):
            return result.item()
        return result

    return wrapped


def _add(xs: Any, ys: Any) -> Any:
    return tree_map(_keeping_type(operator.add), xs, ys)


def _sub(xs: Any, ys: Any) -> Any:
    return tree_map(_keeping_type(operator.sub), xs, ys)


def _conj(xs: Any) -> Any:
    return tree_map(_keeping_type(np.conj), xs)


def _safe_sub(xs: Any, ys: Any) -> Any:
    """Subtraction with ``inf - inf == 0``."""

    def sub(x: Any, y: Any) -> Any:
        d = _dtype(x)
        with np.errstate(invalid="ignore"):
            return np.where(np.equal(x, y), np.array(0, d), np.subtract(x, y, dtype=d))

    return tree_map(sub, xs, ys)


def _scalar_mul(xs: Any, a: float) -> Any:
    def mul(x: Any) -> Any:
        d = _dtype(x)
        result = np.multiply(x, np.array(a, dtype=d), dtype=d)
        return result.item() if _is_python_scalar(x) else result

    return tree_map(mul, xs)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    shape, d = np.shape(x), _dtype(x)
    result = np.asarray(rng.randn(*shape), dtype=d)
    if d.kind == "c":
        result = result + d.type(1j) * np.asarray(rng.randn(*shape), dtype=d)
    return result.item() if _is_python_scalar(x) else result


def numerical_jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], eps: float = EPS) -> Any:
    """The central difference ``(f(x + eps t) - f(x - eps t)) / (2 eps)``."""
    delta = _scalar_mul(tangents, eps)
    f_pos = f(*_add(primals, delta))
    f_neg = f(*_sub(primals, delta))
    return _scalar_mul(_safe_sub(f_pos, f_neg), 0.5 / eps)


def _merge_tolerance(tol: Tolerance, default: dict[np.dtype[Any], float]) -> Tolerance:
    if tol is None:
        return default
    if not isinstance(tol, dict):
        return tol
    out = dict(default)
    for k, v in tol.items():
        out[np.dtype(k)] = v
    return out


def check_jvp(
    f: Callable[..., Any],
    f_jvp: Callable[[Any, Any], Any],
    args: Sequence[Any],
    atol: Tolerance = None,
    rtol: Tolerance = None,
    eps: float = EPS,
    err_msg: str = "",
) -> None:
    """Checks ``f_jvp(args, tangents) -> (f(*args), tangent_out)`` (typically
    ``functools.partial(ferrax.jvp, f)``) against central differences along one random
    direction. Raises ``AssertionError`` when they disagree."""
    atol = _merge_tolerance(atol, _DEFAULT_GRADIENT_TOLERANCE)
    rtol = _merge_tolerance(rtol, _DEFAULT_GRADIENT_TOLERANCE)
    rng = np.random.RandomState(0)
    tangent = tree_map(lambda x: _rand_like(rng, x), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_out_expected = f(*args)
    _check_dtypes_match(v_out, v_out_expected)
    t_out_expected = numerical_jvp(f, args, tangent, eps=eps)
    _check_close(v_out, v_out_expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    _check_close(t_out, t_out_expected, atol, rtol, f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(
    f: Callable[..., Any],
    f_vjp: Callable[..., Any],
    args: Sequence[Any],
    atol: Tolerance = None,
    rtol: Tolerance = None,
    eps: float = EPS,
    err_msg: str = "",
) -> None:
    """Checks ``f_vjp(*args) -> (f(*args), vjp_fn)`` (typically
    ``functools.partial(ferrax.vjp, f)``) by the inner-product identity against central
    differences along one random direction and one random cotangent. Raises
    ``AssertionError`` when they disagree."""
    atol = _merge_tolerance(atol, _DEFAULT_GRADIENT_TOLERANCE)
    rtol = _merge_tolerance(rtol, _DEFAULT_GRADIENT_TOLERANCE)
    rng = np.random.RandomState(0)
    v_out, vjp_fn = f_vjp(*args)
    v_out_expected = f(*args)
    _check_close(v_out, v_out_expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_map(lambda x: _rand_like(rng, x), args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_map(lambda x: _rand_like(rng, x), v_out)
    cotangent_out = _conj(vjp_fn(_conj(cotangent)))
    ip = _inner_prod(tangent, cotangent_out)
    ip_expected = _inner_prod(tangent_out, cotangent)
    msg = f"{err_msg} cotangent projection" if err_msg else "cotangent projection"
    _check_close(ip, ip_expected, atol, rtol, msg)


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    order: int,
    modes: Sequence[str] = ("fwd", "rev"),
    atol: Tolerance = None,
    rtol: Tolerance = None,
    eps: float | None = None,
) -> None:
    """Checks the derivatives of ``f`` at ``args`` up to ``order`` against finite
    differences: ``"fwd"`` (``ferrax.jvp``), ``"rev"`` (``ferrax.vjp``) and ``"lin"``
    (``ferrax.linearize``) in ``modes``; each along one random direction. ``atol`` and
    ``rtol`` are numbers or dicts from dtype to tolerance (JAX's defaults for the dtypes
    not given); ``eps`` is the finite-difference step (``1e-4``). Raises
    ``AssertionError`` when a check fails."""
    args = tuple(args)
    step = eps or EPS

    def check(f: Callable[..., Any], args: Sequence[Any], order: int, err_msg: str = "") -> None:
        if "fwd" in modes:
            fwd_msg = f"JVP of {err_msg}" if err_msg else "JVP"
            f_jvp = functools.partial(jvp, f)
            check_jvp(f, f_jvp, args, atol, rtol, step, fwd_msg)
            if order > 1:
                check(f_jvp, (args, args), order - 1, fwd_msg)
        if "rev" in modes:
            rev_msg = f"VJP of {err_msg}" if err_msg else "VJP"
            check_vjp(f, functools.partial(vjp, f), args, atol, rtol, step, rev_msg)
            if order > 1:

                def f_vjp(*xs: Any) -> Any:
                    out, vjp_fn = vjp(f, *xs)
                    return vjp_fn(out)

                check(f_vjp, args, order - 1, rev_msg)
        if "lin" in modes:
            lin_msg = f"LIN of {err_msg}" if err_msg else "LIN"
            lin_jvp = functools.partial(_jvp_from_linearize, f)
            check_jvp(f, lin_jvp, args, atol, rtol, step, lin_msg)
            if order > 1:
                check(lin_jvp, (args, args), order - 1, lin_msg)

    check(f, args, order)


def _jvp_from_linearize(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    out, f_lin = linearize(f, *primals)
    return out, f_lin(*tangents)
