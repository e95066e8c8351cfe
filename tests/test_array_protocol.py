"""The array a user holds (``ferrax.Array``) against ``jax.Array``.

Eager results, jit results and ``device_put`` values are one public type; their
``repr``/``str``/``format``, pickling and copying, NumPy's protocol (``__array__`` with
NumPy 2's ``copy=``, NumPy's functions dispatching to methods), the methods, operators
and scalar-type casts are compared with JAX's over generated dtypes, shapes and weak
types, eagerly and under ``jit``.
"""

from __future__ import annotations

import copy
import os
import pickle
import warnings
from collections.abc import Callable
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
DTYPES = ["bool", "int8", "int32", "uint8", "uint32", "float16", "bfloat16", "float32"]
SHAPES: list[tuple[int, ...]] = [(), (1,), (3,), (2, 3), (3, 1, 2), (0,), (2, 0), (4, 5), (2000,)]
INTERNAL_NAMES = ("ConcreteArray", "DeviceArray", "Tracer", "DynamicTracer", "_IndexUpdate", "ArrayImpl")


def _value(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    d = np.dtype(dtype)
    if d == np.bool_:
        return rng.integers(0, 2, shape).astype(d)
    if d.kind in "iu":
        lo = 0 if d.kind == "u" else -50
        return rng.integers(lo, 100, shape).astype(d)
    # Fractions of several magnitudes, so NumPy's printing picks its precision and padding.
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 3, shape)).astype(d)


def _pair(dtype: str, shape: tuple[int, ...], weak: bool, seed: int = 0) -> tuple[Any, Any]:
    """The same value as a ferrax and a jax array (weakly typed if ``weak``)."""
    value = _value(dtype, shape, seed)
    if weak:
        # A Python scalar makes the weak type in both: int array * 1.0 is a weak float32,
        # a 0-d array from a Python int a weak int32.
        if dtype == "float32":
            ints = value.astype(np.int32)
            return fnp.asarray(ints) * 1.0, jnp.asarray(ints) * 1.0
        assert dtype == "int32" and shape == ()
        return fnp.asarray(int(value)), jnp.asarray(int(value))
    return fnp.asarray(value), jnp.asarray(value)


def _display_cases() -> list[Any]:
    cases = [pytest.param(d, s, False, id=f"{d}-{s}") for d in DTYPES for s in SHAPES]
    cases += [pytest.param("float32", s, True, id=f"weak-float32-{s}") for s in SHAPES]
    cases.append(pytest.param("int32", (), True, id="weak-int32-()"))
    return cases


