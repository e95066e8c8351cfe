"""``lax.conv_general_dilated`` and its wrappers against JAX 0.10.2.

The cases are generated: every feature of a convolution's geometry (strides, each
padding mode and explicit padding with negative entries, lhs and rhs dilation, feature
and batch groups, channels-last layouts) on 1-D, 2-D and 3-D operands, plus one case
combining them all per rank. Each case is checked

- eagerly (NumPy) and under ``ferrax.jit`` (XLA, through the Rust lowering) against
  ``jax.lax``, in float32, float16 and bfloat16 (values, dtypes, shapes);
- in reverse mode (``ferrax.grad`` w.r.t. both operands, eager and jitted: the Rust
  transpose rules) against ``jax.grad``; in forward mode against ``jax.jvp``;
- under ``ferrax.vmap`` over the lhs, the rhs and both against ``jax.vmap``.

JAX's references are computed in one ``jax.jit`` per check and dtype, ferrax's jitted
results in one ``ferrax.jit`` likewise: compilations, not checks, cost the time. Plus the
jaxpr text against JAX's, JAX's errors, the wrappers (``conv``,
``conv_with_general_padding``, ``conv_transpose``), the parameter helpers
(``conv_dimension_numbers``, ``padtype_to_pads``), ``ferrax.numpy.convolve`` and
``correlate``, and ``cost_analysis`` against XLA's count.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import lax

jax = pytest.importorskip("jax")
jlax = jax.lax
jnp = jax.numpy

NDArray = np.ndarray[Any, Any]
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)


class Conv(NamedTuple):
    """One convolution: operand shapes and ``conv_general_dilated``'s keyword params."""

    label: str
    lhs: tuple[int, ...]
    rhs: tuple[int, ...]
    params: dict[str, Any]

    def op(self, L: Any) -> Callable[[Any, Any], Any]:
        return lambda x, w: L.conv_general_dilated(x, w, **self.params)


SPATIAL = "HWD"

#: Each feature of the geometry, alone; "all" combines them.
FEATURES: dict[str, dict[str, Any]] = {
    "plain": {},
    "strided": {"strides": 2},
    "same": {"padding": "SAME", "strides": 2},
    "same_lower": {"padding": "SAME_LOWER"},
    "explicit_padding": {"padding": "explicit"},
    "lhs_dilation": {"lhs_dilation": 2, "padding": "explicit"},
    "rhs_dilation": {"rhs_dilation": 2, "padding": "SAME"},
    "feature_groups": {"fgc": 2},
    "batch_groups": {"bgc": 2},
    "channels_last": {"layout": True},
    # lhs dilation 3 with stride 2: windows land on elements (with 2 and 2 and odd
    # padding every tap could fall on a hole).
    "all": {"strides": 2, "padding": "explicit", "lhs_dilation": 3, "rhs_dilation": 2, "fgc": 3, "layout": True},
    "all_batch_groups": {"strides": 2, "padding": "SAME", "rhs_dilation": 2, "bgc": 2, "layout": True},
}


