"""``lax.gather``, the ``lax.scatter`` family and ``lax.rev`` against ``jax.lax``: random
valid dimension numbers (offset, collapsed and batching dimensions, index maps in any
order, windows of any size), indices in and out of range, every mode, eagerly and under
``jit``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest
from jax import lax as jlax

import ferrax
from ferrax import lax

NDArray = np.ndarray[Any, Any]

MODES = ["clip", "fill", "promise_in_bounds"]


class GatherCase(NamedTuple):
    shape: tuple[int, ...]
    indices: NDArray
    offset_dims: tuple[int, ...]
    collapsed: tuple[int, ...]
    index_map: tuple[int, ...]
    operand_batching: tuple[int, ...]
    indices_batching: tuple[int, ...]
    slice_sizes: tuple[int, ...]


def random_gather(rng: np.random.Generator) -> GatherCase:
    """A random valid gather (its transpose is a valid scatter of its result's shape)."""
    rank = int(rng.integers(1, 4))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    batch = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3)))]
    dims = [int(d) for d in rng.permutation(rank)]
    n_map = int(rng.integers(1, rank + 1))
    index_map, rest = dims[:n_map], dims[n_map:]
    operand_batching: list[int] = []
    indices_batching: list[int] = []
    if rest and batch and rng.random() < 0.4:
        d, b = rest.pop(), int(rng.integers(0, len(batch)))
        shape[d] = batch[b]
        operand_batching.append(d)
        indices_batching.append(b)
    collapsed = sorted(d for d in index_map if rng.random() < 0.5)
    sizes = [
        1 if d in collapsed or d in operand_batching else int(rng.integers(0, shape[d] + 1))
        for d in range(rank)
    ]
    n_offset = rank - len(collapsed) - len(operand_batching)
    offset = sorted(int(o) for o in rng.choice(len(batch) + n_offset, n_offset, replace=False))
    indices = rng.integers(-2, max(shape) + 2, size=(*batch, n_map)).astype(np.int32)
    return GatherCase(
        tuple(shape), indices, tuple(offset), tuple(collapsed), tuple(index_map),
        tuple(operand_batching), tuple(indices_batching), tuple(sizes),
    )


def gather_dnums(c: GatherCase, module: Any) -> Any:
    return module.GatherDimensionNumbers(c.offset_dims, c.collapsed, c.index_map, c.operand_batching, c.indices_batching)


def scatter_dnums(c: GatherCase, module: Any) -> Any:
    return module.ScatterDimensionNumbers(c.offset_dims, c.collapsed, c.index_map, c.operand_batching, c.indices_batching)


def operand(shape: tuple[int, ...], dtype: Any) -> NDArray:
    return ((np.arange(int(np.prod(shape))) * 5 % 11) - 3).reshape(shape).astype(dtype)


def jax_batch(thunks: Sequence[Callable[..., Any]]) -> list[NDArray]:
    """JAX's values of the thunks, computed by one jitted function (one compilation)."""
    return [np.asarray(o) for o in jax.jit(lambda: [t() for t in thunks])()]


def assert_same(got: Any, expected: NDArray, what: str) -> None:
    g = np.asarray(got)
    assert (g.dtype, g.shape) == (expected.dtype, expected.shape), what
    np.testing.assert_array_equal(g, expected, err_msg=what)


GATHERS = [(random_gather(np.random.default_rng(seed)), MODES[seed % 3], seed % 4 == 0) for seed in range(90)]


def test_gather_against_jax() -> None:
    """Every mode (fill with its default and a given fill value), eagerly and (every
    third case) under jit."""
    thunks = []
    for c, mode, fill in GATHERS:
        dtype = np.int32 if fill else np.float32
        x = operand(c.shape, dtype)
        thunks.append(
            lambda x=x, c=c, mode=mode, fill=fill: jlax.gather(
                x, c.indices, gather_dnums(c, jlax), c.slice_sizes, mode=mode, fill_value=-9 if fill else None
            )
        )
    expected = jax_batch(thunks)
    for n, ((c, mode, fill), e) in enumerate(zip(GATHERS, expected)):
        x = operand(c.shape, e.dtype)

        def f(x: Any, i: Any, c: GatherCase = c, mode: str = mode, fill: bool = fill) -> Any:
            return lax.gather(x, i, gather_dnums(c, lax), c.slice_sizes, mode=mode, fill_value=-9 if fill else None)

        assert_same(f(x, c.indices), e, f"gather {c} {mode}")
        if n % 3 == 0:
            assert_same(ferrax.jit(f)(x, c.indices), e, f"jitted gather {c} {mode}")


SCATTER_OPS = [
    (lax.scatter_add, jlax.scatter_add),
    (lax.scatter_sub, jlax.scatter_sub),
    (lax.scatter_mul, jlax.scatter_mul),
    (lax.scatter_min, jlax.scatter_min),
    (lax.scatter_max, jlax.scatter_max),
    (lax.scatter, jlax.scatter),
]


