"""vmap of indexing, slicing and creation against jax.vmap (issue 9): the batching rules
of gather, the scatters, dynamic_slice, dynamic_update_slice, pad, rev and iota, reached
through ``ferrax.numpy`` indexing and ``ferrax.lax``.

Each kernel is a function of one batch element, written once for both systems (``m`` is
ferrax's or JAX's namespace). The cases are generated: every kernel with each non-empty
subset of its operands mapped (the others passed unmapped, ``in_axes=None``), the mapped
ones along axes 0, 1 or -1 (varied across operands and cases), batch sizes 1 and 3. Each
case compares values and dtypes with ``jax.vmap`` and the primitives of the staged
jaxpr with ``jax.make_jaxpr``'s.

JAX's values of a table of cases are computed in one ``jax.jit`` (eager dispatch would
compile every operation of every case): each case traced on its own, the operands it maps
the jit's arguments, those an eager vmap leaves unmapped closed over (NumPy arrays, as
eagerly), every operand an argument where the case is a jit of its own. Where a table
fails to build, each test computes its own case (to report its own error).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax

NDArray = np.ndarray[Any, Any]

# JAX's values are computed a table at a time (_jax_table): one worker runs the module
# (pytest-xdist's loadgroup), so they are computed once.
pytestmark = pytest.mark.xdist_group("vmap-indexing")


class M(NamedTuple):
    np: Any
    lax: Any
    vmap: Any
    grad: Any
    jit: Any
    make_jaxpr: Any


FX = M(fnp, lax, ferrax.vmap, ferrax.grad, ferrax.jit, ferrax.make_jaxpr)
JX = M(jnp, jax.lax, jax.vmap, jax.grad, jax.jit, jax.make_jaxpr)


class Arg(NamedTuple):
    """One operand of a kernel: its shape per batch element, and its values: floats
    (``lo is None``) or int32 in ``[lo, hi)``."""

    shape: tuple[int, ...]
    lo: int | None = None
    hi: int = 0


def F(*shape: int) -> Arg:
    return Arg(shape)


def I(lo: int, hi: int, *shape: int) -> Arg:
    return Arg(shape, lo, hi)


class Kernel(NamedTuple):
    name: str
    fn: Callable[[M], Callable[..., Any]]
    args: tuple[Arg, ...]
    # The first operand is a float array whose gradient (of the sum of squares of the
    # result) vmap(grad(f)) is checked against JAX's.
    grad: bool = False
    # Whether the staged primitives are JAX's (see _COMPARED).
    same_jaxpr: bool = True


def _set(m: M) -> Callable[..., Any]:
    return lambda x, i, u: x.at[i].set(u)


KERNELS = [
    # ferrax.numpy indexing: dynamic_slice for traced scalars, gather for arrays.
    Kernel("x[i], i scalar", lambda m: lambda x, i: x[i], (F(5, 4), I(-5, 5)), grad=True),
    Kernel("x[i, j], scalars", lambda m: lambda x, i, j: x[i, j], (F(5, 4), I(-5, 5), I(0, 4))),
    Kernel("x[i, 1:3]", lambda m: lambda x, i: x[i, 1:3], (F(5, 4), I(0, 5))),
    Kernel("x[::-1, i]", lambda m: lambda x, i: x[::-1, i], (F(5, 4), I(0, 4))),
    Kernel("x[i], i array", lambda m: lambda x, i: x[i], (F(5, 4), I(-5, 5, 3)), grad=True),
    Kernel("x[:, i]", lambda m: lambda x, i: x[:, i], (F(5, 4), I(0, 4, 2, 3))),
    Kernel("x[i, j], arrays", lambda m: lambda x, i, j: x[i, j], (F(5, 4), I(0, 5, 3), I(-4, 4, 3)), grad=True),
    Kernel("x[i[:, None], j]", lambda m: lambda x, i, j: x[i[:, None], j], (F(5, 4), I(0, 5, 2), I(0, 4, 3))),
    Kernel("x[..., i] rank 3", lambda m: lambda x, i: x[..., i], (F(2, 3, 4), I(0, 4, 2))),
    Kernel("x[i, :, j]", lambda m: lambda x, i, j: x[i, :, j], (F(3, 2, 4), I(0, 3, 2), I(0, 4, 2))),
    Kernel("x[i] fill", lambda m: lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0), (F(4, 2), I(-6, 6, 3))),
    Kernel("static slices", lambda m: lambda x: x[1:4, ::-2] + x[0, :2].sum(), (F(5, 4),), grad=True),
    Kernel("take_along_axis", lambda m: lambda x, i: m.np.take_along_axis(x, i, axis=1), (F(3, 4), I(0, 4, 3, 2))),
    Kernel("take", lambda m: lambda x, i: m.np.take(x, i, axis=0), (F(5, 2), I(0, 5, 3))),
    # .at[...] updates: every operand (array, indices, updates) mapped or not.
    Kernel("x.at[i].set(u)", _set, (F(5, 2), I(0, 5), F(2)), grad=True),
    Kernel("x.at[i].set(u), i array", lambda m: lambda x, i, u: x.at[i].set(u, unique_indices=True), (F(5, 2), I(2, 4, 1), F(1, 2))),
    Kernel("x.at[i].add(u)", lambda m: lambda x, i, u: x.at[i].add(u), (F(5, 2), I(-5, 5, 4), F(4, 2)), grad=True),
    Kernel("x.at[i, j].add(u)", lambda m: lambda x, i, j, u: x.at[i, j].add(u), (F(5, 4), I(0, 5, 3), I(0, 4, 3), F(3))),
    Kernel("x.at[i].subtract(u)", lambda m: lambda x, i, u: x.at[i].subtract(u), (F(5, 2), I(0, 5, 4), F(4, 2))),
    Kernel("x.at[i].mul(u)", lambda m: lambda x, i, u: x.at[i].multiply(u), (F(5,), I(0, 5, 4), F(4))),
    Kernel("x.at[i].min(u)", lambda m: lambda x, i, u: x.at[i].min(u), (F(5,), I(0, 5, 4), F(4)), grad=True),
    Kernel("x.at[i].max(u)", lambda m: lambda x, i, u: x.at[i].max(u), (F(4, 3), I(0, 3, 2), F(2, 3))),
    Kernel("x.at[:, i].add(u) clip", lambda m: lambda x, i, u: x.at[:, i].add(u, mode="clip"), (F(3, 4), I(-2, 7, 2), F(3, 2))),
    Kernel("x.at[i].add(u) drop", lambda m: lambda x, i, u: x.at[i].add(u, mode="drop"), (F(4,), I(-6, 6, 5), F(5))),
    # ferrax.lax: the dynamic slices (start indices clamped), pad, rev.
    Kernel(
        "dynamic_slice",
        lambda m: lambda x, i, j: m.lax.dynamic_slice(x, (i, j), (2, 3)),
        (F(5, 4), I(-7, 7), I(-2, 5)),
        grad=True,
    ),
    Kernel("dynamic_slice, static start", lambda m: lambda x: m.lax.dynamic_slice(x, (1, 7), (2, 2)), (F(5, 4),)),
    Kernel(
        "dynamic_update_slice",
        lambda m: lambda x, u, i, j: m.lax.dynamic_update_slice(x, u, (i, j)),
        (F(5, 4), F(2, 3), I(-7, 7), I(0, 3)),
        grad=True,
    ),
    Kernel(
        "dynamic_update_slice, static start",
        lambda m: lambda x, u: m.lax.dynamic_update_slice(x, u, (3, 0)),
        (F(5, 4), F(3, 2)),
    ),
    Kernel(
        "dynamic_index_in_dim",
        lambda m: lambda x, i: m.lax.dynamic_index_in_dim(x, i, axis=1, keepdims=False),
        (F(3, 4), I(-4, 4)),
    ),
    Kernel(
        "dynamic_index_in_dim keepdims",
        lambda m: lambda x, i: m.lax.dynamic_index_in_dim(x, i, axis=0),
        (F(3, 4), I(0, 3)),
    ),
    # JAX gathers with an empty index vector here; ferrax returns the operand.
    Kernel("dynamic_slice of a scalar", lambda m: lambda x: m.lax.dynamic_slice(x, (), ()), (F(),), same_jaxpr=False),
    Kernel(
        "dynamic_update_slice of a scalar",
        lambda m: lambda x, u: m.lax.dynamic_update_slice(x, u, ()),
        (F(), F()),
        same_jaxpr=False,  # JAX scatters with an empty index vector; ferrax takes the update
    ),
    Kernel("pad", lambda m: lambda x, v: m.lax.pad(x, v, [(1, 2, 0), (0, 1, 1)]), (F(3, 2), F()), grad=True),
    Kernel("pad, negative and interior", lambda m: lambda x, v: m.lax.pad(x, v, [(-1, 2, 2), (2, -3, 1)]), (F(3, 4), F())),
    Kernel("pad, integer", lambda m: lambda x, v: m.lax.pad(x, v, [(1, -1, 1)]), (I(-9, 9, 4), I(-9, 9))),
    Kernel("rev", lambda m: lambda x: m.lax.rev(x, (0, 2)), (F(2, 3, 4),)),
    Kernel("flip", lambda m: lambda x: m.np.flip(x), (F(3, 4),), grad=True),
    Kernel("flip axis", lambda m: lambda x: m.np.flip(x, axis=-1), (F(3, 4),)),
    # Creation inside the mapped function: iota is never batched.
    # ferrax.numpy.arange makes a constant, jax.numpy's an iota.
    Kernel("arange", lambda m: lambda x: x * m.np.arange(4.0), (F(4),), same_jaxpr=False),
    Kernel("iota plus index", lambda m: lambda i: m.lax.iota(np.int32, 4) + i, (I(0, 9),)),
    Kernel("broadcasted_iota", lambda m: lambda x: x + m.lax.broadcasted_iota(np.float32, (3, 2), 1), (F(3, 2),)),
]

AXES = (0, 1, -1)


class Case(NamedTuple):
    kernel: Kernel
    in_axes: tuple[int | None, ...]
    size: int

    @property
    def id(self) -> str:
        return f"{self.kernel.name}-{self.in_axes}-{self.size}"


def _cases() -> list[Case]:
    cases = []
    for n, kernel in enumerate(KERNELS):
        masks = [m for m in itertools.product((True, False), repeat=len(kernel.args)) if any(m)]
        for j, mapped in enumerate(masks):
            for size in (1, 3) if j % 2 == 0 else (3,):  # size 1 for every other subset
                axes: list[int | None] = []
                for k, (m, arg) in enumerate(zip(mapped, kernel.args)):
                    # Axis 1 only where the batched operand has one; otherwise 0 / -1.
                    a = AXES[(n + k + size) % 3]
                    axes.append(None if not m else (a if a != 1 or arg.shape else 0))
                cases.append(Case(kernel, tuple(axes), size))
    return cases


CASES = _cases()


def _value(arg: Arg, shape: Sequence[int], rng: np.random.Generator) -> NDArray:
    if arg.lo is None:
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(arg.lo, arg.hi, size=shape, dtype=np.int32)


def _inputs(case: Case, seed: int = 0) -> list[NDArray]:
    rng = np.random.default_rng(seed)
    out = []
    for arg, axis in zip(case.kernel.args, case.in_axes):
        if axis is None:
            out.append(_value(arg, arg.shape, rng))
        else:
            shape = list(arg.shape)
            shape.insert(axis % (len(shape) + 1), case.size)
            out.append(_value(arg, shape, rng))
    return out


def _assert_same(got: Any, want: Any) -> None:
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert str(g_tree) == str(w_tree)
    for g, w in zip(g_leaves, w_leaves):
        ga, wa = np.asarray(g), np.asarray(w)
        assert ga.shape == wa.shape and ga.dtype == wa.dtype, f"{ga.dtype}{ga.shape} vs {wa.dtype}{wa.shape}"
        # (ferrax.vmap returns an output that is an input as it was given, a NumPy array)
        assert getattr(g, "weak_type", False) == w.weak_type
        np.testing.assert_allclose(ga, wa, rtol=1e-6, atol=1e-6)


def _kernel(m: M, case: Case) -> Callable[..., Any]:
    """The kernel of ``case`` on arrays of ``m`` (an unmapped operand is a NumPy array)."""
    fn = case.kernel.fn(m)
    return lambda *args: fn(*(m.np.asarray(a) for a in args))


# The primitives the batching rules stage, with the parameters compared. (The
# equations around them may differ: jax.numpy normalizes a static index with lt, add and
# select_n in the jaxpr, ferrax.numpy on the host; ferrax's elementwise rules move a
# batch axis to the front where JAX's keep it, so the transposes are not compared.)
_COMPARED = {
    "gather": ("dimension_numbers", "slice_sizes", "mode", "unique_indices", "indices_are_sorted"),
    **{
        name: ("dimension_numbers", "mode", "unique_indices", "indices_are_sorted")
        for name in ("scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max")
    },
    "dynamic_slice": ("slice_sizes",),
    "dynamic_update_slice": (),
    "pad": ("padding_config",),
    "rev": (),  # its axes follow where the rules before it left the batch axis
    "iota": ("shape", "dimension"),
    "concatenate": ("dimension",),
}


def _normalized(value: Any) -> Any:
    if isinstance(value, tuple):  # dimension numbers hold NumPy ints in JAX
        return tuple(_normalized(v) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    return getattr(value, "name", value)


def _primitives(closed: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """The compared equations of ``closed`` and of the jaxprs it calls (jax.numpy's
    ``take`` is a jitted function), in order."""
    out = []
    for e in closed.jaxpr.eqns:
        name = e.primitive if isinstance(e.primitive, str) else e.primitive.name
        if name in _COMPARED:
            out.append((name, tuple(_normalized(e.params[k]) for k in _COMPARED[name])))
        for value in e.params.values():
            if hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
                out.extend(_primitives(value))
    return out


def _vmapped(m: M, case: Case) -> Callable[..., Any]:
    return m.vmap(_kernel(m, case), in_axes=case.in_axes)  # type: ignore[no-any-return]


def _jit_of_vmap(m: M, case: Case) -> Callable[..., Any]:
    return m.jit(_vmapped(m, case))  # type: ignore[no-any-return]


def _vmap_of_grad(m: M, case: Case) -> Callable[..., Any]:
    f = _kernel(m, case)
    return m.vmap(m.grad(lambda *a: m.np.sum(f(*a) ** 2)), in_axes=case.in_axes)  # type: ignore[no-any-return]


def _grad_of_vmap(m: M, case: Case) -> Callable[..., Any]:
    mapped = _vmapped(m, case)
    return m.jit(m.grad(lambda *a: m.np.sum(mapped(*a) ** 2)))  # type: ignore[no-any-return]


Program = Callable[[M, Case], Callable[..., Any]]


@functools.cache
def _jax_table(program: Program, cases: tuple[Case, ...], seed: int, jitted: bool) -> dict[str, Any] | None:
    """JAX's ``program(JX, case)(*_inputs(case, seed))`` of every case, by id, in one
    ``jax.jit``; None if that fails. The operands are the jit's arguments where the
    program is ``jitted`` (a jit of its own), else those the case maps (the unmapped ones
    closed over, as concrete as eagerly)."""

    def passed(case: Case) -> list[bool]:
        return [jitted or axis is not None for axis in case.in_axes]

    inputs = {c.id: _inputs(c, seed) for c in cases}
    arguments = {c.id: [a for a, p in zip(inputs[c.id], passed(c)) if p] for c in cases}

    def run(arguments: dict[str, list[NDArray]]) -> dict[str, Any]:
        out = {}
        for c in cases:
            given = iter(arguments[c.id])
            args = [next(given) if p else a for a, p in zip(inputs[c.id], passed(c))]
            out[c.id] = program(JX, c)(*args)
        return out

    try:
        return jax.jit(run)(arguments)  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - each test then runs its own case
        return None


def _jax_value(program: Program, cases: list[Case], seed: int, jitted: bool, case: Case) -> Any:
    """JAX's value of ``case`` from the table of ``cases``, or computed alone."""
    table = _jax_table(program, tuple(cases), seed, jitted)
    return table[case.id] if table is not None else program(JX, case)(*_inputs(case, seed))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vmap_matches_jax(case: Case) -> None:
    args = _inputs(case)
    _assert_same(_vmapped(FX, case)(*args), _jax_value(_vmapped, CASES, 0, False, case))
    if case.kernel.same_jaxpr and case.size > 1:  # (size 1 stages the same primitives)
        fx_jaxpr, jax_jaxpr = FX.make_jaxpr(_vmapped(FX, case))(*args), JX.make_jaxpr(_vmapped(JX, case))(*args)
        assert _primitives(fx_jaxpr) == _primitives(jax_jaxpr)


