"""jacfwd, jacrev and hessian against JAX's (issue 9): values, dtypes, weak types and
tree structure on a suite of programs, each written once for both systems (``m`` is
ferrax's or JAX's namespace), and JAX's errors for bad input.

Some programs need the batching rules of control flow and indexing primitives (cond,
scan, gather, dynamic_slice, and pad and dynamic_update_slice, which reverse mode of
slicing and indexing produces): they are here as the other programs are.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, assert_type

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import lax
from ferrax.tree_util import tree_flatten, tree_unflatten


class M(NamedTuple):
    np: Any
    lax: Any
    jit: Any
    jacfwd: Any
    jacrev: Any
    hessian: Any
    enable_x64: Any


# JAX's results are computed at once per x64 mode (_jax_results): one worker runs the
# module (pytest-xdist's loadgroup), so they are computed once.
pytestmark = pytest.mark.xdist_group("jacobians")

FX = M(fnp, lax, ferrax.jit, ferrax.jacfwd, ferrax.jacrev, ferrax.hessian, ferrax.enable_x64)
JX = M(jnp, jax.lax, jax.jit, jax.jacfwd, jax.jacrev, jax.hessian, jax.enable_x64)


def _x(*shape: int, seed: int = 0, dtype: Any = np.float32) -> Any:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


class Program(NamedTuple):
    """``build(m)`` is the function; ``args()`` its arguments; ``opts`` the keyword
    arguments of the transformations; ``jit_outer`` puts the transformed function under
    ``jit``; ``x64`` runs it in 64-bit mode; ``transforms`` the transformations tried."""

    name: str
    build: Callable[[M], Callable[..., Any]]
    args: Callable[[], tuple[Any, ...]]
    opts: dict[str, Any] = {}
    transforms: tuple[str, ...] = ("jacfwd", "jacrev", "hessian")
    jit_outer: bool = False
    x64: bool = False


def _mlp(m: M) -> Callable[..., Any]:
    def loss(params: Any, x: Any, y: Any) -> Any:
        h = m.np.tanh(x @ params["w1"] + params["b1"])
        return m.np.mean((h @ params["w2"] + params["b2"] - y) ** 2)

    return loss


def _params() -> dict[str, Any]:
    return {"w1": _x(3, 4, seed=1), "b1": _x(4, seed=2), "w2": _x(4, 2, seed=3), "b2": _x(2, seed=4)}


def _cond(m: M) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        return m.lax.cond(m.np.sum(x) > 0.0, lambda v: m.np.sin(v) * v, lambda v: m.np.cos(v) * 2.0, x)

    return f


def _rnn(m: M) -> Callable[..., Any]:
    def f(w: Any, xs: Any) -> Any:
        def step(h: Any, x: Any) -> tuple[Any, Any]:
            h = m.np.tanh(w @ h + x)
            return h, m.np.sum(h)

        h, ys = m.lax.scan(step, m.np.zeros(3, dtype=xs.dtype), xs)
        return m.np.sum(h) + m.np.sum(ys)

    return f


PROGRAMS = [
    Program("scalar of a Python float", lambda m: lambda x: m.np.sin(x) * x**2, lambda: (0.7,)),
    Program("scalar of f32[]", lambda m: lambda x: m.np.exp(x) / (1.0 + x * x), lambda: (np.float32(0.3),)),
    Program("elementwise vector", lambda m: lambda x: m.np.tanh(x) * x, lambda: (_x(4),)),
    Program("vector to scalar", lambda m: lambda x: m.np.sum(x**3) - m.np.prod(x), lambda: (_x(5),)),
    Program(
        "matmul, argnums tuple",
        lambda m: lambda w, x: m.np.tanh(w @ x),
        lambda: (_x(3, 4), _x(4, seed=1)),
        {"argnums": (0, 1)},
    ),
    Program("matrix input and output", lambda m: lambda a: a.T @ a + m.np.sin(a).sum(axis=0), lambda: (_x(3, 2),)),
    Program(
        "reductions",
        lambda m: lambda x: (m.np.max(x, axis=1), m.np.mean(x), m.np.sum(x * x, axis=0)),
        lambda: (_x(3, 4),),
    ),
    Program(
        "broadcasting",
        lambda m: lambda x, y: x[:, None] * y[None, :] + y,
        lambda: (_x(3), _x(2, seed=1)),
        {"argnums": (0, 1)},
    ),
    Program("where", lambda m: lambda x: m.np.where(x > 0.0, x * x, m.np.sin(x)), lambda: (_x(6),)),
    Program("MLP loss wrt a dict of params", lambda m: _mlp(m), lambda: (_params(), _x(5, 3, seed=5), _x(5, 2, seed=6))),
    Program(
        "with aux",
        lambda m: lambda x: (m.np.sin(x) * 2.0, {"norm": m.np.sum(x * x), "n": 3}),
        lambda: (_x(3),),
        {"has_aux": True},
    ),
    Program(
        "pytree outputs",
        lambda m: lambda x: {"a": (x * 2.0, m.np.sum(x)), "b": [m.np.cos(x)[:2]]},
        lambda: (_x(3),),
    ),
    Program(
        "pytree inputs, argnums (2, 0)",
        lambda m: lambda d, k, t: m.np.sum(d["u"] * t[0]) * d["v"] + t[1] * k,
        lambda: ({"u": _x(3), "v": np.float32(1.5)}, 2, (_x(3, seed=1), np.float32(0.5))),
        {"argnums": (2, 0)},
    ),
    Program("negative argnums", lambda m: lambda a, b: m.np.sin(a) * b, lambda: (_x(2), _x(2, seed=1)), {"argnums": -1}),
    Program("under jit", lambda m: lambda x: m.np.exp(m.np.sin(x)) @ x, lambda: (_x(3),), jit_outer=True),
    Program("of a jitted function", lambda m: m.jit(lambda x: m.np.tanh(x) * m.np.sum(x)), lambda: (_x(3),)),
    Program(
        "MLP loss under jit, argnums (0, 1)",
        lambda m: _mlp(m),
        lambda: (_params(), _x(2, 3, seed=5), _x(2, 2, seed=6)),
        {"argnums": (0, 1)},
        jit_outer=True,
    ),
    Program("reshape, transpose, concatenate", lambda m: lambda x: m.np.concatenate([x.reshape(3, 2).T.ravel(), x[::2]]), lambda: (_x(6),)),
    Program("float16", lambda m: lambda x: m.np.sin(x) * x, lambda: (_x(3, dtype=np.float16),), transforms=("jacfwd", "jacrev")),
    Program(
        "float16 and float32 arguments",
        lambda m: lambda a, b: a * b,
        lambda: (_x(2, dtype=np.float16), _x(2, seed=1)),
        {"argnums": (0, 1)},
        transforms=("jacfwd", "jacrev"),
    ),
    Program("float64 (x64)", lambda m: lambda x: m.np.sin(x) * m.np.sum(x), lambda: (_x(3, dtype=np.float64),), x64=True),
    Program("Python float (x64)", lambda m: lambda x: x**3, lambda: (1.5,), x64=True),
    Program(
        "integer output (jacfwd gives integer zeros)",
        lambda m: lambda x: (x * 2.0, (x * 3.0).astype(m.np.int32)),
        lambda: (_x(3),),
        transforms=("jacfwd",),
    ),
    Program(
        "integer input with allow_int",
        lambda m: lambda x, i: x * i,
        lambda: (_x(2), np.arange(2, dtype=np.int32)),
        {"argnums": (0, 1), "allow_int": True},
        transforms=("jacrev",),
    ),
    Program("keyword arguments passed through", lambda m: lambda x, k=2.0: m.np.sin(x) * k, lambda: (_x(3),)),
    # Programs that need the batching rules of control flow and indexing.
    Program("cond", _cond, lambda: (_x(3),)),
    Program("cond, other branch", _cond, lambda: (-np.abs(_x(3)),)),
    Program("integer-array indexing (gather)", lambda m: lambda x: x[np.array([2, 0, 2])] * x[1], lambda: (_x(3),)),
    Program(
        "dynamic_slice",
        lambda m: lambda x: m.lax.dynamic_slice(x, (1,), (2,)) ** 2,
        lambda: (_x(4),),
    ),
    Program("scan (an RNN)", _rnn, lambda: (_x(3, 3) * 0.5, _x(4, 3, seed=1)), {"argnums": (0, 1)}),
]


def _run(m: M, p: Program, transform: str, args: tuple[Any, ...] | None = None) -> Any:
    fun = getattr(m, transform)(p.build(m), **p.opts)
    if p.jit_outer:
        fun = m.jit(fun)
    kwargs = {"k": 3.0} if "keyword" in p.name else {}
    return fun(*(p.args() if args is None else args), **kwargs)


@contextlib.contextmanager
def _mode(p: Program) -> Iterator[None]:
    with jax.enable_x64(p.x64), ferrax.enable_x64(p.x64):
        yield


def _compare(got: Any, want: Any, rtol: float, atol: float) -> None:
    """Same tree structure, and leaf by leaf the same shape, dtype, weak type and values
    (within the tolerances)."""
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    # ferrax's tree rebuilt with placeholders, so JAX's tree_util reads its structure.
    placeholders = tree_unflatten(got_tree, [0] * len(got_leaves))
    got_structure: Any = jax.tree_util.tree_structure(placeholders)
    assert got_structure == want_tree, f"{placeholders} vs {want_tree}"
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        assert np.shape(g) == np.shape(w)
        assert getattr(g, "weak_type", None) == getattr(w, "weak_type", None)
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64), rtol=rtol, atol=atol)


CASES = [(p, t) for p in PROGRAMS for t in p.transforms]


@functools.cache
def _jax_results(x64: bool) -> dict[tuple[str, str], Any] | None:
    """JAX's result of every case run in the x64 mode ``x64``, by program name and
    transformation, all in one ``jax.jit`` (eagerly, JAX compiles every operation of
    every case): the NumPy arrays among the arguments are the jit's arguments, the rest
    (Python and NumPy scalars) closed over, as concrete as eagerly. Output leaves that
    are not traced (an aux output's Python int) are kept as they are, as eagerly. None if
    that fails (each test then runs its own case, to report its own error). Values may
    differ from eager JAX's in the last bits (XLA compiles a case's operations together)."""
    cases = [(p, t) for p, t in CASES if p.x64 == x64]
    leaves, tree = jax.tree_util.tree_flatten([p.args() for p, _ in cases])
    arrays = [i for i, leaf in enumerate(leaves) if isinstance(leaf, np.ndarray)]
    untraced: dict[tuple[str, str], dict[int, Any]] = {}
    trees: dict[tuple[str, str], Any] = {}

    def run(array_leaves: list[Any]) -> dict[tuple[str, str], list[Any]]:
        full = list(leaves)
        for i, a in zip(arrays, array_leaves, strict=True):
            full[i] = a
        argss = jax.tree_util.tree_unflatten(tree, full)
        out = {}
        for (p, t), args in zip(cases, argss, strict=True):
            results, trees[p.name, t] = jax.tree_util.tree_flatten(_run(JX, p, t, tuple(args)))
            kept = untraced[p.name, t] = {k: r for k, r in enumerate(results) if not isinstance(r, jax.core.Tracer)}
            out[p.name, t] = [None if k in kept else r for k, r in enumerate(results)]
        return out

    try:
        with jax.enable_x64(x64):
            traced = jax.jit(run)([leaves[i] for i in arrays])
    except Exception:  # noqa: BLE001
        return None
    return {
        key: jax.tree_util.tree_unflatten(trees[key], [untraced[key].get(k, r) for k, r in enumerate(results)])
        for key, results in traced.items()
    }


@pytest.mark.parametrize("p, transform", CASES, ids=[f"{t}: {p.name}" for p, t in CASES])
def test_against_jax(p: Program, transform: str) -> None:
    with _mode(p):
        table = _jax_results(p.x64)
        want = table[p.name, transform] if table is not None else _run(JX, p, transform)
        got = _run(FX, p, transform)
    low = any(np.asarray(a).dtype == np.float16 for a in jax.tree_util.tree_leaves(p.args()))
    rtol, atol = (2e-2, 2e-2) if low else (1e-6, 1e-7) if p.x64 else (2e-5, 1e-5)
    _compare(got, want, rtol, atol)


class M2(NamedTuple):
    np: Any
    jit: Any
    vmap: Any
    grad: Any
    jacfwd: Any
    jacrev: Any
    hessian: Any


FX2 = M2(fnp, ferrax.jit, ferrax.vmap, ferrax.grad, ferrax.jacfwd, ferrax.jacrev, ferrax.hessian)
JX2 = M2(jnp, jax.jit, jax.vmap, jax.grad, jax.jacfwd, jax.jacrev, jax.hessian)

# Jacobians composed with the other transformations and with themselves.
COMPOSED: list[tuple[str, Callable[[M2], Any], float]] = [
    ("vmap of jacfwd", lambda m: m.vmap(m.jacfwd(lambda a: m.np.sin(a) * a))(_x(4, 3)), 2e-5),
    ("vmap of jacrev, in_axes 1", lambda m: m.vmap(m.jacrev(lambda a, w: m.np.tanh(w @ a)), in_axes=(1, None))(_x(3, 4), _x(2, 3, seed=1)), 2e-5),
    ("jacfwd of jacfwd", lambda m: m.jacfwd(m.jacfwd(lambda a: m.np.sin(a) * m.np.sum(a)))(_x(3)), 2e-5),
    ("jacrev of jacrev", lambda m: m.jacrev(m.jacrev(lambda a: m.np.sin(a) * m.np.sum(a)))(_x(3)), 2e-5),
    ("grad of a sum of jacrev", lambda m: m.grad(lambda a: m.np.sum(m.jacrev(lambda b: m.np.sin(b) * b)(a) ** 2))(_x(3)), 2e-5),
    ("hessian with aux under jit", lambda m: m.jit(m.hessian(lambda a: (m.np.sum(a**3), a * 2.0), has_aux=True))(_x(3)), 2e-5),
    ("jacfwd of a constant output", lambda m: m.jacfwd(lambda a: np.float32(2.0))(_x(3)), 2e-5),
    ("jacrev, empty output", lambda m: m.jacrev(lambda a: a[:0])(_x(3)), 2e-5),
    ("jacfwd, empty input", lambda m: m.jacfwd(lambda a: m.np.sum(a) * 2.0)(np.ones(0, np.float32)), 2e-5),
    ("jacfwd, bfloat16", lambda m: m.jacfwd(lambda a: a * a)(np.ones(2, jnp.bfloat16)), 1e-2),
    ("jacfwd, None in the input tree", lambda m: m.jacfwd(lambda d: d["a"] * 2.0)({"a": _x(3), "b": None}), 2e-5),
]


@pytest.mark.parametrize("build, tol", [(b, t) for _, b, t in COMPOSED], ids=[n for n, _, _ in COMPOSED])
def test_composed_against_jax(build: Callable[[M2], Any], tol: float) -> None:
    _compare(build(FX2), build(JX2), tol, tol)


class Bad(NamedTuple):
    """A call that must fail: ``call(m)`` does it; ferrax's message must contain
    ``says`` (and the test file's name, the user's line)."""

    name: str
    call: Callable[[M], Any]
    says: str


BAD = [
    Bad("jacfwd of an integer input", lambda m: m.jacfwd(lambda x: x * 2)(np.arange(3, dtype=np.int32)), "int32 for argument 0"),
    Bad(
        "jacfwd of an integer leaf in a pytree argument",
        lambda m: m.jacfwd(lambda a, d: a * d["i"], argnums=1)(_x(2), {"f": _x(2), "i": np.int32(2)}),
        "int32 for argument 1 (leaf 1 of its pytree)",
    ),
    Bad("jacrev of an integer input", lambda m: m.jacrev(lambda x: x * 2)(np.arange(3, dtype=np.int32)), "int32 for argument 0"),
    Bad("jacrev of a bool input", lambda m: m.jacrev(lambda x, b: x * b, argnums=(0, 1))(_x(2), True), "bool for argument 1"),
    Bad("hessian of an integer input", lambda m: m.hessian(lambda x: m.np.sum(x * x))(np.arange(3, dtype=np.int32)), "int32 for argument 0"),
    Bad("jacrev of an integer output", lambda m: m.jacrev(lambda x: (x * 2).astype(m.np.int32))(_x(2)), "int32 for output leaf 0"),
    Bad("jacfwd holomorphic", lambda m: m.jacfwd(m.np.sin, holomorphic=True)(_x(2)), "complex dtype"),
    Bad("jacrev holomorphic", lambda m: m.jacrev(m.np.sin, holomorphic=True)(_x(2)), "complex dtype"),
    Bad("hessian holomorphic", lambda m: m.hessian(lambda x: m.np.sum(x**3), holomorphic=True)(_x(2)), "complex dtype"),
    Bad("argnums out of range", lambda m: m.jacfwd(m.np.sin, argnums=1)(_x(2)), "got value 1 for len(args) == 1"),
    Bad("negative argnums out of range", lambda m: m.jacrev(m.np.sin, argnums=(0, -2))(_x(2)), "got value -2"),
    Bad("argnums not an int", lambda m: m.jacfwd(m.np.sin, argnums=1.5), "argnums"),
    Bad("not a callable", lambda m: m.jacrev(3), "callable"),
    Bad("a string argument", lambda m: m.jacfwd(lambda x: x)("a"), "argument 0 of type str"),
    Bad("has_aux without a pair", lambda m: m.jacrev(lambda x: x * 2.0, has_aux=True)(_x(2)), "pair"),
]


@pytest.mark.parametrize("bad", BAD, ids=[b.name for b in BAD])
def test_errors_as_jax(bad: Bad) -> None:
    with pytest.raises(Exception) as want:
        bad.call(JX)
    with pytest.raises(Exception) as got:
        bad.call(FX)
    assert isinstance(got.value, type(want.value)), f"JAX raises {type(want.value).__name__}, ferrax {type(got.value).__name__}: {got.value}"
    assert bad.says in str(got.value)
    assert "test_jacobians.py" in str(got.value), str(got.value)


def test_jacfwd_has_aux_without_a_pair() -> None:
    # JAX's jacfwd fails here with an UnexpectedTracerError from inside vmap; ferrax
    # says what is wrong, as jacrev does (a TypeError).
    with pytest.raises(TypeError, match="pair"):
        ferrax.jacfwd(lambda x: x * 2.0, has_aux=True)(_x(2))


def test_jacobian_jaxpr_has_no_loops() -> None:
    # jacfwd and jacrev are vectorized: one jvp/vjp evaluated on the whole basis, so the
    # jaxpr's size does not grow with the number of inputs or outputs.
    f = lambda x: fnp.sin(x) * fnp.sum(x)  # noqa: E731
    small = ferrax.make_jaxpr(ferrax.jacfwd(f))(_x(2))
    large = ferrax.make_jaxpr(ferrax.jacfwd(f))(_x(50))
    assert len(large.jaxpr.eqns) == len(small.jaxpr.eqns)
    small = ferrax.make_jaxpr(ferrax.jacrev(f))(_x(2))
    large = ferrax.make_jaxpr(ferrax.jacrev(f))(_x(50))
    assert len(large.jaxpr.eqns) == len(small.jaxpr.eqns)


def test_public_types() -> None:
    # What mypy --strict sees (tests/ are checked): functions of any arguments.
    f = lambda x: fnp.sum(x * x)  # noqa: E731
    assert_type(ferrax.jacfwd(f), Callable[..., Any])
    assert_type(ferrax.jacrev(f, argnums=(0,), has_aux=False, holomorphic=False, allow_int=False), Callable[..., Any])
    assert_type(ferrax.hessian(f, 0), Callable[..., Any])
    assert {"jacfwd", "jacrev", "hessian"} <= set(ferrax.__all__)
