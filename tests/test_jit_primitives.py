"""Every built-in primitive, for every dtype its Rust rule accepts, runs under ``jit``
and matches eager (NumPy) evaluation. The cases are generated from a table of how to
call each ``lax`` function; which dtypes to try is asked of the Rust shape rule.

The cases of one dtype are compiled together, in one ``ferrax.jit`` (compilations, not
the checks, take the time), but for those on a mesh and the incomplete gamma family (a
large program each, which gains nothing from sharing one); where that jit fails, each
test compiles its own case (to report its own error). The conversions from one dtype
are likewise compiled together."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import ferrax as fx
from ferrax import TypeCheckError, _ir, lax
from ferrax._lax._operands import bind1
from ferrax._lax import prng
from ferrax._lax.bits import threefry2x32
from ferrax._lax.custom import custom_jvp_call_p, custom_vjp_call_p, remat_p, stop_gradient_p
from ferrax._lax import windowed
from ferrax._lax.elementwise import add_any_p
from ferrax._lax.linalg import (
    cholesky_p, eigh_p, geqp3_p, geqrf_p, householder_product_p, lu_p, qr_p, svd_p, triangular_solve_p,
)

@pytest.fixture(autouse=True)
def x64() -> Iterator[None]:
    """64-bit dtypes are among those tried: they exist with x64 (as in JAX)."""
    with fx.enable_x64(True):
        yield


DTYPES = [
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
        np.uint64, np.float16, np.float32, np.float64,
    )
] + [np.dtype(ml_dtypes.bfloat16)]


class Case(NamedTuple):
    """How to call one primitive: its name, the function, and operand shapes."""

    primitive: str
    fun: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...]
    params: dict[str, Any]
    positive: bool = False  # operands drawn from (0.5, 2) (log, sqrt, pow, ...)
    nonzero: bool = False  # second operand never zero (div, rem)
    shift: bool = False  # second operand a shift amount over the dtype's range, out-of-range ones included


def _c(name: str, fun: Callable[..., Any], *shapes: tuple[int, ...], params: dict[str, Any] | None = None, **kw: bool) -> Case:
    return Case(name, fun, tuple(shapes), params or {}, **kw)


S = (2, 3)
_WINDOW: dict[str, Any] = {"window_dimensions": (2, 2), "window_strides": (1, 2), "padding": ((1, 0), (0, 1))}


def _4(x: Any) -> Any:
    return lax.convert_element_type(4, x.dtype)


def _same_width_int(x: Any) -> np.dtype[Any]:
    return np.dtype(f"i{x.dtype.itemsize}")


def _half(x: Any) -> Any:
    return lax.convert_element_type(0.5, x.dtype)

def _spd(x: Any) -> Any:
    """``x xᵀ + 4 I``: a symmetric positive definite matrix from a ``(2, 3)`` operand (the
    primitives' own rules take or refuse the operand's dtype)."""
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (2, 2), 0), lax.broadcasted_iota(np.int32, (2, 2), 1)), x.dtype)
    return lax.add(lax.dot_general(x, x, (((1,), (1,)), ((), ()))), lax.mul(eye, _4(x)))


def _solve(**flags: bool) -> Callable[..., Any]:
    every = dict(left_side=False, lower=False, transpose_a=False, conjugate_a=False, unit_diagonal=False)
    return lambda x: bind1(triangular_solve_p, _spd(x), x if flags.get("left_side") else lax.transpose(x, (1, 0)), **{**every, **flags})


_ROWS = np.array([[1], [0], [-1], [5]], np.int32)
_POINTS = np.array([[1, 2], [0, 0]], np.int32)
_GATHER_ROWS = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
_GATHER_POINTS = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
_SCATTER_ROWS = lax.ScatterDimensionNumbers(
    update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)
)
def _rule(*args: Any) -> Any:
    """A custom rule the call primitives carry (evaluation never calls it)."""
    raise AssertionError("a custom rule was called")


def _called(prim: str) -> Callable[[Any], Any]:
    """``x -> rev(x)`` through one of the call primitives (bound directly), whose jaxpr is
    traced for x's type and has a second output the caller drops."""

    def fun(x: Any) -> Any:
        inner = fx.make_jaxpr(lambda y: (lax.rev(y, (1,)), y))(np.zeros(x.shape, x.dtype))
        if prim == "custom_jvp_call":
            outs = custom_jvp_call_p.bind(x, name="f", call_jaxpr=inner, jvp=_rule, symbolic_zeros=False)
        elif prim == "custom_vjp_call":
            outs = custom_vjp_call_p.bind(x, name="f", call_jaxpr=inner, fwd=_rule, bwd=_rule, symbolic_zeros=False)
        else:
            outs = remat_p.bind(x, jaxpr=inner, differentiated=False, policy=None, prevent_cse=True)
        return outs[0]

    return fun


