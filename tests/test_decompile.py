"""``ferrax.core.to_python``: jaxprs written back as Python source that traces to them.

Every test executes the source and traces the function it defines with
``ferrax.make_jaxpr`` on arguments of the jaxpr's input types, comparing printed texts:
over the text corpus, over random jaxprs of the IR crate's generator, and over programs
traced from Python.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import FerraxError, lax
from ferrax.core import (
    ClosedJaxpr,
    DecompileError,
    ExtensionPrimitive,
    Jaxpr,
    Primitive,
    ShapedArray,
    bind,
    literal,
    parse_jaxpr,
    to_python,
    trace_jaxpr,
)
from ferrax._ir import consts_to_invars
from ferrax.tree_util import tree_leaves

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS_DIRS = [ROOT / "rust" / "ir" / "tests" / "jaxprs", ROOT / "rust" / "ir" / "tests" / "collectives", ROOT / "fuzz" / "findings"]

# Corpus files that do not round-trip, with why. shard_map bodies' types carry varying
# manual axes ({V:x}), which Python code cannot state (to_python refuses shard_map).
EXCLUDED = {
    "shard_map.jaxpr": "shard_map",
    "jax_every_collective.jaxpr": "shard_map",
    "jax_nested_jit_cond.jaxpr": "shard_map",
    "jax_psum_pmax_pmin.jaxpr": "shard_map",
    "jax_untiled_and_multi_axis.jaxpr": "shard_map",
}
# Measured: every other valid file of the corpus (those of the extension primitives too).
CORPUS_ROUND_TRIPS = 131

# The Rust test driver's extension primitives, which some corpus files use.
test_ext = Primitive("test_ext", multiple_results=True)
test_ext.def_abstract_eval(lambda *avals, **params: list(avals))
test_effect = Primitive("test_effect", multiple_results=True)
test_effect.def_abstract_eval(lambda *avals, **params: [])


def _read(path: pathlib.Path) -> str:
    text = path.read_text().split("; expect:")[0]
    return "\n".join("" if line.startswith(";;") else line for line in text.splitlines())


def _example(aval: ShapedArray) -> Any:
    """An argument of this (strong) type."""
    if aval.dtype == ferrax.dtypes.key_fry:
        return ferrax.random.wrap_key_data(np.zeros((*aval.shape, 2), np.uint32))
    assert not aval.weak_type
    return np.zeros(aval.shape, aval.dtype)


def _wide(j: Jaxpr) -> bool:
    text = str(j)
    return any(f"{t}[" in text for t in ("f64", "i64", "u64", "c128"))


def _function(source: str, name: str = "f") -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<decompiled>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def _retraced(jaxpr: Jaxpr | ClosedJaxpr, args: list[Any] | None = None) -> tuple[str, str, str]:
    """(source, the jaxpr text it should trace to, the text its function traces to on
    ``args`` or zeros). Constants the function takes as parameters are inputs of that
    jaxpr."""
    source = to_python(jaxpr)
    want = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    if "constants are f's first parameters" in source:
        want = consts_to_invars(want)
    args = [_example(a) for a in want.in_avals] if args is None else args
    return source, str(want), str(ferrax.make_jaxpr(_function(source))(*args))


# ------------------------------------------------------------------- the corpus


def test_corpus_round_trips() -> None:
    extensions = [p.ir_primitive() for p in (test_ext, test_effect)]
    assert all(isinstance(e, ExtensionPrimitive) for e in extensions)
    paths = sorted(p for d in CORPUS_DIRS for p in d.glob("*.jaxpr") if not p.name.startswith("err_"))
    done, failures = [], []
    for path in paths:
        jaxpr = parse_jaxpr(_read(path), extensions=[e for e in extensions if isinstance(e, ExtensionPrimitive)])
        if path.name in EXCLUDED:
            with pytest.raises(DecompileError, match=EXCLUDED[path.name]):
                to_python(jaxpr)
            continue
        with ferrax.enable_x64(_wide(jaxpr)):
            try:
                _, want, got = _retraced(jaxpr)
            except Exception as e:  # reported below, all files at once
                failures.append(f"{path.name}: {type(e).__name__}: {e}")
                continue
        if got != want:
            failures.append(f"{path.name}: traces to\n{got}")
        done.append(path.name)
    assert not failures, "\n".join(failures)
    assert len(done) >= CORPUS_ROUND_TRIPS


def test_shared_jaxprs_stay_shared() -> None:
    # One sub-jaxpr held by two scans: traced once, at module level.
    text = _read(ROOT / "rust" / "ir" / "tests" / "jaxprs" / "jax_shared_scan.jaxpr")
    jaxpr = parse_jaxpr(text)
    source, want, got = _retraced(jaxpr)
    assert got == want and got.startswith("let jaxpr = ")
    assert "jaxpr_0 = core.trace_jaxpr(" in source


# ------------------------------------------------------------------ random jaxprs


def test_random_jaxprs_round_trip() -> None:
    from ferrax._ir import random_jaxpr

    # Without to_python's own check: the readable forms must trace back as written.
    for seed in range(300):
        jaxpr = random_jaxpr(seed, eqns=5)
        source = to_python(jaxpr, check=False)
        got = ferrax.make_jaxpr(_function(source))(*[_example(a) for a in jaxpr.in_avals])
        assert str(got) == str(jaxpr), f"seed {seed}"


# ------------------------------------------------------------ programs from Python

RNG = np.random.default_rng(0)
W1 = RNG.normal(size=(4, 8)).astype(np.float32)
B1 = RNG.normal(size=(8,)).astype(np.float32)
W2 = RNG.normal(size=(8, 3)).astype(np.float32)
X = RNG.normal(size=(5, 4)).astype(np.float32)


def mlp(x: Any) -> Any:
    return ferrax.nn.log_softmax(ferrax.nn.relu(x @ W1 + B1) @ W2)


def loss(params: tuple[Any, Any], x: Any) -> Any:
    w1, w2 = params
    return fnp.mean((fnp.tanh(x @ w1) @ w2) ** 2)


@ferrax.jit
def inner(a: Any, b: Any) -> Any:
    return a * b + 1.0


@ferrax.jit
def nested_jit(c: Any) -> Any:
    return inner(c, c) + inner(c, 2.0 * c)


def scan_program(xs: Any, w: Any) -> Any:
    return lax.scan(lambda c, r: (c + r @ w, (c * 2.0).sum()), fnp.zeros(8), xs)


def cond_program(x: Any, p: Any) -> Any:
    return lax.cond(p > 0, lambda a: fnp.sin(a) * 2.0, lambda a: a - 1.0, x)


def while_program(x: Any) -> Any:
    return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))


PROGRAMS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "mlp": (mlp, (X,)),
    "grad": (ferrax.grad(loss), ((W1, W2), X)),
    "vmap": (ferrax.vmap(lambda v: fnp.dot(v, v) * fnp.sin(v).sum()), (X,)),
    "vmap_while": (ferrax.vmap(lambda v: lax.while_loop(lambda c: c[0] < c[1].sum(), lambda c: (c[0] + 1.0, c[1]), (0.0, v))), (X,)),
    "scan": (scan_program, (X, W1)),
    "cond": (cond_program, (X, 1.0)),
    "switch": (lambda i, a: lax.switch(i, [lambda z: z, lambda z: -z, lambda z: z * z], a), (2, X)),
    "while": (while_program, (X,)),
    "fori_loop": (lambda v, n: lax.fori_loop(0, n, lambda i, c: c * 2.0, v), (X, 3)),
    "nested_jit": (nested_jit, (X,)),
    "checkpoint": (ferrax.grad(lambda a: ferrax.checkpoint(lambda b: fnp.sin(fnp.sin(b)))(a).sum()), (X,)),
    "random": (lambda k: ferrax.random.normal(k, (3,)), (ferrax.random.key(0),)),
    "bfloat16": (lambda a: (a * 0.1).astype(fnp.float32), (np.ones(3, ferrax.dtypes.bfloat16),)),
    "indexing": (lambda a: a[1:3, None] + a[0].at[1].set(5.0)[None], (X,)),
    "weak_scalars": (lambda a, s: a * s + s, (X, 2.0)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_round_trip(name: str) -> None:
    fn, args = PROGRAMS[name]
    closed = ferrax.make_jaxpr(fn)(*args)
    _, want, got = _retraced(closed, tree_leaves(args))
    assert got == want == str(closed)


@pytest.mark.parametrize("name", ["grad", "scan", "cond", "switch", "while", "nested_jit", "checkpoint"])
def test_generic_forms_round_trip(name: str) -> None:
    # What to_python falls back to when a readable form does not trace back: every
    # control-flow and call equation as core.bind with traced sub-jaxprs.
    from ferrax._decompile import _Decompiler

    fn, args = PROGRAMS[name]
    closed = ferrax.make_jaxpr(fn)(*args)
    source = _Decompiler(closed, "f", readable=False).source()
    assert "lax.cond(" not in source and "lax.scan(" not in source and "@ferrax.jit" not in source
    got = ferrax.make_jaxpr(_function(source))(*tree_leaves(args))
    assert str(got) == str(closed)


def test_x64_programs_round_trip() -> None:
    with ferrax.enable_x64(True):
        x = np.linspace(0, 1, 4)
        closed = ferrax.make_jaxpr(lambda a, n: fnp.sin(a) * 2.0 + n + np.int64(3))(x, 2)
        source, want, got = _retraced(closed, [x, 2])
        assert got == want == str(closed) and "f64[4]" in got
        assert "jax_enable_x64" in source


def test_constants_are_exact_module_arrays() -> None:
    closed = ferrax.make_jaxpr(mlp)(X)
    source = to_python(closed)
    assert "const_0 = np.array([[" in source and "dtype=np.float32)" in source
    got = np.asarray(_function(source)(X))
    # relu and log_softmax are nested jits (as JAX's): the decompiled source calls them
    # compiled, where mlp(X) runs op by op, so the last bit may differ.
    np.testing.assert_allclose(got, np.asarray(mlp(X)), rtol=1e-6, atol=1e-7)


def test_source_is_readable() -> None:
    source = to_python(ferrax.make_jaxpr(cond_program)(X, 1.0))
    assert "lax.cond(" in source and "    def true_fn(" in source and "    def false_fn(" in source
    assert "core.bind" not in source and "import numpy" not in source
    source = to_python(ferrax.make_jaxpr(scan_program)(X, W1))
    assert "lax.scan(body_fn, " in source and "    def body_fn(carry, x):" in source
    assert "= fnp.zeros((8,), np.float32)" in source
    source = to_python(ferrax.make_jaxpr(while_program)(X))
    assert "lax.while_loop(cond_fn, body_fn, (0, a))" in source
    source = to_python(ferrax.make_jaxpr(nested_jit)(X))
    assert "    @ferrax.jit\n    def nested_jit(" in source
    # One module-level function for the jaxpr both calls share.
    assert "\n@ferrax.jit\ndef inner(" in source and source.count("def inner(") == 1
    source = to_python(ferrax.make_jaxpr(lambda a, b: (a + b) * 2.0 - fnp.sin(a))(X, X))
    assert "c = a + b" in source and "d = c * 2.0" in source and "lax.sin(a)" in source


def test_source_example() -> None:
    jaxpr = parse_jaxpr("{ lambda ; a:f32[3] b:f32[]. let c:f32[3] = mul a b; d:f32[3] = sin c in (d,) }")
    assert to_python(jaxpr, "g") == (
        "# Written by ferrax.core.to_python.\n"
        "import ferrax\n"
        "from ferrax import lax\n"
        "\n"
        "\n"
        "def g(a, b):\n"
        "    c = a * b\n"
        "    d = lax.sin(c)\n"
        "    return d\n"
    )


# ---------------------------------------------------------------------- constants


def test_unknown_constants_are_placeholders() -> None:
    jaxpr = parse_jaxpr("{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) }")
    source, want, got = _retraced(jaxpr)
    assert got == want == str(jaxpr)
    assert "value is unknown" in source and "const_0 = np.zeros((3,), dtype=np.float32)" in source


def test_scalar_and_key_constants_become_parameters() -> None:
    key = ferrax.random.key(0)
    closed = ferrax.make_jaxpr(lambda x: ferrax.random.normal(key, (3,)) + x)(np.ones(3, np.float32))
    source = to_python(closed)
    assert "constants are f's first parameters (a)" in source
    again = ferrax.make_jaxpr(_function(source))(key, np.ones(3, np.float32))
    assert str(again) == str(ferrax.make_jaxpr(lambda k, x: ferrax.random.normal(k, (3,)) + x)(key, np.ones(3, np.float32)))


# ----------------------------------------------------------------- deep nesting


def test_deep_nesting_goes_to_module_level() -> None:
    fn: Callable[[Any], Any] = lambda x: x * 2.0
    for _ in range(40):
        fn = ferrax.jit((lambda g: lambda x: g(x) + 1.0)(fn))
    closed = ferrax.make_jaxpr(fn)(np.float32(1))
    source, want, got = _retraced(closed, [np.float32(1)])
    assert got == want == str(closed)
    assert max(len(line) - len(line.lstrip()) for line in source.splitlines()) <= 4 * 26


# --------------------------------------------------------------- runtime helpers


def test_bind_trace_jaxpr_and_literal() -> None:
    def f(x: Any) -> Any:
        body = trace_jaxpr(lambda a: lax.sin(a), [ShapedArray((3,), np.float32)])
        (y,) = bind("jit", x, jaxpr=body, name="g")
        return bind("mul", y, literal(0.1, np.float32))

    text = str(ferrax.make_jaxpr(f)(np.ones(3, np.float32)))
    assert "jaxpr={ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }" in text
    assert "mul b 0.1:f32[]" in text  # the literal keeps its value as given (not f32's)
    assert float(np.asarray(literal(2, np.int8))) == 2.0
    with pytest.raises(ferrax.TypeCheckError, match="no primitive is named 'nope'"):
        bind("nope", 1.0)
    with pytest.raises(TypeError, match="ShapedArray"):
        trace_jaxpr(lambda a: a, [np.float32])  # type: ignore[list-item]


# ----------------------------------------------------------------------- errors


def test_errors() -> None:
    assert issubclass(DecompileError, FerraxError)
    with pytest.raises(DecompileError, match="expects a ClosedJaxpr or a Jaxpr, got int"):
        to_python(3)  # type: ignore[arg-type]
    jaxpr = parse_jaxpr("{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }")
    for bad in ("lambda", "1f", "np"):
        with pytest.raises(DecompileError, match="must be a Python identifier"):
            to_python(jaxpr, bad)
    with ferrax.enable_x64(True):
        wide = parse_jaxpr("{ lambda ; a:f64[]. let b:f64[] = sin a in (b,) }")
    with ferrax.enable_x64(False), pytest.raises(DecompileError, match="jax_enable_x64"):
        to_python(wide)
    with pytest.raises(DecompileError) as info:
        to_python(parse_jaxpr(_read(ROOT / "rust" / "ir" / "tests" / "jaxprs" / "shard_map.jaxpr")))
    assert "\n" not in str(info.value)