GRAD_CASES = [c for c in CASES if c.size == 3 and c.kernel.grad]
# Compiled: for every kernel, batch size 3 with all operands mapped, and with only the
# last one mapped.
def _all_and_last_mapped(kernel: Kernel) -> list[Case]:
    cases = [c for c in CASES if c.kernel is kernel and c.size == 3]
    return cases[:1] + cases[-1:] if len(cases) > 1 else cases


JIT_CASES = [c for k in KERNELS for c in _all_and_last_mapped(k)]


@pytest.mark.parametrize("case", JIT_CASES, ids=[c.id for c in JIT_CASES])
def test_jit_of_vmap_matches_jax(case: Case) -> None:
    args = _inputs(case, seed=1)
    _assert_same(_jit_of_vmap(FX, case)(*args), _jax_value(_jit_of_vmap, JIT_CASES, 1, True, case))


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_vmap_of_grad_matches_jax(case: Case) -> None:
    args = _inputs(case, seed=2)
    _assert_same(_vmap_of_grad(FX, case)(*args), _jax_value(_vmap_of_grad, GRAD_CASES, 2, False, case))


NESTED = [
    ("x[i]", lambda m: lambda x, i, u: x[i]),
    ("x.at[i].add(u)", lambda m: lambda x, i, u: x.at[i].add(u)),
    ("x.at[i].set(u) clip", lambda m: lambda x, i, u: x.at[i].set(u, mode="clip")),
    ("dynamic_slice", lambda m: lambda x, i, u: m.lax.dynamic_slice(x, (i[0],), (2,))),
    ("dynamic_update_slice", lambda m: lambda x, i, u: m.lax.dynamic_update_slice(x, u, (i[1],))),
]
# (inner in_axes, outer in_axes) of (x, i); u (of shape (2,)) is never mapped.
NESTED_AXES = [
    (inner, outer)
    for inner in ((0, 1), (0, None), (None, 1))
    for outer in ((1, 0), (-1, None), (None, 0))
]


