"""Dense Jacobians and Hessians, as JAX's: ``jacfwd`` (``vmap`` of ``jvp`` over the
standard basis of the inputs: one column per input element), ``jacrev`` (``vmap`` of the
VJP over the standard basis of the outputs: one row per output element) and ``hessian``
(``jacfwd`` of ``jacrev``).

A Jacobian is a pytree of pytrees: for each output leaf of shape ``o``, the inputs' tree
(the argument at ``argnums``, or the tuple of them) with, for an input leaf of shape
``i``, the block of shape ``o + i``, of the output leaf's dtype (``jacfwd``) or the input
leaf's (``jacrev``), weak types included, as JAX types them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax._autodiff import _check_callable, jvp, vjp, wraps
from ferrax._core import ConcreteArray, Tracer, aval_of, user_location
from ferrax._interpreters import ad
from ferrax import _core
from ferrax._lax._operands import bind1
from ferrax._lax.elementwise import convert_element_type, convert_element_type_p
from ferrax._lax.structural import reshape
from ferrax._vmap import vmap
from ferrax import _ir, dtypes
from ferrax.tree_util import tree_flatten, tree_unflatten

__all__ = ["hessian", "jacfwd", "jacrev"]


def _static_argnums(argnums: Any) -> int | tuple[int, ...]:
    """``argnums`` as an int or a tuple of ints (checked when the transformation is made,
    as JAX does)."""
    try:
        return operator.index(argnums)
    except TypeError:
        pass
    try:
        return tuple(operator.index(n) for n in argnums)
    except TypeError:
        raise TypeError(
            f"argnums must be an int or a sequence of ints, got {argnums!r}, at {user_location()}"
        ) from None


def _positions(argnums: int | tuple[int, ...], nargs: int) -> tuple[int, ...]:
    """The argument positions ``argnums`` names, in range for ``nargs`` arguments (JAX's
    ValueError otherwise)."""
    nums = (argnums,) if isinstance(argnums, int) else argnums
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(
                "Positional argument indices, e.g. for `argnums`, must have value greater than "
                f"or equal to -len(args) and less than len(args), but got value {n} for "
                f"len(args) == {nargs}, at {user_location()}"
            )
    return tuple(n % nargs for n in nums)


def _where(arg: int, leaf: int, n_leaves: int) -> str:
    """Names an input leaf for error messages: the argument and, in a pytree, the leaf."""
    return f"argument {arg}" if n_leaves == 1 else f"argument {arg} (leaf {leaf} of its pytree)"


def _input_avals(api: str, args: Sequence[Any], nums: tuple[int, ...]) -> list[_ir.ShapedArray]:
    """The abstract values of the leaves of the arguments ``nums``; a TypeError naming
    the argument for a leaf that is not an array."""
    avals = []
    for n in nums:
        leaves = tree_flatten(args[n])[0]
        for k, x in enumerate(leaves):
            try:
                avals.append(aval_of(x))
            except TypeError:
                raise TypeError(
                    f"{api}: {_where(n, k, len(leaves))} of type {type(x).__name__} is not a valid "
                    f"ferrax type (arrays, scalars, or pytrees of them), at {user_location()}"
                ) from None
    return avals


def _argument_of(args: Sequence[Any], nums: tuple[int, ...], i: int) -> str:
    """Names flat input leaf ``i`` of the arguments ``nums``."""
    for n in nums:
        count = len(tree_flatten(args[n])[0])
        if i < count:
            return _where(n, i, count)
        i -= count
    raise AssertionError("leaf index out of range")


def _no_complex(api: str, what: str, dtype: np.dtype[Any], place: str) -> TypeError:
    return TypeError(
        f"{api} with holomorphic=True requires {what} with complex dtype, but got {dtype.name} "
        f"for {place} (ferrax has no complex dtypes, so holomorphic differentiation is not "
        f"available), at {user_location()}"
    )


def _std_basis(avals: Sequence[_ir.ShapedArray]) -> list[Any]:
    """The standard basis of the space of these leaves, one array per leaf: leaf ``j``'s
    part has shape ``(n,) + shape_j`` (``n`` the total size), its dtype and weak type.

    Staged (under ``make_jaxpr`` or ``jit``) it is computed in the jaxpr as JAX's is: an
    ``eye`` of the leaves' common dtype, split per leaf, reshaped and converted (always
    a ``convert_element_type``, as JAX writes one). Eagerly it is a NumPy constant."""
    sizes = [math.prod(a.shape) for a in avals]
    n = sum(sizes)
    if _core._state.dynamic:
        from ferrax import numpy as fnp

        common, _ = dtypes.promote([(a.dtype, False) for a in avals])
        parts = fnp.split(fnp.eye(n, dtype=common), np.cumsum(sizes[:-1]), axis=1)
        return [
            bind1(convert_element_type_p, reshape(part, (n, *a.shape)), new_dtype=a.dtype, weak_type=a.weak_type)
            for part, a in zip(parts, avals)
        ]
    out: list[Any] = []
    offset = 0
    for a, size in zip(avals, sizes):
        part = np.zeros((n, size), dtype=a.dtype)
        part[np.arange(offset, offset + size), np.arange(size)] = 1
        out.append(ConcreteArray(part.reshape((n, *a.shape)), a.weak_type))
        offset += size
    return out


def _unravel(x: Any, axis: int, shapes: Sequence[tuple[int, ...]], examples: Sequence[_ir.ShapedArray]) -> list[Any]:
    """``x`` split along ``axis`` into one block per leaf (one ``split``, its sizes
    those of ``shapes``), each block's axis reshaped to the leaf's shape and converted to
    its example's dtype and weak type, as JAX unravels a Jacobian."""
    from ferrax import numpy as fnp

    full = tuple(aval_of(x).shape)
    sizes = [math.prod(s) for s in shapes]
    parts = fnp.split(x, np.cumsum(sizes[:-1]), axis=axis)
    return [
        convert_element_type(reshape(part, full[:axis] + shape + full[axis + 1 :]), e.dtype, weak_type=e.weak_type)
        for part, shape, e in zip(parts, shapes, examples)
    ]


