"""The primitives of custom differentiation rules and checkpointing, as JAX names them.

- ``custom_jvp_call[name, call_jaxpr, jvp, symbolic_zeros]``: a call of ``call_jaxpr``
  whose forward derivative is the user's ``jvp`` (a Python function, kept as it is);
- ``custom_vjp_call[name, bwd, call_jaxpr, fwd, symbolic_zeros]``: a call of
  ``call_jaxpr`` whose reverse derivative is the user's ``fwd`` and ``bwd``;
- ``remat2[differentiated, jaxpr, policy, prevent_cse]`` (``checkpoint``): a call of
  ``jaxpr`` whose intermediate values are recomputed, not stored, for the backward pass;
- ``stop_gradient``: the identity, whose derivative is zero.

Evaluated eagerly, each is just its function: the calls run their jaxpr (with
``eval_jaxpr``, so they also run under whatever transformation is active) and
``stop_gradient`` returns its operand. Their differentiation rules live with the user
API in ``ferrax._custom_derivatives``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._core import Primitive

__all__ = ["custom_jvp_call_p", "custom_vjp_call_p", "remat_p", "stop_gradient_p"]


def _call(jaxpr: _ir.ClosedJaxpr, args: tuple[Any, ...]) -> list[Any]:
    from ferrax._jit import eval_jaxpr

    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


custom_jvp_call_p = Primitive.builtin("custom_jvp_call", multiple_results=True)
"""``custom_jvp_call``: ``call_jaxpr`` applied to the operands; ``jvp`` is the user's rule."""


@custom_jvp_call_p.def_impl
def _custom_jvp_call_impl(*args: Any, call_jaxpr: _ir.ClosedJaxpr, **_rules: Any) -> list[Any]:
    return _call(call_jaxpr, args)


custom_vjp_call_p = Primitive.builtin("custom_vjp_call", multiple_results=True)
"""``custom_vjp_call``: ``call_jaxpr`` applied to the operands; ``fwd`` and ``bwd`` are the
user's rules."""


@custom_vjp_call_p.def_impl
def _custom_vjp_call_impl(*args: Any, call_jaxpr: _ir.ClosedJaxpr, **_rules: Any) -> list[Any]:
    return _call(call_jaxpr, args)


remat_p = Primitive.builtin("remat2", multiple_results=True)
"""``remat2`` (``checkpoint``): ``jaxpr`` applied to the operands."""


@remat_p.def_impl
def _remat_impl(*args: Any, jaxpr: _ir.ClosedJaxpr, **_params: Any) -> list[Any]:
    return _call(jaxpr, args)


stop_gradient_p = Primitive.builtin("stop_gradient")
"""``stop_gradient``: the operand, unchanged (its derivative is zero)."""
stop_gradient_p.def_impl(lambda x: np.asarray(x))
