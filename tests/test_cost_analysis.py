"""cost_analysis: flops counted from the jaxpr, against counts derived by hand."""

from __future__ import annotations

from typing import Any

import numpy as np

import ferrax as fx
import ferrax.numpy as fnp
from ferrax import lax


def test_chain_counts_three_flops_per_element_and_step() -> None:
    def chain(x: Any) -> Any:
        for _ in range(10):
            x = fnp.sin(x) * 1.5 + x
        return fnp.sum(x)

    # sin, mul, add on 128 elements per step; the sum combines 128 values (127 adds).
    assert fx.cost_analysis(chain)(np.zeros(128, np.float32)) == {"flops": 10 * 3 * 128 + 127, "while_loops": 0}


def test_matmul_counts_a_multiply_and_an_add_per_term() -> None:
    a, b = np.zeros((64, 256), np.float32), np.zeros((256, 32), np.float32)
    assert fx.cost_analysis(lambda a, b: a @ b)(a, b)["flops"] == 2 * 64 * 256 * 32


def test_integer_arithmetic_and_data_movement_are_free() -> None:
    x = np.zeros((4, 5), np.int32)
    assert fx.cost_analysis(lambda x: (x + 1).T.reshape(20))(x)["flops"] == 0


def test_control_flow() -> None:
    xs = np.zeros((5, 3), np.float32)
    scan = fx.cost_analysis(lambda xs: lax.scan(lambda c, x: (c + x, c * x), fnp.zeros(3), xs))(xs)
    assert scan == {"flops": 5 * (3 + 3), "while_loops": 0}
    x = np.zeros(4, np.float32)
    cond = fx.cost_analysis(lambda x: lax.cond(True, lambda v: fnp.sin(v) * 2.0, lambda v: v, x))(x)
    assert cond["flops"] == 8  # the costlier branch
    loop = fx.cost_analysis(lambda x: lax.while_loop(lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1] * 2.0), (0, x)))(x)
    assert loop == {"flops": 4, "while_loops": 1}  # one iteration; the trip count is data
    nested = fx.cost_analysis(fx.jit(lambda x: fx.jit(fnp.sin)(x) + x))(x)
    assert nested["flops"] == 8