def make_case(n: int, name: str, feature: dict[str, Any], rng: np.random.Generator) -> Conv:
    """A convolution of rank ``n + 2`` with ``feature``'s geometry and random sizes."""
    fgc, bgc = feature.get("fgc", 1), feature.get("bgc", 1)
    batch = bgc * int(rng.integers(1, 3))
    in_features = fgc * int(rng.integers(1, 3))
    out_features = fgc * bgc * int(rng.integers(1, 3))
    small = n == 3
    sizes = [int(rng.integers(3, 5 if small else 8)) for _ in range(n)]
    kernel = [int(rng.integers(1, 3 if small else 4)) for _ in range(n)]
    params: dict[str, Any] = {"window_strides": (feature.get("strides", 1),) * n}
    if feature.get("padding") == "explicit":
        params["padding"] = tuple((int(rng.integers(-1, 3)), int(rng.integers(0, 3))) for _ in range(n))
    else:
        params["padding"] = feature.get("padding", "VALID")
    if "lhs_dilation" in feature:
        params["lhs_dilation"] = (feature["lhs_dilation"],) * n
    if "rhs_dilation" in feature:
        params["rhs_dilation"] = (feature["rhs_dilation"],) * n
    if fgc > 1:
        params["feature_group_count"] = fgc
    if bgc > 1:
        params["batch_group_count"] = bgc
    sp = SPATIAL[:n]
    if feature.get("layout"):
        # Channels last, the kernel's spatial dimensions first (TensorFlow's layout).
        params["dimension_numbers"] = ("N" + sp + "C", sp + "IO", "N" + sp + "C")
        lhs = (batch, *sizes, in_features)
        rhs = (*kernel, in_features // fgc, out_features)
    else:
        lhs = (batch, in_features, *sizes)
        rhs = (out_features, in_features // fgc, *kernel)
    return Conv(f"{n}d-{name}", lhs, rhs, params)


#: 3-D convolutions cost the most to compile: a few features there.
FEATURES_3D = ("plain", "same", "feature_groups", "batch_groups", "all")


def generate_cases() -> list[Conv]:
    rng = np.random.default_rng(0)
    return [
        make_case(n, name, f, rng)
        for n in (1, 2, 3)
        for name, f in FEATURES.items()
        if n < 3 or name in FEATURES_3D
    ]


CASES = generate_cases()
#: The cases checked in half precision and staged under ``jit`` after transformations
#: (each staged convolution is an XLA compilation's worth of time).
CASES_2D = [c for c in CASES if c.label.startswith("2d")]


def operands(case: Conv, dtype: np.dtype[Any], seed: int) -> tuple[NDArray, NDArray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(case.lhs).astype(dtype), rng.standard_normal(case.rhs).astype(dtype)


def cases_for(dtype: np.dtype[Any]) -> list[Conv]:
    return CASES if dtype == F32 else CASES_2D


def all_operands(dtype: np.dtype[Any], cases: list[Conv] | None = None) -> list[tuple[NDArray, NDArray]]:
    return [operands(c, dtype, i) for i, c in enumerate(cases_for(dtype) if cases is None else cases)]


def tolerance(dtype: np.dtype[Any]) -> float:
    return {F32: 1e-5, F16: 4e-3, BF16: 3e-2}[dtype]


def assert_close(actual: Any, expected: Any, dtype: np.dtype[Any], what: str) -> None:
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype}, JAX's is {e.dtype}"
    assert a.shape == e.shape, f"{what}: shape {a.shape}, JAX's is {e.shape}"
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    # Sums of a few dozen products: errors scale with the largest magnitude.
    scale = max(1.0, float(np.max(np.abs(e64), initial=0.0)))
    np.testing.assert_allclose(a64, e64, rtol=0, atol=tolerance(dtype) * scale * 4, err_msg=what)


@functools.cache
def jax_values(dtype: np.dtype[Any]) -> list[NDArray]:
    ops = [c.op(jlax) for c in cases_for(dtype)]
    run = jax.jit(lambda args: [op(x, w) for op, (x, w) in zip(ops, args)])
    return [np.asarray(v) for v in run(all_operands(dtype))]


@functools.cache
def ferrax_jit_values(dtype: np.dtype[Any]) -> list[NDArray]:
    ops = [c.op(lax) for c in cases_for(dtype)]
    run = fx.jit(lambda args: [op(x, w) for op, (x, w) in zip(ops, args)])
    return [np.asarray(v) for v in run(all_operands(dtype))]


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
def test_values_match_jax_eager_and_jitted(dtype: np.dtype[Any]) -> None:
    expected = jax_values(dtype)
    jitted = ferrax_jit_values(dtype)
    for i, (case, (x, w)) in enumerate(zip(cases_for(dtype), all_operands(dtype))):
        eager = case.op(lax)(x, w)
        assert_close(eager, expected[i], dtype, f"{case.label} eager")
        assert_close(jitted[i], expected[i], dtype, f"{case.label} jit")


def test_the_cases_cover_every_feature() -> None:
    # The generator makes what it names: groups, dilations, layouts and padding modes.
    keys = [set(c.params) for c in CASES]
    assert sum("batch_group_count" in k for k in keys) == 2 * 2 + 1
    assert sum("feature_group_count" in k for k in keys) == 2 * 2 + 2
    assert sum("lhs_dilation" in k for k in keys) == 2 * 2 + 1
    assert {c.params["padding"] for c in CASES if isinstance(c.params["padding"], str)} == {"VALID", "SAME", "SAME_LOWER"}
    assert any(lo < 0 for c in CASES if not isinstance(c.params["padding"], str) for lo, _ in c.params["padding"])
    assert {len(c.lhs) for c in CASES} == {3, 4, 5}


def test_integer_bool_and_preferred_dtypes() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (2, 4, 6)).astype(np.int8)
    w = rng.integers(-3, 4, (6, 2, 3)).astype(np.int8)
    cases: list[tuple[str, Callable[[Any], Any], tuple[NDArray, ...]]] = [
        ("int8", lambda L: lambda a, b: L.conv_general_dilated(a, b, (1,), "SAME", feature_group_count=2), (x, w)),
        ("int8->int32", lambda L: lambda a, b: L.conv_general_dilated(a, b, (2,), "VALID", feature_group_count=2, preferred_element_type=np.int32), (x, w)),
        ("int8->float32", lambda L: lambda a, b: L.conv_general_dilated(a, b, (1,), "VALID", feature_group_count=2, preferred_element_type=np.float32), (x, w)),
        ("bool", lambda L: lambda a, b: L.conv_general_dilated(a, b, (1,), "VALID"), (x[:, :2] > 0, w[:, :2] > 0)),
        ("f16->f32", lambda L: lambda a, b: L.conv_general_dilated(a, b, (1,), "SAME", feature_group_count=2, preferred_element_type=np.float32), (x.astype(np.float16), w.astype(np.float16))),
    ]
    expected = jax.jit(lambda args: [op(jlax)(*a) for (_, op, _), a in zip(cases, args)])([a for _, _, a in cases])
    jitted = fx.jit(lambda args: [op(lax)(*a) for (_, op, _), a in zip(cases, args)])([a for _, _, a in cases])
    for (label, op, args), e, j in zip(cases, expected, jitted):
        for got, how in ((op(lax)(*args), "eager"), (j, "jit")):
            assert np.asarray(got).dtype == np.asarray(e).dtype, f"{label} {how}"
            np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(e, np.float64), rtol=1e-6, err_msg=f"{label} {how}")


