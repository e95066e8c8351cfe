"""``cost_analysis``: how many floating-point operations a function performs, counted
from its jaxpr in Rust without running it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ferrax import _ir
from ferrax._staging import make_jaxpr

__all__ = ["cost_analysis"]


def cost_analysis(f: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """A function that traces ``f`` on the given arguments and returns its static cost:
    ``{"flops": ..., "while_loops": ...}``.

    Elementwise float operations count one per element, reductions one per combined
    element, ``dot_general`` two per multiply-add; ``cond`` counts its costliest branch,
    ``scan`` its body ``length`` times. A ``while`` loop's trip count depends on data: one
    iteration is counted, and ``while_loops`` says how many loops were met.
    """

    def analyse(*args: Any) -> dict[str, Any]:
        return _ir.cost_analysis(make_jaxpr(f)(*args).jaxpr)

    return analyse
