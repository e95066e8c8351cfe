"""User-defined derivatives and checkpoints: ``custom_jvp``, ``custom_vjp`` and
``checkpoint`` (``remat``), as JAX defines them (their primitives and rules are in
``ferrax._lax.custom``).

A ``custom_jvp`` function is traced once per call into the ``call_jaxpr`` of a
``custom_jvp_call`` equation that also carries the user's rule: evaluating or staging it
runs ``call_jaxpr``; differentiating it runs the rule instead (its primal part is known,
its tangent part recorded, as for any primitive). ``custom_vjp`` likewise keeps ``fwd``
and ``bwd`` in a ``custom_vjp_call`` equation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, ParamSpec, TypeVar

from ferrax import _ir
from ferrax._core import aval_of, user_location
from ferrax._interpreters import ad
from ferrax._lax.custom import custom_jvp_call_p, custom_vjp_call_p, remat_p
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_map, tree_unflatten

__all__ = ["checkpoint", "custom_jvp", "custom_vjp", "remat"]

P = ParamSpec("P")
R = TypeVar("R")


def _fun_name(f: Callable[..., Any]) -> str:
    return getattr(f, "__name__", None) or type(f).__name__


def _merge_nondiff(fixed: Sequence[Any], dyn: Sequence[Any], nondiff: tuple[int, ...]) -> list[Any]:
    it_f, it_d = iter(fixed), iter(dyn)
    n = len(fixed) + len(dyn)
    return [next(it_f) if i in nondiff else next(it_d) for i in range(n)]


class _Traced(NamedTuple):
    """A call of a function whose arguments ``nondiff`` are passed as they are: those
    arguments (``fixed``), the others' leaves, and the function traced on them."""

    nondiff: tuple[int, ...]
    fixed: list[Any]
    dyn: list[Any]
    flat: list[Any]
    in_tree: PyTreeDef
    closed: _ir.ClosedJaxpr
    out_tree: PyTreeDef


def _trace_call(fun: Callable[..., Any], args: Sequence[Any], static: Sequence[int]) -> _Traced:
    from ferrax._staging import trace_to_jaxpr

    nondiff = tuple(i % len(args) for i in static) if args else ()
    fixed = [args[i] for i in nondiff]
    dyn = [a for i, a in enumerate(args) if i not in nondiff]
    flat, in_tree = tree_flatten(tuple(dyn))

    def call(*dyn_args: Any) -> Any:
        return fun(*_merge_nondiff(fixed, dyn_args, nondiff))

    closed, out_tree = trace_to_jaxpr(call, [aval_of(x) for x in flat], in_tree)
    return _Traced(nondiff, fixed, dyn, flat, in_tree, closed, out_tree)


def _types_text(avals: Sequence[_ir.ShapedArray]) -> str:
    return ", ".join(a.str_short() for a in avals)


# -------------------------------------------------------------------------- custom_jvp


