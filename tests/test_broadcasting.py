"""Broadcasting as JAX 0.10 does it.

Binary elementwise primitives broadcast a rank-0 operand and, between operands of equal
rank, size-1 dimensions (``lax.add(f32[4,3], f32[1,3])`` is ``f32[4,3]``); operands of
different non-zero ranks are refused. ``ferrax.numpy`` stages ``x + b`` with a lower-rank
``b`` as ``broadcast_in_dim`` of ``b`` to leading size-1 dimensions, then the primitive,
as ``jax.numpy`` does. The binary primitives are found from the primitive table, so a new
one is covered (and must have a JAX counterpart) without editing this file.

Compilations, not the checks, take the time: JAX's results of a table's cases (but the
incomplete gamma family's) are computed in one ``jax.jit`` (the operands its arguments,
as eager dispatch passes them to a primitive's computation), ferrax's jitted ones in one
``ferrax.jit``. Where a table fails to build, each test computes its own case (to report
its own error).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import _ir, core
from ferrax._core import Primitive
from ferrax._lax.registry import primitive_named
from ferrax.errors import TypeCheckError

_CANDIDATE_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_))
# Names in jax.lax where they differ from the primitive's.
_JAX_NAMES = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "not": "bitwise_not"}


def _all_primitives() -> list[Primitive]:
    from ferrax._lax import registry

    return sorted(registry._collect().values(), key=lambda p: p.name)


def _binary_dtype(prim: Primitive) -> np.dtype[Any] | None:
    """The first dtype for which ``prim`` is a binary elementwise primitive taking no
    params (two operands of one shape give that shape, a scalar operand broadcasts)."""
    if not prim._builtin or prim.multiple_results:
        return None
    for d in _CANDIDATE_DTYPES:
        x, s = _ir.ShapedArray((2, 3), d), _ir.ShapedArray((), d)
        try:
            same = prim.abstract_eval([x, x], {})
            scalar = prim.abstract_eval([x, s], {})
        except Exception:
            continue
        if [a.shape for a in same] == [(2, 3)] and [a.shape for a in scalar] == [(2, 3)]:
            return d
    return None


BINARY = [(p.name, d) for p in _all_primitives() if (d := _binary_dtype(p)) is not None]

SIZE_ONE_SHAPES = [
    ((4, 3), (1, 3)),
    ((1, 3), (4, 3)),
    ((4, 1), (1, 3)),
    ((1, 1), (2, 5)),
    ((2, 1, 3), (1, 4, 1)),
    ((1, 3), (0, 3)),
    ((1,), (6,)),
]


def test_the_binary_primitives_are_found() -> None:
    names = {n for n, _ in BINARY}
    assert {"add", "sub", "mul", "div", "rem", "pow", "max", "min", "and", "or"} <= names
    assert {"eq", "ne", "lt", "le", "gt", "ge"} <= names
    assert "select_n" not in names and "sin" not in names


def _operand(shape: tuple[int, ...], dtype: np.dtype[Any], rng: np.random.Generator) -> np.ndarray[Any, Any]:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(1, 5, size=shape).astype(dtype)
    return rng.uniform(0.5, 2.0, size=shape).astype(dtype)


def _jax_fun(name: str) -> Callable[..., Any]:
    fun = getattr(jax.lax, _JAX_NAMES.get(name, name), None)
    assert fun is not None, f"jax.lax has no counterpart of primitive {name}"
    return fun  # type: ignore[no-any-return]


Shapes = tuple[tuple[int, ...], tuple[int, ...]]
NDArray = np.ndarray[Any, Any]
Binary = Callable[[Any, Any], Any]


def _batched(
    jit: Callable[..., Any], funs: Callable[[], list[Binary]], operands: list[tuple[NDArray, NDArray]]
) -> list[NDArray] | None:
    """``f(x, y)`` of each function of ``funs()`` on its operands, all in one ``jit``
    (the operands its arguments); None if that fails (each test then runs its own case,
    to report its own error)."""
    try:
        fs = funs()
        results = jit(lambda ops: [f(x, y) for f, (x, y) in zip(fs, ops, strict=True)])(operands)
    except Exception:  # noqa: BLE001
        return None
    return [np.asarray(r) for r in results]


def _size_one_operands(dtype: np.dtype[Any], shapes: Shapes) -> tuple[NDArray, NDArray]:
    rng = np.random.default_rng(0)
    x, y = (_operand(s, dtype, rng) for s in shapes)
    return x, y


def _bind(name: str) -> Binary:
    prim = primitive_named(name)
    return lambda a, b: prim.bind(a, b)


# The incomplete gamma family is left out: a large program per case, whose compilation
# gains nothing from sharing one, and whose values XLA rounds a few ulps differently in a
# larger program.
SIZE_ONE_CASES = [
    (name, dtype, shapes) for name, dtype in BINARY if not name.startswith("igamma") for shapes in SIZE_ONE_SHAPES
]


@functools.cache
def _size_one_table(library: str) -> dict[tuple[str, Shapes], NDArray] | None:
    """Every case of the size-one table under JAX's ``jit`` (of its ``lax`` function) or
    ferrax's (of the primitive), by name and shapes; None if that fails."""
    make: Callable[[str], Binary] = _jax_fun if library == "jax" else _bind
    results = _batched(
        jax.jit if library == "jax" else fx.jit,
        lambda: [make(n) for n, _, _ in SIZE_ONE_CASES],
        [_size_one_operands(d, s) for _, d, s in SIZE_ONE_CASES],
    )
    return None if results is None else {(n, s): r for (n, _, s), r in zip(SIZE_ONE_CASES, results, strict=True)}


