"""Structured control flow: ``cond``/``switch``, ``while_loop``/``fori_loop`` and
``scan``, as primitives holding sub-jaxprs.

The functions given are traced to jaxprs once, on the types of their operands. Values
they close over become explicit leading operands (closure conversion), so the
primitives' sub-jaxprs have no constants and lower to plain functions. Eagerly, the
primitives run by evaluating their sub-jaxprs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir
from ferrax._array import Array
from ferrax._core import Primitive, aval_of
from ferrax._lax._operands import scalar
from ferrax.errors import TypeCheckError
from ferrax.tree_util import PyTreeDef, tree_flatten, tree_unflatten

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]

cond_p = Primitive.builtin("cond", multiple_results=True)
while_p = Primitive.builtin("while", multiple_results=True)
scan_p = Primitive.builtin("scan", multiple_results=True)


def _eval(closed: _ir.ClosedJaxpr, *args: Any) -> list[Any]:
    from ferrax._jit import eval_jaxpr

    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


@cond_p.def_impl
def _cond_impl(index: Any, *operands: Any, branches: tuple[_ir.ClosedJaxpr, ...]) -> list[Any]:
    i = int(np.clip(int(index), 0, len(branches) - 1))
    return [np.asarray(o) for o in _eval(branches[i], *operands)]


@while_p.def_impl
def _while_impl(*args: Any, cond_jaxpr: _ir.ClosedJaxpr, body_jaxpr: _ir.ClosedJaxpr, cond_nconsts: int, body_nconsts: int) -> list[Any]:
    cond_consts = list(args[:cond_nconsts])
    body_consts = list(args[cond_nconsts : cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts :])
    while bool(np.asarray(_eval(cond_jaxpr, *cond_consts, *carry)[0])):
        carry = _eval(body_jaxpr, *body_consts, *carry)
    return [np.asarray(c) for c in carry]


@scan_p.def_impl
def _scan_impl(
    *args: Any, jaxpr: _ir.ClosedJaxpr, length: int, reverse: bool, num_consts: int, num_carry: int, **_: Any
) -> list[Any]:
    consts = list(args[:num_consts])
    carry = list(args[num_consts : num_consts + num_carry])
    xs = [np.asarray(x) for x in args[num_consts + num_carry :]]
    ys: list[list[Any]] = []
    for t in (reversed(range(length)) if reverse else range(length)):
        outs = _eval(jaxpr, *consts, *carry, *[x[t] for x in xs])
        carry = outs[:num_carry]
        ys.append([np.asarray(y) for y in outs[num_carry:]])
    if reverse:
        ys.reverse()
    y_avals = jaxpr.out_avals[num_carry:]
    stacked = [
        np.stack([step[k] for step in ys]) if ys else np.zeros((0, *a.shape), a.dtype)
        for k, a in enumerate(y_avals)
    ]
    return [np.asarray(c) for c in carry] + stacked


def _trace(fun: Callable[..., Any], avals: Sequence[_ir.ShapedArray], tree: PyTreeDef) -> tuple[_ir.ClosedJaxpr, list[Any], PyTreeDef]:
    """``fun`` traced on these types; its constants become leading inputs. Returns the
    constant-free jaxpr, the constants, and the output structure."""
    from ferrax._staging import trace_to_jaxpr

    closed, out_tree = trace_to_jaxpr(fun, avals, tree)
    hoisted = _ir.ClosedJaxpr(_ir.consts_to_invars(closed.jaxpr), [])
    return hoisted, list(closed.consts), out_tree


def _operand_avals(xs: Sequence[Any]) -> list[_ir.ShapedArray]:
    return [aval_of(x) for x in xs]


def _same_types(a: Sequence[_ir.ShapedArray], b: Sequence[_ir.ShapedArray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def _describe(avals: Sequence[_ir.ShapedArray]) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[index](*operands)``, with ``index`` clamped into range; every branch is
    traced, and all must return the same types."""
    if not branches:
        raise ValueError("switch needs at least one branch")
    flat, tree = tree_flatten(operands)
    flat = [scalar(x) for x in flat]
    avals = _operand_avals(flat)
    traced = [_trace(b, avals, tree) for b in branches]
    out_tree = traced[0][2]
    out_avals = traced[0][0].out_avals
    for k, (j, _, t) in enumerate(traced):
        if t != out_tree or not _same_types(j.out_avals, out_avals):
            raise TypeCheckError(
                f"branch {k} returns {_describe(j.out_avals)} but branch 0 returns {_describe(out_avals)}"
            )
    # Each branch takes every branch's constants (its own used), then the operands.
    all_consts = [c for _, consts, _ in traced for c in consts]
    const_avals = _operand_avals(all_consts)
    joined = []
    start = 0
    for j, consts, _ in traced:
        joined.append(_with_unused_inputs(j, const_avals, start, len(consts), avals))
        start += len(consts)
    from ferrax._lax.elementwise import clamp, convert_element_type

    idx = convert_element_type(index, np.int32)
    idx = clamp(0, idx, len(branches) - 1)
    outs = cond_p.bind(idx, *all_consts, *flat, branches=tuple(joined))
    return tree_unflatten(out_tree, outs)


