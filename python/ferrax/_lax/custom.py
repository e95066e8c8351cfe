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

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import numpy as np

from ferrax import _ir
from ferrax._array import Array
from ferrax._core import Primitive, aval_of, user_location
from ferrax._interpreters import ad
from ferrax._interpreters.partial_eval import partial_eval_rules, split_by_pass
from ferrax._lax._operands import is_array, scalar
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

T = TypeVar("T")

__all__ = ["custom_jvp_call_p", "custom_lin_p", "custom_vjp_call_p", "remat_p", "stop_gradient", "stop_gradient_p"]


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
        # Bound for every dtype, as JAX 0.10 binds it (integers have no tangent anyway).
        return stop_gradient_p.bind(scalar(leaf))

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
    return ad.call_jvp(
        remat_p, primals, tangents, jaxpr, prevent_cse=prevent_cse, differentiated=True, policy=policy
    )


remat_p.def_jvp(_remat_jvp)


# Checkpoints split in reverse mode by the Rust pass: the known outputs computed now,
# nothing intermediate stored; the backward pass recomputes from the inputs.
partial_eval_rules["remat2"] = split_by_pass


# ----------------------------------------------------------- custom_vjp's linear part


class _Lin:
    """What a ``custom_lin`` equation needs beyond its operands: the user's ``bwd``, the
    residuals' structure (array leaves are operands, other leaves kept here), and the
    types of the primal outputs (the tangents it makes) and differentiable inputs."""

    __slots__ = ("bwd", "res_tree", "res_static", "out_avals", "in_avals", "diff", "fun_name", "__name__")

    def __init__(
        self, bwd: Callable[..., Any], res_tree: PyTreeDef, res_static: list[Any], out_avals: list[_ir.ShapedArray],
        in_avals: list[_ir.ShapedArray], diff: list[bool], fun_name: str,
    ) -> None:
        self.bwd, self.res_tree, self.res_static = bwd, res_tree, res_static
        self.out_avals, self.in_avals, self.diff, self.fun_name = out_avals, in_avals, diff, fun_name
        self.__name__ = getattr(bwd, "__name__", None) or type(bwd).__name__

    def residuals(self, arrays: Sequence[Any]) -> Any:
        it = iter(arrays)
        leaves = [next(it) if x is _ARRAY else x for x in self.res_static]
        return tree_unflatten(self.res_tree, leaves)


_ARRAY = object()


def _custom_lin_abstract_eval(*avals: _ir.ShapedArray, lin: _Lin) -> list[_ir.ShapedArray]:
    return [_ir.ShapedArray(a.shape, a.dtype, False) for a in lin.out_avals]


def _custom_lin_impl(*args: Any, lin: _Lin) -> list[Any]:
    raise TypeError(
        f"can't apply forward-mode autodiff (jvp) to a custom_vjp function ({lin.fun_name}), "
        f"at {user_location()}"
    )


def _custom_lin_transpose(avals: Sequence[_ir.ShapedArray], linear: Sequence[bool], *, lin: _Lin) -> _ir.ClosedJaxpr:
    """The backward pass of a custom_vjp function as a jaxpr: the non-linear operands (the
    residuals, and the tangents that are known zeros: those of the inputs not being
    differentiated) and the output cotangents in, the cotangents of the linear operands
    out (``bwd`` traced)."""
    from ferrax._staging import trace_to_jaxpr

    n_res = sum(1 for x in lin.res_static if x is _ARRAY)
    fixed = [i for i, is_linear in enumerate(linear) if not is_linear]
    if any(linear[:n_res]):
        raise TypeError(f"custom_vjp {lin.fun_name}: a residual of fwd depends on a value being differentiated")
    ct_avals = [_ir.ShapedArray(a.shape, a.dtype, False) for a in lin.out_avals]

    def backward(*args: Any) -> list[Any]:
        operands: list[Any] = [None] * len(avals)
        for i, v in zip(fixed, args[: len(fixed)]):
            operands[i] = v
        res = lin.residuals(operands[:n_res])
        cts = lin.bwd(res, list(args[len(fixed) :]))
        out = []
        operand = n_res
        for ct, a, d in zip(cts, lin.in_avals, lin.diff):
            if not d:
                continue
            operand += 1
            if not linear[operand - 1]:
                continue  # a known-zero tangent: no cotangent wanted
            if ct is None:
                out.append(ad.instantiate(ad.Zero(_ir.ShapedArray(a.shape, a.dtype, False))))
                continue
            got = aval_of(ct)
            if got.shape != a.shape:
                raise ValueError(
                    f"Custom VJP bwd rule must produce an output with the same shape/dtypes as "
                    f"the args tuple of the primal function: expected {a.str_short()}, got "
                    f"{got.str_short()}, at {user_location()}"
                )
            out.append(ct)
        return out

    in_avals = [avals[i] for i in fixed]
    tree = tree_flatten(tuple(range(len(in_avals) + len(ct_avals))))[1]
    closed, _ = trace_to_jaxpr(backward, [*in_avals, *ct_avals], tree)
    return closed


