"""The differentiation API, with JAX's names, conventions and errors: ``jvp``
(forward mode, online), ``linearize`` (the JVP partially evaluated: primal values
computed now, the tangent computation recorded as a linear jaxpr), ``vjp`` (that jaxpr
transposed by the Rust pass), ``grad`` and ``value_and_grad``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax._array import Array
from ferrax._core import ConcreteArray, aval_of, user_location
from ferrax import _ir
from ferrax._interpreters import ad
from ferrax._interpreters.partial_eval import Recipe, trace_linear
from ferrax._staging import StagingTrace
from ferrax.errors import PassError, ReverseModeError
from ferrax.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["grad", "jvp", "linearize", "value_and_grad", "vjp"]


def _check_callable(fun: Any, api: str) -> None:
    if not callable(fun):
        raise TypeError(f"{api}: expected a callable value, got {fun!r:.60}, at {user_location()}")


def _tangent_value(t: Any, aval: Any) -> Any:
    """An output tangent as the user sees it: zeros materialized, float0 for integers."""
    if not ad.is_differentiable(aval.dtype):
        return np.zeros(aval.shape, dtype=ad.float0)
    if type(t) is ad.Zero:
        return ad.instantiate(t)
    return t


def _leaf_dtype(x: Any) -> np.dtype[Any]:
    """A tangent's or cotangent's dtype as ferrax types it (float64 NumPy values are
    float32 without x64, as JAX canonicalizes them); float0 stays float0."""
    if isinstance(x, np.ndarray) and x.dtype == ad.float0:
        return ad.float0
    return aval_of(x).dtype


def _check_tangent(i: int, primal: Any, tangent: Any) -> Any:
    """The input tangent for one primal leaf, checked as JAX checks it."""
    p = aval_of(primal)
    t_dtype = _leaf_dtype(tangent)
    t_shape = tuple(np.shape(tangent))
    if not ad.is_differentiable(p.dtype):
        if t_dtype != ad.float0:
            raise TypeError(
                "primal and tangent arguments to ferrax.jvp do not match; dtypes must be equal, "
                f"or in case of int/bool primal dtype the tangent dtype must be float0. Got primal "
                f"dtype {p.dtype} and so expected tangent dtype float0, but got tangent dtype "
                f"{t_dtype} instead (leaf {i}), at {user_location()}"
            )
        if t_shape != p.shape:
            raise ValueError(
                f"ferrax.jvp called with different primal and tangent shapes; got primal shape "
                f"{p.shape} and tangent shape {t_shape} (leaf {i}), at {user_location()}"
            )
        return ad.Zero(p)
    t = aval_of(tangent)
    if t.dtype != p.dtype:
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp do not match; dtypes must be equal, "
            f"or in case of int/bool primal dtype the tangent dtype must be float0. Got primal "
            f"dtype {p.dtype} and tangent dtype {t.dtype} (leaf {i}), at {user_location()}"
        )
    if t.shape != p.shape:
        raise ValueError(
            f"ferrax.jvp called with different primal and tangent shapes; got primal shape "
            f"{p.shape} and tangent shape {t.shape} (leaf {i}), at {user_location()}"
        )
    return tangent


def jvp(
    fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, ...]:
    """Forward-mode derivative: ``fun(*primals)`` and its directional derivative along
    ``tangents`` (a tuple or list like ``primals``, one tangent per array leaf, of the
    leaf's shape and dtype; ``float0`` for integer and boolean leaves). Returns
    ``(primals_out, tangents_out)``, plus ``aux`` with ``has_aux``."""
    _check_callable(fun, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp must be tuples or lists; found "
            f"{type(primals).__name__} and {type(tangents).__name__}, at {user_location()}"
        )
    flat_p, tree_p = tree_flatten(primals)
    flat_t, tree_t = tree_flatten(tangents)
    if tree_p != tree_t:
        raise TypeError(
            "primal and tangent arguments to ferrax.jvp must have the same tree structure; "
            f"primals have tree structure {tree_p} whereas tangents have tree structure "
            f"{tree_t}, at {user_location()}"
        )
    # A tangent takes its primal's weak type, as it does in JAX's jvp (through
    # jax.numpy's promotion, which converts it along with the primal).
    checked = [_like_primal(_check_tangent(i, p, t), p) for i, (p, t) in enumerate(zip(flat_p, flat_t))]
    flat_fun, cell = _flatten_fun(fun, tree_p, has_aux, "jvp")
    p_out, t_out = ad.jvp_flat(flat_fun, list(flat_p), checked)
    out_tree = cell[0]
    t_values = [_tangent_value(t, aval_of(p)) for t, p in zip(t_out, p_out)]
    p_values = [p if isinstance(p, Array) else ConcreteArray(np.asarray(p)) for p in p_out]
    result = (tree_unflatten(out_tree, p_values), tree_unflatten(out_tree, t_values))
    if has_aux:
        return (*result, _strip_aux(cell[1]))
    return result


# ------------------------------------------------------------------------ reverse mode


def _run_linear(jaxpr: _ir.Jaxpr, args: list[Any]) -> list[Any]:
    """Evaluates a constant-free jaxpr under the active transformations. While staging
    (``make_jaxpr``/``jit`` of a gradient) with nothing above the staging trace, its
    equations are copied into the staged jaxpr by Rust in one call."""
    from ferrax._core import Tracer, _state
    from ferrax._jit import eval_jaxpr
    from ferrax._staging import JaxprTracer

    dynamic = _state.dynamic
    if dynamic:
        main = dynamic[-1]
        trace = main.trace
        level = main.level
        for x in args:
            if isinstance(x, Tracer) and x._trace.main.level > level:
                break
        else:
            assert isinstance(trace, StagingTrace)
            # (The residuals are mostly the staging trace's own tracers: kept as they are.)
            raised = [x if isinstance(x, Tracer) and x._trace.main is main else trace.full_raise(x) for x in args]
            return list(trace.builder.inline_traced(jaxpr, raised, JaxprTracer, trace))
    return eval_jaxpr(jaxpr, [], *args)


class _Linearized:
    """A function's primal outputs and the recorded linear map of its JVP, flat."""

    __slots__ = ("in_avals", "diff", "primals_out", "out_avals", "out_unknown", "out_known", "recipe", "_transposed")

    def __init__(self, flat_fun: Callable[..., list[Any]], flat_primals: list[Any], weak_tangents: bool = False) -> None:
        self.in_avals = [aval_of(p) for p in flat_primals]
        self.diff = [ad.is_differentiable(a.dtype) for a in self.in_avals]
        # linearize's tangents are strongly typed (a weak primal's too), vjp's have their
        # primal's weak type: as JAX types them (the weak types of results follow).
        tangent_avals = [
            _ir.ShapedArray(a.shape, a.dtype, a.weak_type and weak_tangents)
            for a, d in zip(self.in_avals, self.diff)
            if d
        ]

        def fun(unknowns: list[Any]) -> tuple[list[Any], list[Any]]:
            it = iter(unknowns)
            tangents = [next(it) if d else ad.Zero(a) for a, d in zip(self.in_avals, self.diff)]
            return ad.jvp_flat(flat_fun, flat_primals, tangents)

        self.primals_out, self.out_known, self.out_unknown, self.recipe = self._trace(fun, tangent_avals)
        self.out_avals = [aval_of(p) for p in self.primals_out]
        self._transposed: _ir.Jaxpr | None = None

    @staticmethod
    def _trace(fun: Callable[[list[Any]], tuple[list[Any], list[Any]]], avals: list[_ir.ShapedArray]) -> tuple[list[Any], list[Any], list[bool], Recipe]:
        return trace_linear(fun, avals)

    def tangents_out(self, tangents: Sequence[Any]) -> list[Any]:
        """The linear map applied to the differentiable inputs' tangents."""
        from ferrax._jit import eval_jaxpr

        recorded = iter(eval_jaxpr(self.recipe.jaxpr, self.recipe.residuals, *tangents))
        outs = []
        for known, unknown, aval in zip(self.out_known, self.out_unknown, self.out_avals):
            outs.append(next(recorded) if unknown else _tangent_value(known, aval))
        return outs

    def cotangents_in(self, cotangents: Sequence[Any]) -> list[Any]:
        """The transposed map: output cotangents to the differentiable inputs' ones."""
        from ferrax._jit import eval_jaxpr

        if self._transposed is None:
            jaxpr = self.recipe.jaxpr
            n_res = len(jaxpr.constvars)
            flat = _ir.consts_to_invars(jaxpr)
            try:
                self._transposed = _ir.transpose(flat, [False] * n_res + [True] * len(jaxpr.invars))
            except PassError as e:
                if isinstance(e.__cause__, (TypeError, ValueError)):
                    # A user's rule failed (a custom_vjp bwd returning the wrong
                    # structure): its own error, as JAX raises it.
                    raise e.__cause__ from None
                lead = ""
                if "(while)" in str(e):
                    lead = (
                        "Reverse-mode differentiation does not work for lax.while_loop (nor "
                        "fori_loop with traced bounds): use lax.scan, or lax.fori_loop with "
                        "static (Python int) bounds, which becomes a scan.\n  "
                    )
                raise ReverseModeError(f"{lead}{e}\n  (reverse-mode differentiation, at {user_location()})") from e
        cts = [ct for ct, u in zip(cotangents, self.out_unknown) if u]
        return _run_linear(self._transposed, [*self.recipe.residuals, *cts])


def _flatten_fun(fun: Callable[..., Any], in_tree: Any, has_aux: bool, api: str) -> tuple[Callable[..., list[Any]], list[Any]]:
    """``fun`` on flat leaves returning flat outputs; the cell gets the output tree
    (and the aux value with ``has_aux``)."""
    cell: list[Any] = []

    def flat_fun(*leaves: Any) -> list[Any]:
        out = fun(*tree_unflatten(in_tree, list(leaves)))
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(
                    f"{api} with has_aux=True requires the function to return a pair "
                    f"(output, aux), got {type(out).__name__}, at {user_location()}"
                )
            out, aux = out
            cell.append(aux)
        flat_out, out_tree = tree_flatten(out)
        cell.insert(0, out_tree)
        return flat_out

    return flat_fun, cell


def _strip_aux(aux: Any) -> Any:
    """Aux outputs as plain values: differentiation tracers of transformations that have
    ended give their primal values."""
    from ferrax._core import _state

    live = {id(m) for m in _state.stack}
    leaves, tree = tree_flatten(aux)
    out = []
    for x in leaves:
        while isinstance(x, ad.JVPTracer) and id(x._trace.main) not in live:
            x = x.primal
        out.append(x)
    return tree_unflatten(tree, out)


def linearize(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``fun(*primals)`` and its JVP as a function of the tangents alone: the primal
    values are computed once, the tangent computation is recorded as a linear jaxpr.
    Returns ``(primals_out, f_jvp)``, plus ``aux`` with ``has_aux``."""
    _check_callable(fun, "linearize")
    flat, in_tree = tree_flatten(primals)
    flat_fun, cell = _flatten_fun(fun, in_tree, has_aux, "linearize")
    lin = _Linearized(flat_fun, flat)
    out_tree = cell[0]

    def f_jvp(*tangents: Any) -> Any:
        flat_t, t_tree = tree_flatten(tangents)
        if t_tree != in_tree:
            raise TypeError(
                f"linearized function called with tangent structure {t_tree}, but the primals "
                f"had structure {in_tree}, at {user_location()}"
            )
        checked = [_check_linear_tangent(i, p, t) for i, (p, t) in enumerate(zip(flat, flat_t))]
        diff_t = [t for t, d in zip(checked, lin.diff) if d]
        return tree_unflatten(out_tree, lin.tangents_out(diff_t))

    out = tree_unflatten(out_tree, lin.primals_out)
    if has_aux:
        return out, f_jvp, _strip_aux(cell[1])
    return out, f_jvp


def _check_linear_tangent(i: int, primal: Any, tangent: Any) -> Any:
    """A tangent given to a linearized function: as jvp checks it, but a type mismatch is
    a ValueError (JAX's)."""
    try:
        return _check_tangent(i, primal, tangent)
    except TypeError as e:
        raise ValueError(str(e).replace("ferrax.jvp", "the linearized function")) from None


def _check_cotangent(i: int, ct: Any, aval: _ir.ShapedArray) -> Any:
    want = ad.float0 if not ad.is_differentiable(aval.dtype) else aval.dtype
    got_dtype = _leaf_dtype(ct)
    got_shape = tuple(np.shape(ct))
    if got_shape != tuple(aval.shape) or (got_dtype != want and want != ad.float0):
        got = f"{got_dtype}{list(got_shape)}"
        raise ValueError(
            f"unexpected type (shape/dtype) for argument to the vjp function: got {got}, but "
            f"expected {aval.str_short()} because the corresponding output of the function "
            f"(leaf {i}) has type {aval.str_short()}, at {user_location()}"
        )
    return ct


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``fun(*primals)`` and its VJP: a function taking a cotangent shaped like the
    output and returning one cotangent per primal argument (a tuple). Returns
    ``(primals_out, vjp_fn)``, plus ``aux`` with ``has_aux``."""
    _check_callable(fun, "vjp")
    flat, in_tree = tree_flatten(primals)
    flat_fun, cell = _flatten_fun(fun, in_tree, has_aux, "vjp")
    lin = _Linearized(flat_fun, flat, weak_tangents=True)
    out_tree = cell[0]

    def vjp_fn(*args: Any) -> tuple[Any, ...]:
        if len(args) != 1:
            raise TypeError(
                f"the vjp function takes one cotangent (shaped like the function's output), "
                f"got {len(args)} arguments, at {user_location()}"
            )
        flat_ct, ct_tree = tree_flatten(args[0])
        if ct_tree != out_tree:
            raise ValueError(
                f"Tree structure of cotangent input {ct_tree}, does not match structure of "
                f"primal output {out_tree}, at {user_location()}"
            )
        cts = [_check_cotangent(i, ct, a) for i, (ct, a) in enumerate(zip(flat_ct, lin.out_avals))]
        cts = [ct if d else None for ct, d in zip(cts, (ad.is_differentiable(a.dtype) for a in lin.out_avals))]
        diff_cts = iter(lin.cotangents_in(cts))
        out = [next(diff_cts) if d else ad.zeros_float0(a) for a, d in zip(lin.in_avals, lin.diff)]
        return tuple(tree_unflatten(in_tree, out))

    out = tree_unflatten(out_tree, lin.primals_out)
    if has_aux:
        return out, vjp_fn, _strip_aux(cell[1])
    return out, vjp_fn


def _like_primal(g: Any, primal: Any) -> Any:
    """A gradient leaf with its primal's weak type."""
    p = aval_of(primal)
    if type(g) is ad.Zero or not ad.is_differentiable(p.dtype) or aval_of(g).weak_type == p.weak_type:
        return g
    from ferrax._lax.elementwise import convert_element_type

    return convert_element_type(g, p.dtype, weak_type=p.weak_type)


def _argnums(argnums: Any, nargs: int, api: str) -> tuple[int, ...]:
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        nums: tuple[Any, ...] = (argnums,)
    elif isinstance(argnums, (tuple, list)):
        nums = tuple(argnums)
    else:
        nums = ()
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise TypeError(
            f"argnums must be an int or a tuple of ints, got {argnums!r}, at {user_location()}"
        )
    for n in nums:
        if n < -nargs:
            raise ValueError(
                f"argnums={argnums} refers to argument {n}, but the function was called with "
                f"only {nargs} positional arguments, at {user_location()}"
            )
        if n >= nargs:
            raise TypeError(
                f"differentiating with respect to argnums={argnums} requires at least "
                f"{max(nums) + 1 if n >= 0 else -n} positional arguments to be passed by the "
                f"caller, but got only {nargs} positional arguments, at {user_location()}"
            )
    return tuple(n % nargs for n in nums)


def wraps(wrapped: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Names a transformed function after the function it transforms (JAX's
    ``util.wraps``): ``jit(grad(f))`` stages a jit named after ``f``."""

    from ferrax._jit import _fun_name

    def wrapper(fun: Callable[..., Any]) -> Callable[..., Any]:
        try:
            fun.__name__ = _fun_name(wrapped)
            fun.__qualname__ = getattr(wrapped, "__qualname__", fun.__name__)
            fun.__module__ = getattr(wrapped, "__module__", "<unknown module>")
            fun.__doc__ = getattr(wrapped, "__doc__", "") or ""
            fun.__wrapped__ = wrapped  # type: ignore[attr-defined]
        except Exception:  # an object whose attributes cannot be read: the name stays
            pass
        return fun

    return wrapper


def value_and_grad(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, allow_int: bool = False
) -> Callable[..., Any]:
    """A function returning ``fun``'s value and its gradient with respect to the
    arguments ``argnums`` (pytrees of float arrays); ``fun`` must return a real scalar
    (or ``(scalar, aux)`` with ``has_aux``, giving ``((value, aux), grad)``)."""

    _check_callable(fun, "value_and_grad")

    @wraps(fun)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums(argnums, len(args), "grad")
        for n in nums:
            for leaf in tree_flatten(args[n])[0]:
                dtype = aval_of(leaf).dtype
                if not ad.is_differentiable(dtype) and not allow_int:
                    raise TypeError(
                        "grad requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {dtype.name}. If you want to use "
                        "Boolean- or integer-valued inputs, use vjp or set allow_int to True."
                        f" At {user_location()}"
                    )

        def partial(*diff_args: Any) -> Any:
            full = list(args)
            for n, a in zip(nums, diff_args):
                full[n] = a
            return fun(*full, **kwargs)

        res = vjp(partial, *[args[n] for n in nums], has_aux=has_aux)
        out, pullback = res[0], res[1]
        ans = out
        aval = aval_of(ans) if not isinstance(ans, (tuple, list, dict)) else None
        if aval is None or aval.shape != ():
            shape = aval.shape if aval is not None else type(ans).__name__
            raise TypeError(
                f"Gradient only defined for scalar-output functions. Output had shape: {shape}, "
                f"at {user_location()}"
            )
        if not ad.is_differentiable(aval.dtype):
            raise TypeError(
                "grad requires real-valued outputs (output dtype that is a sub-dtype of "
                f"np.floating), but got {aval.dtype.name}. For holomorphic differentiation, "
                f"pass holomorphic=True. At {user_location()}"
            )
        g = pullback(ConcreteArray(np.ones((), aval.dtype), aval.weak_type))
        # As JAX: a gradient has its argument's type, weak type included.
        grads = g[0] if isinstance(argnums, int) else tuple(g)
        if has_aux:
            return (ans, res[2]), grads
        return ans, grads

    return value_and_grad_f


def grad(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, allow_int: bool = False
) -> Callable[..., Any]:
    """A function returning the gradient of ``fun`` (a real scalar function) with respect
    to the arguments ``argnums``; with ``has_aux``, ``(gradient, aux)``."""
    _check_callable(fun, "grad")
    vg = value_and_grad(fun, argnums, has_aux, allow_int)

    @wraps(fun)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        if has_aux:
            return g, value[1]
        return g

    return grad_f
