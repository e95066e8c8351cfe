"""NumPy indexing (``x[index]``) and functional updates (``x.at[index]``) against
``jax.numpy``: generated expressions (every index form, in and out of range, eager and
under ``jit``, values and dtypes), the primitives they stage (JAX's, for the common
forms), and the errors JAX raises.

The expressions are generated from per-axis components (ints in and out of range, slices
with any step, integer arrays and lists, boolean masks and scalars, traced scalars) with
``None`` and ``...`` inserted, over a few shapes; each is compared with JAX's result.
Under ``jit`` the index arrays and traced ints are arguments, so one compiled function
is checked with several index values (in and out of range).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax.core import ClosedJaxpr, parse_jaxpr, typecheck
from ferrax.errors import NonConcreteBooleanIndexError

NDArray = np.ndarray[Any, Any]

SHAPES = [(5,), (3, 4), (2, 3, 4)]


class Component(NamedTuple):
    """One entry of an index: ``kind`` says how it is passed (``"array"`` and
    ``"tint"`` entries are arguments of the jitted function)."""

    kind: str
    value: Any


def _ints(rng: np.random.Generator, size: int) -> Component:
    return Component("int", int(rng.choice([0, -1, 1, size - 1, size + 2, -size - 3])))


def _slice(rng: np.random.Generator, size: int) -> Component:
    options = [
        slice(None), slice(1, 3), slice(None, None, -1), slice(None, None, 2),
        slice(size - 1, 0, -2), slice(-2, None), slice(4, 1), slice(None, None, -3),
        slice(1, None), slice(-100, 100),
    ]
    return Component("slice", options[int(rng.integers(len(options)))])


def _array(rng: np.random.Generator, size: int) -> Component:
    shapes = [(2,), (2, 1), (1, 3), (3,)]
    shape = shapes[int(rng.integers(len(shapes)))]
    value = rng.integers(-size, size, shape).astype(np.int32)
    if rng.random() < 0.25:  # out of range somewhere
        value.flat[0] = size + 1
    if rng.random() < 0.2:
        return Component("list", value.reshape(-1).tolist())
    return Component("array", value)


def _tint(rng: np.random.Generator, size: int) -> Component:
    return Component("tint", np.int32(rng.choice([0, -1, size - 1, size + 3])))


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> Component:
    return Component("mask", rng.random(shape) < 0.5)


def random_index(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[Component, ...]:
    """A random index for an array of ``shape``."""
    parts: list[Component] = []
    axis = 0
    ndim = len(shape)
    while axis < ndim:
        r = rng.random()
        if r < 0.08 and axis + 2 <= ndim:
            parts.append(_mask(rng, shape[axis : axis + 2]))
            axis += 2
            continue
        if r < 0.16:
            parts.append(_mask(rng, shape[axis : axis + 1]))
        elif r < 0.36:
            parts.append(_ints(rng, shape[axis]))
        elif r < 0.62:
            parts.append(_slice(rng, shape[axis]))
        elif r < 0.85:
            parts.append(_array(rng, shape[axis]))
        else:
            parts.append(_tint(rng, shape[axis]))
        axis += 1
    # Leave trailing axes implicit, or under an ellipsis, sometimes.
    if parts and rng.random() < 0.3 and parts[-1].kind == "slice":
        parts.pop()
    if rng.random() < 0.25:
        cut = int(rng.integers(0, len(parts) + 1))
        if all(p.kind != "mask" or p.value.ndim == 1 for p in parts[cut:]):
            covered = parts[cut : cut + int(rng.integers(0, 2))]
            parts[cut : cut + len(covered)] = [Component("ellipsis", Ellipsis)]
    for _ in range(int(rng.integers(0, 2 if ndim > 1 else 3))):
        parts.insert(int(rng.integers(0, len(parts) + 1)), Component("none", None))
    if rng.random() < 0.05:
        parts.insert(int(rng.integers(0, len(parts) + 1)), Component("bool", bool(rng.random() < 0.7)))
    return tuple(parts)


def build(parts: tuple[Component, ...], traced: list[Any] | None = None) -> tuple[Any, ...]:
    """The index itself; with ``traced``, array and traced-int entries come from it."""
    out = []
    it = iter(traced) if traced is not None else None
    for p in parts:
        if it is not None and p.kind in ("array", "tint"):
            out.append(next(it))
        else:
            out.append(p.value)
    return tuple(out)


def dynamic(parts: tuple[Component, ...]) -> list[Any]:
    return [p.value for p in parts if p.kind in ("array", "tint")]


def show(parts: tuple[Component, ...]) -> str:
    def one(p: Component) -> str:
        if p.kind == "array":
            return f"array({p.value.tolist()})"
        if p.kind == "tint":
            return f"traced({int(p.value)})"
        if p.kind == "mask":
            return f"mask{list(p.value.shape)}"
        if p.kind == "ellipsis":
            return "..."
        if isinstance(p.value, slice):
            s = p.value
            return f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}" + (
                "" if s.step is None else f":{s.step}"
            )
        return repr(p.value)

    return "[" + ", ".join(one(p) for p in parts) + "]"


def assert_same(got: Any, expected: Any, what: str) -> None:
    g, e = np.asarray(got), np.asarray(expected)
    assert g.dtype == e.dtype, f"{what}: dtype {g.dtype} != JAX's {e.dtype}"
    assert g.shape == e.shape, f"{what}: shape {g.shape} != JAX's {e.shape}"
    if g.dtype.kind == "f":
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=0, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, e, err_msg=what)


def other_values(parts: tuple[Component, ...], shape: tuple[int, ...], rng: np.random.Generator) -> list[Any]:
    """Fresh values (same shapes and dtypes) for the traced entries, some out of range."""
    out = []
    axis_sizes = [s for s in shape]
    for p in parts:
        if p.kind not in ("array", "tint"):
            continue
        size = max(axis_sizes)
        value = rng.integers(-size - 2, size + 3, np.shape(p.value)).astype(np.int32)
        out.append(value if p.kind == "array" else np.int32(value))
    return out


# --------------------------------------------------------------------------- x[index]

N_GET = 200
N_GET_JIT = 70


def _get_cases() -> list[tuple[tuple[int, ...], tuple[Component, ...]]]:
    rng = np.random.default_rng(7)
    cases: list[tuple[tuple[int, ...], tuple[Component, ...]]] = []
    seen = set()
    while len(cases) < N_GET:
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        parts = random_index(rng, shape)
        key = (shape, show(parts))
        if key in seen:
            continue
        seen.add(key)
        cases.append((shape, parts))
    return cases


GET_CASES = _get_cases()


def _operand(shape: tuple[int, ...], dtype: Any = np.float32) -> NDArray:
    return (np.arange(int(np.prod(shape))) * 3 % 17).reshape(shape).astype(dtype)


def jax_results(thunks: list[tuple[Callable[[Any], Any], NDArray]]) -> list[Any]:
    """JAX's ``f(x)`` for each pair, or the exception it raises: errors are found by
    tracing each alone, the values computed by one jitted function (compiling each
    expression eagerly, one by one, would take most of a minute)."""
    results: list[Any] = [None] * len(thunks)
    ok: list[int] = []
    for k, (f, x) in enumerate(thunks):
        try:
            jax.eval_shape(f, x)
        except (IndexError, TypeError, ValueError) as e:
            results[k] = e
            continue
        ok.append(k)
    batch = jax.jit(lambda *xs: [thunks[k][0](x) for k, x in zip(ok, xs)])
    for k, out in zip(ok, batch(*[thunks[k][1] for k in ok])):
        results[k] = np.asarray(out)
    return results


def _getter(index: Any) -> Callable[[Any], Any]:
    return lambda x: x[index]


def test_generated_getitem_eager_and_jit() -> None:
    """Every generated ``x[index]`` gives JAX's value and dtype (or its exception type)
    eagerly; a subset is also run under ``jit`` with its index arrays as arguments, at
    two sets of values (the second with fresh values, some out of range)."""
    rng = np.random.default_rng(11)
    operands = [_operand(shape) for shape, _ in GET_CASES]
    jitted = [n for n in range(0, 2 * N_GET_JIT, 2)]
    again = {n: other_values(GET_CASES[n][1], GET_CASES[n][0], rng) for n in jitted}
    again = {n: v for n, v in again.items() if v}
    thunks = [(_getter(build(parts)), x) for (shape, parts), x in zip(GET_CASES, operands)]
    thunks += [(_getter(build(GET_CASES[n][1], v)), operands[n]) for n, v in again.items()]
    expected = jax_results(thunks)
    second = dict(zip(again, expected[len(GET_CASES) :]))
    checked = errors = 0
    for n, ((shape, parts), x) in enumerate(zip(GET_CASES, operands)):
        index = build(parts)
        what = f"x{list(shape)}{show(parts)}"
        if isinstance(expected[n], Exception):
            with pytest.raises(type(expected[n])):
                fnp.asarray(x)[index]
            errors += 1
            continue
        assert_same(fnp.asarray(x)[index], expected[n], what)
        checked += 1
        if n in jitted:
            f = ferrax.jit(lambda x, *dyn: x[build(parts, list(dyn))])
            assert_same(f(x, *dynamic(parts)), expected[n], what + " under jit")
            checked += 1
            if n in second and not isinstance(second[n], Exception):
                assert_same(f(x, *again[n]), second[n], what + f" under jit at {again[n]}")
                checked += 1
    assert checked >= 270 and errors < 30, (checked, errors)


# -------------------------------------------------------------------------- .at[...]

UPDATE_OPS = ["set", "add", "subtract", "multiply", "mul", "min", "max", "divide", "power", "apply", "get"]
N_UPDATE = 180
N_UPDATE_JIT = 50


class UpdateCase(NamedTuple):
    shape: tuple[int, ...]
    parts: tuple[Component, ...]
    op: str
    dtype: Any
    value_kind: str  # "scalar", "full", "trailing"
    mode: str | None


def _update_cases() -> list[UpdateCase]:
    rng = np.random.default_rng(3)
    cases = []
    for n in range(N_UPDATE):
        shape = SHAPES[n % len(SHAPES)]
        parts = random_index(rng, shape)
        op = UPDATE_OPS[n % len(UPDATE_OPS)]
        dtype = np.int32 if op in ("add", "min", "max", "set") and rng.random() < 0.3 else np.float32
        value_kind = ["scalar", "full", "trailing"][int(rng.integers(3))]
        modes: list[str | None] = [None, "clip", "fill"] if op == "get" else [None, "clip", "drop"]
        mode = modes[int(rng.integers(3))]
        cases.append(UpdateCase(shape, parts, op, dtype, value_kind, mode))
    return cases


UPDATE_CASES = _update_cases()


def _apply_update(ref: Any, case: UpdateCase, value: Any) -> Any:
    kw: dict[str, Any] = {} if case.mode is None else {"mode": case.mode}
    if case.op == "get":
        if case.mode == "fill":
            kw["fill_value"] = -7
        return ref.get(**kw)
    if case.op == "apply":
        return ref.apply(lambda v: v * 2 + 1, **kw)
    return getattr(ref, case.op)(value, **kw)


def _update_value(case: UpdateCase, target: tuple[int, ...], rng: np.random.Generator) -> Any:
    if case.value_kind == "scalar" or not target:
        return 3 if case.dtype == np.int32 else 2.0
    shape = target if case.value_kind == "full" else target[-1:]
    low = 1 if case.op in ("divide", "power", "multiply", "mul") else -4
    return rng.integers(low, 4, shape).astype(case.dtype)


def jax_shapes(thunks: list[tuple[Callable[[Any], Any], NDArray]]) -> list[Any]:
    """The shape of JAX's ``f(x)`` for each pair (by tracing alone), or its exception."""
    results: list[Any] = []
    for f, x in thunks:
        try:
            results.append(jax.eval_shape(f, x).shape)
        except (IndexError, TypeError, ValueError) as e:
            results.append(e)
    return results