def _same(got: Any, want: Any) -> None:
    """``got`` (ferrax) has ``want``'s (jax) type, dtype, weak type, shape and values."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if not isinstance(want, jax.Array):
        assert type(got) is type(want), (got, want)
        assert got == want or (got != got and want != want)
        return
    assert isinstance(got, ferrax.Array), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.weak_type == want.weak_type, (got.weak_type, want.weak_type)
    assert got.shape == want.shape
    g, w = np.asarray(got), np.asarray(want)
    if g.dtype.kind == "f" or g.dtype == BF16:
        rtol = {2: 2e-2, 4: 2e-6}.get(g.dtype.itemsize, 1e-6)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(g, w)


# ----------------------------------------------------------------------- one public type


def test_eager_jit_and_device_results_are_one_public_type() -> None:
    x = fnp.arange(3.0)
    seen: list[bool] = []

    def f(y: ferrax.Array) -> ferrax.Array:
        seen.append(isinstance(y, ferrax.Array))
        return y * 2

    jitted = ferrax.jit(f)(x)
    for value in (x, jitted, ferrax.device_put(np.ones(2)), fnp.float32(1), x + 1, x[0]):
        assert isinstance(value, ferrax.Array)
        assert isinstance(value, fnp.ndarray)
    assert seen == [True]
    assert ferrax.Array is fnp.ndarray
    assert "Array" in ferrax.__all__
    # The classes implementing it are not public.
    assert not any("Array" in name and name != "Array" for name in ferrax.__all__)
    assert not hasattr(ferrax, "DeviceArray") and not hasattr(ferrax, "ConcreteArray")


# ---------------------------------------------------------------------- repr, str, format


@pytest.mark.parametrize(("dtype", "shape", "weak"), _display_cases())
def test_repr_and_str_are_jaxs(dtype: str, shape: tuple[int, ...], weak: bool) -> None:
    x, y = _pair(dtype, shape, weak)
    assert repr(x) == repr(y)
    assert str(x) == str(y)
    # A jit result prints as the eager one.
    on_device = ferrax.jit(lambda v: v)(x)
    assert repr(on_device) == repr(y)
    assert str(on_device) == str(y)


def test_repr_follows_numpy_print_options() -> None:
    x, y = _pair("float32", (4, 5), False)
    with np.printoptions(linewidth=40, precision=3):
        assert repr(x) == repr(y)
        assert str(x) == str(y)


@pytest.mark.parametrize("spec", [".4f", "8.2e", "", ">10", "+.1f", "g"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_format_of_scalars(spec: str, dtype: str) -> None:
    if dtype in ("int32", "bool") and spec and spec[-1] in "fe":
        spec = spec if dtype == "int32" else ">10"
    x, y = _pair(dtype, (), False, seed=3)
    assert format(x, spec) == format(y, spec)
    assert f"{x:{spec}}" == f"{y:{spec}}"
    assert format(ferrax.jit(lambda v: v)(x), spec) == format(y, spec)


def test_format_of_arrays_is_numpys() -> None:
    x, y = _pair("float32", (2, 3), False)
    assert format(x) == format(y) == str(y)
    with pytest.raises(TypeError):
        format(y, ".4f")
    with pytest.raises(TypeError):
        format(x, ".4f")


def test_traced_values_do_not_format_as_numbers() -> None:
    def f(v: Any) -> Any:
        with pytest.raises(ferrax.ConcretizationError):
            format(v, ".4f")
        assert repr(v) == str(v) == "Traced(float32[])"
        assert repr(v * 1.0) == "Traced(float32[])"
        weak = fnp.asarray(2.0) + 0 * v.astype(int)
        assert repr(weak) == f"Traced(~{weak.dtype.name}[])"
        return v

    ferrax.jit(f)(np.float32(1.0))


# ------------------------------------------------------------------- pickle and copying


@pytest.mark.parametrize(("dtype", "shape", "weak"), _display_cases()[::3])
@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy", "method"])
@pytest.mark.parametrize("where", ["eager", "jit"])
def test_pickle_and_copies_keep_dtype_weak_type_and_values(
    dtype: str, shape: tuple[int, ...], weak: bool, how: str, where: str
) -> None:
    x, y = _pair(dtype, shape, weak)
    if where == "jit":
        x = ferrax.jit(lambda v: v)(x)
    copies: dict[str, Callable[[Any], Any]] = {
        "pickle": lambda v: pickle.loads(pickle.dumps(v)),
        "deepcopy": copy.deepcopy,
        "copy": copy.copy,
        "method": lambda v: v.copy(),
    }
    got = copies[how](x)
    assert got is not x
    _same(got, copies[how](y))
    assert repr(got) == repr(y)


def test_copy_of_a_traced_value_stages_copy_as_jax() -> None:
    x = np.ones(3, np.float32)
    ours = ferrax.make_jaxpr(lambda v: v.copy())(x)
    theirs = jax.make_jaxpr(lambda v: v.copy())(x)
    assert [e.primitive for e in ours.jaxpr.eqns] == [e.primitive.name for e in theirs.jaxpr.eqns] == ["copy"]
    _same(ferrax.jit(lambda v: copy.deepcopy(v) + 1)(x), jax.jit(lambda v: copy.deepcopy(v) + 1)(x))


def test_pickled_arrays_in_containers() -> None:
    tree = {"w": fnp.ones((2, 2), fnp.bfloat16), "b": [fnp.asarray(1.0), ferrax.jit(lambda: fnp.arange(3))()]}
    back = pickle.loads(pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL))
    assert repr(back) == repr(tree)
    assert back["b"][0].weak_type


def test_traced_values_cannot_be_pickled() -> None:
    def f(v: Any) -> Any:
        with pytest.raises(ferrax.ConcretizationError):
            pickle.dumps(v)
        assert isinstance(copy.deepcopy(v), ferrax.Array)
        return v

    ferrax.jit(f)(np.ones(2, np.float32))


# ---------------------------------------------------------------------- NumPy's protocol


@pytest.mark.parametrize("where", ["eager", "jit"])
def test_array_protocol_copy_semantics(where: str) -> None:
    x = fnp.arange(4.0, dtype=np.float32)
    if where == "jit":
        x = ferrax.jit(lambda v: v + 0)(x)
    view = np.asarray(x)
    assert view.dtype == np.float32 and not view.flags.writeable  # immutable, as JAX's
    assert np.asarray(x, copy=False).tolist() == [0.0, 1.0, 2.0, 3.0]
    owned = np.array(x)
    assert owned.flags.writeable and owned.flags.owndata
    owned[0] = 7.0
    assert float(x[0]) == 0.0  # the copy is independent
    forced = np.asarray(x, copy=True)
    assert forced.flags.writeable
    assert np.asarray(x, dtype=np.int32).dtype == np.int32
    with pytest.raises(ValueError):
        np.asarray(x, dtype=np.int32, copy=False)
    assert x.__array_priority__ >= 100
    # With NumPy on the left, the ferrax operand wins: the result is an Array.
    assert isinstance(np.ones(4, np.float32) + x, ferrax.Array)
    assert isinstance(np.float32(2) * x, ferrax.Array)


NUMPY_FUNCTIONS: list[tuple[str, Callable[[Any], Any]]] = [
    ("sum", np.sum),
    ("sum axis", lambda v: np.sum(v, axis=0)),
    ("sum keepdims", lambda v: np.sum(v, axis=1, keepdims=True)),
    ("mean", np.mean),
    ("mean axis", lambda v: np.mean(v, axis=1)),
    ("max", np.max),
    ("min", np.min),
    ("amax", lambda v: np.amax(v, axis=0)),
    ("prod", np.prod),
    ("any", np.any),
    ("all", np.all),
    ("argmax", np.argmax),
    ("argmin axis", lambda v: np.argmin(v, axis=1)),
    ("round", np.round),
    ("around 1", lambda v: np.around(v, 1)),
    ("std", np.std),
    ("var ddof", lambda v: np.var(v, ddof=1)),
    ("transpose", np.transpose),
    ("swapaxes", lambda v: np.swapaxes(v, 0, 1)),
    ("repeat", lambda v: np.repeat(v, 2)),
    ("repeat axis", lambda v: np.repeat(v, 3, axis=1)),
    ("reshape", lambda v: np.reshape(v, (3, 2))),
    ("squeeze", lambda v: np.squeeze(v[None])),
    ("allclose", lambda v: np.allclose(v, v + 1e-9)),
    ("not allclose", lambda v: np.allclose(v, v + 1)),
    ("array_equal", lambda v: np.array_equal(v, v)),
    ("asarray", lambda v: np.asarray(v).tolist()),
    ("isclose", lambda v: np.isclose(v, 0.0).tolist()),
    ("shape", np.shape),
    ("ndim", np.ndim),
    ("size", np.size),
]


@pytest.mark.parametrize(("name", "fun"), NUMPY_FUNCTIONS, ids=[n for n, _ in NUMPY_FUNCTIONS])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_numpy_functions_on_arrays_agree_with_jax(name: str, fun: Callable[[Any], Any], dtype: str) -> None:
    x, y = _pair(dtype, (2, 3), False, seed=1)
    want = fun(y)
    got = fun(x)
    if isinstance(want, np.ndarray):
        want = want.tolist()
    if isinstance(got, np.ndarray):
        got = got.tolist()
    if isinstance(want, np.bool_):
        want = bool(want)
    if isinstance(got, np.bool_):
        got = bool(got)
    _same(got, want)


@pytest.mark.parametrize(
    "method", ["sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "round", "clip", "std", "var", "cumsum"]
)
def test_out_must_be_none(method: str) -> None:
    x = fnp.ones((2, 2))
    if not hasattr(fnp, method):
        with pytest.raises(NotImplementedError):
            getattr(x, method)()
        return
    assert isinstance(getattr(x, method)(out=None), ferrax.Array)
    with pytest.raises(NotImplementedError, match="'out' argument"):
        getattr(x, method)(out=np.zeros((2, 2), np.float32))


# --------------------------------------------------------------------------- methods

M = np.array([[True, False, True], [False, True, True]])

METHODS: list[tuple[str, Callable[[Any], Any]]] = [
    ("block_until_ready", lambda v: v.block_until_ready()),
    ("copy", lambda v: v.copy()),
    ("item", lambda v: v[1, 2].item()),
    ("item index", lambda v: v.item(4)),
    ("tolist", lambda v: v.tolist()),
    ("nbytes", lambda v: v.nbytes),
    ("itemsize", lambda v: v.itemsize),
    ("size", lambda v: v.size),
    ("ndim", lambda v: v.ndim),
    ("len", len),
    ("flatten", lambda v: v.flatten()),
    ("ravel", lambda v: v.ravel()),
    ("any", lambda v: v.any()),
    ("any axis", lambda v: v.any(axis=1)),
    ("any where", lambda v: v.any(axis=0, where=M)),
    ("all", lambda v: v.all()),
    ("all keepdims", lambda v: v.all(axis=0, keepdims=True)),
    ("all where", lambda v: v.all(where=M)),
    ("clip", lambda v: v.clip(1, 3)),
    ("clip min", lambda v: v.clip(min=2)),
    ("clip max", lambda v: v.clip(max=0.5)),
    ("round", lambda v: v.round()),
    ("round 1", lambda v: v.round(1)),
    ("round 2", lambda v: v.round(decimals=2)),
    ("argmin", lambda v: v.argmin()),
    ("argmin axis", lambda v: v.argmin(axis=1)),
    ("argmin keepdims", lambda v: v.argmin(axis=0, keepdims=True)),
    ("argmax keepdims", lambda v: v.argmax(keepdims=True)),
    ("argmax axis keepdims", lambda v: v.argmax(axis=-1, keepdims=True)),
    ("swapaxes", lambda v: v.swapaxes(0, 1)),
    ("swapaxes 3d", lambda v: v.reshape(1, 2, 3).swapaxes(2, 0)),
    ("repeat", lambda v: v.repeat(2)),
    ("repeat axis", lambda v: v.repeat(3, axis=0)),
    ("repeat counts", lambda v: v.repeat(np.array([1, 0, 2]), axis=1)),
    ("repeat list", lambda v: v.repeat([2, 1], axis=0)),
    ("transpose tuple", lambda v: v.reshape(1, 2, 3).transpose((2, 0, 1))),
    ("transpose args", lambda v: v.reshape(1, 2, 3).transpose(2, 0, 1)),
    ("transpose none", lambda v: v.transpose()),
    ("T", lambda v: v.T),
    ("reshape args", lambda v: v.reshape(3, 2)),
    ("reshape tuple", lambda v: v.reshape((6,))),
    ("sum dtype", lambda v: v.sum(dtype=np.int32)),
    ("sum dtype float", lambda v: v.sum(axis=0, dtype=np.float32)),
    ("sum initial", lambda v: v.sum(initial=2) if isinstance(v, ferrax.Array) else jnp.sum(v, initial=2)),
    ("sum where", lambda v: v.sum(axis=1, where=M)),
    ("prod dtype", lambda v: v.prod(dtype=np.float32)),
    ("sum bool", lambda v: v.sum(axis=0, dtype=bool)),
    ("prod bool", lambda v: v.prod(dtype=np.bool_)),
    ("prod initial", lambda v: v.prod(axis=1, initial=3)),
    ("max initial", lambda v: v.max(initial=2)),
    ("max axis initial", lambda v: v.max(axis=0, initial=1)),
    ("max where", lambda v: v.max(where=M, initial=1)),
    ("min initial", lambda v: v.min(initial=0)),
    ("min keepdims", lambda v: v.min(axis=1, keepdims=True)),
    ("mean dtype", lambda v: v.mean(dtype=np.float32)),
    ("mean where", lambda v: v.mean(axis=1, where=M)),
    ("mean keepdims", lambda v: v.mean(axis=0, keepdims=True)),
    ("std", lambda v: v.std()),
    ("std ddof", lambda v: v.std(axis=0, ddof=1)),
    ("var", lambda v: v.var(axis=1, keepdims=True)),
    ("var correction", lambda v: v.var(correction=2)),
    ("astype", lambda v: v.astype(np.int8)),
    ("dot", lambda v: v.dot(v.T)),
]


def _compare_method(fun: Callable[[Any], Any], x: Any, y: Any) -> None:
    try:
        want = fun(y)
    except Exception:  # noqa: BLE001 -- JAX refuses: so must ferrax
        with pytest.raises((TypeError, ValueError, NotImplementedError)):
            fun(x)
        return
    _same(fun(x), want)


@pytest.mark.parametrize(("name", "fun"), METHODS, ids=[n for n, _ in METHODS])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint8", "bool", "float16", "bfloat16"])
def test_methods_agree_with_jax(name: str, fun: Callable[[Any], Any], dtype: str) -> None:
    x, y = _pair(dtype, (2, 3), False, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's own deprecation notes are not under test
        _compare_method(fun, x, y)


@pytest.mark.parametrize(("name", "fun"), METHODS, ids=[n for n, _ in METHODS])
def test_methods_under_jit_agree_with_eager(name: str, fun: Callable[[Any], Any]) -> None:
    x, y = _pair("float32", (2, 3), False, seed=4)
    try:
        eager = fun(x)
    except TypeError:
        with pytest.raises(TypeError):
            ferrax.jit(fun)(x)
        return
    if not isinstance(eager, ferrax.Array):
        return  # Python values need concrete arrays (checked in test_traced_conversions)
    _same(ferrax.jit(fun)(x), fun(y))


@pytest.mark.parametrize(("name", "fun"), METHODS, ids=[n for n, _ in METHODS])
def test_weak_types_of_methods_are_jaxs(name: str, fun: Callable[[Any], Any]) -> None:
    x, y = _pair("float32", (2, 3), True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare_method(fun, x, y)


def test_traced_conversions_name_the_concretization() -> None:
    def f(v: Any) -> Any:
        for convert in (lambda a: a.item(), lambda a: a.tolist(), float, np.asarray):
            with pytest.raises(ferrax.ConcretizationError, match="traced"):
                convert(v)
        return v

    ferrax.jit(f)(np.float32(1.0))


def test_take_calls_ferrax_numpy_take() -> None:
    x = fnp.arange(6.0).reshape(2, 3)
    if not hasattr(fnp, "take"):
        with pytest.raises(NotImplementedError, match="take"):
            x.take(np.array([0, 2]))
        return
    idx = np.array([0, 2])
    _same(x.take(idx), jnp.arange(6.0).reshape(2, 3).take(idx))
    _same(x.take(idx, axis=1), jnp.arange(6.0).reshape(2, 3).take(idx, axis=1))


def test_take_forwards_the_options_given(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []

    def fake_take(a: Any, indices: Any, **options: Any) -> Any:
        seen.append((indices, options))
        return a

    monkeypatch.setattr(fnp, "take", fake_take, raising=False)
    x = fnp.arange(6.0)
    x.take([1, 2])
    x.take(np.array([0]), axis=0, mode="clip", fill_value=-1.0)
    np.take(x, 3, mode="wrap")  # NumPy's function forwards to the method
    assert seen == [
        ([1, 2], {"axis": None}),
        (seen[1][0], {"axis": 0, "mode": "clip", "fill_value": -1.0}),
        (3, {"axis": None, "mode": "wrap"}),
    ]
    with pytest.raises(NotImplementedError, match="'out' argument"):
        x.take([0], out=np.zeros(1))  # type: ignore[arg-type]


def test_iteration_and_len() -> None:
    x, y = _pair("int32", (3, 2), False)
    assert [r.tolist() for r in x] == [r.tolist() for r in y]
    z = fnp.asarray(1.0)
    with pytest.raises(TypeError):
        iter(z)
    with pytest.raises(TypeError):
        len(z)


# -------------------------------------------------------------------------- operators

INT_DTYPES = ["int8", "int32", "uint8", "uint32"]


def _operator_cases() -> list[Any]:
    ops: list[tuple[str, Callable[[Any, Any], Any], bool]] = [
        ("xor", lambda a, b: a ^ b, False),
        ("xor scalar", lambda a, b: a ^ 5, False),
        ("rxor scalar", lambda a, b: 6 ^ a, False),
        ("invert", lambda a, b: ~a, False),
        ("divmod", lambda a, b: divmod(a, b), False),
        ("divmod scalar", lambda a, b: divmod(a, 3), False),
        ("rdivmod scalar", lambda a, b: divmod(7, b), False),
        ("lshift", lambda a, b: a << (b % 8), True),
        ("lshift scalar", lambda a, b: a << 2, True),
        ("rlshift", lambda a, b: 1 << (b % 8), True),
        ("rshift", lambda a, b: a >> (b % 8), True),
        ("rshift scalar", lambda a, b: a >> 1, True),
        ("rrshift", lambda a, b: 100 >> (b % 8), True),
    ]
    cases = []
    for name, op, needs_shift in ops:
        for d in INT_DTYPES:
            marks = []
            if needs_shift and not hasattr(lax, "shift_left"):
                marks.append(pytest.mark.skip(reason="lax.shift_left lands with the xor/shift primitives"))
            cases.append(pytest.param(op, d, id=f"{name}-{d}", marks=marks))
    return cases


@pytest.mark.parametrize(("op", "dtype"), _operator_cases())
def test_integer_operators_agree_with_jax(op: Callable[[Any, Any], Any], dtype: str) -> None:
    a, ja = _pair(dtype, (6,), False, seed=5)
    b_value = np.maximum(_value(dtype, (6,), seed=6), 1).astype(dtype)
    b, jb = fnp.asarray(b_value), jnp.asarray(b_value)
    _same(op(a, b), op(ja, jb))
    _same(ferrax.jit(op)(a, b), op(ja, jb))


@pytest.mark.parametrize(
    "op",
    [lambda a, b: a ^ b, lambda a, b: a ^ True, lambda a, b: ~a, lambda a, b: a & b, lambda a, b: a | b],
)
def test_boolean_operators_agree_with_jax(op: Callable[[Any, Any], Any]) -> None:
    a, ja = _pair("bool", (5,), False, seed=7)
    b, jb = _pair("bool", (5,), False, seed=8)
    _same(op(a, b), op(ja, jb))


@pytest.mark.skipif(not hasattr(lax, "shift_left"), reason="lax.shift_left lands with the xor/shift primitives")
@pytest.mark.parametrize(
    "op",
    [lambda a, b: a << 1, lambda a, b: a >> b, lambda a, b: 1 << a, lambda a, b: a << 9, lambda a, b: b >> 9],
)
def test_shifts_of_bools_and_past_the_width_agree_with_jax(op: Callable[[Any, Any], Any]) -> None:
    a, ja = _pair("bool", (5,), False, seed=7)
    b_value = np.array([-128, -1, 0, 64, 127], np.int8)
    b, jb = fnp.asarray(b_value), jnp.asarray(b_value)
    _same(op(a, b), op(ja, jb))
    _same(ferrax.jit(op)(a, b), jax.jit(op)(ja, jb))


def test_shifts_stage_jaxs_primitives(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, np.dtype[Any], np.dtype[Any]]] = []

    def recorder(name: str) -> Callable[[Any, Any], Any]:
        def shift(a: Any, b: Any) -> Any:
            calls.append((name, a.dtype, b.dtype))
            return a

        return shift

    for name in ("shift_left", "shift_right_arithmetic", "shift_right_logical"):
        monkeypatch.setattr(lax, name, recorder(name), raising=False)
    fnp.ones(2, np.uint8) >> 1
    fnp.ones(2, np.int8) >> 1
    fnp.ones(2, np.int16) << np.int16(3)
    fnp.ones(2, bool) << 1
    assert calls == [
        ("shift_right_logical", np.dtype(np.uint8), np.dtype(np.uint8)),
        ("shift_right_arithmetic", np.dtype(np.int8), np.dtype(np.int8)),
        ("shift_left", np.dtype(np.int16), np.dtype(np.int16)),
        ("shift_left", np.dtype(np.int32), np.dtype(np.int32)),
    ]
    with pytest.raises(TypeError):
        fnp.ones(2) << 1


@pytest.mark.skipif(not hasattr(lax, "bitwise_xor"), reason="lax.bitwise_xor lands with the xor primitive")
def test_xor_stages_jaxs_primitive() -> None:
    x = np.array([True, False])
    ours = ferrax.make_jaxpr(lambda a: a ^ True)(x)
    theirs = jax.make_jaxpr(lambda a: a ^ True)(x)
    assert [e.primitive for e in ours.jaxpr.eqns] == [e.primitive.name for e in theirs.jaxpr.eqns] == ["xor"]


def test_xor_is_bitwise_on_every_bit() -> None:
    x = np.array([0, -1, 127, -128, 85], np.int8)
    y = np.array([-1, -1, -128, 1, -86], np.int8)
    assert (fnp.asarray(x) ^ y).tolist() == (x ^ y).tolist()
    u = np.array([0, 2**32 - 1, 2**31, 12345], np.uint32)
    assert (fnp.asarray(u) ^ np.uint32(2**32 - 1)).tolist() == (u ^ np.uint32(2**32 - 1)).tolist()


def test_xor_of_floats_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        fnp.ones(2) ^ 1


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("ndigits", [None, 0, 1, 2])
def test_round_builtin_agrees_with_jax(dtype: str, ndigits: int | None) -> None:
    x, y = _pair(dtype, (7,), False, seed=9)
    _same(round(x, ndigits), round(y, ndigits))
    _same(ferrax.jit(lambda v: round(v, ndigits))(x), round(y, ndigits))


def test_round_halves_to_even_like_jax() -> None:
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999998, 1e8 + 1, -3.5, 0.0, -0.0, np.inf, np.nan], np.float32)
    _same(fnp.round(values), jnp.round(values))
    halves = np.array([0.5, 1.5, 2.5, -2.5, 1024.5, 2047.0, 60000.0, -0.25, np.inf, np.nan], np.float16)
    _same(fnp.round(halves), jnp.round(halves))
    _same(fnp.round(halves.astype(ml_dtypes.bfloat16)), jnp.round(halves.astype(ml_dtypes.bfloat16)))
    _same(fnp.round(np.array([1.25, 2.675, -0.125], np.float32), 2), jnp.round(np.array([1.25, 2.675, -0.125], np.float32), 2))
    assert np.signbit(np.asarray(fnp.round(np.float32(-0.4)))) == np.signbit(np.asarray(jnp.round(np.float32(-0.4))))


# ------------------------------------------------------------- immutability, attributes


def _no_internal_names(message: str) -> None:
    for name in INTERNAL_NAMES:
        assert name not in message, message


@pytest.mark.parametrize("where", ["eager", "jit result", "traced"])
def test_item_assignment_points_to_at(where: str) -> None:
    def attempt(x: Any) -> str:
        with pytest.raises(TypeError) as info:
            x[0] = 1
        return str(info.value)

    x = fnp.arange(3)
    if where == "eager":
        message = attempt(x)
    elif where == "jit result":
        message = attempt(ferrax.jit(lambda v: v + 1)(x))
    else:
        messages: list[str] = []

        def f(v: Any) -> Any:
            messages.append(attempt(v))
            return v

        ferrax.jit(f)(x)
        (message,) = messages
    assert "x.at[0].set(1)" in message
    assert "immutable" in message
    assert os.path.basename(__file__) in message
    _no_internal_names(message)


def test_item_deletion_is_a_type_error() -> None:
    x = fnp.arange(3)
    with pytest.raises(TypeError, match="immutable") as info:
        del x[0]  # type: ignore[attr-defined]
    _no_internal_names(str(info.value))


def test_item_assignment_message_shows_the_index() -> None:
    x = fnp.zeros((3, 3))
    with pytest.raises(TypeError, match=r"x\.at\[1:, \.\.\.\]\.set\(2\.5\)"):
        x[1:, ...] = 2.5  # type: ignore[index]
    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.set\(y\)"):
        x[np.array([0, 1])] = np.ones(3)  # type: ignore[index]


@pytest.mark.parametrize("where", ["eager", "jit result", "traced", "device_put"])
def test_unknown_attribute_names_the_public_type(where: str) -> None:
    messages: list[str] = []

    def probe(x: Any) -> None:
        with pytest.raises(AttributeError) as info:
            x.foo  # noqa: B018
        messages.append(str(info.value))
        assert not hasattr(x, "bar")

    x = fnp.arange(3.0)
    if where == "eager":
        probe(x)
    elif where == "jit result":
        probe(ferrax.jit(lambda v: v * 2)(x))
    elif where == "device_put":
        probe(ferrax.device_put(np.ones(2)))
    else:

        def f(v: Any) -> Any:
            probe(v)
            return v

        ferrax.jit(f)(x)
    (message,) = messages
    assert message == "ferrax.Array has no attribute 'foo'"


@pytest.mark.parametrize("where", ["eager", "jit result", "traced"])
def test_pythons_own_messages_name_the_public_type(where: str) -> None:
    mistakes: list[Callable[[Any], Any]] = [
        hash,
        lambda v: {v: 1},
        lambda v: {v},
        lambda v: v(),
        lambda v: setattr(v, "foo", 1),
        lambda v: setattr(v, "shape", (3, 1)),
        lambda v: setattr(v, "dtype", np.int32),
        lambda v: setattr(v, "ndim", 2),
    ]
    messages: list[str] = []

    def probe(v: Any) -> Any:
        for mistake in mistakes:
            with pytest.raises((TypeError, AttributeError)) as info:
                mistake(v)
            messages.append(str(info.value))
        return v

    x = fnp.arange(3.0)
    if where == "eager":
        probe(x)
    elif where == "jit result":
        probe(ferrax.jit(lambda v: v + 1)(x))
    else:
        ferrax.jit(probe)(x)
    assert len(messages) == len(mistakes)
    for message in messages:
        assert "ferrax.Array" in message
        _no_internal_names(message)
    assert "x = x.reshape(" in messages[5] and "x = x.astype(" in messages[6]
    for message in messages[5:]:
        assert os.path.basename(__file__) in message


@pytest.mark.parametrize(
    "mistake",
    [
        lambda v: v.sum(out=np.zeros(())),
        lambda v: v.reshape(2, 2, order="A"),
        lambda v: v.flatten("K"),
        lambda v: len(v.sum()),
        lambda v: iter(v.sum()),
        lambda v: v.round(out=v),
    ],
)
def test_method_errors_name_the_users_line(mistake: Callable[[Any], Any]) -> None:
    with pytest.raises((TypeError, NotImplementedError)) as info:
        mistake(fnp.ones((2, 2)))
    assert os.path.basename(__file__) in str(info.value)
    _no_internal_names(str(info.value))


def test_messages_about_array_types_name_the_public_type() -> None:
    x = fnp.arange(3.0)
    # (The exception class is JAX's, tested with the other errors; here: the name.)
    with pytest.raises((TypeError, ValueError)) as info:
        ferrax.jit(lambda a, b: a, static_argnums=1)(1.0, x)
    assert "ferrax.Array" in str(info.value)
    _no_internal_names(str(info.value))
    with pytest.raises((TypeError, ValueError)) as info:
        ferrax.make_jaxpr(lambda a, b: a, static_argnums=1)(1.0, x)
    assert "ferrax.Array" in str(info.value)
    _no_internal_names(str(info.value))


# ------------------------------------------------------------------------ scalar types

SCALAR_TYPES = ["bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "bfloat16", "float32"]
WIDE_TYPES = ["int64", "uint64", "float64"]


@pytest.mark.parametrize("name", SCALAR_TYPES + WIDE_TYPES)
@pytest.mark.parametrize("value", [3, 2.75, True, -1.5, [1, 2], np.array([[0.5], [7.25]], np.float32)], ids=str)
def test_scalar_types_cast_as_jax(name: str, value: Any) -> None:
    ftype, jtype = getattr(fnp, name), getattr(jnp, name)
    if name.startswith("uint") and np.any(np.asarray(value) < 0):
        # Negative Python numbers do not fit an unsigned type: JAX refuses them.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the 64-bit truncation notes
            with pytest.raises(OverflowError, match="out of bounds"):
                jtype(value)
            with pytest.raises(OverflowError, match=r"Python integer -1 out of bounds for uint\d+.*test_array_protocol"):
                ftype(value)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's (and ferrax's) 64-bit truncation notes
        want = jtype(value)
        got = ftype(value)
    _same(got, want)


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_types_cast_under_jit(name: str) -> None:
    ftype, jtype = getattr(fnp, name), getattr(jnp, name)
    x = np.array([0.0, 1.5, -2.25, 7.0], np.float32)
    _same(ferrax.jit(lambda v: ftype(v) * 2)(x), jax.jit(lambda v: jtype(v) * 2)(x))
    jaxpr = ferrax.make_jaxpr(lambda v: ftype(v))(x)
    if name != "float32":
        assert "convert_element_type" in str(jaxpr)


def test_64_bit_scalar_types_truncate_with_a_warning() -> None:
    if ferrax.config.jax_enable_x64:
        pytest.skip("64-bit types are kept with x64")
    with pytest.warns(UserWarning, match="float64"):
        y = fnp.float64(1.5)
    assert y.dtype == np.float32


@pytest.mark.parametrize("name", SCALAR_TYPES + WIDE_TYPES)
def test_scalar_types_are_dtypes(name: str) -> None:
    t = getattr(fnp, name)
    np_type = np.dtype(getattr(jnp, name).dtype).type
    assert t.dtype == np.dtype(np_type) == np.dtype(t)
    assert t == np_type and np_type == t and hash(t) == hash(np_type)
    assert {np_type: 1}[t] == 1
    assert isinstance(np_type(1), t)
    assert not isinstance(fnp.asarray(np.ones(2, np_type)), t)
    assert np.zeros(2, t).dtype == np_type
    assert repr(t) == f"<class 'ferrax.numpy.{name}'>"
    assert t.__name__ == name
    if name not in WIDE_TYPES:
        assert fnp.zeros(3, t).dtype == np_type
        assert fnp.ones((2,), dtype=t).dtype == np_type
        assert fnp.arange(3.0).astype(t).dtype == np_type
        assert fnp.asarray(np.ones(2, np.float32)).dtype != t or name == "float32"
        assert (fnp.zeros(2, t).dtype == t) is True


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_types_wherever_a_dtype_is_taken(name: str) -> None:
    from ferrax.core import ShapedArray

    t = getattr(fnp, name)
    d = np.dtype(getattr(jnp, name).dtype)
    x = fnp.ones((2,))
    assert lax.convert_element_type(x, t).dtype == d
    assert ShapedArray((3,), t) == ShapedArray((3,), d)
    assert fnp.result_type(t) == d
    assert fnp.full(2, 1, t).dtype == d
    assert fnp.zeros_like(x, dtype=t).dtype == d
    assert fnp.asarray([1, 0], t).dtype == d
    assert fnp.sum(x, dtype=t).dtype == d
    jaxpr = ferrax.make_jaxpr(lambda v: t(v))(np.ones(2, np.float32))
    assert jaxpr.out_avals == [ShapedArray((2,), d)]


@pytest.mark.parametrize(
    "fun",
    [
        lambda v: v.repeat(2),
        lambda v: v.repeat(3, axis=0),
        lambda v: v.repeat(2, axis=-1),
        lambda v: v.flatten(),
        lambda v: v.transpose(1, 0),
        lambda v: v.max(initial=0.5),
    ],
)
def test_methods_stage_jaxs_primitives(fun: Callable[[Any], Any]) -> None:
    x = np.ones((2, 3), np.float32)
    ours = ferrax.make_jaxpr(fun)(x)
    theirs = jax.make_jaxpr(fun)(jnp.asarray(x))
    assert [e.primitive for e in ours.jaxpr.eqns] == [e.primitive.name for e in theirs.jaxpr.eqns]
    assert ours.out_avals[0].shape == theirs.out_avals[0].shape


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
@pytest.mark.parametrize(
    "value", [-1, 0, 127, 128, 255, 256, -129, 127.9, -0.5, -1.5, 2**31, [1, 300], [[-1], [2]], (3, -200)], ids=str
)
def test_python_numbers_asked_for_as_integers_must_fit(dtype: str, value: Any) -> None:
    try:
        want: Any = np.asarray(jnp.asarray(value, dtype=dtype))
    except OverflowError:
        want = OverflowError
    if want is OverflowError:
        with pytest.raises(OverflowError, match="out of bounds.*test_array_protocol"):
            fnp.asarray(value, dtype=dtype)
    else:
        got = np.asarray(fnp.asarray(value, dtype=dtype))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