@pytest.mark.parametrize("axes", NESTED_AXES, ids=[str(a) for a in NESTED_AXES])
@pytest.mark.parametrize("name, fn", NESTED, ids=[n for n, _ in NESTED])
def test_nested_vmap_batches_batched_gathers_and_scatters(
    name: str, fn: Callable[[M], Callable[..., Any]], axes: tuple[tuple[int | None, ...], tuple[int | None, ...]]
) -> None:
    # The inner vmap gives gathers and scatters with batching dimensions (or windows
    # along a batch axis) already; the outer one adds its own.
    (xi, ii), (xo, io) = axes
    rng = np.random.default_rng(0)
    x_shape, i_shape = [5], [2]
    for shape, inner, outer, sizes in ((x_shape, xi, xo, (3, 4)), (i_shape, ii, io, (3, 4))):
        if inner is not None:
            shape.insert(inner, sizes[0])
        if outer is not None:
            shape.insert(outer % (len(shape) + 1), sizes[1])
    x = rng.standard_normal(x_shape).astype(np.float32)
    i = rng.integers(-1, 5, size=i_shape).astype(np.int32)
    u = rng.standard_normal((2,)).astype(np.float32)

    def f(m: M) -> Callable[..., Any]:
        kernel = fn(m)
        inner = m.vmap(lambda *a: kernel(*(m.np.asarray(v) for v in a)), in_axes=(xi, ii, None))
        return m.vmap(inner, in_axes=(xo, io, None), out_axes=-1)  # type: ignore[no-any-return]

    _assert_same(f(FX)(x, i, u), f(JX)(x, i, u))
    assert _primitives(ferrax.make_jaxpr(f(FX))(x, i, u)) == _primitives(jax.make_jaxpr(f(JX))(x, i, u))