def _repeats(x: NDArray, index: Any) -> bool:
    """Whether ``index`` picks an element of ``x`` more than once (counted by ferrax:
    the comparison with JAX then checks the count's scatter too)."""
    counts = fnp.zeros(x.shape, np.int32).at[index].add(1)
    return bool(np.asarray(counts).max(initial=0) > 1)


def _updater(index: Any, case: UpdateCase, value: Any) -> Callable[[Any], Any]:
    return lambda x: _apply_update(x.at[index], case, value)


def test_generated_at_updates_eager_and_jit() -> None:
    """``x.at[index].op(value)`` for every op, generated indices, in and out of range
    (out-of-range updates are dropped, or clamped with ``mode="clip"``), against JAX;
    every other one of the first cases also under ``jit`` (index arrays as arguments)."""
    rng = np.random.default_rng(5)
    operands = [_operand(c.shape, c.dtype) for c in UPDATE_CASES]
    indices = [build(c.parts) for c in UPDATE_CASES]
    # The shape of x[index] (or JAX's error).
    targets = jax_shapes([(_getter(i), x) for i, x in zip(indices, operands)])
    values = [
        None if isinstance(t, Exception) else _update_value(c, t, rng) for c, t in zip(UPDATE_CASES, targets)
    ]
    runnable = [
        n
        for n, (c, t) in enumerate(zip(UPDATE_CASES, targets))
        # Which of several writes to one element wins is unspecified (XLA); JAX's apply
        # applies its function once per repetition (ferrax's once per element).
        if not isinstance(t, Exception) and not (c.op in ("set", "apply") and _repeats(operands[n], indices[n]))
    ]
    expected = dict(
        zip(runnable, jax_results([(_updater(indices[n], UPDATE_CASES[n], values[n]), operands[n]) for n in runnable]))
    )
    checked = errors = jitted = 0
    for n, case in enumerate(UPDATE_CASES):
        x, index, value = operands[n], indices[n], values[n]
        what = f"x{list(case.shape)}:{case.dtype.__name__}.at{show(case.parts)}.{case.op}({value!r}) mode={case.mode}"
        if isinstance(targets[n], Exception):
            with pytest.raises(type(targets[n])):
                _apply_update(fnp.asarray(x).at[index], case, 1)
            errors += 1
            continue
        if n not in expected:
            continue
        assert not isinstance(expected[n], Exception), (what, expected[n])
        assert_same(_apply_update(fnp.asarray(x).at[index], case, value), expected[n], what)
        checked += 1
        if n < 2 * N_UPDATE_JIT and n % 2 == 1:
            f = ferrax.jit(lambda x, v, *dyn: _apply_update(x.at[build(case.parts, list(dyn))], case, v))
            assert_same(f(x, value, *dynamic(case.parts)), expected[n], what + " under jit")
            checked += 1
            jitted += 1
    assert checked >= 200 and jitted >= 40 and errors < 30, (checked, jitted, errors)