CASES = [
    *[_c(n, getattr(lax, f), S) for n, f in [
        ("neg", "neg"), ("abs", "abs"), ("sign", "sign"), ("exp", "exp"), ("sin", "sin"),
        ("cos", "cos"), ("tan", "tan"), ("tanh", "tanh"), ("logistic", "logistic"),
        ("square", "square"), ("not", "bitwise_not"), ("expm1", "expm1"),
    ]],
    *[_c(n, getattr(lax, n), S, positive=True) for n in ("log", "log1p", "sqrt", "rsqrt")],
    # Special functions and the rest of the trigonometric family (issue 12); operands in
    # (-2, 2), so asin, acos, atanh and erf_inv see NaN outside their domains, acosh below 1.
    *[_c(n, getattr(lax, n), S) for n in (
        "erf_inv", "erf", "erfc", "exp2", "cbrt", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
        "atanh", "is_finite",
    )],
    *[_c(n, getattr(lax, n), S, positive=True) for n in ("lgamma", "digamma")],
    _c("atan2", lax.atan2, S, S),
    _c("floor", lax.floor, S),
    _c("ceil", lax.ceil, S),
    # On multiples of 0.5 (x.5 is where the rounding methods differ), and on x itself.
    *[_c("round", lambda x, m=m: lax.round(lax.mul(lax.floor(lax.mul(x, _4(x))), _half(x)), m), S) for m in (0, 1)],
    _c("round", lax.round, S),
    *[_c(n, getattr(lax, f), S, S) for n, f in [
        ("add", "add"), ("sub", "sub"), ("mul", "mul"), ("max", "max"), ("min", "min"),
        ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("eq", "eq"), ("ne", "ne"), ("lt", "lt"),
        ("le", "le"), ("gt", "gt"), ("ge", "ge"),
    ]],
    _c("add", lax.add, S, ()),  # a rank-0 operand broadcasts
    _c("add_any", lambda x, y: bind1(add_any_p, x, y), S, S),
    *[_c(n, getattr(lax, n), (4, 8), (4, 8), shift=True) for n in (
        "shift_left", "shift_right_logical", "shift_right_arithmetic",
    )],
    _c("shift_left", lambda x: lax.shift_left(x, lax.convert_element_type(-1, x.dtype)), S),
    # Bits over each integer dtype's whole range (shift=True draws it).
    *[_c(n, getattr(lax, n), (4, 8), shift=True) for n in ("population_count", "clz")],
    _c("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, _same_width_int(x)), S),
    _c("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, np.uint8), S),
    _c("bitcast_convert_type", lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, np.uint8), x.dtype), S),
    _c("threefry2x32", lambda k0, k1, x0, x1: lax.concatenate(threefry2x32(k0, k1, x0, x1), 0), (), (), (4, 8), (1, 8), shift=True),
    # The key primitives on key data (uint32 only: other dtypes are refused by random_wrap)
    # or on seeds (integers): keys unwrapped again.
    _c("random_seed", lambda s: prng.random_unwrap(prng.random_seed(s)), (3,), shift=True),
    _c("random_wrap", lambda d: prng.random_unwrap(prng.random_wrap(d)), (3, 2), shift=True),
    _c("random_unwrap", lambda d: prng.random_unwrap(prng.random_wrap(d)), (2,), shift=True),
    _c("random_split", lambda d: prng.random_unwrap(prng.random_split(prng.random_wrap(d), (2, 3))), (3, 2), shift=True),
    _c("random_bits", lambda d: prng.random_bits(prng.random_wrap(d), 32, (4,)), (3, 2), shift=True),
    _c("random_fold_in", lambda d, m: prng.random_unwrap(prng.random_fold_in(prng.random_wrap(d), m)), (3, 2), (3,), shift=True),
    _c("random_clone", lambda d: prng.random_unwrap(prng.random_clone(prng.random_wrap(d))), (3, 2), shift=True),
    _c("div", lax.div, S, S, nonzero=True),
    _c("rem", lax.rem, S, S, nonzero=True),
    _c("pow", lax.pow, S, S, positive=True),
    _c("integer_pow", lambda x: lax.integer_pow(x, 3), S),
    _c("integer_pow", lambda x: lax.integer_pow(x, -2), S, positive=True),
    _c("select_n", lambda x, y: lax.select_n(lax.gt(x, y), x, y), S, S),
    _c("clamp", lambda x: lax.clamp(lax.reduce_min(x, (0, 1)), x, lax.reduce_max(x, (0, 1))), S),
    _c("reduce_sum", lambda x: lax.reduce_sum(x, (1,)), S),
    _c("reduce_max", lambda x: lax.reduce_max(x, (0,)), S),
    _c("reduce_min", lambda x: lax.reduce_min(x, (0, 1)), S),
    _c("reduce_prod", lambda x: lax.reduce_prod(x, (1,)), S),
    # The logical reductions (each integer dtype's whole range), nextafter and
    # reduce_precision (issue 12; bit for bit against JAX in test_logical_and_precision.py).
    *[_c(n, lambda x, n=n: getattr(lax, n)(x, (1,)), S, shift=True) for n in ("reduce_and", "reduce_or", "reduce_xor")],
    _c("nextafter", lax.nextafter, S, S),
    _c("reduce_precision", lambda x: lax.reduce_precision(x, 4, 2), S),
    _c("argmax", lambda x: lax.argmax(x, 1, np.int32), S),
    _c("argmin", lambda x: lax.argmin(x, 0, np.int32), S),
    _c("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)), S),
    _c("reshape", lambda x: lax.reshape(x, (3, 2)), S),
    _c("reshape", lambda x: lax.reshape(x, (6,), dimensions=(1, 0)), S),
    _c("transpose", lambda x: lax.transpose(x, (1, 0)), S),
    _c("squeeze", lambda x: lax.squeeze(x, (0,)), (1, 3)),
    _c("expand_dims", lambda x: lax.expand_dims(x, (0, 2)), S),
    _c("concatenate", lambda x, y: lax.concatenate([x, y], 0), S, S),
    _c("split", lambda x: lax.concatenate(lax.split(x, (1, 0, 2), 1)[::-1], 1), S),
    _c("stack", lambda x, y: lax.stack([x, y, x], 1), S, S),
    _c("unstack", lambda x: lax.stack(lax.unstack(x, 1)[::-1], 0), S),
    _c("tile", lambda x: lax.tile(x, (2, 3)), S),
    _c("optimization_barrier", lambda x, y: lax.sub(*lax.optimization_barrier((x, y))), S, S),
    _c("mulhi", lax.mulhi, (4, 8), (4, 8), shift=True),
    _c("slice", lambda x: lax.slice(x, (0, 1), (2, 3)), S),
    _c("slice", lambda x: lax.slice(x, (0, 0), (2, 3), (1, 2)), S),
    _c("dynamic_slice", lambda x: lax.dynamic_slice(x, (1, 1), (1, 2)), S),
    _c("dynamic_update_slice", lambda x, u: lax.dynamic_update_slice(x, u, (1, 0)), S, (1, 2)),
    _c("dot_general", lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ()))), S, (3, 2)),
    _c("dot_general", lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), (2, 2, 3), (2, 3, 4)),
    _c(
        "conv_general_dilated",
        lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 1)), (1, 2), (2, 1), ("NHWC", "HWIO", "NHWC"), 2),
        (1, 4, 5, 2), (2, 2, 1, 4),
    ),
    _c("copy", lambda x: fx._lax.structural.copy(x), S),
    # Indices in and out of range (-1 and 5 along an axis of 2): each mode's handling.
    *[_c("gather", lambda x, m=m: lax.gather(x, _ROWS, _GATHER_ROWS, (1, 3), mode=m), S) for m in ("clip", "fill")],
    _c("gather", lambda x: lax.gather(x, _POINTS, _GATHER_POINTS, (1, 1), mode="promise_in_bounds"), S),
    *[
        _c(name, lambda x, u, f=f, m=m: f(x, _ROWS, u, _SCATTER_ROWS, mode=m), S, (4, 3))
        for name, f in [
            ("scatter", lax.scatter), ("scatter-add", lax.scatter_add), ("scatter-sub", lax.scatter_sub),
            ("scatter-mul", lax.scatter_mul), ("scatter-min", lax.scatter_min), ("scatter-max", lax.scatter_max),
        ]
        for m in ("clip", "drop")
        # Clamped, the rows collide: which write wins is unspecified for a plain scatter.
        if (name, m) != ("scatter", "clip")
    ],
    _c("pad", lambda x, v: lax.pad(x, v, ((1, -1, 1), (0, 2, 0))), S, ()),
    _c("pad", lambda x, v: lax.pad(x, v, ((-1, 0, 0), (2, -3, 2))), S, ()),
    _c("rev", lambda x: lax.rev(x, (0, 1)), S),
    _c("rev", lambda x: lax.rev(x, (1,)), S),
    _c("sort", lambda x: lax.sort(x, 1), S),
    _c("sort", lambda x, y: lax.sort((x, y), 0, num_keys=2)[1], S, S),
    _c("top_k", lambda x: lax.top_k(x, 2)[0], S),
    _c("top_k", lambda x: lax.top_k(x, 1, axis=0)[1], S),
    # Linear algebra: LAPACK compiled (jaxlib's kernels) and eagerly (SciPy's), the same
    # routines; half precision through float32 in both.
    _c("cholesky", lambda x: bind1(cholesky_p, _spd(x)), S),
    _c("triangular_solve", _solve(left_side=True, lower=True), S),
    _c("triangular_solve", _solve(transpose_a=True, unit_diagonal=True), S),
    _c("lu", lambda x: lu_p.bind(x)[0], S),
    _c("eigh", lambda x: eigh_p.bind(_spd(x), lower=True, sort_eigenvalues=True, subset_by_index=None, algorithm=None)[1], S),
    _c("qr", lambda x: qr_p.bind(x, full_matrices=True, pivoting=False, use_magma=None)[0], S),
    _c("qr", lambda x: qr_p.bind(lax.transpose(x, (1, 0)), full_matrices=True, pivoting=False, use_magma=None)[0], S),
    _c("qr", lambda x: qr_p.bind(x, full_matrices=False, pivoting=False, use_magma=None)[1], S),
    _c("svd", lambda x: svd_p.bind(x, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None)[1], S),
    _c("svd", lambda x: svd_p.bind(x, full_matrices=False, compute_uv=False, subset_by_index=None, algorithm=None)[0], S),
    _c("lu", lambda x: lax.concatenate([lu_p.bind(x)[1], lu_p.bind(lax.transpose(x, (1, 0)))[2]], 0), S),
    _c("geqrf", lambda x: geqrf_p.bind(x)[0], S),
    _c("geqrf", lambda x: geqrf_p.bind(lax.transpose(x, (1, 0)))[1], S),
    _c("householder_product", lambda x, t: bind1(householder_product_p, lax.transpose(x, (1, 0)), t), S, (2,)),
    _c("geqp3", lambda x: geqp3_p.bind(x, lax.full((3,), 0, np.int32), use_magma=None)[0], S),
    _c("geqp3", lambda x: geqp3_p.bind(lax.transpose(x, (1, 0)), lax.full((2,), 0, np.int32), use_magma=None)[2], S),
    _c("qr", lambda x: qr_p.bind(lax.transpose(x, (1, 0)), full_matrices=False, pivoting=True, use_magma=None)[0], S),
    _c("qr", lambda x: qr_p.bind(x, full_matrices=True, pivoting=True, use_magma=None)[1], S),
    *[_c(name, lambda x, name=name: getattr(lax, name)(x, 1, True), S) for name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")],
    *[_c(name, lambda x, name=name: getattr(lax, name)(x, 0), S) for name in ("cumsum", "cummax")],
    # Windowed reductions (pooling) and the primitives of their derivatives.
    *[
        _c(p.name, lambda x, p=p: bind1(p, x, **_WINDOW, base_dilation=(2, 1), window_dilation=(1, 2)), S)
        for p in (windowed.reduce_window_sum_p, windowed.reduce_window_max_p, windowed.reduce_window_min_p)
    ],
    _c("reduce_window", lambda x: lax.reduce_window(x, _4(x), lax.max, (2, 2), (1, 2), ((1, 0), (0, 1))), S),
    _c("select_and_gather_add", lambda t, x: windowed._select_and_gather_add(t, x, "le", (2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1), (1, 1)), S, S),
    _c("select_and_scatter_add", lambda s, x: windowed._select_and_scatter_add(s, x, "ge", (2, 2), (1, 2), ((1, 0), (0, 1))), (2, 2), S),
    *[_c(name, _called(name), S) for name in ("custom_jvp_call", "custom_vjp_call", "remat2")],
    _c("stop_gradient", lambda x: bind1(stop_gradient_p, x), S),
    _c("sharding_constraint", lambda x: lax.with_sharding_constraint(x, _replicated()), S),
    # Collectives mean something inside a shard_map (here over a (2, 2) mesh): eagerly it
    # runs compiled for the mesh's devices, under jit as one equation of the program.
    _c("psum", lambda x: _in_shard_map(lambda a: lax.psum(a, "x"), ("x",), ())(x), (4, 3)),
    _c("pmax", lambda x: _in_shard_map(lambda a: lax.pmax(a, ("x", "y")), ("x", "y"), ())(x), (4, 6)),
    _c("pmin", lambda x: _in_shard_map(lambda a: lax.pmin(a, "y"), ("x", "y"), ("x",))(x), (4, 6)),
    _c("pvary", lambda x: _in_shard_map(lambda a: lax.pcast(a, "x", to="varying"), (), ("x",))(x), (2, 3)),
    _c("all_gather", lambda x: _in_shard_map(lambda a: lax.all_gather(a, "x"), ("x",), ("x",))(x), (4, 3)),
    _c("reduce_scatter", lambda x: _in_shard_map(lambda a: lax.psum_scatter(a, "x", tiled=True), ("x",), ("x",))(x), (8, 3)),
    _c("ppermute", lambda x: _in_shard_map(lambda a: lax.ppermute(a, "x", [(0, 1), (1, 0)]), ("x",), ("x",))(x), (4, 3)),
    _c("all_to_all", lambda x: _in_shard_map(lambda a: lax.all_to_all(a, "x", 0, 1, tiled=True), ("x",), ("x",))(x), (8, 3)),
    _c("axis_index", lambda x: _in_shard_map(lambda a: lax.mul(a, lax.convert_element_type(lax.axis_index("y"), a.dtype)), ("x", "y"), ("x", "y"))(x), (4, 6)),
    _c("shard_map", lambda x: _in_shard_map(lambda a: lax.mul(a, a), ("x", "y"), ("x", "y"))(x), (4, 6)),
    # The incomplete gamma family: operands in (0.5, 2), both the series and the fraction.
    *[_c(n, getattr(lax, n), S, S, positive=True) for n in ("igamma", "igammac", "igamma_grad_a")],
]