@pytest.mark.parametrize("shapes", SIZE_ONE_SHAPES, ids=str)
@pytest.mark.parametrize(("name", "dtype"), BINARY, ids=[n for n, _ in BINARY])
def test_binary_primitive_broadcasts_size_one_dimensions(name: str, dtype: np.dtype[Any], shapes: Shapes) -> None:
    x, y = _size_one_operands(dtype, shapes)
    prim = primitive_named(name)
    theirs = _size_one_table("jax")
    want = theirs[name, shapes] if theirs and (name, shapes) in theirs else np.asarray(_jax_fun(name)(x, y))
    # The incomplete gamma family is a series/continued fraction summed to float32
    # precision: a few ulps apart between the NumPy rule, the reference evaluator and XLA.
    rtol = 5e-6 if name.startswith("igamma") else 1e-6
    # Eager (the primitive's NumPy rule, typed by the Rust shape rule).
    eager = np.asarray(prim.bind(x, y))
    assert eager.shape == want.shape and eager.dtype == want.dtype
    np.testing.assert_allclose(eager, want, rtol=rtol)
    # Staged, then run by the Rust reference evaluator.
    closed = fx.make_jaxpr(lambda a, b: prim.bind(a, b))(x, y)
    assert closed.out_avals[0].shape == want.shape
    ref_in = [(_ir.ShapedArray(v.shape, v.dtype), v.ravel().tolist()) for v in (x, y)]
    ((aval, values),) = _ir.reference_eval(closed.jaxpr, [], ref_in)
    reference = np.asarray(values, dtype=aval.dtype).reshape(aval.shape)
    np.testing.assert_allclose(reference, want, rtol=rtol)
    # Lowered to StableHLO, compiled and run by XLA.
    ours = _size_one_table("ferrax")
    jitted = ours[name, shapes] if ours and (name, shapes) in ours else np.asarray(fx.jit(_bind(name))(x, y))
    assert jitted.shape == want.shape and jitted.dtype == want.dtype
    np.testing.assert_allclose(jitted, want, rtol=rtol)


@pytest.mark.parametrize(("name", "dtype"), BINARY, ids=[n for n, _ in BINARY])
def test_binary_primitive_refuses_what_jax_refuses(name: str, dtype: np.dtype[Any]) -> None:
    rng = np.random.default_rng(1)
    prim = primitive_named(name)
    for sx, sy in [((3,), (1, 3)), ((2, 3), (3, 3)), ((4, 3), (3,))]:
        x, y = _operand(sx, dtype, rng), _operand(sy, dtype, rng)
        with pytest.raises(TypeError):
            _jax_fun(name)(x, y)
        with pytest.raises(TypeCheckError, match=re.escape(f"{name}")):
            prim.bind(x, y)
        with pytest.raises(TypeCheckError):
            fx.make_jaxpr(lambda a, b: prim.bind(a, b))(x, y)


