"""``ferrax.lax.pad`` against ``jax.lax.pad``: values, dtypes and weak types over padding
configs with low, high, negative (cropping) and interior padding, eagerly and under
``jit`` (XLA's ``stablehlo.pad``); bad configs raise JAX's exception types."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import ferrax as fx
from ferrax import TypeCheckError, lax

CONFIGS: list[tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]] = [
    ((4,), ((2, 3, 0),)),
    ((4,), ((0, 0, 1),)),
    ((4,), ((-1, -2, 0),)),
    ((4,), ((-3, 1, 2),)),
    ((2, 3), ((1, -1, 1), (0, 2, 0))),
    ((2, 3), ((-1, 0, 2), (2, -2, 1))),
    ((2, 3), ((-2, 0, 0), (0, 0, 0))),
    ((3, 0), ((1, 1, 1), (2, 1, 3))),
    ((2, 1, 3), ((0, 0, 0), (1, 1, 4), (-1, -1, 1))),
    ((), ()),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize(("shape", "config"), CONFIGS, ids=[str(c) for _, c in CONFIGS])
def test_pad_matches_jax(shape: tuple[int, ...], config: tuple[tuple[int, int, int], ...], dtype: Any) -> None:
    rng = np.random.default_rng(0)
    x = (rng.integers(-5, 5, size=shape)).astype(dtype)
    v = np.asarray(7, dtype) if dtype != np.bool_ else np.asarray(True)
    want = jax.lax.pad(x, v, config)
    got = lax.pad(x, v, config)
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    jitted = fx.jit(lambda a, b: lax.pad(a, b, config))(x, v)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(want))


def test_python_scalar_padding_values_keep_their_dtype() -> None:
    # A weak float scalar pads a float32 array (weak only if both are); an int one is
    # refused for a float array, as JAX refuses it.
    x = np.ones(3, np.float32)
    got, want = lax.pad(x, 0.5, [(1, 1, 0)]), jax.lax.pad(x, 0.5, [(1, 1, 0)])
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got, want = lax.pad(2.0, 1.0, []), jax.lax.pad(2.0, 1.0, [])
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    with pytest.raises(TypeError, match="same dtype"):
        jax.lax.pad(x, 0, [(1, 1, 0)])
    with pytest.raises(TypeCheckError, match="pad operand and padding_value must be same dtype: got f32 and i32"):
        lax.pad(x, 0, [(1, 1, 0)])


@pytest.mark.parametrize(
    ("shape", "value", "config", "message"),
    [
        ((3,), 0.0, ((1, 1, -1),), "interior padding in padding_config must be nonnegative"),
        ((3,), 0.0, ((1, 1, 0), (0, 0, 0)), "length of padding_config must equal the number of axes"),
        ((3,), 0.0, ((-3, -1, 0),), "Dimension size after padding is not at least 0"),
        ((3,), np.ones(2, np.float32), ((1, 1, 0),), "padding_value must be a scalar"),
    ],
)
def test_bad_configs_raise_value_error_as_jax(
    shape: tuple[int, ...], value: Any, config: tuple[tuple[int, int, int], ...], message: str
) -> None:
    x = np.ones(shape, np.float32)
    with pytest.raises(ValueError, match=message):
        jax.lax.pad(x, value, config)
    with pytest.raises(ValueError, match=message):
        lax.pad(x, value, config)