def _float0_as(t: Any, aval: _ir.ShapedArray) -> Any:
    """A float0 tangent or cotangent (of an integer value) as zeros of the value's dtype,
    so it can be batched and converted as JAX's are."""
    if isinstance(t, np.ndarray) and t.dtype == ad.float0:
        return ConcreteArray(np.zeros(aval.shape, aval.dtype), aval.weak_type)
    return t


def _partial(fun: Callable[..., Any], args: Sequence[Any], nums: tuple[int, ...], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """``fun`` as a function of the arguments at ``nums`` alone."""

    def f_partial(*dyn: Any) -> Any:
        full = list(args)
        for n, a in zip(nums, dyn):
            full[n] = a
        return fun(*full, **kwargs)

    return f_partial


def jacfwd(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` with respect to the arguments ``argnums`` (an int or a
    tuple of ints; pytrees of float arrays), by forward mode: one JVP per input element,
    vectorized with ``vmap``. With ``has_aux``, ``fun`` returns ``(output, aux)`` and the
    result is ``(jacobian, aux)``. ``holomorphic=True`` needs complex inputs, which
    ferrax does not have (a TypeError, as JAX raises for real inputs)."""
    _check_callable(fun, "jacfwd")
    spec = _static_argnums(argnums)

    @wraps(fun)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        nums = _positions(spec, len(args))
        avals = _input_avals("jacfwd", args, nums)
        for i, a in enumerate(avals):
            if holomorphic:
                raise _no_complex("jacfwd", "inputs", a.dtype, _argument_of(args, nums, i))
            if not dtypes.is_float(a.dtype):
                raise TypeError(
                    "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                    f"np.floating), but got {a.dtype.name} for {_argument_of(args, nums, i)}. For "
                    "differentiation of functions of integer inputs, use ferrax.jvp directly. "
                    f"At {user_location()}"
                )
        dyn = tuple(args[n] for n in nums)
        dyn_tree = tree_flatten(dyn)[1]
        f_partial = _partial(fun, args, nums, kwargs)

        def pushfwd(*tangents: Any) -> Any:
            res = jvp(f_partial, dyn, tree_unflatten(dyn_tree, list(tangents)), has_aux=has_aux)
            y, t = res[0], res[1]
            y_flat, y_tree = tree_flatten(y)
            t_flat = [_float0_as(ti, aval_of(yi)) for ti, yi in zip(tree_flatten(t)[0], y_flat)]
            if not has_aux:
                return y, tree_unflatten(y_tree, t_flat)
            # Aux leaves that are not traced values (Python numbers, NumPy arrays) come
            # back as they are, as JAX's vmap returns them; the others go through vmap.
            aux_flat, aux_tree = tree_flatten(res[2])
            aux_cell[:] = [aux_tree, [None if isinstance(a, Tracer) else a for a in aux_flat]]
            return y, tree_unflatten(y_tree, t_flat), [a for a in aux_flat if isinstance(a, Tracer)]

        aux_cell: list[Any] = []
        out_axes = (None, -1, None) if has_aux else (None, -1)
        res = vmap(pushfwd, out_axes=out_axes)(*_std_basis(avals))
        y_flat, y_tree = tree_flatten(res[0])
        y_avals = [aval_of(y) for y in y_flat]
        if holomorphic:  # reached only without inputs
            for i, a in enumerate(y_avals):
                raise _no_complex("jacfwd", "outputs", a.dtype, f"output leaf {i}")
        jac_flat = tree_flatten(res[1])[0]
        example_tree = tree_flatten(dyn[0] if isinstance(spec, int) else dyn)[1]
        rows = []
        for y_aval, jac in zip(y_avals, jac_flat):
            blocks = _unravel(jac, len(y_aval.shape), [tuple(a.shape) for a in avals], [y_aval] * len(avals))
            rows.append(tree_unflatten(example_tree, blocks))
        jac_tree = tree_unflatten(y_tree, rows)
        if not has_aux:
            return jac_tree
        traced = iter(res[2])
        aux_tree, kept = aux_cell
        return jac_tree, tree_unflatten(aux_tree, [next(traced) if a is None else a for a in kept])

    return jacfun


def jacrev(
    fun: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable[..., Any]:
    """The Jacobian of ``fun`` with respect to the arguments ``argnums`` (an int or a
    tuple of ints; pytrees of float arrays), by reverse mode: one VJP per output element,
    vectorized with ``vmap``. ``fun``'s outputs must be floating. With ``has_aux``, ``fun``
    returns ``(output, aux)`` and the result is ``(jacobian, aux)``; ``allow_int`` lets
    integer inputs through (their blocks are zeros). ``holomorphic=True`` needs complex
    inputs, which ferrax does not have (a TypeError, as JAX raises for real inputs)."""
    _check_callable(fun, "jacrev")
    spec = _static_argnums(argnums)

    @wraps(fun)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        nums = _positions(spec, len(args))
        avals = _input_avals("jacrev", args, nums)
        for i, a in enumerate(avals):
            if holomorphic:
                raise _no_complex("jacrev", "inputs", a.dtype, _argument_of(args, nums, i))
            if not dtypes.is_float(a.dtype) and not allow_int:
                raise TypeError(
                    "jacrev requires real- or complex-valued inputs (input dtype that is a "
                    f"sub-dtype of np.inexact), but got {a.dtype.name} for "
                    f"{_argument_of(args, nums, i)}. If you want to use Boolean- or integer-"
                    f"valued inputs, use vjp or set allow_int to True. At {user_location()}"
                )
        dyn = tuple(args[n] for n in nums)
        res = vjp(_partial(fun, args, nums, kwargs), *dyn, has_aux=has_aux)
        y, pullback = res[0], res[1]
        y_flat, y_tree = tree_flatten(y)
        y_avals = []
        for i, leaf in enumerate(y_flat):
            a = aval_of(leaf)
            if holomorphic:
                raise _no_complex("jacrev", "outputs", a.dtype, f"output leaf {i}")
            if not dtypes.is_float(a.dtype):
                raise TypeError(
                    "jacrev requires real-valued outputs (output dtype that is a sub-dtype of "
                    f"np.floating), but got {a.dtype.name} for output leaf {i}. For "
                    "differentiation of functions with integer outputs, use ferrax.vjp "
                    f"directly. At {user_location()}"
                )
            y_avals.append(a)

        def pull(*cotangents: Any) -> list[Any]:
            cts = tree_flatten(pullback(tree_unflatten(y_tree, list(cotangents))))[0]
            return [_float0_as(ct, a) for ct, a in zip(cts, avals)]

        cols = vmap(pull)(*_std_basis(y_avals))
        example_tree = tree_flatten(dyn[0] if isinstance(spec, int) else dyn)[1]
        # Each input's column block split by output leaf, as JAX's `_jacrev_unravel`.
        per_input = [_unravel(col, 0, [tuple(y.shape) for y in y_avals], [a] * len(y_avals)) for col, a in zip(cols, avals)]
        rows = [tree_unflatten(example_tree, [blocks[k] for blocks in per_input]) for k in range(len(y_avals))]
        jac_tree = tree_unflatten(y_tree, rows)
        return (jac_tree, res[2]) if has_aux else jac_tree

    return jacfun


def hessian(
    fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False
) -> Callable[..., Any]:
    """The Hessian of ``fun`` with respect to the arguments ``argnums``, dense:
    ``jacfwd(jacrev(fun))``. For an output of shape ``o`` and inputs of shapes ``i`` and
    ``j``, a block has shape ``o + i + j`` (pytrees nest as JAX's: output tree, then the
    inputs' tree twice). With ``has_aux``, ``(hessian, aux)``."""
    _check_callable(fun, "hessian")
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux, holomorphic=holomorphic)

