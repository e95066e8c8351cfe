"""64-bit values and the x64 switch, against ``jax.numpy`` in both of JAX's modes.

Every pair of operands over every supported dtype and every kind of operand (NumPy
array, NumPy scalar, weakly typed array, Python scalar) is combined by ``add`` and
``true_divide``, eagerly and under ``make_jaxpr``, and by ``result_type``; every pair
of dtype-likes by ``result_type``; every explicit dtype request by the creation
functions and ``astype``; and the defaults (``arange(5)``, ``asarray(1.5)``, ...). The
dtypes, weak types and warnings must be ``jax.numpy``'s. The default mode runs in this
process; the x64 run is a subprocess with ``JAX_ENABLE_X64=1`` for both JAX and ferrax
(:func:`mismatches` is the one comparison both use).
"""

from __future__ import annotations

import functools
import importlib
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
] + [BF16]
WIDE = {np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float64)}

Kind = tuple[np.dtype[Any], bool]
# One operand: its label and how to make it for JAX and for ferrax (the same NumPy or
# Python value, or a weakly typed array each library makes).
Operand = tuple[str, Callable[[], Any], Callable[[], Any]]


@pytest.fixture(autouse=True)
def default_mode() -> Iterator[None]:
    """Each test starts in JAX's default mode, for both libraries, whatever
    ``JAX_ENABLE_X64`` says (tests of x64 switch it themselves)."""
    with jax.enable_x64(False), ferrax.enable_x64(False):
        yield


def _weak_jax(d: np.dtype[Any]) -> Any:
    # JAX has no public way to make a weakly typed array of a given dtype.
    internal = importlib.import_module("jax._src.lax.lax")
    return internal._convert_element_type(np.ones(2, d), d, weak_type=True)


def operands(x64: bool) -> list[Operand]:
    """Every dtype as a NumPy array and a NumPy scalar, every dtype the mode has as a
    weakly typed array, and the Python scalars."""
    out: list[Operand] = []
    for d in DTYPES:
        arr = np.ones(2, d)
        out.append((f"{d}[2]", functools.partial(_same, arr), functools.partial(_same, arr)))
        sc = d.type(1)
        out.append((f"np.{d}", functools.partial(_same, sc), functools.partial(_same, sc)))
        if d != np.bool_ and (x64 or d not in WIDE):
            out.append((f"weak {d}[2]", functools.partial(_weak_jax, d), functools.partial(_weak_ferrax, d)))
    for py in (True, 1, 1.5):
        out.append((repr(py), functools.partial(_same, py), functools.partial(_same, py)))
    return out


def _same(x: Any) -> Any:
    return x


def _weak_ferrax(d: np.dtype[Any]) -> Any:
    return lax.convert_element_type(np.ones(2, d), d, True)


def kind(x: Any) -> Kind:
    return np.dtype(x.dtype), bool(x.weak_type)