custom_lin_p = Primitive("custom_lin", multiple_results=True)
custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
custom_lin_p.def_impl(_custom_lin_impl)
# The user's bwd runs in place in the backward pass, as JAX runs it (no nested jit).
custom_lin_p.def_transpose_jaxpr(_custom_lin_transpose, inline=True)


def _custom_vjp_call_jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, call_jaxpr: _ir.ClosedJaxpr, fwd: Any, bwd: Any,
    symbolic_zeros: bool, name: str, num_consts: int = 0,
) -> tuple[list[Any], list[Any]]:
    # fwd runs now, on the primals; the tangents go through custom_lin, a linear map that
    # cannot run forward but transposes to bwd (reverse mode records it, then transposes).
    _closed_over_tangent("custom_vjp", name, tangents[:num_consts])
    primals, tangents = primals[num_consts:], tangents[num_consts:]
    out, res = fwd(*primals)
    res_leaves, res_tree = tree_flatten(res)
    arrays = [x for x in res_leaves if is_array(x) or isinstance(x, (int, float))]
    static = [_ARRAY if (is_array(x) or isinstance(x, (int, float))) else x for x in res_leaves]
    in_avals = [aval_of(p) for p in primals]
    diff = [ad.is_differentiable(a.dtype) for a in in_avals]
    lin = _Lin(bwd, res_tree, static, [aval_of(o) for o in out], in_avals, diff, name)
    diff_tangents = [ad.instantiate(t) for t, d in zip(tangents, diff) if d]
    touts = custom_lin_p.bind(*arrays, *diff_tangents, lin=lin)
    return list(out), list(touts)


custom_vjp_call_p.def_jvp(_custom_vjp_call_jvp)


# ----------------------------------------------------------------------------- batching
# Rules for ``vmap``: the call's jaxpr vectorized (batch axis first), the call staying one
# equation with its rules intact: the user's jvp, fwd and bwd run vectorized too, so
# differentiating the batched call still uses them. Every output is batched (the user's
# rules may make any of them depend on a batched input).


def _batched_call(
    jaxpr: _ir.ClosedJaxpr, vals: Sequence[Any], dims: Sequence[int | None], axis_size: int, instantiate: bool
) -> tuple[_ir.ClosedJaxpr, list[Any], list[Any], list[bool]]:
    """The vectorized body (constants hoisted), its constants, the operands with their
    batch axis first, and which outputs are batched."""
    from ferrax._interpreters import batching

    closed, out_b = batching.batch_jaxpr(jaxpr, axis_size, [d is not None for d in dims], instantiate)
    body, extra = ad.hoist_consts(closed)
    return body, extra, batching.at_front(vals, dims), out_b


def _vectorized(
    fun: Callable[..., Sequence[Any]], args: Sequence[Any], batched: Sequence[bool], axis_size: int
) -> list[Any]:
    """``fun(*args)`` on arguments batched along their first axis (where flagged), every
    result batched along its first axis."""
    from ferrax._interpreters import batching

    dims = [0 if b else None for b in batched]
    outs, out_dims = batching.batch_flat(fun, list(args), dims, axis_size)
    return [batching.bdim_at_front(o, d, axis_size) for o, d in zip(outs, out_dims)]