# -------------------------------------------------------------- out of range, by hand


def test_out_of_range_updates_are_dropped_and_reads_clamp() -> None:
    x = fnp.arange(5.0)
    np.testing.assert_array_equal(np.asarray(x.at[7].set(9.0)), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(x.at[-6].add(9.0)), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(x.at[7].set(9.0, mode="clip")), [0, 1, 2, 3, 9])
    assert float(x[7]) == 4.0 and float(x.at[7].get()) == 4.0
    assert np.isnan(float(x.at[7].get(mode="fill")))
    assert float(x.at[7].get(mode="fill", fill_value=-1)) == -1.0
    set_at = ferrax.jit(lambda x, i: x.at[i].set(9.0))
    np.testing.assert_array_equal(np.asarray(set_at(np.arange(5.0, dtype=np.float32), np.int32(7))), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(np.asarray(set_at(np.arange(5.0, dtype=np.float32), np.int32(-1))), [0, 1, 2, 3, 9])


def test_update_keeps_dtype_and_weak_type() -> None:
    x = fnp.arange(5)
    out = x.at[1].set(2.7)  # JAX warns (unsafe cast) and truncates
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 2, 3, 4])
    w = fnp.zeros_like(1.0, shape=(3,))
    assert w.weak_type == jnp.zeros_like(1.0, shape=(3,)).weak_type
    assert w.at[0].set(2).weak_type == jnp.zeros_like(1.0, shape=(3,)).at[0].set(2).weak_type


