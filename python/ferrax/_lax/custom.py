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
``stop_gradient`` returns its operand. Their differentiation rules are below;
the user API (``custom_jvp``, ``custom_vjp``, ``checkpoint``) is in
``ferrax._custom_derivatives``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

import numpy as np

from ferrax import _ir
from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax._interpreters.partial_eval import partial_eval_rules, split_by_pass
from ferrax._lax._operands import scalar

T = TypeVar("T")

__all__ = ["custom_jvp_call_p", "custom_vjp_call_p", "remat_p", "stop_gradient", "stop_gradient_p"]


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


# -------------------------------------------------------------------------- derivatives


def _closed_over_tangent(kind: str, name: str, tangents: Sequence[Any]) -> None:
    if any(type(t) is not ad.Zero for t in tangents):
        raise TypeError(
            f"{kind} function {name} closes over a value being differentiated: pass it as an "
            f"argument instead, at {user_location()}"
        )


def _custom_jvp_call_jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, call_jaxpr: _ir.ClosedJaxpr, jvp: Any,
    symbolic_zeros: bool, name: str, num_consts: int = 0,
) -> tuple[list[Any], list[Any]]:
    # The user's rule replaces the call; the constants it closed over have no tangent.
    _closed_over_tangent("custom_jvp", name, tangents[:num_consts])
    args = [ad.instantiate(t) for t in tangents[num_consts:]]
    p_out, t_out = jvp(list(primals[num_consts:]), args)
    return list(p_out), list(t_out)


custom_jvp_call_p.def_jvp(_custom_jvp_call_jvp)


@overload
def stop_gradient(x: Array | np.ndarray[Any, Any] | np.generic | float | int) -> Array: ...
@overload
def stop_gradient(x: T) -> T: ...
def stop_gradient(x: Any) -> Any:
    """``x`` (a pytree), with zero derivative: differentiation treats it as a constant."""
    from ferrax.tree_util import tree_map

    def one(leaf: Any) -> Any:
        value = scalar(leaf)
        if not ad.is_differentiable(aval_of(value).dtype):
            return value
        return stop_gradient_p.bind(value)

    return tree_map(one, x)


def _stop_gradient_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    out = stop_gradient_p.bind(*primals)
    return out, ad.Zero(aval_of(out))


stop_gradient_p.def_jvp(_stop_gradient_jvp)


def _remat_jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, jaxpr: _ir.ClosedJaxpr, prevent_cse: bool,
    differentiated: bool, policy: Any,
) -> tuple[list[Any], list[Any]]:
    # As jit's: the body differentiated, still one remat2 equation.
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    body, consts = ad.hoist_consts(jvp_closed)
    outs = remat_p.bind(
        *consts, *primals, *[t for t in tangents if type(t) is not ad.Zero],
        jaxpr=body, prevent_cse=prevent_cse, differentiated=True, policy=policy,
    )
    n = len(jaxpr.out_avals)
    rest = iter(outs[n:])
    return list(outs[:n]), [next(rest) if nz else ad.Zero(a) for nz, a in zip(out_nz, jaxpr.out_avals)]


remat_p.def_jvp(_remat_jvp)


# Checkpoints split in reverse mode by the Rust pass: the known outputs computed now,
# nothing intermediate stored; the backward pass recomputes from the inputs.
partial_eval_rules["remat2"] = split_by_pass