def _in_shard_map(body: Callable[..., Any], in_spec: tuple[Any, ...], out_spec: tuple[Any, ...]) -> Callable[..., Any]:
    from ferrax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(fx.devices()[:4]).reshape(2, 2), ("x", "y"))
    return fx.shard_map(body, mesh=mesh, in_specs=PartitionSpec(*in_spec), out_specs=PartitionSpec(*out_spec))  # type: ignore[no-any-return]


def _replicated() -> Any:
    from ferrax.sharding import Mesh, NamedSharding, PartitionSpec

    return NamedSharding(Mesh(np.array(fx.devices()), ("x",)), PartitionSpec())


@functools.cache
def _accepts(index: int, dtype: np.dtype[Any]) -> bool:
    """Whether the primitive's Rust rule takes operands of this dtype (via make_jaxpr)."""
    case = CASES[index]
    try:
        with fx.enable_x64(True):
            fx.make_jaxpr(case.fun)(*[np.zeros(s, dtype) for s in case.shapes])
    except TypeCheckError:
        return False
    return True


def _operand(shape: tuple[int, ...], dtype: np.dtype[Any], rng: np.random.Generator, case: Case, index: int) -> np.ndarray[Any, Any]:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu" and case.shift and index == 1:
        # Amounts from below 0 (negative, or huge when unsigned) to past 64.
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -3), min(info.max, 70) + 1, size=shape).astype(dtype)
    if dtype.kind in "iu" and case.shift:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind in "iu":
        lo = 1 if (case.nonzero and index == 1) or case.positive else (0 if dtype.kind == "u" else -3)
        return rng.integers(lo, 4, size=shape).astype(dtype)
    if case.positive:
        return rng.uniform(0.5, 2.0, size=shape).astype(dtype)
    x = rng.uniform(-2.0, 2.0, size=shape)
    if case.nonzero and index == 1:
        x = np.where(np.abs(x) < 0.25, 1.0, x)
    return x.astype(dtype)