def test_weak_types() -> None:
    x, w = np.ones((1, 2, 3), np.float32), np.ones((1, 2, 2), np.float32)
    for args in [(x, w), (fnp.asarray(1.0) * x, w)]:
        ours = lax.conv_general_dilated(*args, (1,), "VALID")
        theirs = jlax.conv_general_dilated(*(jnp.asarray(a) for a in args), (1,), "VALID")
        assert ours.weak_type == theirs.weak_type


# --------------------------------------------------------------------- derivatives


def loss(L: Any, cases: list[Conv]) -> Callable[..., Any]:
    """The sum over the cases of each convolution times a fixed cotangent."""
    ops = [c.op(L) for c in cases]

    def f(args: Any, cts: Any) -> Any:
        total = 0.0
        for op, (x, w), ct in zip(ops, args, cts):
            total = total + (op(x, w) * ct).sum()
        return total

    return f


def cotangents(values: list[NDArray]) -> list[NDArray]:
    rng = np.random.default_rng(7)
    return [np.asarray(rng.standard_normal(v.shape), np.float32) for v in values]


def test_grad_matches_jax_for_both_operands() -> None:
    # Eagerly for every case (the transposed jaxpr run by NumPy), staged for the 2-D ones.
    args = all_operands(F32)
    cts = cotangents(jax_values(F32))
    expected = jax.jit(jax.grad(loss(jlax, CASES)))(args, cts)
    eager = fx.grad(loss(lax, CASES))(args, cts)
    staged = [i for i, c in enumerate(CASES) if c in CASES_2D]
    jitted = fx.jit(fx.grad(loss(lax, CASES_2D)))([args[i] for i in staged], [cts[i] for i in staged])
    for case, e, a in zip(CASES, expected, eager):
        for side, k in (("lhs", 0), ("rhs", 1)):
            assert_close(a[k], e[k], F32, f"{case.label} d/d{side} eager")
    for i, j in zip(staged, jitted):
        for side, k in (("lhs", 0), ("rhs", 1)):
            assert_close(j[k], expected[i][k], F32, f"{CASES[i].label} d/d{side} jit")