def _windows_overlap(c: GatherCase, x: NDArray, updates: NDArray) -> bool:
    ones = lax.scatter_add(np.zeros(x.shape, np.int32), c.indices, np.ones(updates.shape, np.int32), scatter_dnums(c, lax), mode="clip")
    return bool(np.asarray(ones).max(initial=0) > 1)


def test_scatters_against_jax() -> None:
    """Each op and mode over random dimension numbers (``scatter`` only where no two
    updates hit one element: which wins is unspecified), eagerly and under jit."""
    rng = np.random.default_rng(0)
    cases = []
    for seed in range(120):
        c = random_gather(np.random.default_rng(1000 + seed))
        ours, theirs = SCATTER_OPS[seed % len(SCATTER_OPS)]
        mode = MODES[(seed // len(SCATTER_OPS)) % 3]
        dtype = np.int32 if seed % 5 == 0 else np.float32
        x = operand(c.shape, dtype)
        out_shape = jax.eval_shape(lambda: jlax.gather(x, c.indices, gather_dnums(c, jlax), c.slice_sizes)).shape
        updates = rng.integers(-3, 4, out_shape).astype(dtype)
        if ours is lax.scatter and _windows_overlap(c, x, updates):
            continue
        cases.append((c, ours, theirs, mode, x, updates))
    expected = jax_batch(
        [
            lambda c=c, theirs=theirs, mode=mode, x=x, u=u: theirs(x, c.indices, u, scatter_dnums(c, jlax), mode=mode)
            for c, _, theirs, mode, x, u in cases
        ]
    )
    jitted = 0
    for n, ((c, ours, _, mode, x, u), e) in enumerate(zip(cases, expected)):
        def f(x: Any, i: Any, u: Any, c: GatherCase = c, ours: Any = ours, mode: str = mode) -> Any:
            return ours(x, i, u, scatter_dnums(c, lax), mode=mode)

        what = f"{ours.__name__} {c} {mode}"
        assert_same(f(x, c.indices, u), e, what)
        if n % 3 == 0:
            assert_same(ferrax.jit(f)(x, c.indices, u), e, "jitted " + what)
            jitted += 1
    assert len(cases) >= 100 and jitted >= 30


@pytest.mark.parametrize("dims", [(), (0,), (1,), (0, 2), (2, 1, 0)])
def test_rev(dims: tuple[int, ...]) -> None:
    x = operand((2, 3, 4), np.float32)
    expected = np.asarray(jlax.rev(x, dims))
    assert_same(lax.rev(x, dims), expected, f"rev {dims}")
    assert_same(ferrax.jit(lambda x: lax.rev(x, dims))(x), expected, f"jitted rev {dims}")


def test_modes_by_name_and_default_fill_values() -> None:
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    assert lax.GatherScatterMode.from_any("drop") is lax.GatherScatterMode.FILL_OR_DROP
    assert lax.GatherScatterMode.from_any("clip") is lax.GatherScatterMode.CLIP
    assert [m.name for m in lax.GatherScatterMode] == [m.name for m in jlax.GatherScatterMode]
    with pytest.raises(ValueError, match="Unknown gather mode"):
        lax.GatherScatterMode.from_any("wrap")
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    assert dn._fields == jlax.GatherDimensionNumbers._fields
    assert lax.ScatterDimensionNumbers._fields == jlax.ScatterDimensionNumbers._fields
    i = np.array([[7]], np.int32)
    for dtype in (np.float32, np.int8, np.uint8, np.bool_):
        x = np.zeros(3, dtype)
        expected = np.asarray(jlax.gather(x, i, jlax.GatherDimensionNumbers(*dn), (1,), mode="fill"))
        assert_same(lax.gather(x, i, dn, (1,), mode="fill"), expected, f"fill {dtype}")
        assert_same(ferrax.jit(lambda x: lax.gather(x, i, dn, (1,), mode="fill"))(x), expected, f"jitted fill {dtype}")


def test_staged_gather_prints_as_jax() -> None:
    dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    x = operand((4, 5), np.float32)
    i = np.array([[0], [2]], np.int32)
    ours = str(ferrax.make_jaxpr(lambda x, i: lax.gather(x, i, dn, (1, 5), mode="clip"))(x, i))
    jdn = jlax.GatherDimensionNumbers(*dn)
    theirs = str(jax.make_jaxpr(lambda x, i: jlax.gather(x, i, jdn, (1, 5), mode="clip"))(x, i))
    assert ours == theirs


def test_bad_dimension_numbers_are_type_errors_naming_the_user_line() -> None:
    x = operand((4, 5), np.float32)
    i = np.array([[0], [2]], np.int32)
    bad = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(0,))
    # TypeCheckError (JAX raises a TypeError; TypeCheckError becomes one in issue 7 too).
    with pytest.raises((TypeError, ferrax.TypeCheckError)) as info:
        lax.gather(x, i, bad, (1, 5))  # bad dimension numbers
    assert "# bad dimension numbers" in str(info.value)
    with pytest.raises(TypeError, match="GatherDimensionNumbers"):
        lax.gather(x, i, ((1,), (0,), (0,)), (1, 5))  # type: ignore[arg-type]