# ``ferrax.numpy`` against ``jax.numpy``: the staged jaxpr has JAX's structure. JAX's
# text is parsed by ferrax and printed again, so both sides print the same way.
NUMPY_OPS: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b, lambda a, b: a + b),
    ("subtract", lambda a, b: a - b, lambda a, b: a - b),
    ("multiply", fnp.multiply, jnp.multiply),
    ("divide", lambda a, b: a / b, lambda a, b: a / b),
    ("maximum", fnp.maximum, jnp.maximum),
    ("less", lambda a, b: a < b, lambda a, b: a < b),
    ("equal", fnp.equal, jnp.equal),
]

NUMPY_SHAPES = [
    ((4, 3), (3,)),
    ((3,), (4, 3)),
    ((4, 1), (3,)),
    ((4, 3), (1, 3)),
    ((2, 1, 3), (4, 1)),
    ((5,), (2, 3, 5)),
    ((2, 3), ()),
    ((1,), (1, 1, 1)),
    ((4, 3), (4, 3)),
]


def _numpy_operands(shapes: Shapes) -> tuple[NDArray, NDArray]:
    rng = np.random.default_rng(2)
    x, y = (rng.uniform(0.5, 2.0, s).astype(np.float32) for s in shapes)
    return x, y


@functools.cache
def _numpy_jitted() -> dict[tuple[str, Shapes], NDArray] | None:
    """``ferrax.jit`` of each ``ferrax.numpy`` op on each pair of shapes, in one jit, by
    name and shapes; None if that fails."""
    cases = [(name, ours, shapes) for name, ours, _ in NUMPY_OPS for shapes in NUMPY_SHAPES]
    results = _batched(fx.jit, lambda: [ours for _, ours, _ in cases], [_numpy_operands(s) for _, _, s in cases])
    return None if results is None else {(n, s): r for (n, _, s), r in zip(cases, results, strict=True)}


@pytest.mark.parametrize("shapes", NUMPY_SHAPES, ids=str)
@pytest.mark.parametrize(("name", "ours", "theirs"), NUMPY_OPS, ids=[n for n, _, _ in NUMPY_OPS])
def test_numpy_binary_ops_stage_as_jax_numpy(
    name: str,
    ours: Callable[[Any, Any], Any],
    theirs: Callable[[Any, Any], Any],
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    x, y = (np.ones(s, np.float32) for s in shapes)
    want = core.parse_jaxpr(str(jax.make_jaxpr(theirs)(x, y).jaxpr))
    got = fx.make_jaxpr(ours)(x, y)
    assert str(got.jaxpr) == str(want)
    # And the values agree, eagerly and under jit.
    x, y = _numpy_operands(shapes)
    expected = np.asarray(theirs(x, y))
    np.testing.assert_allclose(np.asarray(ours(x, y)), expected, rtol=1e-6)
    table = _numpy_jitted()
    jitted = table[name, shapes] if table is not None else np.asarray(fx.jit(ours)(x, y))
    np.testing.assert_allclose(jitted, expected, rtol=1e-6)


def test_shapes_that_do_not_broadcast_name_both_and_the_line() -> None:
    x, y = np.ones((4, 3), np.float32), np.ones((2,), np.float32)
    with pytest.raises(TypeCheckError, match=r"f32\[4,3\] and f32\[2\].*test_broadcasting\.py"):
        fnp.add(x, y)


def test_an_mlp_loss_prints_exactly_as_jax_prints_it() -> None:
    # The README's quickstart model: ferrax's jaxpr text is JAX's, character for character.
    def make_loss(np_: Any) -> Callable[..., Any]:
        def loss(params: Any, x: Any, y: Any) -> Any:
            (w1, b1), (w2, b2) = params
            h = np_.tanh(x @ w1 + b1)
            return np_.mean((h @ w2 + b2 - y) ** 2)

        return loss

    rng = np.random.default_rng(0)
    params = [
        (rng.standard_normal((4, 8), dtype=np.float32), np.zeros(8, np.float32)),
        (rng.standard_normal((8, 1), dtype=np.float32), np.zeros(1, np.float32)),
    ]
    x = rng.standard_normal((16, 4), dtype=np.float32)
    y = rng.standard_normal((16, 1), dtype=np.float32)
    assert str(fx.make_jaxpr(make_loss(fnp))(params, x, y)) == str(jax.make_jaxpr(make_loss(jnp))(params, x, y))