def _operands(index: int, dtype: np.dtype[Any]) -> list[np.ndarray[Any, Any]]:
    case = CASES[index]
    rng = np.random.default_rng(index)
    return [_operand(s, dtype, rng, case, i) for i, s in enumerate(case.shapes)]


_ON_A_MESH = {
    "sharding_constraint", "psum", "pmax", "pmin", "pvary", "all_gather", "reduce_scatter", "ppermute", "all_to_all",
    "axis_index", "shard_map",
}


def _compiled_alone(case: Case) -> bool:
    return case.primitive in _ON_A_MESH or case.primitive.startswith("igamma")


@functools.cache
def _compiled_together(dtype: np.dtype[Any]) -> dict[int, np.ndarray[Any, Any]] | None:
    """The results of every case of ``dtype`` (but those compiled alone) that the rule
    accepts, compiled in one ``ferrax.jit``, by case index; None if that fails."""
    indices = [i for i, c in enumerate(CASES) if not _compiled_alone(c) and _accepts(i, dtype)]
    try:
        with fx.enable_x64(True):
            run = fx.jit(lambda argss: [CASES[i].fun(*args) for i, args in zip(indices, argss, strict=True)])
            results = run([_operands(i, dtype) for i in indices])
    except Exception:  # noqa: BLE001 - each test then compiles its own case
        return None
    return {i: np.asarray(r) for i, r in zip(indices, results, strict=True)}