# ------------------------------------------------------------- take, take_along_axis


@pytest.mark.parametrize("mode", [None, "fill", "clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("indices", [np.array([0, 2, -1]), np.array([[1, 7], [-5, 0]]), np.array(1)])
def test_take(indices: NDArray, axis: int | None, mode: str | None) -> None:
    x = _operand((3, 4))
    expected = jnp.take(jnp.asarray(x), indices, axis=axis, mode=mode)
    assert_same(fnp.take(x, indices, axis=axis, mode=mode), expected, f"take {indices.tolist()} {axis} {mode}")
    if axis == 1 and indices.ndim == 1:
        f = ferrax.jit(lambda x, i: fnp.take(x, i, axis=axis, mode=mode))
        assert_same(f(x, indices), expected, "take under jit")


@pytest.mark.parametrize("mode", [None, "clip", "fill"])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((3, 4), np.array([[0, 3], [1, -1], [2, 5]]), 1),
        ((3, 4), np.array([[0, 1, 2, 1]]), 0),
        ((3, 4), np.array([[2], [0], [1]]), -1),
        ((2, 3, 4), np.array([[[0], [3], [-2]]]), 2),
        ((2, 3, 4), np.array([[[1, 0, 1, 0]], [[0, 0, 1, 9]]]), 1),
        ((6,), np.array([5, 0, -1]), None),
    ],
)
def test_take_along_axis(shape: tuple[int, ...], indices: NDArray, axis: int | None, mode: str | None) -> None:
    x = _operand(shape)
    expected = jnp.take_along_axis(jnp.asarray(x), indices, axis=axis, mode=mode)
    assert_same(fnp.take_along_axis(x, indices, axis=axis, mode=mode), expected, f"take_along_axis {shape} {axis}")
    f = ferrax.jit(lambda x, i: fnp.take_along_axis(x, i, axis=axis, mode=mode))
    assert_same(f(x, indices.astype(np.int32)), expected, "take_along_axis under jit")


