"""The IR's gather, scatter family and rev against JAX 0.10.2, over generated dimension
numbers and modes: JAX prints a jaxpr of one `lax.gather`/`lax.scatter*` call; the Rust
parser reads JAX's text (so the shape rule agrees with the output type JAX declared); the
reference evaluator and the StableHLO lowering run through XLA must both give JAX's values,
with indices out of bounds on both sides. Dimension numbers JAX's shape rule refuses are
refused by the Rust rule too."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax import lax  # noqa: E402

from ferrax import TypeCheckError, _ir  # noqa: E402
from ferrax._runtime import buffer_of, compile_stablehlo  # noqa: E402

NDArray = np.ndarray[Any, Any]
MODES = ("clip", "fill", "promise_in_bounds")


@dataclasses.dataclass
class Config:
    """One gather, and the scatter that is its transpose."""

    operand_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...]
    start_indices_batching_dims: tuple[int, ...]
    slice_sizes: tuple[int, ...]

    def gather_dnums(self) -> Any:
        return lax.GatherDimensionNumbers(
            offset_dims=self.offset_dims,
            collapsed_slice_dims=self.collapsed_slice_dims,
            start_index_map=self.start_index_map,
            operand_batching_dims=self.operand_batching_dims,
            start_indices_batching_dims=self.start_indices_batching_dims,
        )

    def scatter_dnums(self) -> Any:
        return lax.ScatterDimensionNumbers(
            update_window_dims=self.offset_dims,
            inserted_window_dims=self.collapsed_slice_dims,
            scatter_dims_to_operand_dims=self.start_index_map,
            operand_batching_dims=self.operand_batching_dims,
            scatter_indices_batching_dims=self.start_indices_batching_dims,
        )

    def output_shape(self) -> tuple[int, ...]:
        """The gather's output shape (the scatter's updates shape)."""
        kept = iter(
            s
            for d, s in enumerate(self.slice_sizes)
            if d not in self.collapsed_slice_dims and d not in self.operand_batching_dims
        )
        batch = iter(self.indices_shape[:-1])
        rank = len(self.offset_dims) + len(self.indices_shape) - 1
        return tuple(next(kept) if i in self.offset_dims else next(batch) for i in range(rank))


def random_config(rng: np.random.Generator, unit_windows: bool = False, min_k: int = 0) -> Config:
    """Valid dimension numbers: operand rank 1-3, 0-2 index batch dims, maybe a batching
    dim pair, an index map over at least `min_k` operand dims, some of them collapsed."""
    rank = int(rng.integers(1, 4))
    shape = tuple(int(s) for s in rng.integers(1, 5, size=rank))
    dims = list(range(rank))
    nbatch = int(rng.integers(0, 2)) if rank >= 2 else 0
    operand_batching = sorted(int(d) for d in rng.choice(dims, size=nbatch, replace=False))
    free = [d for d in dims if d not in operand_batching]
    k = int(rng.integers(min(min_k, len(free)), len(free) + 1))
    index_map = [int(d) for d in rng.permutation(free)[:k]]
    collapsed = sorted(d for d in index_map if rng.random() < 0.6)
    sizes = []
    for d in dims:
        if d in collapsed or d in operand_batching:
            sizes.append(1)
        elif unit_windows and d in index_map:
            sizes.append(1)
        else:
            sizes.append(int(rng.integers(0 if not unit_windows else 1, shape[d] + 1)))
    nfree_batch = int(rng.integers(0, 3))
    index_batch_rank = nfree_batch + nbatch
    positions = [int(p) for p in rng.permutation(index_batch_rank)[:nbatch]]
    index_batch = [int(s) for s in rng.integers(1, 4, size=index_batch_rank)]
    for p, od in zip(positions, operand_batching):
        index_batch[p] = shape[od]
    indices_shape = (*index_batch, k)
    noffset = rank - len(collapsed) - nbatch
    out_rank = noffset + index_batch_rank
    offset_dims = sorted(int(d) for d in rng.choice(out_rank, size=noffset, replace=False))
    return Config(
        operand_shape=shape,
        indices_shape=indices_shape,
        offset_dims=tuple(offset_dims),
        collapsed_slice_dims=tuple(collapsed),
        start_index_map=tuple(index_map),
        operand_batching_dims=tuple(operand_batching),
        start_indices_batching_dims=tuple(positions),
        slice_sizes=tuple(sizes),
    )


def random_indices(rng: np.random.Generator, c: Config, dtype: Any = np.int32) -> NDArray:
    """Start indices from -2 to past the end of their operand dimension."""
    idx = np.zeros(c.indices_shape, dtype=np.int64)
    for k, d in enumerate(c.start_index_map):
        idx[..., k] = rng.integers(-2, c.operand_shape[d] + 2, size=c.indices_shape[:-1])
    return idx.astype(dtype)


def run_ir(text: str, args: list[NDArray]) -> tuple[list[NDArray], list[NDArray]]:
    """Parses JAX's text, then runs the reference evaluator and the lowering on XLA."""
    jaxpr = _ir.parse_jaxpr(text)
    ref_in = [(a, x.ravel().tolist()) for a, x in zip(jaxpr.in_avals, args)]
    ref = [
        np.asarray(values, dtype=aval.dtype).reshape(aval.shape)
        for aval, values in _ir.reference_eval(jaxpr, [], ref_in)
    ]
    exe = compile_stablehlo(_ir.lower_to_stablehlo(jaxpr, "t"), jaxpr.out_avals)
    xla = [np.asarray(o) for o in exe([buffer_of(x, a) for x, a in zip(args, jaxpr.in_avals)])]
    return ref, xla