def _params() -> list[Any]:
    # One worker per dtype (pytest-xdist's loadgroup): a dtype's cases are compiled once.
    out = []
    for i, case in enumerate(CASES):
        for d in DTYPES:
            out.append(pytest.param(i, d, id=f"{case.primitive}-{i}-{d.name}", marks=pytest.mark.xdist_group(f"jit-{d.name}")))
    return out


def test_the_table_covers_every_builtin() -> None:
    from ferrax import _ir
    from ferrax._lax.registry import primitive_named

    covered = {c.primitive for c in CASES} | {"convert_element_type", "iota", "jit", "cond", "while", "scan"}
    covered |= {"debug_callback", "pure_callback", "io_callback", "debug_print"}  # host callbacks: test_callbacks.py
    rust_builtins = _ir.builtin_primitives()
    assert {"neg", "add", "reduce_sum", "dot_general", "select_n", "scan"} <= set(rust_builtins)
    # Every primitive of the Rust catalogue has a case here and Python rules (an eager
    # implementation at least): adding a primitive means adding both.
    assert sorted(set(rust_builtins) - covered) == []
    for name in rust_builtins:
        prim = primitive_named(name)
        assert prim.name == name and prim.impl_rule is not None, name


@pytest.mark.parametrize(("index", "dtype"), _params())
def test_primitive_under_jit_matches_eager(index: int, dtype: np.dtype[Any]) -> None:
    case = CASES[index]
    if not _accepts(index, dtype):
        # The rule rejects this dtype: jit must reject it too, with the same error kind.
        with pytest.raises(TypeCheckError):
            fx.jit(case.fun)(*[np.zeros(s, dtype) for s in case.shapes])
        return
    args = _operands(index, dtype)
    eager = np.asarray(case.fun(*args))
    together = None if _compiled_alone(case) else _compiled_together(dtype)
    compiled = together[index] if together is not None else np.asarray(fx.jit(case.fun)(*args))
    assert compiled.dtype == eager.dtype and compiled.shape == eager.shape
    if eager.dtype.kind in "fV" or eager.dtype == ml_dtypes.bfloat16:
        low = eager.dtype in (np.float16, ml_dtypes.bfloat16)
        tol = 2e-2 if low else 2e-5
        np.testing.assert_allclose(compiled.astype(np.float64), eager.astype(np.float64), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(compiled, eager)


def _converted(src: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The operand converted from ``src``."""
    rng = np.random.default_rng(0)
    if src == np.bool_:
        return rng.random(6) < 0.5
    if src.kind in "iu":
        return rng.integers(0, 100, size=6).astype(src)
    return rng.uniform(0.0, 100.0, size=6).astype(src)


@functools.cache
def _converted_under_jit(src: np.dtype[Any]) -> list[np.ndarray[Any, Any]] | None:
    """The operand of ``src`` converted to every dtype, in one ``ferrax.jit``; None if
    that fails (each test then compiles its own conversion)."""
    try:
        with fx.enable_x64(True):
            results = fx.jit(lambda v: [lax.convert_element_type(v, d) for d in DTYPES])(_converted(src))
    except Exception:  # noqa: BLE001
        return None
    return [np.asarray(r) for r in results]


@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("dst", DTYPES, ids=lambda d: d.name)
def test_convert_element_type_under_jit_matches_eager(src: np.dtype[Any], dst: np.dtype[Any]) -> None:
    x = _converted(src)

    def f(v: Any) -> Any:
        return lax.convert_element_type(v, dst)

    eager = np.asarray(f(x))
    together = _converted_under_jit(src)
    compiled = together[DTYPES.index(dst)] if together is not None else np.asarray(fx.jit(f)(x))
    assert compiled.dtype == eager.dtype == dst
    np.testing.assert_allclose(compiled.astype(np.float64), eager.astype(np.float64), rtol=1e-2)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != np.bool_], ids=lambda d: d.name)
def test_iota_under_jit_matches_eager(dtype: np.dtype[Any]) -> None:
    def f() -> Any:
        return lax.broadcasted_iota(dtype, (2, 3), 1)

    np.testing.assert_array_equal(np.asarray(fx.jit(f)()), np.asarray(f()))