def test_jvp_matches_jax() -> None:
    # The 1-D cases (test_jvp_primitives.py checks the rule over its own table too).
    cases = [c for c in CASES if c.label.startswith("1d")]
    args = all_operands(F32, cases)
    tangents = [operands(c, F32, 100 + i) for i, c in enumerate(cases)]

    def jvps(L: Any, jvp: Any) -> Callable[..., Any]:
        ops = [c.op(L) for c in cases]
        return lambda args, ts: [jvp(op, a, t)[1] for op, a, t in zip(ops, args, ts)]

    expected = jax.jit(jvps(jlax, jax.jvp))(args, tangents)
    ours = jvps(lax, fx.jvp)(args, tangents)
    for case, e, a in zip(cases, expected, ours):
        assert_close(a, e, F32, f"{case.label} jvp")


def test_grad_with_preferred_element_type() -> None:
    # float16 operands, float32 result: the transposes convert around the convolution.
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 6)).astype(np.float16)
    w = rng.standard_normal((4, 2, 3)).astype(np.float16)

    def f(L: Any) -> Callable[..., Any]:
        return lambda a, b: (L.conv_general_dilated(a, b, (2,), "SAME", feature_group_count=2, preferred_element_type=np.float32) ** 2).sum()

    expected = jax.grad(f(jlax), (0, 1))(x, w)
    ours = fx.grad(f(lax), (0, 1))(x, w)
    for a, e in zip(ours, expected):
        assert_close(a, e, F16, "preferred grad")


# ------------------------------------------------------------------------- batching


def test_vmap_matches_jax_over_lhs_rhs_and_both() -> None:
    axes = [(0, None), (None, 0), (0, 0), (1, 2)]
    size = 2
    runs = []
    for i, case in enumerate(CASES):
        in_axes = axes[i % len(axes)]
        x, w = operands(case, F32, i)
        rng = np.random.default_rng(50 + i)

        def batched(a: NDArray, axis: int | None) -> NDArray:
            if axis is None:
                return a
            stack = np.stack([a] + [np.asarray(rng.standard_normal(a.shape), a.dtype) for _ in range(size - 1)])
            return np.moveaxis(stack, 0, axis)

        runs.append((case, in_axes, (batched(x, in_axes[0]), batched(w, in_axes[1]))))
    expected = jax.jit(lambda args: [jax.vmap(c.op(jlax), in_axes=ax)(*a) for (c, ax, _), a in zip(runs, args)])(
        [a for _, _, a in runs]
    )
    for (case, in_axes, args), e in zip(runs, expected):
        ours = fx.vmap(case.op(lax), in_axes=in_axes)(*args)
        assert_close(ours, e, F32, f"{case.label} vmap {in_axes}")
    # One staged run of the 2-D ones: the batched convolutions lower and run under XLA.
    staged = [(r, e) for r, e in zip(runs, expected) if r[0] in CASES_2D]
    jitted = fx.jit(lambda args: [fx.vmap(c.op(lax), in_axes=ax)(*a) for ((c, ax, _), _), a in zip(staged, args)])(
        [a for (_, _, a), _ in staged]
    )
    for ((case, in_axes, _), e), j in zip(staged, jitted):
        assert_close(j, e, F32, f"{case.label} jit(vmap) {in_axes}")


def test_vmap_of_an_empty_batch() -> None:
    x, w = np.ones((0, 2, 3, 5), np.float32), np.ones((4, 3, 2), np.float32)
    ours = fx.vmap(lambda a: lax.conv_general_dilated(a, w, (1,), "SAME"))(x)
    theirs = jax.vmap(lambda a: jlax.conv_general_dilated(a, w, (1,), "SAME"))(x)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype


# ---------------------------------------------------------------------- jaxpr text