# ----------------------------------------------------------------- staged structure


def stage(f: Callable[..., Any], *args: Any) -> ClosedJaxpr:
    """``f``'s jaxpr, checked: its text parses back to itself and it typechecks."""
    closed = ferrax.make_jaxpr(f)(*args)
    text = str(closed)
    assert str(parse_jaxpr(text)) == text
    typecheck(parse_jaxpr(text))
    return closed


def _on_inputs(eqns: list[Any], inputs: list[Any], ins: Callable[[Any], list[Any]], outs: Callable[[Any], list[Any]], name: Callable[[Any], str]) -> list[str]:
    """The primitives of the equations that depend on the jaxpr's inputs (JAX also
    stages equations on literals alone, e.g. normalizing a constant start index)."""
    live = set(inputs)
    names = []
    for e in eqns:
        if any(a in live for a in ins(e)):
            live.update(outs(e))
            names.append(name(e))
    return names


def _ferrax_prims(closed: ClosedJaxpr) -> list[str]:
    j = closed.jaxpr
    # Variables compared by their names (unique within the jaxpr).
    inputs = [str(v) for v in [*j.invars, *j.constvars]]
    return _on_inputs(
        list(j.eqns),
        inputs,
        lambda e: [str(a) for a in e.inputs if type(a).__name__ == "Var"],
        lambda e: [str(v) for v in e.outvars],
        lambda e: str(e.primitive),
    )