def test_iota_is_not_batched() -> None:
    # iota has no operands: vmap stages it once, unbatched, as JAX does.
    f = ferrax.vmap(lambda x: x + lax.iota(np.int32, 3))
    eqns = ferrax.make_jaxpr(f)(np.zeros((2, 3), np.int32)).jaxpr.eqns
    assert eqns[0].primitive == "iota" and eqns[0].params["shape"] == (3,)
    # The add's rule lifts it to rank 2 as JAX does (broadcast_in_dim, then add).
    assert [e.primitive for e in eqns[1:]] == ["broadcast_in_dim", "add"]
    want = jax.make_jaxpr(jax.vmap(lambda x: x + jax.lax.iota(np.int32, 3)))(np.zeros((2, 3), np.int32))
    assert [str(e.primitive) for e in want.jaxpr.eqns] == [e.primitive for e in eqns]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("index", [2, -1, 7, -9])
def test_dynamic_index_and_slice_in_dim_match_jax(axis: int, index: int) -> None:
    # Eager (a Python int and a NumPy index) and jitted (a traced index), with JAX's
    # clamping of starts out of range.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for keepdims in (True, False):
        for index_value in (index, np.int32(index)):
            got = lax.dynamic_index_in_dim(x, index_value, axis, keepdims)
            _assert_same(got, jax.lax.dynamic_index_in_dim(x, index_value, axis, keepdims))
    got = ferrax.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis))(x, np.int32(index))
    want = jax.jit(lambda x, i: jax.lax.dynamic_slice_in_dim(x, i, 2, axis))(x, np.int32(index))
    _assert_same(got, want)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), ()])