def test_jaxpr_text_matches_jax() -> None:
    x, w = np.ones((2, 8, 8, 3), np.float32), np.ones((3, 3, 3, 4), np.float32)
    ct = np.ones((2, 3, 17, 4), np.float32)

    def f(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.conv_general_dilated(a, b, (2, 1), ((1, 0), (2, 2)), (1, 2), (2, 1), ("NHWC", "HWIO", "NHWC"))

    assert str(fx.make_jaxpr(f(lax))(x, w)) == str(jax.make_jaxpr(f(jlax))(x, w))
    # The primal output is used, so that no variable prints as JAX's unused `_`.
    def with_vjp(lib: Any, L: Any) -> Callable[..., Any]:
        def g(a: Any, b: Any, c: Any) -> Any:
            out, pullback = lib.vjp(f(L), a, b)
            return out, pullback(c)

        return g

    assert str(fx.make_jaxpr(with_vjp(fx, lax))(x, w, ct)) == str(jax.make_jaxpr(with_vjp(jax, jlax))(x, w, ct))
    xs, ws = np.ones((5, 2, 8, 8, 3), np.float32), np.ones((5, 3, 3, 3, 4), np.float32)
    assert str(fx.make_jaxpr(fx.vmap(f(lax)))(xs, ws)) == str(jax.make_jaxpr(jax.vmap(f(jlax)))(xs, ws))
    h = np.ones((1, 4, 5), np.float16), np.ones((6, 2, 3), np.float16)

    def grouped(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.conv_general_dilated(
            a, b, (1,), "SAME", feature_group_count=2, precision="highest", preferred_element_type=np.float32
        )

    assert str(fx.make_jaxpr(grouped(lax))(*h)) == str(jax.make_jaxpr(grouped(jlax))(*h))


def test_jax_text_reads_prints_and_runs() -> None:
    # JAX's jaxpr text parses (ConvDimensionNumbers, padding pairs, precision), prints
    # back identically, and runs eagerly with the params read from it.
    from ferrax._jit import eval_jaxpr
    from ferrax.core import parse_jaxpr

    rng = np.random.default_rng(17)
    x, w = rng.standard_normal((2, 6, 5, 4)).astype(np.float32), rng.standard_normal((2, 3, 2, 6)).astype(np.float32)

    def f(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.conv_general_dilated(
            a, b, (2, 1), ((1, 0), (2, -1)), (1, 2), (2, 1), ("NHWC", "HWIO", "NHWC"), 2, precision="highest"
        )

    text = str(jax.make_jaxpr(f(jlax))(x, w))
    jaxpr = parse_jaxpr(text)
    assert str(jaxpr) == text
    (out,) = eval_jaxpr(jaxpr, [], x, w)
    assert_close(out, f(jlax)(x, w), F32, "parsed")


def test_lowering_matches_jax_convolution() -> None:
    # The same attributes as JAX's `stablehlo.convolution` (JAX prints it in the pretty
    # form, ferrax in the generic one).
    x, w = np.ones((2, 8, 8, 3), np.float32), np.ones((3, 3, 3, 4), np.float32)

    def f(L: Any) -> Callable[..., Any]:
        return lambda a, b: L.conv_general_dilated(a, b, (2, 1), "SAME", None, (2, 1), ("NHWC", "HWIO", "NHWC"), precision="highest")

    ours = fx.jit(f(lax)).lower(x, w).as_text()
    theirs = jax.jit(f(jlax)).lower(x, w).as_text()
    found = re.search(
        r"dim_numbers = (.*?), window = \{stride = (\[.*?\]), pad = (\[\[.*?\]\]), "
        r"lhs_dilate = (\[.*?\]), rhs_dilate = (\[.*?\])",
        theirs,
    )
    assert found, theirs
    dims, stride, pad, lhs_dil, rhs_dil = found.groups()
    expected = [
        f"dimension_numbers = #stablehlo.conv<{dims}>",
        f"padding = dense<{pad}> : tensor<2x2xi64>",
        f"window_strides = array<i64: {stride[1:-1]}>",
        f"lhs_dilation = array<i64: {lhs_dil[1:-1]}>",
        f"rhs_dilation = array<i64: {rhs_dil[1:-1]}>",
        "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]",
    ]
    assert "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]" in theirs
    for attr in expected:
        assert attr in ours, f"{attr}\n{ours}"


# --------------------------------------------------------------------------- errors


def error_cases() -> list[tuple[str, Callable[[Any], Any]]]:
    x, w = np.ones((2, 4, 5), np.float32), np.ones((6, 4, 3), np.float32)
    c = "conv_general_dilated"
    return [
        ("dtypes", lambda L: getattr(L, c)(x, w.astype(np.float16), (1,), "VALID")),
        ("ranks", lambda L: getattr(L, c)(x, w[None], (1,), "VALID")),
        ("feature_groups_divide", lambda L: getattr(L, c)(x, w, (1,), "VALID", feature_group_count=3)),
        ("kernel_features", lambda L: getattr(L, c)(x, w, (1,), "VALID", feature_group_count=2)),
        ("out_features_groups", lambda L: getattr(L, c)(x, w[:5, :2], (1,), "VALID", feature_group_count=2)),
        ("zero_groups", lambda L: getattr(L, c)(x, w, (1,), "VALID", feature_group_count=0)),
        ("batch_groups_divide", lambda L: getattr(L, c)(x[:1], w, (1,), "VALID", batch_group_count=2)),
        ("out_features_batch_groups", lambda L: getattr(L, c)(x, w[:5], (1,), "VALID", batch_group_count=2)),
        ("both_groups", lambda L: getattr(L, c)(np.ones((2, 4, 5), np.float32), w[:, :2], (1,), "VALID", feature_group_count=2, batch_group_count=2)),
        ("strides_count", lambda L: getattr(L, c)(x, w, (1, 1), "VALID")),
        ("zero_dilation", lambda L: getattr(L, c)(x, w, (1,), ((0, 0),), rhs_dilation=(0,))),
        ("padding_count", lambda L: getattr(L, c)(x, w, (1,), ((0, 0), (1, 1)))),
        ("padding_pairs", lambda L: getattr(L, c)(x, w, (1,), [(1,)])),
        ("padding_string", lambda L: getattr(L, c)(x, w, (1,), "FOO")),
        ("negative_padding", lambda L: getattr(L, c)(x, w, (1,), ((-4, -3),))),
        ("string_padding_lhs_dilation", lambda L: getattr(L, c)(x, w, (1,), "SAME", lhs_dilation=(2,))),
        ("spec_length", lambda L: getattr(L, c)(x, w, (1,), "VALID", dimension_numbers=("NCHW", "OIH", "NCH"))),
        ("spec_chars", lambda L: getattr(L, c)(x, w, (1,), "VALID", dimension_numbers=("NHW", "OIH", "NCH"))),
        ("spec_spatial", lambda L: getattr(L, c)(x, w, (1,), "VALID", dimension_numbers=("NCH", "OIW", "NCH"))),
        ("spec_count", lambda L: getattr(L, c)(x, w, (1,), "VALID", dimension_numbers=("NCH", "OIH"))),
        ("preferred_narrower", lambda L: getattr(L, c)(x, w, (1,), "VALID", preferred_element_type=np.float16)),
        ("preferred_int", lambda L: getattr(L, c)(x, w, (1,), "VALID", preferred_element_type=np.int32)),
    ]


@pytest.mark.parametrize("label, call", error_cases(), ids=[e[0] for e in error_cases()])
def test_errors_match_jax(label: str, call: Callable[[Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        call(jlax)
    with pytest.raises(type(theirs.value)) as ours:
        call(lax)
    # JAX prints NumPy ints of its shapes as `np.int64(5)`.
    message = re.sub(r"np\.int64\((-?\d+)\)", r"\1", str(theirs.value).split("\n")[0]).rstrip(".")
    assert str(ours.value).startswith(message), f"{ours.value!r} vs JAX's {theirs.value!r}"
    assert "test_conv.py" in str(ours.value), "the message names the user's line"


# ------------------------------------------------------------------------ wrappers


def test_wrappers_match_jax() -> None:
    rng = np.random.default_rng(11)
    x4, w4 = rng.standard_normal((2, 3, 7, 6)).astype(np.float32), rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    t4, k4 = rng.standard_normal((2, 5, 6, 3)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    t3, k3 = rng.standard_normal((2, 5, 3)).astype(np.float32), rng.standard_normal((4, 3, 2)).astype(np.float32)
    calls: list[tuple[str, Callable[[Any], Any], tuple[NDArray, ...]]] = [
        ("conv_same", lambda L: lambda a, b: L.conv(a, b, (2, 1), "SAME"), (x4, w4)),
        ("conv_valid", lambda L: lambda a, b: L.conv(a, b, (1, 2), "VALID"), (x4, w4)),
        ("general_padding", lambda L: lambda a, b: L.conv_with_general_padding(a, b, (1, 1), ((1, 0), (2, -1)), (2, 1), (1, 2)), (x4, w4)),
        *[
            (f"transpose_{p}_{s}_{tk}", lambda L, p=p, s=s, tk=tk: lambda a, b: L.conv_transpose(a, b, s, p, transpose_kernel=tk), (t4, k4))
            for p in ("SAME", "VALID")
            for s in ((1, 1), (2, 3))
            for tk in (False, True)
        ],
        ("transpose_explicit", lambda L: lambda a, b: L.conv_transpose(a, b, (2, 1), ((1, 2), (0, 1))), (t4, k4)),
        ("transpose_consistent", lambda L: lambda a, b: L.conv_transpose(a, b, (2, 1), ((1, 2), (0, 1)), use_consistent_padding=True), (t4, k4)),
        ("transpose_dilated", lambda L: lambda a, b: L.conv_transpose(a, b, (2,), "SAME", rhs_dilation=(2,)), (t3, k3)),
    ]
    expected = jax.jit(lambda args: [f(jlax)(*a) for (_, f, _), a in zip(calls, args)])([a for _, _, a in calls])
    for (label, f, args), e in zip(calls, expected):
        assert_close(f(lax)(*args), e, F32, label)


def test_parameter_helpers_match_jax() -> None:
    for specs in [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NWHC", "WHIO", "CNHW"), ("NCH", "HOI", "HNC")]:
        shape = (1,) * len(specs[0])
        assert lax.conv_dimension_numbers(shape, shape, specs) == tuple(jlax.conv_dimension_numbers(shape, shape, specs))
        assert lax.conv_general_permutations(specs) == jlax.conv_general_permutations(specs)
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == tuple(jlax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None))
    dn = lax.ConvDimensionNumbers((0, 2, 1), (2, 1, 0), (0, 2, 1))
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), dn) == dn
    for mode in ("SAME", "SAME_LOWER", "VALID"):
        for in_shape, window, strides in [((7, 6), (3, 2), (2, 1)), ((5,), (4,), (3,)), ((4, 4), (1, 5), (1, 2))]:
            assert lax.padtype_to_pads(in_shape, window, strides, mode) == [
                tuple(p) for p in jlax.padtype_to_pads(in_shape, window, strides, mode)
            ]


def test_numpy_convolve_and_correlate_match_jax() -> None:
    rng = np.random.default_rng(13)
    pairs = [
        (rng.standard_normal(7).astype(np.float32), rng.standard_normal(3).astype(np.float32)),
        (rng.standard_normal(2).astype(np.float32), rng.standard_normal(5).astype(np.float32)),
        (np.arange(4), np.arange(3)),
    ]
    calls = [(fn, mode, i) for fn in ("convolve", "correlate") for mode in ("full", "same", "valid") for i in range(len(pairs))]
    expected = jax.jit(lambda ps: [getattr(jnp, fn)(*ps[i], mode) for fn, mode, i in calls])(pairs)
    for (fn, mode, i), e in zip(calls, expected):
        got = getattr(fnp, fn)(*pairs[i], mode)
        assert got.dtype == e.dtype, (fn, mode, i)
        np.testing.assert_allclose(np.asarray(got), np.asarray(e), rtol=1e-5, atol=1e-5, err_msg=f"{fn} {mode} {i}")
    ints = fnp.convolve(np.arange(4), np.arange(3), preferred_element_type=np.int32)
    assert ints.dtype == np.int32 and list(np.asarray(ints)) == [0, 0, 1, 4, 7, 6]
    for bad, kind in [((np.ones((2, 2)), np.ones(2)), ValueError), ((np.ones(0), np.ones(2)), ValueError)]:
        with pytest.raises(kind):
            jnp.convolve(*bad)
        with pytest.raises(kind):
            fnp.convolve(*bad)
    with pytest.raises(ValueError, match="mode must be one of"):
        fnp.correlate(np.ones(3), np.ones(2), "wide")


# ----------------------------------------------------------------------------- cost


def kernel_axes(case: Conv) -> list[int]:
    """The rhs's spatial axes."""
    spec = case.params.get("dimension_numbers")
    n = len(case.rhs) - 2
    return list(range(n)) if spec else list(range(2, n + 2))


def test_cost_analysis_counts_flops_as_xla() -> None:
    # XLA counts a multiply and an add per window tap that lands on the lhs (not on
    # padding or on the holes of the lhs dilation). Float32 cases, one compilation; not
    # those of a one-element window, which XLA rewrites as a dot or a multiply.
    cases = [c for c in CASES if np.prod([c.rhs[i] for i in kernel_axes(c)]) > 1]
    args = [operands(c, F32, i) for i, c in enumerate(cases)]

    def f(L: Any) -> Callable[..., Any]:
        ops = [c.op(L) for c in cases]
        return lambda args: [op(x, w) for op, (x, w) in zip(ops, args)]

    ours = fx.cost_analysis(f(lax))(args)["flops"]
    theirs = jax.jit(f(jlax)).lower(args).compile().cost_analysis()["flops"]
    assert ours == theirs