def _jax_prims(f: Callable[..., Any], *args: Any) -> list[str]:
    j = jax.make_jaxpr(f)(*args).jaxpr
    return _on_inputs(
        list(j.eqns),
        [*j.invars, *j.constvars],
        lambda e: [v for v in e.invars if type(v).__name__ != "Literal"],
        lambda e: list(e.outvars),
        lambda e: str(e.primitive.name),
    )


X34 = _operand((3, 4))
X234 = _operand((2, 3, 4))
IDX = np.array([0, 2], np.int32)

STRUCTURES: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    # (label, f(numpy_module, *args), args)
    ("x[1]", lambda m, x: x[1], (X34,)),
    ("x[-1]", lambda m, x: x[-1], (X34,)),
    ("x[1:3]", lambda m, x: x[1:3], (X34,)),
    ("x[::2]", lambda m, x: x[::2], (X34,)),
    ("x[::-1]", lambda m, x: x[::-1], (X34,)),
    ("x[1:3, None, ::-1]", lambda m, x: x[1:3, None, ::-1], (X34,)),
    ("x[None, 1]", lambda m, x: x[None, 1], (X34,)),
    ("x[7] (clamped)", lambda m, x: x[7], (X34,)),
    ("x[i]", lambda m, x, i: x[i], (X34, np.int32(1))),
    ("x[:, i]", lambda m, x, i: x[:, i], (X34, np.int32(1))),
    ("x[i, 1:3]", lambda m, x, i: x[i, 1:3], (X34, np.int32(1))),
    ("x[idx]", lambda m, x, i: x[i], (X34, IDX)),
    ("x[idx, :, idx]", lambda m, x, i: x[i, :, i], (X234, IDX)),
    ("x[i, idx]", lambda m, x, i, j: x[i, j], (X34, np.int32(1), IDX)),
    ("x[idx, None]", lambda m, x, j: x[j, None], (X34, IDX)),
    ("x[idx, ::-1]", lambda m, x, j: x[j, ::-1], (X34, IDX)),
    ("x[..., idx]", lambda m, x, j: x[..., j], (X234, IDX)),
    ("x[:, idx]", lambda m, x, i: x[:, i], (X234, IDX)),
    ("x.at[idx].set(v)", lambda m, x, i: x.at[i].set(2.0), (X34, IDX)),
    ("x.at[i].set(v)", lambda m, x, i: x.at[i].set(2.0), (X34, np.int32(1))),
    ("x.at[i, 1:3].add(v)", lambda m, x, i: x.at[i, 1:3].add(2.0), (X34, np.int32(1))),
    ("x.at[idx, 1].mul(v)", lambda m, x, j: x.at[j, 1].mul(3.0), (X34, IDX)),
    ("x.at[::2].set(v)", lambda m, x: x.at[::2].set(1.0), (X34,)),
    ("x.at[1:3].set(row)", lambda m, x, v: x.at[1:3].set(v), (X34, np.ones(4, np.float32))),
    ("int x.at[idx].min(1)", lambda m, x, j: x.at[j].min(1), (np.arange(5, dtype=np.int32), IDX)),
    ("x.at[idx].add(v)", lambda m, x, i: x.at[i].add(2.0), (X34, IDX)),
    ("x.at[idx].max(v)", lambda m, x, i: x.at[i].max(2.0), (X34, IDX)),
    ("x.at[idx].divide(v)", lambda m, x, i: x.at[i].divide(2.0), (X34, IDX)),
    ("x.at[idx].get(mode='fill')", lambda m, x, i: x.at[i].get(mode="fill"), (X34, IDX)),
]


@pytest.mark.parametrize(("label", "f", "args"), STRUCTURES, ids=[s[0] for s in STRUCTURES])
def test_staged_primitives_are_jaxs(label: str, f: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The equations on variables (JAX also stages some on literals only) are JAX's."""
    closed = stage(lambda *a: f(fnp, *a), *args)
    assert _ferrax_prims(closed) == _jax_prims(lambda *a: f(jnp, *a), *args), str(closed)


def test_staged_gather_params() -> None:
    closed = stage(lambda x, i: x.at[i].get(indices_are_sorted=True, unique_indices=True, mode="clip"), X34, IDX)
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive == "gather"]
    assert eqn.params["indices_are_sorted"] is True and eqn.params["unique_indices"] is True
    assert eqn.params["mode"] == ferrax.lax.GatherScatterMode.CLIP
    assert eqn.params["dimension_numbers"] == ferrax.lax.GatherDimensionNumbers(
        offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)
    )