def _custom_jvp_call_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, call_jaxpr: _ir.ClosedJaxpr, jvp: Any,
    symbolic_zeros: bool, name: str, num_consts: int = 0,
) -> tuple[list[Any], list[int]]:
    body, extra, args, _ = _batched_call(call_jaxpr, vals, dims, axis_size, True)
    arg_b = [d is not None for d in dims[num_consts:]]

    def batched_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        n = len(primals)

        def both(*xs: Any) -> list[Any]:
            p_out, t_out = jvp(list(xs[:n]), list(xs[n:]))
            return [*p_out, *t_out]

        outs = _vectorized(both, [*primals, *tangents], arg_b + arg_b, axis_size)
        return outs[: len(outs) // 2], outs[len(outs) // 2 :]

    batched_jvp.__name__ = getattr(jvp, "__name__", "jvp")
    outs = custom_jvp_call_p.bind(
        *extra, *args, call_jaxpr=body, jvp=batched_jvp, num_consts=len(extra) + num_consts,
        symbolic_zeros=symbolic_zeros, name=name,
    )
    return list(outs), [0] * len(outs)


custom_jvp_call_p.def_batch(_custom_jvp_call_batch)


def _custom_vjp_call_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, call_jaxpr: _ir.ClosedJaxpr, fwd: Any,
    bwd: Any, symbolic_zeros: bool, name: str, num_consts: int = 0,
) -> tuple[list[Any], list[int]]:
    from ferrax._lax.reductions import reduce_sum

    body, extra, args, _ = _batched_call(call_jaxpr, vals, dims, axis_size, True)
    arg_b = [d is not None for d in dims[num_consts:]]
    arg_avals = call_jaxpr.in_avals[num_consts:]
    n_out = len(call_jaxpr.out_avals)
    # The residuals' structure and their non-array leaves, found when fwd runs.
    res_layout: list[Any] = []

    def batched_fwd(*primals: Any) -> tuple[list[Any], tuple[Any, ...]]:
        def run(*ps: Any) -> list[Any]:
            out, res = fwd(*ps)
            leaves, tree = tree_flatten(res)
            arrays = [is_array(x) or isinstance(x, (int, float)) for x in leaves]
            res_layout[:] = [tree, [None if a else x for a, x in zip(arrays, leaves)], arrays]
            return [*out, *(x for a, x in zip(arrays, leaves) if a)]

        outs = _vectorized(run, primals, arg_b, axis_size)
        return outs[:n_out], tuple(outs[n_out:])

    def batched_bwd(res: tuple[Any, ...], cts: Sequence[Any]) -> list[Any]:
        tree, static, arrays = res_layout
        n_res = len(res)
        diff = [ad.is_differentiable(a.dtype) for a in arg_avals]

        def run(*xs: Any) -> list[Any]:
            it = iter(xs[:n_res])
            leaves = [next(it) if a else s for a, s in zip(arrays, static)]
            got = bwd(tree_unflatten(tree, leaves), list(xs[n_res:]))
            return [
                ad.instantiate(ad.Zero(_ir.ShapedArray(a.shape, a.dtype, False))) if ct is None else ct
                for ct, a, d in zip(got, arg_avals, diff)
                if d
            ]

        per_lane = iter(_vectorized(run, [*res, *cts], [True] * (n_res + len(cts)), axis_size))
        # An input shared by every element gets the sum of the elements' cotangents.
        return [
            (ct if b else reduce_sum(ct, (0,))) if d else None
            for b, d in zip(arg_b, diff)
            for ct in ([next(per_lane)] if d else [None])
        ]

    batched_fwd.__name__ = getattr(fwd, "__name__", "fwd")
    batched_bwd.__name__ = getattr(bwd, "__name__", "bwd")
    outs = custom_vjp_call_p.bind(
        *extra, *args, call_jaxpr=body, fwd=batched_fwd, bwd=batched_bwd, num_consts=len(extra) + num_consts,
        symbolic_zeros=symbolic_zeros, name=name,
    )
    return list(outs), [0] * len(outs)


custom_vjp_call_p.def_batch(_custom_vjp_call_batch)


def _remat_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, jaxpr: _ir.ClosedJaxpr, **params: Any
) -> tuple[list[Any], list[int | None]]:
    body, extra, args, out_b = _batched_call(jaxpr, vals, dims, axis_size, False)
    outs = remat_p.bind(*extra, *args, jaxpr=body, **params)
    return list(outs), [0 if b else None for b in out_b]


remat_p.def_batch(_remat_batch)


def _install_batching() -> None:
    from ferrax._interpreters import batching

    batching.defvectorized(stop_gradient_p)


_install_batching()