def _with_unused_inputs(
    j: _ir.ClosedJaxpr, const_avals: list[_ir.ShapedArray], start: int, count: int, op_avals: list[_ir.ShapedArray]
) -> _ir.ClosedJaxpr:
    """A jaxpr taking all constants and the operands, calling ``j`` on its own constants
    (positions ``start..start+count``) and the operands."""
    if len(const_avals) == count:
        return j
    b = _ir.JaxprBuilder()
    cs = [b.add_invar(a) for a in const_avals]
    ops = [b.add_invar(a) for a in op_avals]
    outs = b.add_eqn("jit", cs[start : start + count] + ops, {"jaxpr": j, "name": "branch"})
    return _ir.ClosedJaxpr(b.build(outs), [])


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``; both are traced
    and must return the same types."""
    aval = aval_of(scalar(pred))
    if aval.shape != ():
        raise TypeCheckError(f"cond's predicate must be a scalar, got {aval.str_short()}")
    from ferrax._lax.elementwise import ne

    if aval.dtype != np.bool_:
        pred = ne(pred, 0)
    return switch(pred, [false_fun, true_fun], *operands)


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``while cond_fun(val): val = body_fun(val)``, staged as one ``while`` primitive;
    ``body_fun`` must return values of the types it takes."""
    flat, tree = tree_flatten(init_val)
    flat = [scalar(x) for x in flat]
    avals = _operand_avals(flat)
    arg_tree = tree_flatten((init_val,))[1]  # the functions take one argument
    cj, cconsts, ctree = _trace(cond_fun, avals, arg_tree)
    if ctree.num_leaves != 1 or len(cj.out_avals) != 1 or cj.out_avals[0].shape != () or cj.out_avals[0].dtype != np.bool_:
        raise TypeCheckError(f"while_loop's cond_fun must return a bool scalar, got {_describe(cj.out_avals)}")
    bj, bconsts, btree = _trace(body_fun, avals, arg_tree)
    if btree != tree or not _same_types(bj.out_avals, avals):
        raise TypeCheckError(
            f"while_loop's body_fun must return its input's types {_describe(avals)}, got {_describe(bj.out_avals)}"
        )
    outs = while_p.bind(
        *cconsts, *bconsts, *flat,
        cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=len(cconsts), body_nconsts=len(bconsts),
    )
    return tree_unflatten(tree, outs)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)`` as a ``while`` loop."""
    from ferrax._lax.elementwise import add, lt

    def cond_fun(c: Any) -> Any:
        return lt(c[0], c[1])

    def body(c: Any) -> Any:
        i, hi, val = c
        return (add(i, 1), hi, body_fun(i, val))

    lo = scalar(lower) if isinstance(lower, int) else lower
    _, _, out = while_loop(cond_fun, body, (lo, scalar(upper) if isinstance(upper, int) else upper, init_val))
    return out


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns the final carry
    and the ``y``s stacked. With ``xs=None`` give ``length``."""
    init_flat, carry_tree = tree_flatten(init)
    init_flat = [scalar(x) for x in init_flat]
    xs_flat, xs_tree = tree_flatten(xs)
    xs_avals = _operand_avals(xs_flat)
    lengths = {a.shape[0] for a in xs_avals if a.shape}
    if any(not a.shape for a in xs_avals):
        raise TypeCheckError("scan's xs must have a leading axis to scan over")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise TypeCheckError(f"scan needs one length: xs have leading sizes {sorted(lengths)} (length={length})")
    n = lengths.pop()
    carry_avals = _operand_avals(init_flat)
    x_avals = [_ir.ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in xs_avals]
    def body(carry_leaves: Any, x_leaves: Any) -> Any:
        carry = tree_unflatten(carry_tree, carry_leaves)
        x = tree_unflatten(xs_tree, x_leaves)
        return f(carry, x)

    pair_tree = tree_flatten((list(range(len(carry_avals))), list(range(len(x_avals)))))[1]
    j, consts, out_tree = _trace(body, carry_avals + x_avals, pair_tree)
    out_avals = j.out_avals
    new_carry, ys = out_tree.children if len(out_tree.children) == 2 else (None, None)
    if new_carry is None or new_carry != carry_tree or not _same_types(out_avals[: len(carry_avals)], carry_avals):
        raise TypeCheckError(
            f"scan's f must return (carry, y) with the carry's types {_describe(carry_avals)}, got {_describe(out_avals)}"
        )
    outs = scan_p.bind(
        *consts, *init_flat, *xs_flat,
        jaxpr=j, length=n, reverse=bool(reverse), num_consts=len(consts), num_carry=len(carry_avals),
        linear=(False,) * (len(consts) + len(init_flat) + len(xs_flat)), unroll=1,
    )
    carry_out = tree_unflatten(carry_tree, outs[: len(carry_avals)])
    assert ys is not None
    return carry_out, tree_unflatten(ys, outs[len(carry_avals) :])