# ------------------------------------------------------------------------- errors


class I_:
    """``I[...]`` is the index written inside the brackets."""

    def __getitem__(self, index: Any) -> Any:
        return index


I = I_()

ERRORS: list[tuple[str, Any]] = [
    ("list index", I[[0, 1]]),
    ("nested list", I[[[0, 1], slice(None)]]),
    ("float", I[1.5]),
    ("float array", I[np.array([1.0])]),
    ("string", I["a"]),
    ("object", I[object()]),
    ("too many", I[0, 0, 0]),
    ("two ellipses", I[..., 0, ...]),
    ("mask shape", I[np.array([True, False])]),
    ("float slice bound", I[0:1.5]),
]


@pytest.mark.parametrize(("label", "index"), ERRORS, ids=[e[0] for e in ERRORS])
def test_index_errors_are_jaxs(label: str, index: Any) -> None:
    with pytest.raises(Exception) as jax_error:
        jnp.asarray(X34)[index]
    with pytest.raises(type(jax_error.value)) as info:
        fnp.asarray(X34)[index]  # the user's line
    assert "test_indexing.py" in str(info.value), str(info.value)
    assert "_Item" not in str(info.value) and "Tracer" not in str(info.value)


def test_traced_mask_raises_nonconcrete_boolean_index_error() -> None:
    with pytest.raises(NonConcreteBooleanIndexError, match="concrete") as info:
        ferrax.jit(lambda x: x[x > 2])(X34)
    assert isinstance(info.value, IndexError)
    with pytest.raises(NonConcreteBooleanIndexError):
        ferrax.jit(lambda x: x.at[x > 2].set(0.0))(X34)
    # A concrete mask closed over is fine, eagerly and under jit.
    mask = X34 > 5
    assert_same(ferrax.jit(lambda x: x[mask])(X34), jnp.asarray(X34)[mask], "closed-over mask")
    assert_same(ferrax.jit(lambda x: x.at[mask].set(0.0))(X34), jnp.asarray(X34).at[mask].set(0.0), "mask set")


def test_traced_slice_bound_raises_index_error() -> None:
    with pytest.raises(IndexError, match="Slice entries must be static integers"):
        ferrax.jit(lambda x, i: x[i:])(X34, np.int32(1))


def test_update_value_that_does_not_broadcast() -> None:
    with pytest.raises(ferrax.TypeCheckError, match="cannot be broadcast") as info:
        fnp.asarray(X34).at[0].set(np.ones(3, np.float32))  # wrong value
    assert "# wrong value" in str(info.value)


def test_index_update_ref_is_described_without_private_names() -> None:
    ref = fnp.asarray(X34).at[1:3]
    assert "_IndexUpdateRef" not in repr(ref) and "_IndexUpdateHelper" not in repr(fnp.asarray(X34).at)


def test_jax_warns_where_ferrax_is_silent() -> None:
    # JAX's FutureWarning for an unsafe update cast: both truncate the same way.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = jnp.arange(4).at[1].set(2.5)
    assert_same(fnp.arange(4).at[1].set(2.5), expected, "unsafe cast")


