"""Python scalars as operands at the edges of their conversion (the int32 range, float32's
largest finite value, infinities, NaN), and NumPy's broadcasting rule for shapes, each
compared with JAX (values, dtypes, weak types, or the exception) and with NumPy.

The conversions skip NumPy's range checks where nothing can overflow; these cases are
the ones on either side of where they stop skipping."""

from __future__ import annotations

import itertools
import random
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from jax_harness import both_x64

F32_MAX = float(np.finfo(np.float32).max)
SCALARS: list[Any] = [
    2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**63 - 1, 2**63, 65504, 65520,
    F32_MAX, -F32_MAX, np.nextafter(F32_MAX, np.inf), 3.5e38, -1e39, 1e300,
    float("inf"), float("-inf"), float("nan"), 0.1, -2.5, 7,
]
# (Subnormal scalars are left out: XLA's CPU arithmetic flushes them to zero in JAX's
# eager operations, which is not a conversion question.)
DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int32", "uint32", "int64"]


def _outcome(run: Any) -> tuple[str, Any, bool, Any] | str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = run()
            return ("ok", np.dtype(out.dtype), bool(out.weak_type), np.asarray(out))
    except Exception as e:  # noqa: BLE001 - compared with JAX's
        return type(e).__name__


def _same(ours: Any, theirs: Any, what: Any) -> None:
    if isinstance(theirs, str):
        # ferrax's errors subclass the built-in ones JAX raises (OverflowError, TypeError).
        assert isinstance(ours, str), (what, ours, theirs)
        return
    assert not isinstance(ours, str), (what, ours, theirs)
    assert ours[1:3] == theirs[1:3], (what, ours[1:3], theirs[1:3])
    a, b = ours[3], theirs[3]
    if a.dtype.kind not in "iubc":  # float16, bfloat16 (NaNs compared as NaNs), floats
        a, b = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_array_equal(a, b, err_msg=str(what))


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_operands_as_jax(dtype: str, x64: bool) -> None:
    with both_x64(x64):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 64-bit dtypes narrowed without x64
            x = np.ones(3, dtype=np.dtype(ferrax.dtypes.canonicalize(dtype)))
        for s in SCALARS:
            for name, ours, theirs in [
                ("fnp.add", lambda: fnp.add(x, s), lambda: jnp.add(x, s)),
                ("fnp.multiply (scalar first)", lambda: fnp.multiply(s, x), lambda: jnp.multiply(s, x)),
                ("fnp.asarray", lambda: fnp.asarray(s), lambda: jnp.asarray(s)),
            ]:
                _same(_outcome(ours), _outcome(theirs), (name, dtype, s, x64))
        # Staged: the same values as constants of the compiled program (a few scalars:
        # each is a compilation on both systems).
        for s in [2**31 - 1, 2**31, 3.5e38, float("nan")]:
            staged = _outcome(lambda: ferrax.jit(lambda a: a + s)(x))
            _same(staged, _outcome(lambda: jax.jit(lambda a: a + s)(x)), ("jit", dtype, s, x64))


def _random_shapes(rng: random.Random) -> list[tuple[int, ...]]:
    rank = rng.randint(0, 4)
    base = [rng.choice([0, 1, 2, 3]) for _ in range(rank)]
    shapes = []
    for _ in range(rng.randint(1, 4)):
        r = rng.randint(0, rank)
        shape = base[rank - r:]
        # Some dimensions become 1 (broadcast), a few another size (an error).
        shapes.append(tuple(1 if rng.random() < 0.3 else (rng.choice([2, 5]) if rng.random() < 0.08 else d)
                            for d in shape))
    return shapes


def test_broadcast_shapes_as_numpy() -> None:
    rng = random.Random(7)
    cases = [_random_shapes(rng) for _ in range(400)]
    cases += [[(0,), (1,)], [(0,), (3,)], [(1, 0), (4, 1)], [(), ()], [(2, 1), (1, 3), (1, 1, 1)]]
    errors = 0
    for shapes in cases:
        try:
            want: Any = np.broadcast_shapes(*shapes)
        except ValueError:
            want = None
            errors += 1
        if want is None:
            with pytest.raises(ferrax.TypeCheckError, match="do not broadcast"):
                fnp.broadcast_shapes(*shapes)
        else:
            assert fnp.broadcast_shapes(*shapes) == want, shapes
        if len(shapes) >= 2:
            # The rule as an element-wise operation applies it (its first two shapes).
            operands = [np.zeros(s, np.float32) for s in shapes[:2]]
            if _fails(shapes[:2]):
                with pytest.raises(ferrax.TypeCheckError, match="do not broadcast"):
                    fnp.add(*operands)
            else:
                assert fnp.add(*operands).shape == np.broadcast_shapes(*shapes[:2]), shapes
    assert errors > 10, "the generator made too few shapes that do not broadcast"


def _fails(shapes: list[tuple[int, ...]]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return True
    return False


def test_mixed_rank_operands_stage_as_jax() -> None:
    # Lower-rank operands get leading size-1 dimensions (broadcast_in_dim) before the
    # element-wise primitive, as jax.numpy stages them.
    for a, b in itertools.product([(3,), (2, 3), (1, 3), ()], [(4, 2, 3), (2, 1), (3,)]):
        x, y = np.ones(a, np.float32), np.ones(b, np.float32)
        if _fails([a, b]):
            with pytest.raises(ferrax.TypeCheckError):
                ferrax.make_jaxpr(fnp.add)(x, y)
            continue
        ours = ferrax.make_jaxpr(fnp.add)(x, y)
        theirs = jax.make_jaxpr(jnp.add)(x, y)
        assert [e.primitive for e in ours.jaxpr.eqns] == [str(e.primitive) for e in theirs.jaxpr.eqns], (a, b)