def assert_same(got: NDArray, want: NDArray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("seed", range(45))
def test_gather_matches_jax(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = random_config(rng)
    mode = MODES[seed % 3]
    fill = None if seed % 2 else -3.5
    x = rng.uniform(-5, 5, size=c.operand_shape).astype(np.float32)
    i = random_indices(rng, c, np.int32 if seed % 4 else np.uint8)

    def f(x: Any, i: Any) -> Any:
        return lax.gather(x, i, c.gather_dnums(), c.slice_sizes, mode=mode, fill_value=fill)

    text = str(jax.make_jaxpr(f)(x, i))
    want = np.asarray(jax.jit(f)(x, i))
    ref, xla = run_ir(text, [x, i])
    what = f"{c} {mode} fill={fill}\n{text}"
    assert_same(ref[0], want, "reference evaluator: " + what)
    assert_same(xla[0], want, "lowering: " + what)


SCATTERS = {
    "scatter-add": lax.scatter_add,
    "scatter-sub": lax.scatter_sub,
    "scatter-mul": lax.scatter_mul,
    "scatter-min": lax.scatter_min,
    "scatter-max": lax.scatter_max,
}


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_combining_scatters_match_jax(name: str, seed: int) -> None:
    # int32 operands: duplicates combine exactly whatever the order. Index vectors are
    # not empty: with empty ones XLA (so JAX) applies only one of several updates to an
    # element, where XLA's semantics (and the reference evaluator) combine them all.
    rng = np.random.default_rng(seed)
    c = random_config(rng, min_k=1)
    mode = MODES[seed % 3]
    x = rng.integers(-9, 10, size=c.operand_shape).astype(np.int32)
    i = random_indices(rng, c)
    u = rng.integers(-3, 4, size=c.output_shape()).astype(np.int32)
    op = SCATTERS[name]

    def f(x: Any, i: Any, u: Any) -> Any:
        return op(x, i, u, c.scatter_dnums(), mode=mode)

    text = str(jax.make_jaxpr(f)(x, i, u))
    assert name in text
    want = np.asarray(jax.jit(f)(x, i, u))
    ref, xla = run_ir(text, [x, i, u])
    what = f"{c} {mode}\n{text}"
    assert_same(ref[0], want, "reference evaluator: " + what)
    assert_same(xla[0], want, "lowering: " + what)


@pytest.mark.parametrize("seed", range(24))
def test_scatter_with_unique_windows_matches_jax(seed: int) -> None:
    # `scatter` picks one of several updates to an element (XLA leaves which unspecified):
    # windows of size 1 along the indexed dimensions, distinct index vectors.
    rng = np.random.default_rng(1000 + seed)
    mode = ("fill", "promise_in_bounds")[seed % 2]
    for _ in range(100):
        c = random_config(rng, unit_windows=True, min_k=1)
        batch = int(np.prod(c.indices_shape[:-1], dtype=np.int64))
        i = random_indices(rng, c)
        flat = i.reshape(batch, -1)
        if len({tuple(r) for r in flat.tolist()}) == batch and not c.operand_batching_dims:
            break
    else:
        pytest.fail("no configuration with distinct index vectors drawn")
    x = rng.uniform(-5, 5, size=c.operand_shape).astype(np.float32)
    u = rng.uniform(-5, 5, size=c.output_shape()).astype(np.float32)

    def f(x: Any, i: Any, u: Any) -> Any:
        return lax.scatter(x, i, u, c.scatter_dnums(), mode=mode, unique_indices=True)

    text = str(jax.make_jaxpr(f)(x, i, u))
    want = np.asarray(jax.jit(f)(x, i, u))
    ref, xla = run_ir(text, [x, i, u])
    assert_same(ref[0], want, f"reference evaluator: {c}\n{text}")
    assert_same(xla[0], want, f"lowering: {c}\n{text}")


@pytest.mark.parametrize("seed", range(10))
def test_rev_matches_jax(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 4, size=int(rng.integers(0, 4))))
    dims = tuple(int(d) for d in rng.permutation(len(shape))[: int(rng.integers(0, len(shape) + 1))])
    x = rng.integers(0, 100, size=shape).astype(np.int16)
    text = str(jax.make_jaxpr(lambda x: lax.rev(x, dims))(x))
    want = np.asarray(lax.rev(x, dims))
    ref, xla = run_ir(text, [x])
    assert_same(ref[0], want, text)
    assert_same(xla[0], want, text)


def _gather_text(c: Config, out_shape: tuple[int, ...]) -> str:
    dn = ", ".join(
        f"{k}={v!r}"
        for k, v in [
            ("offset_dims", c.offset_dims),
            ("collapsed_slice_dims", c.collapsed_slice_dims),
            ("start_index_map", c.start_index_map),
            ("operand_batching_dims", c.operand_batching_dims),
            ("start_indices_batching_dims", c.start_indices_batching_dims),
        ]
    )
    op = ",".join(str(s) for s in c.operand_shape)
    ix = ",".join(str(s) for s in c.indices_shape)
    out = ",".join(str(s) for s in out_shape)
    return (
        f"{{ lambda ; a:f32[{op}] b:i32[{ix}]. let\n"
        f"    c:f32[{out}] = gather[dimension_numbers=GatherDimensionNumbers({dn}) "
        f"mode=GatherScatterMode.CLIP slice_sizes={c.slice_sizes!r}] a b\n"
        "  in (c,) }"
    )


def _mutations(rng: np.random.Generator, c: Config) -> list[tuple[str, Config]]:
    out: list[tuple[str, Config]] = []
    r = len(c.operand_shape)
    rep = dataclasses.replace
    if len(c.offset_dims) >= 2:
        out.append(("unsorted offset_dims", rep(c, offset_dims=tuple(reversed(c.offset_dims)))))
    out.append(("offset dim out of range", rep(c, offset_dims=(*c.offset_dims[:-1], 99)) if c.offset_dims else rep(c, offset_dims=(99,))))
    out.append(("start_index_map out of range", rep(c, start_index_map=(*c.start_index_map[:-1], r)) if c.start_index_map else rep(c, indices_shape=(*c.indices_shape[:-1], 1), start_index_map=(r,))))
    out.append(("index vector length", rep(c, indices_shape=(*c.indices_shape[:-1], c.indices_shape[-1] + 1))))
    out.append(("slice_sizes length", rep(c, slice_sizes=(*c.slice_sizes, 1))))
    big = list(c.slice_sizes)
    big[0] = c.operand_shape[0] + 1
    out.append(("slice larger than operand", rep(c, slice_sizes=tuple(big))))
    if c.collapsed_slice_dims:
        s = list(c.slice_sizes)
        d = c.collapsed_slice_dims[0]
        s[d] = 2
        out.append(("collapsed of size 2", rep(c, slice_sizes=tuple(s))))
    out.append(("collapsed out of range", rep(c, collapsed_slice_dims=(*c.collapsed_slice_dims, r + 1))))
    if c.operand_batching_dims:
        out.append(("batching counts", rep(c, start_indices_batching_dims=())))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_gather_rule_refuses_what_jax_refuses(seed: int) -> None:
    # Each mutation of valid dimension numbers: JAX's shape rule and the Rust rule agree
    # on refusing it, or both accept it with one output shape.
    rng = np.random.default_rng(seed)
    c = random_config(rng)
    for what, bad in _mutations(rng, c):
        x = jax.ShapeDtypeStruct(bad.operand_shape, np.float32)
        i = jax.ShapeDtypeStruct(bad.indices_shape, np.int32)
        jax_out: tuple[int, ...] | None
        try:
            jax_out = tuple(
                jax.eval_shape(
                    lambda x, i: lax.gather(x, i, bad.gather_dnums(), bad.slice_sizes, mode="clip"), x, i
                ).shape
            )
        except TypeError:
            jax_out = None
        text = _gather_text(bad, jax_out if jax_out is not None else ())
        try:
            _ir.parse_jaxpr(text)
        except TypeCheckError as e:
            assert jax_out is None, f"{what}: JAX accepts {bad} but ferrax says {e}"
            assert "gather" in str(e)
        else:
            assert jax_out is not None, f"{what}: JAX refuses {bad}, ferrax accepts it"


def _gather_eqn_params(**params: Any) -> dict[str, Any]:
    b = _ir.JaxprBuilder()
    x = b.add_invar(_ir.ShapedArray((3, 4), np.float32))
    i = b.add_invar(_ir.ShapedArray((2, 1), np.int32))
    (y,) = b.add_eqn("gather", [x, i], params)
    return b.build([y]).eqns[0].params


def test_params_cross_the_binding_as_ferrax_lax_records() -> None:
    from ferrax import lax as flax

    dn = flax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    as_dict = {"offset_dims": [1], "collapsed_slice_dims": (0,), "start_index_map": (0,)}
    for dims in (dn, as_dict):
        for mode, want in [
            (flax.GatherScatterMode.CLIP, flax.GatherScatterMode.CLIP),
            ("fill", flax.GatherScatterMode.FILL_OR_DROP),
            ("promise_in_bounds", flax.GatherScatterMode.PROMISE_IN_BOUNDS),
        ]:
            got = _gather_eqn_params(dimension_numbers=dims, slice_sizes=(1, 4), mode=mode, fill_value=np.float32(1.5))
            assert got["dimension_numbers"] == dn
            assert type(got["dimension_numbers"]) is flax.GatherDimensionNumbers
            assert got["mode"] is want
            assert got["fill_value"] == 1.5 and type(got["fill_value"]) is float


@pytest.mark.parametrize(
    "params",
    [
        {"dimension_numbers": (1, 0), "slice_sizes": (1, 4), "mode": "clip"},
        {"dimension_numbers": {"offset_dims": (1,)}, "slice_sizes": (1, 4), "mode": "clip"},
        {"slice_sizes": (1, 4), "mode": "one_hot"},
        {"slice_sizes": (1, 4), "mode": "clip", "fill_value": "x"},
    ],
)
def test_ill_formed_params_are_type_check_errors(params: dict[str, Any]) -> None:
    from ferrax import lax as flax

    params.setdefault(
        "dimension_numbers",
        flax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
    )
    with pytest.raises(TypeCheckError, match="gather:? param .(dimension_numbers|mode|fill_value)"):
        _gather_eqn_params(**params)


_X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
_I = np.array([0, -1, 2, 5], dtype=np.int32)
_J = np.array([[1, 0], [3, -4]], dtype=np.int32)
_K = np.array([[[1, -1], [0, 3], [2, 9]], [[0, 0], [3, 1], [-5, 2]]], dtype=np.int32)

# jax.numpy indexing as users write it (in and out of bounds, negative indices).
JNP_INDEXING = {
    "x[i % 2]": lambda x, i, j, k: x[i % 2],
    "x[:, i]": lambda x, i, j, k: x[:, i],
    "x[..., j]": lambda x, i, j, k: x[..., j],
    "x[0, :, j]": lambda x, i, j, k: x[0, :, j],
    "x[:, None, i % 3, 1:3]": lambda x, i, j, k: x[:, None, i % 3, 1:3],
    "x[::-1, ::2]": lambda x, i, j, k: x[::-1, ::2],
    "x.at[i].get(mode='fill')": lambda x, i, j, k: x.at[i].get(mode="fill", fill_value=-1.0),
    "x.at[i].get(mode='fill'), NaN": lambda x, i, j, k: x.at[:, i].get(mode="fill"),
    "x.at[:, i].set(7)": lambda x, i, j, k: x.at[:, i].set(7.0),
    "x.at[0, j].add(1)": lambda x, i, j, k: x.at[0, j].add(1.0),
    "x.at[1, :, j % 3].mul(2)": lambda x, i, j, k: x.at[1, :, j % 3].mul(2.0),
    "x.at[i].min(3)": lambda x, i, j, k: x.at[i].min(3.0),
    "x.at[0, :2, 2].max(v)": lambda x, i, j, k: x.at[0, :2, 2].max(j[0].astype(np.float32)),
    "x.at[i].subtract(1)": lambda x, i, j, k: x.at[i].subtract(1.0),
    "x.at[i].set(0, mode='clip')": lambda x, i, j, k: x.at[i].set(0.0, mode="clip"),
    "x.at[7].set(9)": lambda x, i, j, k: x.at[7].set(9.0),
    "take(mode='clip')": lambda x, i, j, k: jax.numpy.take(x, i, axis=2, mode="clip"),
    "take(mode='fill')": lambda x, i, j, k: jax.numpy.take(x, i, axis=1, mode="fill"),
    "take_along_axis": lambda x, i, j, k: jax.numpy.take_along_axis(x, k, axis=2),
}


@pytest.mark.parametrize("name", sorted(JNP_INDEXING))
def test_jax_numpy_indexing_jaxprs_run_as_in_jax(name: str) -> None:
    # The whole jaxpr JAX stages for the expression (index normalisation, nested jits,
    # gathers, scatters, rev) parses, and evaluates and lowers to JAX's values.
    f = JNP_INDEXING[name]
    args = [_X, _I, _J, _K]
    text = str(jax.make_jaxpr(f)(*args))
    want = np.asarray(jax.jit(f)(*args))
    ref, xla = run_ir(text, args)
    np.testing.assert_array_equal(ref[0], want, err_msg=f"reference evaluator\n{text}")
    np.testing.assert_array_equal(xla[0], want, err_msg=f"lowering\n{text}")