F = np.arange(5, dtype=np.float32)
M23 = np.arange(6, dtype=np.float32).reshape(2, 3)
EDGES: list[tuple[str, NDArray, Callable[[Any], Any]]] = [
    ("bool operand set", np.array([True, False, True]), lambda x: x.at[1].set(True)),
    ("bool operand min", np.array([True, False, True]), lambda x: x.at[0].min(False)),
    ("unsigned index array", F, lambda x: x[np.array([1, 250], np.uint8)]),
    ("int8 set of an int out of its range (wraps)", np.arange(5, dtype=np.int8), lambda x: x.at[1].set(300)),
    ("int8 add of a float", np.arange(5, dtype=np.int8), lambda x: x.at[1].add(1.5)),
    ("float16 set of float32", F.astype(np.float16), lambda x: x.at[np.array([0, 4])].set(np.float32(2.5))),
    ("empty index array", F, lambda x: x[np.array([], np.int32)]),
    ("empty index array set", F, lambda x: x.at[np.array([], np.int32)].set(1.0)),
    ("empty list", M23, lambda x: x[:, []]),
    ("0-d operand, None", np.array(3.0, np.float32), lambda x: x[None]),
    ("0-d operand, ... set", np.array(3.0, np.float32), lambda x: x.at[...].set(1.0)),
    ("0-d operand, () add", np.array(3.0, np.float32), lambda x: x.at[()].add(1.0)),
    ("0-d operand, True", np.array(3.0, np.float32), lambda x: x[True]),
    ("False", F, lambda x: x[False]),
    ("get fill_value without mode", F, lambda x: x.at[np.array([9])].get(fill_value=-3.0)),
    ("repeated subtract", F, lambda x: x.at[np.array([1, 1, -1])].subtract(1.0)),
    ("int divide", np.arange(4, dtype=np.int32), lambda x: x.at[np.array([1, 2])].divide(2)),
    ("int power", np.arange(4, dtype=np.int32), lambda x: x.at[np.array([1, 2])].power(3)),
    ("int apply", np.arange(4, dtype=np.int32), lambda x: x.at[2:].apply(lambda v: v * 3)),
    ("2-d mask", M23, lambda x: x[np.array([[True, False, True], [False, False, True]])]),
    ("2-d mask set", M23, lambda x: x.at[np.array([[True, False, True], [False, False, True]])].set(0.0)),
    ("lists in a tuple", M23, lambda x: x[[0, 1], [2, 0]]),
    ("bool list in a tuple", F[:3], lambda x: x[[True, False, True],]),
    ("ferrax index array", F, lambda x: x[x.astype(np.int32)[1:3]]),
    ("mode clip set", F, lambda x: x.at[np.array([-9, 9])].set(7.0, mode="clip")),
    ("mode fill get of ints", np.arange(4, dtype=np.int32), lambda x: x.at[np.array([9])].get(mode="fill")),
    ("mode fill get, uint8", np.arange(4, dtype=np.uint8), lambda x: x.at[np.array([9])].get(mode="fill")),
]


@pytest.mark.parametrize(("label", "x", "f"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases_against_jax(label: str, x: NDArray, f: Callable[[Any], Any]) -> None:
    with warnings.catch_warnings():
        # JAX warns of unsafe update casts (it will refuse them); ferrax converts silently.
        warnings.simplefilter("ignore", FutureWarning)
        expected = f(jnp.asarray(x))
    got = f(fnp.asarray(x))
    assert_same(got, np.asarray(expected), label)
    assert got.weak_type == expected.weak_type


@pytest.mark.parametrize(
    "f",
    [
        lambda x, i: x.at[i].get(mode="fill"),
        lambda x, i: x.at[i, ::-2].add(1.0),
        lambda x, i: x[i, None, 1:3],
        lambda x, i: fnp.take_along_axis(x, i[None, :], axis=1),
        lambda x, i: x.at[i[0]].min(-1.0, mode="clip"),
    ],
)
def test_staged_indexing_evaluates_as_eager(f: Callable[[Any, Any], Any]) -> None:
    """ferrax.eval_jaxpr runs the staged gathers and scatters (the params read back
    from the jaxpr) to the eager values, and jit to the same."""
    x = _operand((3, 4))
    i = np.array([0, 5, -1], np.int32)
    closed = stage(f, x, i)
    (out,) = ferrax.eval_jaxpr(closed.jaxpr, closed.consts, x, i)
    eager = np.asarray(f(fnp.asarray(x), i))
    np.testing.assert_array_equal(np.asarray(out), eager)
    np.testing.assert_array_equal(np.asarray(ferrax.jit(f)(x, i)), eager)