def test_flip_matches_jax(axis: Any) -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    _assert_same(fnp.flip(x, axis), jnp.flip(x, axis))
    # A nested jit `_flip` around one `rev`, as JAX's.
    ours = ferrax.make_jaxpr(lambda x: fnp.flip(x, axis))(x)
    assert str(ours) == str(jax.make_jaxpr(lambda x: jnp.flip(x, axis))(x))


def test_iota_rule_gives_an_unbatched_iota() -> None:
    # Never reached from vmap (iota has no operands), but a rule like any primitive's.
    from ferrax._lax.structural import iota_p

    assert iota_p.batch_rule is not None
    out, dim = iota_p.batch_rule([], [], axis_size=3, dtype=np.dtype(np.int32), shape=(4,), dimension=0, sharding=None)
    assert dim is None
    np.testing.assert_array_equal(np.asarray(out), np.arange(4, dtype=np.int32))


GRAD_OF_VMAP_CASES = [c for k in KERNELS if k.grad for c in _all_and_last_mapped(k)]


@pytest.mark.parametrize("case", GRAD_OF_VMAP_CASES, ids=[c.id for c in GRAD_OF_VMAP_CASES])
def test_grad_of_vmap_matches_jax(case: Case) -> None:
    # Reverse mode through the batched gathers and scatters (their transposes keep the
    # batching dimensions), under jit.
    args = _inputs(case, seed=3)
    _assert_same(_grad_of_vmap(FX, case)(*args), _jax_value(_grad_of_vmap, GRAD_OF_VMAP_CASES, 3, True, case))