class custom_jvp(Generic[P, R]):
    """A function with a forward-mode derivative rule of its own (JAX's ``custom_jvp``).

    Define the rule with :meth:`defjvp` (``jvp(primals, tangents) -> (primal_out,
    tangent_out)``) or :meth:`defjvps` (one function per argument). Reverse mode uses
    the rule too (its tangent part is transposed). ``nondiff_argnums`` are passed to the
    function as they are and to the rule first: ``jvp(*nondiff_args, primals, tangents)``.
    """

    def __init__(self, fun: Callable[P, R], nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun: Callable[..., Any] = fun
        self.nondiff_argnums = tuple(sorted(nondiff_argnums))
        self.jvp: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        """Sets the rule; returns it (usable as a decorator)."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """Sets the rule from one function per argument: ``jvps[i](t_i, primal_out,
        *primals)`` is the output tangent due to argument ``i`` (None: no dependence)."""
        from ferrax._lax.elementwise import add

        def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
            out = self.__call__(*primals)  # type: ignore[call-arg]
            total: Any = None
            for fn, t in zip(jvps, tangents):
                if fn is None:
                    continue
                part = fn(t, out, *primals)
                total = part if total is None else tree_map(add, total, part)
            if total is None:
                total = tree_map(lambda o: ad.instantiate(ad.Zero(aval_of(o))), out)
            return out, total

        # JAX's name for the rule defjvps makes.
        jvp.__name__ = "jvp"
        self.defjvp(jvp)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise TypeError(
                f"custom_jvp function {_fun_name(self.fun)} takes positional arguments only "
                f"(got keywords {sorted(kwargs)}), at {user_location()}"
            )
        if self.jvp is None:
            raise AttributeError(
                f"No JVP defined for custom_jvp function {_fun_name(self.fun)} using defjvp, "
                f"at {user_location()}"
            )
        nondiff, fixed, dyn, flat, in_tree, closed, out_tree = _trace_call(self.fun, args, self.nondiff_argnums)
        rule = self.jvp
        fun_name = _fun_name(self.fun)

        def flat_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            p_tree = tree_unflatten(in_tree, list(primals))
            t_tree = tree_unflatten(in_tree, list(tangents))
            out = rule(*fixed, tuple(p_tree), tuple(t_tree))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(
                    f"Custom JVP rule {_fun_name(rule)} for function {fun_name} must produce a "
                    f"pair (list or tuple of length two) representing primal and tangent "
                    f"outputs, but got {out!r:.80}, at {user_location()}"
                )
            p_out, t_out = out
            p_flat, p_tree_out = tree_flatten(p_out)
            t_flat, t_tree_out = tree_flatten(t_out)
            if p_tree_out != t_tree_out:
                raise TypeError(
                    f"Custom JVP rule {_fun_name(rule)} for function {fun_name} must produce "
                    f"primal and tangent outputs with equal container (pytree) structures, "
                    f"but got {p_tree_out} and {t_tree_out} respectively, at {user_location()}"
                )
            if p_tree_out != out_tree:
                raise TypeError(
                    f"Custom JVP rule {_fun_name(rule)} for function {fun_name} must produce "
                    f"primal outputs with the structure of the function's outputs, {out_tree}, "
                    f"but got {p_tree_out}, at {user_location()}"
                )
            for p, t, want in zip(p_flat, t_flat, closed.out_avals):
                pa, ta = aval_of(p), aval_of(t)
                if pa.shape != want.shape or pa.dtype != want.dtype:
                    raise TypeError(
                        f"Custom JVP rule {_fun_name(rule)} for function {fun_name} must "
                        f"produce primal outputs of the function's types: expected "
                        f"{want.str_short()}, got {pa.str_short()}, at {user_location()}"
                    )
                if ad.is_differentiable(want.dtype) and (ta.shape != want.shape or ta.dtype != want.dtype):
                    raise TypeError(
                        "Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {want.str_short()} (tangent "
                        f"type of {want.str_short()}) but got {ta.str_short()}, at {user_location()}"
                    )
            return p_flat, t_flat

        flat_jvp.__name__ = _fun_name(rule)
        body, consts = ad.hoist_consts(closed)
        outs = custom_jvp_call_p.bind(
            *consts, *flat, call_jaxpr=body, jvp=flat_jvp, num_consts=len(consts),
            symbolic_zeros=self.symbolic_zeros, name=fun_name,
        )
        return tree_unflatten(out_tree, list(outs))  # type: ignore[no-any-return]


# -------------------------------------------------------------------------- custom_vjp


class custom_vjp(Generic[P, R]):
    """A function with a reverse-mode derivative rule of its own (JAX's ``custom_vjp``):
    ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, cotangent_out) ->
    cotangents`` (a tuple, one per argument), set with :meth:`defvjp`."""

    def __init__(self, fun: Callable[P, R], nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun: Callable[..., Any] = fun
        self.nondiff_argnums = tuple(sorted(nondiff_argnums))
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any], symbolic_zeros: bool = False) -> None:
        """Sets the forward and backward functions."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise TypeError(
                f"custom_vjp function {_fun_name(self.fun)} takes positional arguments only "
                f"(got keywords {sorted(kwargs)}), at {user_location()}"
            )
        if self.fwd is None or self.bwd is None:
            raise AttributeError(
                f"No VJP defined for custom_vjp function {_fun_name(self.fun)} using defvjp, "
                f"at {user_location()}"
            )
        nondiff, fixed, dyn, flat, in_tree, closed, out_tree = _trace_call(self.fun, args, self.nondiff_argnums)
        fwd, bwd = self.fwd, self.bwd
        fun_name = _fun_name(self.fun)
        n_args = len(dyn)

        def flat_fwd(*primals: Any) -> tuple[list[Any], Any]:
            out, res = fwd(*_merge_nondiff(fixed, tree_unflatten(in_tree, list(primals)), nondiff))
            out_flat, tree = tree_flatten(out)
            if tree != out_tree:
                raise TypeError(
                    f"Custom VJP fwd rule {_fun_name(fwd)} for function {fun_name} must produce "
                    f"a pair (out, residuals) whose out has the structure of the function's "
                    f"output, {out_tree}, but got {tree}, at {user_location()}"
                )
            return out_flat, res

        def flat_bwd(res: Any, cts: Sequence[Any]) -> list[Any]:
            out = bwd(*fixed, res, tree_unflatten(out_tree, list(cts)))
            if not isinstance(out, (tuple, list)) or len(out) != n_args:
                got = tree_flatten(out)[1] if isinstance(out, (tuple, list)) else type(out).__name__
                raise TypeError(
                    "Custom VJP bwd rule must produce an output with the same container "
                    "(pytree) structure as the args tuple of the primal function, and in "
                    "particular must produce a tuple of length equal to the number of "
                    f"arguments to the primal function, but got bwd output structure {got} for "
                    f"primal input structure {in_tree}, at {user_location()}"
                )
            ct_flat, tree = tree_flatten(tuple(out))
            if tree != in_tree:
                raise TypeError(
                    "Custom VJP bwd rule must produce an output with the same container "
                    f"(pytree) structure as the args tuple of the primal function, but got bwd "
                    f"output structure {tree} for primal input structure {in_tree}, at "
                    f"{user_location()}"
                )
            return ct_flat

        flat_fwd.__name__ = _fun_name(fwd)
        flat_bwd.__name__ = _fun_name(bwd)
        body, consts = ad.hoist_consts(closed)
        outs = custom_vjp_call_p.bind(
            *consts, *flat, call_jaxpr=body, fwd=flat_fwd, bwd=flat_bwd, num_consts=len(consts),
            symbolic_zeros=self.symbolic_zeros, name=fun_name,
        )
        return tree_unflatten(out_tree, list(outs))  # type: ignore[no-any-return]


# ------------------------------------------------------------- stop_gradient, checkpoint


def checkpoint(
    fun: Callable[P, R], *, prevent_cse: bool = True, policy: Callable[..., bool] | None = None,
    static_argnums: int | Sequence[int] = (),
) -> Callable[P, R]:
    """``fun`` whose intermediate values are not kept for reverse mode: the backward
    pass recomputes them from the inputs (a ``remat2`` equation, as JAX's
    ``checkpoint``)."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise TypeError(f"checkpoint: keyword arguments are not supported, at {user_location()}")
        traced = _trace_call(fun, args, static)
        flat, closed, out_tree = traced.flat, traced.closed, traced.out_tree
        body, consts = ad.hoist_consts(closed)
        outs = remat_p.bind(
            *consts, *flat, jaxpr=body, prevent_cse=prevent_cse, differentiated=False, policy=policy
        )
        return tree_unflatten(out_tree, list(outs))  # type: ignore[no-any-return]

    return wrapped


remat = checkpoint