def _with_warnings(f: Callable[[], Any]) -> tuple[Any, bool]:
    """``f()`` (or the exception's type name) and whether it warned (a UserWarning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = f()
        except Exception as e:  # noqa: BLE001 - compared with the other library's
            out = type(e).__name__
    return out, any(issubclass(w.category, UserWarning) for w in caught)


def _type_of(x: Any) -> Any:
    if isinstance(x, str):
        return x
    if isinstance(x, np.dtype):
        return x
    return kind(x)


# ------------------------------------------------------------------------ comparisons


def pair_mismatches(x64: bool) -> list[str]:
    """Binary operations and ``result_type`` over every pair of operands."""
    found: list[str] = []
    ops = [(label, ja(), fa()) for label, ja, fa in operands(x64)]
    for (la, a, x), (lb, b, y) in ((p, q) for p in ops for q in ops):
        # jax.numpy's functions are jitted: their arguments are typed as jit arguments,
        # eagerly too, so eval_shape gives the eager types.
        # A NumPy scalar promotes as a NumPy array of its dtype: true_divide (JAX's
        # slowest part here) leaves them out.
        scalars = la.startswith("np.") or lb.startswith("np.")
        fns = ((jnp.add, fnp.add),) if scalars else ((jnp.add, fnp.add), (jnp.true_divide, fnp.true_divide))
        want = [kind(jax.eval_shape(j, a, b)) for j, _ in fns]
        want_rt = np.dtype(jnp.result_type(a, b))
        eager = [kind(f(x, y)) for _, f in fns]
        staged = [
            (a.dtype, a.weak_type)
            for a in ferrax.make_jaxpr(lambda x, y: [f(x, y) for _, f in fns])(x, y).out_avals
        ]
        rt = fnp.result_type(x, y)
        for what, got, expected in (
            ("add, true_divide", eager, want),
            ("add, true_divide staged", staged, want),
            ("result_type", rt, want_rt),
        ):
            if got != expected:
                found.append(f"{what}({la}, {lb}): ferrax {got}, jax {expected}")
    return found


DTYPE_LIKES: list[Any] = [*DTYPES, int, float, bool, "float64", "int64", "float32"]


def dtype_mismatches() -> list[str]:
    """``result_type`` of dtype-likes, alone and in pairs (64-bit ones warn and are
    truncated without x64)."""
    found: list[str] = []
    cases: list[tuple[Any, ...]] = [(d,) for d in DTYPE_LIKES]
    cases += [(a, b) for a in DTYPE_LIKES for b in DTYPE_LIKES]
    for args in cases:
        theirs = _with_warnings(lambda: np.dtype(jnp.result_type(*args)))
        ours = _with_warnings(lambda: fnp.result_type(*args))
        if ours != theirs:
            found.append(f"result_type{args}: ferrax {ours}, jax {theirs}")
    return found


# Creation functions and conversions given an explicit dtype, as ``f(m, dtype)``.
REQUESTS: dict[str, Callable[[Any, Any], Any]] = {
    "zeros": lambda m, d: m.zeros(3, dtype=d),
    "ones": lambda m, d: m.ones((2, 2), dtype=d),
    "full": lambda m, d: m.full((2,), 1, dtype=d),
    "zeros_like": lambda m, d: m.zeros_like(np.ones(2, np.float32), dtype=d),
    "ones_like": lambda m, d: m.ones_like(np.ones(2, np.int32), dtype=d),
    "full_like": lambda m, d: m.full_like(np.ones(2, np.int8), 2, dtype=d),
    "array": lambda m, d: m.array([1, 2], dtype=d),
    "asarray": lambda m, d: m.asarray(np.ones(2, np.float32), dtype=d),
    "asarray scalar": lambda m, d: m.asarray(1.0, dtype=d),
    "arange": lambda m, d: m.arange(3, dtype=d),
    "linspace": lambda m, d: m.linspace(0, 1, 3, dtype=d),
    "eye": lambda m, d: m.eye(2, dtype=d),
    "astype": lambda m, d: m.asarray(np.ones(2, np.float32)).astype(d),
    "astype function": lambda m, d: m.astype(m.ones(2), d),
}


def request_mismatches() -> list[str]:
    """Every explicit dtype request: the dtype given, and JAX's warning when it is
    truncated."""
    found: list[str] = []
    for label, f in REQUESTS.items():
        for d in [*DTYPES, float, int]:
            if label == "linspace" and d == np.bool_:
                continue  # JAX's linspace of bools is an error of its own
            theirs = _with_warnings(lambda: _type_of(jax.eval_shape(lambda: f(jnp, d))))
            ours = _with_warnings(lambda: _type_of(f(fnp, d)))
            if ours != theirs:
                found.append(f"{label}(dtype={d}): ferrax {ours}, jax {theirs}")
    return found


# Values made without a dtype: the defaults of each mode.
DEFAULTS: dict[str, Callable[[Any], Any]] = {
    "arange(5)": lambda m: m.arange(5),
    "arange(5.0)": lambda m: m.arange(5.0),
    "arange(np.int64(5))": lambda m: m.arange(np.int64(5)),
    "asarray(1.5)": lambda m: m.asarray(1.5),
    "asarray(1)": lambda m: m.asarray(1),
    "asarray(True)": lambda m: m.asarray(True),
    "asarray(np f64 array)": lambda m: m.asarray(np.ones(2)),
    "asarray(np.float64)": lambda m: m.asarray(np.float64(2)),
    "asarray(np.uint64)": lambda m: m.asarray(np.uint64(2)),
    "array([1, 2])": lambda m: m.array([1, 2]),
    "array([1.0, 2])": lambda m: m.array([1.0, 2]),
    "array([np.float64, 1])": lambda m: m.array([np.float64(1), 1]),
    "array([])": lambda m: m.array([]),
    "zeros(3)": lambda m: m.zeros(3),
    "ones(2)": lambda m: m.ones(2),
    "eye(2)": lambda m: m.eye(2),
    "full((2,), 1)": lambda m: m.full((2,), 1),
    "full((2,), 1.5)": lambda m: m.full((2,), 1.5),
    "full((2,), np.float64)": lambda m: m.full((2,), np.float64(1.5)),
    "linspace(0, 1, 3)": lambda m: m.linspace(0, 1, 3),
    "zeros_like(1.0)": lambda m: m.zeros_like(1.0),
    "sum(bool)": lambda m: m.sum(np.ones(3, bool)),
    "sum(int8)": lambda m: m.sum(np.ones(3, np.int8)),
    "sum(uint8)": lambda m: m.sum(np.ones(3, np.uint8)),
    "sum(int32)": lambda m: m.sum(np.ones(3, np.int32)),
    "sum(uint32)": lambda m: m.sum(np.ones(3, np.uint32)),
    "sum(float16)": lambda m: m.sum(np.ones(3, np.float16)),
    "sum(np f64)": lambda m: m.sum(np.ones(3)),
    "mean(int32)": lambda m: m.mean(np.ones(3, np.int32)),
    "mean(float16)": lambda m: m.mean(np.ones(3, np.float16)),
    "argmax": lambda m: m.argmax(np.ones(3, np.float32)),
    "var(int32)": lambda m: m.var(np.ones(3, np.int32)),
    "std(np int64)": lambda m: m.std(np.ones(3, np.int64)),
    "var(float16)": lambda m: m.var(np.ones(3, np.float16)),
    "sum(int32, dtype=int64)": lambda m: m.sum(np.ones(3, np.int32), dtype=np.int64),
    "mean(f32, dtype=float64)": lambda m: m.mean(np.ones(3, np.float32), dtype=np.float64),
    "float64(1.5)": lambda m: m.float64(1.5),
    "int64(np f64)": lambda m: m.int64(np.ones(2)),
    "float32(np.float64)": lambda m: m.float32(np.float64(2)),
    "sin(int32)": lambda m: m.sin(np.ones(3, np.int32)),
    "sin(1)": lambda m: m.sin(1),
    "sqrt(np.int64)": lambda m: m.sqrt(np.int64(8)),
    "f32 / np.sqrt(8)": lambda m: m.ones(3, np.float32) / np.sqrt(8),
    "f32 * np.float64(2)": lambda m: m.ones(3, np.float32) * np.float64(2),
    "f16 + np.float64(2)": lambda m: m.ones(3, np.float16) + np.float64(2),
    "i8 + np.int64(2)": lambda m: m.ones(3, np.int8) + np.int64(2),
    "u32 + i32": lambda m: m.ones(3, np.uint32) + m.ones(3, np.int32),
    "u32 + 1": lambda m: m.ones(3, np.uint32) + 1,
    "bool + 1": lambda m: m.ones(3, bool) + 1,
    "bool + 1.5": lambda m: m.ones(3, bool) + 1.5,
    "i32 + 1.5": lambda m: m.ones(3, np.int32) + 1.5,
    "np i64 + np u64": lambda m: m.add(np.ones(2, np.int64), np.ones(2, np.uint64)),
    "where(bool, 1, 2.0)": lambda m: m.where(np.ones(2, bool), 1, 2.0),
    "maximum(1, 2)": lambda m: m.maximum(1, 2),
    "np f64 @ np f64": lambda m: m.matmul(np.ones((2, 2)), np.ones(2)),
    "concatenate(f64, f32)": lambda m: m.concatenate([np.ones(2), np.ones(2, np.float32)]),
}


def default_mismatches() -> list[str]:
    found: list[str] = []
    for label, f in DEFAULTS.items():
        theirs = _with_warnings(lambda: _type_of(jax.eval_shape(lambda: f(jnp))))
        ours = _with_warnings(lambda: _type_of(f(fnp)))
        staged = _with_warnings(
            lambda: [(a.dtype, a.weak_type) for a in ferrax.make_jaxpr(lambda: f(fnp))().out_avals]
        )
        if ours != theirs:
            found.append(f"{label}: ferrax {ours}, jax {theirs}")
        if not isinstance(theirs[0], str) and staged[0] != [theirs[0]]:
            found.append(f"{label} staged: ferrax {staged}, jax {theirs}")
    return found


FUNCTION_OPERANDS = ("int8[2]", "uint32[2]", "float16[2]", "float32[2]", "np.int64", "weak int8[2]",
                     "weak float16[2]", "weak uint32[2]", "1", "1.5")
def _named(name: str) -> Callable[[Any, Any, Any], Any]:
    return lambda m, x, y: getattr(m, name)(x, y)


FUNCTIONS: dict[str, Callable[[Any, Any, Any], Any]] = {
    name: _named(name)
    for name in ("subtract", "multiply", "maximum", "minimum", "remainder", "equal", "less",
                 "divide", "dot", "matmul")
}
FUNCTIONS["where"] = lambda m, x, y: m.where(np.array([True, False]), x, y)


def function_mismatches(x64: bool) -> list[str]:
    """Other binary functions of ``ferrax.numpy`` over a sample of operand kinds (their
    own promotion paths: ``dot`` takes JAX's result_type, remainder's fix-ups keep the
    operand's dtype, ...)."""
    found: list[str] = []
    ops = [(label, ja(), fa()) for label, ja, fa in operands(x64) if label in FUNCTION_OPERANDS]
    for name, f in FUNCTIONS.items():
        for (la, a, x), (lb, b, y) in ((p, q) for p in ops for q in ops):
            if name in ("dot", "matmul") and (
                np.ndim(a) == 0 or np.ndim(b) == 0 or "weak uint32[2]" in (la, lb)
            ):
                # JAX's refuse Python scalars (ferrax's take them), and a weak uint32
                # with an int8 (a dtype mismatch inside JAX's dot_general).
                continue
            theirs = _with_warnings(lambda: kind(jax.eval_shape(lambda a, b: f(jnp, a, b), a, b)))
            ours = _with_warnings(lambda: kind(f(fnp, x, y)))
            if ours != theirs:
                found.append(f"{name}({la}, {lb}): ferrax {ours}, jax {theirs}")
    return found


INTS = [0, -1, 127, 200, 255, 300, -129, 2**16, 2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**40, 2**63 - 1, 2**63]


def int_scalar_mismatches(x64: bool) -> list[str]:
    """Python ints with arrays of every dtype: an int must fit the default int type
    (else an OverflowError), then wraps to the array's dtype, as in JAX."""
    found: list[str] = []
    for d in DTYPES:
        if not x64 and d in WIDE:
            continue
        x = np.full(2, 3, d)
        for v in INTS:
            theirs = _with_warnings(lambda: _value_of(jnp.add(x, v)))
            ours = _with_warnings(lambda: _value_of(fnp.add(x, v)))
            if ours != theirs:
                found.append(f"{d}[2] + {v}: ferrax {ours}, jax {theirs}")
    for v in INTS:
        theirs = _with_warnings(lambda: _value_of(jnp.asarray(v)))
        ours = _with_warnings(lambda: _value_of(fnp.asarray(v)))
        if ours != theirs:
            found.append(f"asarray({v}): ferrax {ours}, jax {theirs}")
    return found


def _value_of(x: Any) -> Any:
    return np.dtype(x.dtype), bool(x.weak_type), np.asarray(x).ravel()[0].item()


def mismatches() -> list[str]:
    """Every difference from JAX in the current mode (ferrax's and JAX's must agree)."""
    x64 = bool(jax.config.jax_enable_x64)
    assert ferrax.config.jax_enable_x64 == x64, "ferrax and JAX run in different modes"
    return (
        pair_mismatches(x64)
        + dtype_mismatches()
        + request_mismatches()
        + default_mismatches()
        + int_scalar_mismatches(x64)
        + function_mismatches(x64)
    )


# -------------------------------------------------------------------------- the tests


def test_default_mode_matches_jax() -> None:
    assert not jax.config.jax_enable_x64
    assert not ferrax.config.jax_enable_x64
    found = mismatches()
    assert not found, f"{len(found)} differences from JAX:\n" + "\n".join(found[:60])


def test_x64_mode_matches_jax() -> None:
    """The same comparison with ``JAX_ENABLE_X64=1`` (read at import by both)."""
    env = dict(os.environ, JAX_ENABLE_X64="1", TF_CPP_MIN_LOG_LEVEL="3")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_x64 as t; "
        "import ferrax, jax; assert ferrax.config.jax_enable_x64 and jax.config.jax_enable_x64; "
        "found = t.mismatches(); print(len(found)); print('\\n'.join(found[:60]))"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-c", script, here], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count, _, listing = done.stdout.partition("\n")
    assert count.strip() == "0", f"{count.strip()} differences from JAX with x64:\n{listing}"


# ------------------------------------------------- where 64-bit values enter ferrax


def test_numpy_values_enter_as_32_bit_everywhere() -> None:
    f64 = np.linspace(0.0, 1.0, 3)  # float64
    i64 = np.arange(3)  # int64
    f32 = np.dtype(np.float32)
    # As operands, in asarray/array, device_put, as jit arguments and as constants.
    assert fnp.add(f64, f64).dtype == f32 and fnp.add(i64, 1).dtype == np.int32
    assert fnp.asarray(f64).dtype == f32 and fnp.array(np.float64(1.5)).dtype == f32
    assert fnp.asarray(np.uint64(3)).dtype == np.uint32
    put = ferrax.device_put(f64)
    assert put.dtype == f32 and not put.weak_type and np.asarray(put).dtype == f32
    assert ferrax.device_put(1.5).dtype == f32 and ferrax.device_put(1.5).weak_type
    assert ferrax.jit(lambda x: x * 2)(f64).dtype == f32
    closed = ferrax.make_jaxpr(lambda x: x + f64)(np.float32(1))
    assert [c.dtype for c in closed.consts] == [f32]
    assert "f64" not in str(closed)
    # Used several times, a float64 array is converted once: one constant, as in JAX.
    closed = ferrax.make_jaxpr(lambda x: fnp.sin(x * f64) + f64 - lax.mul(x, f64))(np.float32(1))
    assert [c.dtype for c in closed.consts] == [f32]
    # The attention-layer case: x / np.sqrt(d) stays float32.
    x = fnp.ones((2, 4), np.float32)
    assert (x / np.sqrt(4)).dtype == f32
    assert ferrax.make_jaxpr(lambda x: x / np.sqrt(4))(x).out_avals[0].dtype == f32
    # Values are converted as XLA converts: out of float32's range is inf, no warning.
    assert np.isinf(np.asarray(fnp.asarray(np.array([1e300])))).all()


def test_x64_keeps_64_bit_values_and_defaults() -> None:
    with ferrax.enable_x64():
        f64 = np.dtype(np.float64)
        assert fnp.add(np.ones(2), 1.0).dtype == f64
        assert fnp.arange(5).dtype == np.int64 and fnp.asarray(1.5).dtype == f64
        assert fnp.asarray(1.5).weak_type and fnp.zeros(2).dtype == f64
        assert ferrax.device_put(np.ones(2)).dtype == f64
        assert ferrax.jit(lambda x: x + 1)(np.arange(3)).dtype == np.int64
        closed = ferrax.make_jaxpr(lambda x: x + 1.5)(1)
        assert closed.in_avals[0].dtype == np.int64 and closed.out_avals[0].dtype == f64
        # 32-bit values keep their dtype: a Python scalar is weak and takes theirs.
        assert fnp.add(np.ones(2, np.float32), 1.5).dtype == np.float32
        assert fnp.add(np.ones(2, np.int32), 1).dtype == np.int32


def test_a_request_for_64_bits_warns_at_the_users_line() -> None:
    with pytest.warns(UserWarning, match="requested in zeros is not available") as caught:
        z = fnp.zeros(3, np.float64)
    assert z.dtype == np.float32
    assert [w.filename for w in caught] == [__file__]
    with pytest.warns(UserWarning, match="requested in astype"):
        assert fnp.ones(2).astype(np.int64).dtype == np.int32
    with ferrax.enable_x64(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fnp.zeros(3, np.float64).dtype == np.float64


def test_switching_modes_leaves_no_stale_cache() -> None:
    c = np.ones(3)  # float64, closed over

    def f(x: Any) -> Any:
        return x + c + fnp.arange(3) + 1.5

    jf = ferrax.jit(f)
    arg = ferrax.device_put(np.ones(3, np.float32))
    first = [jf(arg).dtype, jf(arg).dtype]  # the second call takes the fast path
    with ferrax.enable_x64():
        second = [jf(arg).dtype, jf(arg).dtype, jf(np.ones(3, np.float32)).dtype]
        made = ferrax.make_jaxpr(f)(np.ones(3, np.float32))
    third = [jf(arg).dtype, jf(arg).dtype]
    assert first == third == [np.float32, np.float32]
    assert second == [np.float64] * 3
    assert made.out_avals[0].dtype == np.float64
    assert ferrax.make_jaxpr(f)(np.ones(3, np.float32)).out_avals[0].dtype == np.float32
    # The staging fast path for Python scalars: with x64 a weak int32 value and a
    # Python int meet at int64, as in JAX.
    with ferrax.enable_x64(), jax.enable_x64(True):
        weak32 = lax.convert_element_type(1, np.int32, True)
        theirs = jax.make_jaxpr(lambda x: x + 1)(_weak_jax(np.dtype(np.int32))).out_avals[0]
        ours = ferrax.make_jaxpr(lambda x: x + 1)(weak32).out_avals[0]
        assert (ours.dtype, ours.weak_type) == (np.dtype(theirs.dtype), theirs.weak_type)


NAMED_REQUESTS: dict[str, Callable[[], Any]] = {
    "convert_element_type": lambda: lax.convert_element_type(np.ones(2, np.float32), np.float64),
    "iota": lambda: lax.iota(np.int64, 3),
    "broadcasted_iota": lambda: lax.broadcasted_iota(np.uint64, (2,), 0),
    "argmax": lambda: lax.argmax(np.ones(3, np.float32), 0, np.int64),
    "dot_general": lambda: lax.dot_general(
        np.ones(2, np.float32), np.ones(2, np.float32), (((0,), (0,)), ((), ())),
        preferred_element_type=np.float64,
    ),
    "sum": lambda: fnp.sum(np.ones(2, np.int32), dtype=np.int64),
    "mean": lambda: fnp.mean(np.ones(2, np.float32), dtype=np.float64),
    "var": lambda: fnp.var(np.ones(2, np.float32), dtype=np.float64),
    "full_like": lambda: fnp.full_like(np.ones(2, np.float32), 1, dtype=np.float64),
}


@pytest.mark.parametrize("name", list(NAMED_REQUESTS))
def test_truncation_warnings_name_the_function(name: str) -> None:
    with pytest.warns(UserWarning, match=f"requested in {name} is not available") as caught:
        out = NAMED_REQUESTS[name]()
    assert np.dtype(out.dtype).itemsize == 4
    assert caught[0].filename == __file__


def test_lax_python_scalars_are_typed_as_jax_types_them() -> None:
    f32 = np.ones(2, np.float32)
    # A Python int must fit the default int type first (JAX: the same OverflowError).
    with pytest.raises(OverflowError, match=r"Python int 1099511627776 too large to convert to int32, at .*test_x64\.py"):
        lax.add(f32, 2**40)
    with ferrax.enable_x64():
        assert float(lax.add(f32, 2**40)[0]) == 2.0**40  # (+ 1, rounded to float32)
    # Out of a half float's range is an infinity, as XLA converts, without NumPy's warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isinf(np.asarray(lax.add(np.ones(2, np.float16), 1e10))).all()
        assert np.isinf(np.asarray(lax.add(np.ones(2, np.float16), 70000))).all()
