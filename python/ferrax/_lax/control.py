"""Structured control flow: ``cond``/``switch``, ``while_loop``/``fori_loop`` and
``scan``, as primitives holding sub-jaxprs.

The functions given are traced to jaxprs once, on the types of their operands. Values
they close over become explicit leading operands (closure conversion), so the
primitives' sub-jaxprs have no constants and lower to plain functions. Eagerly, the
primitives run by evaluating their sub-jaxprs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._core import ConcreteArray, Primitive, Tracer, aval_of, to_numpy, user_location
from ferrax._interpreters import ad, batching
from ferrax._interpreters.partial_eval import partial_eval_rules, split_by_pass
from ferrax._user_frames import in_ferrax
from ferrax._lax._operands import scalar
from ferrax.errors import FerraxError, TypeCheckError
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
    pred = np.asarray(_eval(cond_jaxpr, *cond_consts, *carry)[0])
    while pred.any():
        new = _eval(body_jaxpr, *body_consts, *carry)
        if pred.ndim:
            # A batched predicate (its shape a prefix of every carry's): the loop runs while
            # any element's holds; an element whose predicate is false keeps its carry.
            carry = [_keep_where(pred, np.asarray(c), np.asarray(n)) for c, n in zip(carry, new)]
        else:
            carry = new
        pred = np.asarray(_eval(cond_jaxpr, *cond_consts, *carry)[0])
    return [np.asarray(c) for c in carry]


def _keep_where(pred: np.ndarray[Any, Any], old: np.ndarray[Any, Any], new: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``new`` where ``pred`` (broadcast along the trailing axes) holds, else ``old``."""
    return np.where(pred.reshape(pred.shape + (1,) * (old.ndim - pred.ndim)), new, old)


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


# ----------------------------------------------------------------- names in messages



def _type_text(a: _ir.ShapedArray) -> str:
    """A type as JAX's messages write it: ``float32[3,4]``."""
    return f"{np.dtype(a.dtype).name}[{','.join(str(d) for d in a.shape)}]"


def _types_text(avals: Sequence[_ir.ShapedArray]) -> str:
    return "(" + ", ".join(_type_text(a) for a in avals) + ")"


def _mismatch(a: _ir.ShapedArray, b: _ir.ShapedArray) -> str:
    """``, so the dtypes do not match`` (and/or the shapes)."""
    parts = []
    if a.dtype != b.dtype:
        parts.append("the dtypes do not match")
    if a.shape != b.shape:
        parts.append("the shapes do not match")
    return ", so " + " and ".join(parts) if parts else ""


def _same_type(a: _ir.ShapedArray, b: _ir.ShapedArray) -> bool:
    """Equal shapes and dtypes (weak types may differ: they join)."""
    return a.shape == b.shape and a.dtype == b.dtype


def _same_types(a: Sequence[_ir.ShapedArray], b: Sequence[_ir.ShapedArray]) -> bool:
    return len(a) == len(b) and all(_same_type(x, y) for x, y in zip(a, b))


def _fun_text(f: Callable[..., Any]) -> str:
    """``step at model.py:12``: the function's name and where it is defined."""
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or "a callable"
    code = getattr(f, "__code__", None)
    if code is None:
        return str(name)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"


def _param_name(f: Callable[..., Any], index: int, default: str) -> str:
    """The name of ``f``'s positional parameter ``index`` (``default`` if unknown)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return default
    if index < len(params) and params[index].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        return params[index].name
    return default


def _leaf_paths(tree: PyTreeDef) -> list[str]:
    """The path of each leaf of a structure, as Python would index it: ``[1]['h']``,
    ``.field`` for a namedtuple's fields (iterative: no recursion over depth)."""
    paths: list[str] = []
    pending: list[tuple[PyTreeDef, str]] = [(tree, "")]
    while pending:
        node, path = pending.pop()
        children = node.children
        if node.num_leaves == 1 and not children:
            paths.append(path)
            continue
        kind = node._kind
        if kind in (dict,) or (isinstance(kind, type) and issubclass(kind, dict)):
            keys = [f"[{k!r}]" for k in node._keys()]
        elif isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields"):
            keys = [f".{name}" for name in getattr(kind, "_fields")]
        else:
            keys = [f"[{i}]" for i in range(len(children))]
        pending.extend(reversed([(c, path + k) for c, k in zip(children, keys)]))
    return paths


def _structure_text(tree: PyTreeDef) -> str:
    text = repr(tree)
    return text[len("PyTreeDef(") : -1] if text.startswith("PyTreeDef(") else text


def _raised_by_ferrax(e: BaseException) -> bool:
    """True when ferrax raised ``e`` (its error classes, or a builtin error raised in the
    package): those are the errors whose message may gain context."""
    if isinstance(e, FerraxError):
        return True
    tb = e.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    return in_ferrax(last.tb_frame.f_code.co_filename)


@contextmanager
def _tracing(what: str, f: Callable[..., Any]) -> Iterator[None]:
    """Errors ferrax raises while tracing ``f`` say which of the user's functions was
    being traced (``while tracing body_fun of lax.while_loop (step at m.py:3)``): one line
    per enclosing control-flow function, innermost first. The class is unchanged."""
    try:
        yield
    except (FerraxError, TypeError, ValueError, IndexError) as e:
        if _raised_by_ferrax(e) and len(e.args) == 1 and isinstance(e.args[0], str):
            e.args = (f"{e.args[0]}\n  while tracing {what} ({_fun_text(f)})",)
        raise


# ------------------------------------------------------------------------------ tracing


def _trace(
    fun: Callable[..., Any],
    avals: Sequence[_ir.ShapedArray],
    tree: PyTreeDef,
    what: str,
    user_fun: Callable[..., Any] | None = None,
) -> tuple[_ir.ClosedJaxpr, list[Any], PyTreeDef]:
    """``fun`` traced on these types; its constants become leading inputs. Returns the
    constant-free jaxpr, the constants, and the output structure. ``what`` names the
    user's function in errors (``true_fun of lax.cond``); ``user_fun`` is that function
    when ``fun`` wraps it (else ``fun`` is)."""
    from ferrax._staging import trace_to_jaxpr

    with _tracing(what, fun if user_fun is None else user_fun):
        closed, out_tree = trace_to_jaxpr(fun, avals, tree)
    hoisted = _ir.ClosedJaxpr(_ir.consts_to_invars(closed.jaxpr), [])
    return hoisted, list(closed.consts), out_tree


def _operand_avals(xs: Sequence[Any]) -> list[_ir.ShapedArray]:
    return [aval_of(x) for x in xs]


def _promote_weak_carry(
    flat: list[Any], in_avals: Sequence[_ir.ShapedArray], out_avals: Sequence[_ir.ShapedArray]
) -> tuple[list[Any], bool]:
    """A weakly typed initial carry (a Python scalar) whose type the body changes is
    converted, as JAX does, to the dtype its weak type joins with the body's output (a
    strong type); the caller then traces the body again. Returns the carry and whether
    anything changed."""
    from ferrax._lax.elementwise import convert_element_type

    changed = False
    out = list(flat)
    for k, (x, a, b) in enumerate(zip(flat, in_avals, out_avals)):
        if a.weak_type and not _same_type(a, b):
            dtype, _ = dtypes.result_type([(a.dtype, True), (b.dtype, b.weak_type)])
            out[k] = convert_element_type(x, dtype)
            changed = True
    return out, changed


def _check_carry(
    api: str,
    fun_name: str,
    fun: Callable[..., Any],
    carry_name: str,
    in_tree: PyTreeDef,
    in_avals: Sequence[_ir.ShapedArray],
    out_tree: PyTreeDef | None,
    out_avals: Sequence[_ir.ShapedArray],
) -> None:
    """Raises ``TypeCheckError`` (a ``TypeError``) naming the carry's components by their
    paths when the body's output carry differs from its input carry."""
    head = f"{api}: {fun_name} must return a carry of the same structure and types as the one it takes"
    where = f"{fun_name} is {_fun_text(fun)}; at {user_location()}"
    if out_tree is None or out_tree != in_tree:
        got = "not a (carry, y) pair" if out_tree is None else _structure_text(out_tree)
        raise TypeCheckError(
            f"{head}, but their structures differ: the input carry {carry_name} is "
            f"{_structure_text(in_tree)} and the output carry is {got}.\n  {where}"
        )
    diffs = [
        f"the input carry {'component ' + carry_name + path if path else carry_name} has type "
        f"{_type_text(a)} but the corresponding output carry component has type {_type_text(b)}"
        f"{_mismatch(a, b)}"
        for path, a, b in zip(_leaf_paths(in_tree), in_avals, out_avals)
        if not _same_type(a, b)
    ]
    if diffs:
        raise TypeCheckError(f"{head}: " + "; ".join(diffs) + f".\n  {where}")


# ------------------------------------------------------------------------ cond, switch


def _check_branches(
    api: str,
    names: Sequence[str],
    funs: Sequence[Callable[..., Any]],
    traced: Sequence[tuple[_ir.ClosedJaxpr, list[Any], PyTreeDef]],
    first: int,
) -> None:
    """Every branch returns the structure and types of branch ``first`` (weak types may
    differ); else a ``TypeCheckError`` naming both branches and the output's path."""
    ref_jaxpr, _, ref_tree = traced[first]
    for k, (j, _, tree) in enumerate(traced):
        if k == first:
            continue
        a, b = names[first], names[k]
        where = f"{a} is {_fun_text(funs[first])}; {b} is {_fun_text(funs[k])}; at {user_location()}"
        if tree != ref_tree:
            raise TypeCheckError(
                f"{api}: the branches must return the same structure, but {a} returns "
                f"{_structure_text(ref_tree)} and {b} returns {_structure_text(tree)}.\n  {where}"
            )
        diffs = [
            f"the output of {a}{' at ' + path if path else ''} has type {_type_text(x)} but the "
            f"corresponding output of {b} has type {_type_text(y)}{_mismatch(x, y)}"
            for path, x, y in zip(_leaf_paths(ref_tree), ref_jaxpr.out_avals, j.out_avals)
            if not _same_type(x, y)
        ]
        if diffs:
            raise TypeCheckError(
                f"{api}: the branches must return the same types: " + "; ".join(diffs) + f".\n  {where}"
            )


def _scalar_operand(api: str, what: str, x: Any) -> _ir.ShapedArray:
    """The type of a predicate or index, which must be a scalar array or number."""
    if x is None:
        raise TypeError(f"{api}: the {what} is None, at {user_location()}")
    if isinstance(x, (list, tuple)):
        raise TypeError(f"{api}: the {what} must be a scalar, got a {type(x).__name__}, at {user_location()}")
    try:
        aval = aval_of(scalar(x))
    except TypeError:
        raise TypeError(
            f"{api}: the {what} must be a scalar boolean or number, got {x!r}, at {user_location()}"
        ) from None
    if aval.shape != ():
        raise TypeCheckError(
            f"{api}: the {what} must be a scalar, got an array of type {_type_text(aval)}, at {user_location()}"
        )
    return aval


def _switch(api: str, index: Any, branches: Sequence[Callable[..., Any]], names: Sequence[str], first: int, operands: tuple[Any, ...]) -> Any:
    """``branches[index](*operands)`` staged as one ``cond`` primitive (``index`` an int32
    already in range)."""
    flat, tree = tree_flatten(operands)
    flat = [scalar(x) for x in flat]
    avals = _operand_avals(flat)
    traced = [_trace(b, avals, tree, f"{name} of {api}") for b, name in zip(branches, names)]
    _check_branches(api, names, branches, traced, first)
    out_tree = traced[0][2]
    # Each branch takes every branch's constants (its own used), then the operands.
    all_consts = [c for _, consts, _ in traced for c in consts]
    const_avals = _operand_avals(all_consts)
    joined = []
    start = 0
    for j, consts, _ in traced:
        joined.append(_with_unused_inputs(j, const_avals, start, len(consts), avals))
        start += len(consts)
    outs = cond_p.bind(index, *all_consts, *flat, branches=tuple(joined))
    return tree_unflatten(out_tree, outs)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """``branches[index](*operands)``, with ``index`` (an integer scalar) clamped into
    range; every branch is traced, and all must return the same types. With one branch,
    that branch is called directly."""
    from ferrax._lax.elementwise import clamp, convert_element_type

    if not all(callable(b) for b in branches):
        raise TypeError(f"lax.switch: branches must be a sequence of callables, at {user_location()}")
    aval = _scalar_operand("lax.switch", "index", index)
    if aval.dtype.kind not in "iu":
        raise TypeCheckError(
            f"lax.switch: the index must be an integer, got {index!r} of type {_type_text(aval)}, "
            f"at {user_location()}"
        )
    branches = tuple(branches)
    if not branches:
        raise ValueError(f"lax.switch: the sequence of branches is empty, at {user_location()}")
    if len(branches) == 1:
        return branches[0](*operands)
    idx = convert_element_type(index, np.int32)
    idx = clamp(np.int32(0), idx, np.int32(len(branches) - 1))
    names = [f"branches[{k}]" for k in range(len(branches))]
    return _switch("lax.switch", idx, branches, names, 0, operands)


def _with_unused_inputs(
    j: _ir.ClosedJaxpr, const_avals: list[_ir.ShapedArray], start: int, count: int, op_avals: list[_ir.ShapedArray]
) -> _ir.ClosedJaxpr:
    """``j``'s equations in a jaxpr taking all constants and the operands: it reads its
    own constants (positions ``start..start+count``) and the operands, the other
    constants are unused inputs (as JAX joins the branches' constants)."""
    if len(const_avals) == count:
        return j
    b = _ir.JaxprBuilder()
    cs = [b.add_invar(a) for a in const_avals]
    ops = [b.add_invar(a) for a in op_avals]
    outs = b.inline_traced(j.jaxpr, cs[start : start + count] + ops, _Inlined, None)
    return _ir.ClosedJaxpr(b.build([o.atom for o in outs]), [])


class _Inlined:
    """An output of :meth:`_ir.JaxprBuilder.inline_traced` outside any trace: its
    ``atom`` is the variable or literal."""

    __slots__ = ("_trace", "atom", "aval")
    atom: _ir.Var | _ir.Literal


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``; both are traced
    and must return the same types (those of ``false_fun`` are the result's, weak types
    included). ``pred`` is a scalar bool or number (a number is true when nonzero)."""
    from ferrax._lax.elementwise import convert_element_type, ne

    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError(f"lax.cond: true_fun and false_fun must be callable, at {user_location()}")
    aval = _scalar_operand("lax.cond", "predicate", pred)
    if aval.dtype.kind not in "biuf":
        raise TypeCheckError(
            f"lax.cond: the predicate must be a boolean or a real number, got type "
            f"{_type_text(aval)}, at {user_location()}"
        )
    if aval.dtype != np.bool_:
        pred = ne(scalar(pred), np.zeros((), aval.dtype))
    index = convert_element_type(pred, np.int32)
    return _switch("lax.cond", index, [false_fun, true_fun], ["false_fun", "true_fun"], 1, operands)


# ------------------------------------------------------------------------------- loops


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """``while cond_fun(val): val = body_fun(val)``, staged as one ``while`` primitive;
    ``body_fun`` must return values of the types it takes. A weakly typed initial value
    (a Python scalar) that the body changes takes the joined type, as in JAX."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError(f"lax.while_loop: cond_fun and body_fun must be callable, at {user_location()}")
    flat, tree = tree_flatten(init_val)
    flat = [scalar(x) for x in flat]
    arg_tree = tree_flatten((init_val,))[1]  # the functions take one argument
    carry_name = _param_name(body_fun, 0, "val")

    def trace_both(avals: list[_ir.ShapedArray]) -> tuple[Any, ...]:
        cj, cconsts, ctree = _trace(cond_fun, avals, arg_tree, "cond_fun of lax.while_loop")
        bj, bconsts, btree = _trace(body_fun, avals, arg_tree, "body_fun of lax.while_loop")
        return cj, cconsts, ctree, bj, bconsts, btree

    avals = _operand_avals(flat)
    cj, cconsts, ctree, bj, bconsts, btree = trace_both(avals)
    if btree == tree:
        flat, changed = _promote_weak_carry(flat, avals, bj.out_avals)
        if changed:
            avals = _operand_avals(flat)
            cj, cconsts, ctree, bj, bconsts, btree = trace_both(avals)
    if ctree.num_leaves != 1 or len(cj.out_avals) != 1 or cj.out_avals[0].shape != () or cj.out_avals[0].dtype != np.bool_:
        raise TypeCheckError(
            f"lax.while_loop: cond_fun must return a boolean scalar, but it returns "
            f"{_types_text(cj.out_avals)}.\n  cond_fun is {_fun_text(cond_fun)}; at {user_location()}"
        )
    _check_carry("lax.while_loop", "body_fun", body_fun, carry_name, tree, avals, btree, bj.out_avals)
    return tree_unflatten(tree, _bind_while(cj, cconsts, bj, bconsts, flat))


def _bind_while(
    cj: _ir.ClosedJaxpr, cconsts: list[Any], bj: _ir.ClosedJaxpr, bconsts: list[Any], init: list[Any]
) -> list[Any]:
    """The ``while`` equation. As JAX's while_loop: a carry the body returns unchanged
    and the predicate does not read is no carry but a body constant (the first ones), so
    that it stays unbatched under vmap with a batched predicate; the loop's output for
    it is its initial value."""
    nc, nb = len(cconsts), len(bconsts)
    body = bj.jaxpr
    invars = body.invars
    forwarded = [isinstance(o, _ir.Var) and o == invars[nb + k] for k, o in enumerate(body.outvars)]
    if any(forwarded):
        cond_dced, cond_used = _ir.dce(cj.jaxpr, [True])
        moved = [f and not u for f, u in zip(forwarded, cond_used[nc:])]
    else:
        moved = []
    if not any(moved):
        return list(while_p.bind(
            *cconsts, *bconsts, *init,
            cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=nc, body_nconsts=nb,
        ))
    kept = [not m for m in moved]
    # The predicate without its dead code and the moved carries' inputs.
    cb = _ir.JaxprBuilder()
    c_in = [cb.add_invar(a) for a, keep in zip(cj.in_avals, [True] * nc + kept) if keep]
    c_used = [v for v, u in zip(c_in, [u for u, keep in zip(cond_used, [True] * nc + kept) if keep]) if u]
    c_outs = cb.inline_traced(cond_dced, c_used, _Inlined, None)
    cond = _ir.ClosedJaxpr(cb.build([o.atom for o in c_outs]), [])
    # The body taking the moved carries first, then its constants and the other carries.
    bb = _ir.JaxprBuilder()
    carry_avals = bj.in_avals[nb:]
    moved_in = {k: bb.add_invar(a) for k, a in enumerate(carry_avals) if moved[k]}
    const_in = [bb.add_invar(a) for a in bj.in_avals[:nb]]
    kept_in = {k: bb.add_invar(a) for k, a in enumerate(carry_avals) if not moved[k]}
    args = const_in + [moved_in[k] if moved[k] else kept_in[k] for k in range(len(carry_avals))]
    b_outs = bb.inline_traced(body, args, _Inlined, None)
    body_new = _ir.ClosedJaxpr(bb.build([o.atom for o, keep in zip(b_outs, kept) if keep]), [])
    moved_vals = [x for x, m in zip(init, moved) if m]
    outs = iter(while_p.bind(
        *cconsts, *moved_vals, *bconsts, *[x for x, keep in zip(init, kept) if keep],
        cond_jaxpr=cond, body_jaxpr=body_new, cond_nconsts=nc, body_nconsts=len(moved_vals) + nb,
    ))
    # An initial value comes back as an array (JAX hands back the NumPy value itself).
    firsts = iter([_as_array(x) for x in moved_vals])
    return [next(firsts) if m else next(outs) for m in moved]


def _as_array(x: Any) -> Any:
    """A NumPy array or scalar as a ferrax array; anything else as it is."""
    if isinstance(x, (np.ndarray, np.generic)):
        return ConcreteArray(to_numpy(x), False)
    return x


def _bound_dtypes(lower: Any, upper: Any) -> tuple[np.dtype[Any], _ir.ShapedArray, _ir.ShapedArray]:
    """The loop index's dtype (JAX's rule: equal dtypes, or two signed integers of which
    exactly one is weakly typed, which then takes the other's dtype)."""
    lo, hi = _scalar_operand("lax.fori_loop", "lower bound", lower), _scalar_operand("lax.fori_loop", "upper bound", upper)
    if lo.dtype == hi.dtype:
        return lo.dtype, lo, hi
    if lo.dtype.kind == "i" and hi.dtype.kind == "i" and lo.weak_type != hi.weak_type:
        return (hi.dtype if lo.weak_type else lo.dtype), lo, hi
    raise TypeCheckError(
        f"lax.fori_loop: lower and upper must have the same type, got {np.dtype(lo.dtype).name} "
        f"and {np.dtype(hi.dtype).name}, at {user_location()}"
    )


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    As in JAX: with concrete bounds (Python or NumPy integers, eager arrays) the loop is a
    ``scan`` of ``upper - lower`` steps whose index ``i`` is a weakly typed integer;
    with traced bounds it is a ``while`` loop whose index has the bounds' dtype.
    """
    from ferrax._lax.elementwise import add, convert_element_type, lt

    if not callable(body_fun):
        raise TypeError(f"lax.fori_loop: body_fun must be callable, at {user_location()}")
    dtype, lo_aval, hi_aval = _bound_dtypes(lower, upper)
    carry_name = _param_name(body_fun, 1, "val")
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(lower), int(upper)

        def step(c: Any, _: Any) -> Any:
            i, val = c
            return (add(i, 1), body_fun(i, val)), None

        (_, out), _ = _scan(
            "lax.fori_loop", "body_fun", body_fun, carry_name, step, (lo, init_val), None, max(hi - lo, 0), False, 1
        )
        return out

    if lo_aval.dtype != dtype:
        lower = convert_element_type(lower, dtype)
    if hi_aval.dtype != dtype:
        upper = convert_element_type(upper, dtype)

    def cond_fun(c: Any) -> Any:
        return lt(c[0], c[1])

    def body(c: Any) -> Any:
        i, hi, val = c
        return (add(i, 1), hi, body_fun(i, val))

    flat, tree = tree_flatten(init_val)
    flat = [scalar(x) for x in flat]
    lo_t, hi_t = scalar(lower), scalar(upper)
    loop_tree = tree_flatten((0, 0, init_val))[1]
    arg_tree = tree_flatten(((0, 0, init_val),))[1]

    def trace_both(avals: list[_ir.ShapedArray]) -> tuple[Any, ...]:
        cj, cconsts, _ = _trace(cond_fun, avals, arg_tree, "body_fun of lax.fori_loop", body_fun)
        bj, bconsts, btree = _trace(body, avals, arg_tree, "body_fun of lax.fori_loop", body_fun)
        return cj, cconsts, bj, bconsts, btree

    avals = _operand_avals([lo_t, hi_t, *flat])
    cj, cconsts, bj, bconsts, btree = trace_both(avals)
    if btree == loop_tree:
        new, changed = _promote_weak_carry(flat, avals[2:], bj.out_avals[2:])
        if changed:
            flat = new
            avals = _operand_avals([lo_t, hi_t, *flat])
            cj, cconsts, bj, bconsts, btree = trace_both(avals)
    out_carry_tree = btree.children[2] if btree.children and len(btree.children) == 3 else None
    _check_carry("lax.fori_loop", "body_fun", body_fun, carry_name, tree, avals[2:], out_carry_tree, bj.out_avals[2:])
    outs = _bind_while(cj, cconsts, bj, bconsts, [lo_t, hi_t, *flat])
    return tree_unflatten(tree, outs[2:])


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns the final carry
    and the ``y``s stacked. With ``xs=None`` give ``length``. A weakly typed initial carry
    (a Python scalar) that ``f`` changes takes the joined type, as in JAX."""
    if not callable(f):
        raise TypeError(f"lax.scan: f must be callable, at {user_location()}")
    carry_name = _param_name(f, 0, "carry")
    return _scan("lax.scan", "f", f, carry_name, f, init, xs, length, reverse, 0)


def _scan_length(xs_avals: Sequence[_ir.ShapedArray], length: Any) -> int:
    if any(not a.shape for a in xs_avals):
        raise ValueError(f"lax.scan: every leaf of xs needs a leading axis to scan over, got a scalar, at {user_location()}")
    sizes = [a.shape[0] for a in xs_avals]
    if length is not None:
        if isinstance(length, Tracer):
            raise length._concrete_error("scan's length")
        n = int(length)
        if any(s != n for s in sizes):
            raise ValueError(
                f"lax.scan: length={n} disagrees with the leading sizes of xs {sizes}, at {user_location()}"
            )
        return n
    if not sizes:
        raise ValueError(f"lax.scan: there is nothing to scan over (xs is empty) and no length is given, at {user_location()}")
    if len(set(sizes)) > 1:
        raise ValueError(f"lax.scan: the leaves of xs have different leading sizes {sizes}, at {user_location()}")
    return sizes[0]


def _scan(
    api: str,
    fun_name: str,
    user_fun: Callable[..., Any],
    carry_name: str,
    f: Callable[[Any, Any], Any],
    init: Any,
    xs: Any,
    length: Any,
    reverse: bool,
    carry_skip: int,
) -> tuple[Any, Any]:
    """The scan; errors speak of ``fun_name`` (the user's ``user_fun``) and of its carry
    as ``carry_name``, leaving out the first ``carry_skip`` carry components (fori_loop's
    index)."""
    init_flat, carry_tree = tree_flatten(init)
    init_flat = [scalar(x) for x in init_flat]
    xs_flat, xs_tree = tree_flatten(xs)
    xs_avals = _operand_avals(xs_flat)
    n = _scan_length(xs_avals, length)
    x_avals = [_ir.ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in xs_avals]

    def body(carry_leaves: Any, x_leaves: Any) -> Any:
        carry = tree_unflatten(carry_tree, carry_leaves)
        x = tree_unflatten(xs_tree, x_leaves)
        return f(carry, x)

    def trace(carry_avals: list[_ir.ShapedArray]) -> tuple[Any, ...]:
        pair_tree = tree_flatten((list(range(len(carry_avals))), list(range(len(x_avals)))))[1]
        j, consts, out_tree = _trace(body, carry_avals + x_avals, pair_tree, f"{fun_name} of {api}", user_fun)
        if out_tree.num_leaves == len(out_tree.children) == 0 or len(out_tree.children) != 2 or out_tree._kind not in (tuple, list):
            raise TypeCheckError(
                f"{api}: {fun_name} must return a pair (carry, y), but it returns "
                f"{_structure_text(out_tree)}.\n  {fun_name} is {_fun_text(user_fun)}; at {user_location()}"
            )
        new_carry, ys = out_tree.children
        return j, consts, new_carry, ys

    carry_avals = _operand_avals(init_flat)
    j, consts, new_carry, ys = trace(carry_avals)
    if new_carry == carry_tree:
        init_flat, changed = _promote_weak_carry(init_flat, carry_avals, j.out_avals[: len(carry_avals)])
        if changed:
            carry_avals = _operand_avals(init_flat)
            j, consts, new_carry, ys = trace(carry_avals)
    nc = len(carry_avals)
    if carry_skip:
        user_tree = carry_tree.children[carry_skip]
        out_user = new_carry.children[carry_skip] if len(new_carry.children) == len(carry_tree.children) else new_carry
        _check_carry(api, fun_name, user_fun, carry_name, user_tree, carry_avals[carry_skip:], out_user, j.out_avals[carry_skip:nc])
    else:
        _check_carry(api, fun_name, user_fun, carry_name, carry_tree, carry_avals, new_carry, j.out_avals[:nc])
    outs = scan_p.bind(
        *consts, *init_flat, *xs_flat,
        jaxpr=j, length=n, reverse=bool(reverse), num_consts=len(consts), num_carry=nc,
        linear=(False,) * (len(consts) + len(init_flat) + len(xs_flat)), unroll=1,
    )
    carry_out = tree_unflatten(carry_tree, outs[:nc])
    return carry_out, tree_unflatten(ys, outs[nc:])


# -------------------------------------------------------------------------- derivatives
# Each control-flow primitive differentiates to itself, over JVP jaxprs of its
# sub-jaxprs (``ad.jvp_jaxpr``): only nonzero tangents become operands. Constants a JVP
# jaxpr captured become leading operands (sub-jaxprs take none).


def _nonzero(ts: Sequence[Any]) -> list[bool]:
    return [type(t) is not ad.Zero for t in ts]


def _nonzero_values(ts: Sequence[Any]) -> list[Any]:
    return [t for t in ts if type(t) is not ad.Zero]


def _unpack(outs: Sequence[Any], flags: Sequence[bool], avals: Sequence[_ir.ShapedArray]) -> list[Any]:
    it = iter(outs)
    return [next(it) if f else ad.Zero(a) for f, a in zip(flags, avals)]


def _cond_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, branches: tuple[_ir.ClosedJaxpr, ...]) -> tuple[list[Any], list[Any]]:
    index, *ops = primals
    nz = _nonzero(tangents[1:])
    # An output with a tangent in some branch gets one in every branch.
    out_nz = [False] * len(branches[0].out_avals)
    for b in branches:
        out_nz = [x or y for x, y in zip(out_nz, ad.jvp_jaxpr(b, nz, False)[1])]
    jvps = [ad.hoist_consts(ad.jvp_jaxpr(b, nz, out_nz)[0]) for b in branches]
    const_avals = [c_aval for j, cs in jvps for c_aval in j.in_avals[: len(cs)]]
    consts = [c for _, cs in jvps for c in cs]
    op_avals = jvps[0][0].in_avals[len(jvps[0][1]) :]
    new_branches, start = [], 0
    for j, cs in jvps:
        new_branches.append(_with_unused_inputs(j, const_avals, start, len(cs), op_avals))
        start += len(cs)
    outs = cond_p.bind(index, *consts, *ops, *_nonzero_values(tangents[1:]), branches=tuple(new_branches))
    n = len(branches[0].out_avals)
    return list(outs[:n]), _unpack(outs[n:], out_nz, branches[0].out_avals)


cond_p.def_jvp(_cond_jvp)


def _carry_fixpoint(body: _ir.ClosedJaxpr, const_nz: list[bool], carry_nz: list[bool], rest_nz: list[bool], groups: list[int], out_groups: list[int]) -> list[bool]:
    """The carries with tangents: those given one, and those the body gives one."""
    nc = len(carry_nz)
    while True:
        _, out_nz = ad.jvp_jaxpr(body, const_nz + carry_nz + rest_nz, carry_nz + [False] * (len(body.out_avals) - nc), groups, out_groups)
        new = [a or b for a, b in zip(carry_nz, out_nz[:nc])]
        if new == carry_nz:
            return carry_nz
        carry_nz = new


def _while_jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, cond_jaxpr: _ir.ClosedJaxpr, body_jaxpr: _ir.ClosedJaxpr,
    cond_nconsts: int, body_nconsts: int,
) -> tuple[list[Any], list[Any]]:
    cc, bc = cond_nconsts, body_nconsts
    nz = _nonzero(tangents)
    const_nz, carry_nz = nz[cc : cc + bc], nz[cc + bc :]
    nc = len(carry_nz)
    carry_nz = _carry_fixpoint(body_jaxpr, const_nz, carry_nz, [], [bc, nc], [nc])
    body, extra = ad.hoist_consts(ad.jvp_jaxpr(body_jaxpr, const_nz + carry_nz, carry_nz, [bc, nc], [nc])[0])
    carry_avals = body_jaxpr.out_avals
    tangent_avals = [a for a, f in zip(carry_avals, carry_nz) if f]
    # The predicate ignores the tangents.
    cond = _ir.ClosedJaxpr(_append_unused(cond_jaxpr.jaxpr, tangent_avals), [])
    carry_tangents = [ad.instantiate(t) if f else None for t, f in zip(tangents[cc + bc :], carry_nz)]
    outs = while_p.bind(
        *primals[:cc], *extra, *primals[cc : cc + bc], *_nonzero_values(tangents[cc : cc + bc]),
        *primals[cc + bc :], *[t for t in carry_tangents if t is not None],
        cond_jaxpr=cond, body_jaxpr=body, cond_nconsts=cc, body_nconsts=len(extra) + bc + sum(const_nz),
    )
    return list(outs[:nc]), _unpack(outs[nc:], carry_nz, carry_avals)


def _append_unused(j: _ir.Jaxpr, avals: Sequence[_ir.ShapedArray]) -> _ir.Jaxpr:
    """``j`` taking extra, unused trailing inputs of these types."""
    if not avals:
        return j
    from ferrax._staging import trace_to_jaxpr

    n = len(j.in_avals)
    all_avals = [*j.in_avals, *avals]
    tree = tree_flatten(tuple(range(len(all_avals))))[1]
    closed, _ = trace_to_jaxpr(lambda *xs: ad.eval_closed(_ir.ClosedJaxpr(j, []), *xs[:n]), all_avals, tree)
    return closed.jaxpr


while_p.def_jvp(_while_jvp)


def _scan_jvp(
    primals: Sequence[Any], tangents: Sequence[Any], *, jaxpr: _ir.ClosedJaxpr, num_consts: int, num_carry: int,
    **params: Any,
) -> tuple[list[Any], list[Any]]:
    k, nc = num_consts, num_carry
    nx = len(primals) - k - nc
    nz = _nonzero(tangents)
    const_nz, carry_nz, xs_nz = nz[:k], nz[k : k + nc], nz[k + nc :]
    ny = len(jaxpr.out_avals) - nc
    carry_nz = _carry_fixpoint(jaxpr, const_nz, carry_nz, xs_nz, [k, nc, nx], [nc, ny])
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz, carry_nz + [False] * ny, [k, nc, nx], [nc, ny])
    body, extra = ad.hoist_consts(jvp_closed)
    carry_tangents = [ad.instantiate(t) for t, f in zip(tangents[k : k + nc], carry_nz) if f]
    ops = [
        *extra, *primals[:k], *_nonzero_values(tangents[:k]),
        *primals[k : k + nc], *carry_tangents,
        *primals[k + nc :], *_nonzero_values(tangents[k + nc :]),
    ]
    params = dict(params)
    if "linear" in params:
        params["linear"] = (False,) * len(ops)
    outs = scan_p.bind(
        *ops, jaxpr=body, num_consts=len(extra) + k + sum(const_nz), num_carry=nc + sum(carry_nz), **params
    )
    n_ct = sum(carry_nz)
    carry_out, carry_t = outs[:nc], outs[nc : nc + n_ct]
    ys, ys_t = outs[nc + n_ct : nc + n_ct + ny], outs[nc + n_ct + ny :]
    y_avals = [_ir.ShapedArray((params["length"], *a.shape), a.dtype, a.weak_type) for a in jaxpr.out_avals[nc:]]
    return (
        [*carry_out, *ys],
        [*_unpack(carry_t, carry_nz, jaxpr.out_avals[:nc]), *_unpack(ys_t, out_nz[nc:], y_avals)],
    )


scan_p.def_jvp(_scan_jvp)

# With some operands known and others not (reverse mode), each splits into a known and an
# unknown equation by the Rust pass: a cond per branch with joined residuals, a scan into
# two scans with residuals stacked, a while loop wholly unknown once any carry is.
for _name in ("cond", "scan", "while"):
    partial_eval_rules[_name] = split_by_pass


# ----------------------------------------------------------------------------- batching
# Rules for ``vmap``: the sub-jaxprs are vectorized (``batching.batch_jaxpr``) with the
# batch axis first; the control flow stays one equation where the decision is the same
# for every batch element. Where it differs per element, every branch runs and a select
# picks (cond), or the loop runs while any element's predicate holds and the finished
# elements keep their carry (while), as JAX does.


def _select_by(which: Any, cases: Sequence[Any]) -> Any:
    """``select_n`` with a batched index or predicate (shape ``(B,)``) broadcast over the
    cases' trailing axes."""
    from ferrax._lax.elementwise import select_n
    from ferrax._lax.structural import broadcast_in_dim

    shape = aval_of(cases[0]).shape
    if len(shape) > 1:
        which = broadcast_in_dim(which, shape, (0,))
    return select_n(which, *cases)


def _cond_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, branches: tuple[_ir.ClosedJaxpr, ...]
) -> tuple[list[Any], list[int | None]]:
    if dims[0] is not None:
        return _cond_batch_select(vals, dims, axis_size, branches)
    index, *ops = batching.at_front(vals, dims)
    in_b = [d is not None for d in dims[1:]]
    out_b = [False] * len(branches[0].out_avals)
    for b in branches:
        out_b = [x or y for x, y in zip(out_b, batching.batch_jaxpr(b, axis_size, in_b, False)[1])]
    hoisted = [ad.hoist_consts(batching.batch_jaxpr(b, axis_size, in_b, out_b)[0]) for b in branches]
    consts = [c for _, cs in hoisted for c in cs]
    const_avals = [a for j, cs in hoisted for a in j.in_avals[: len(cs)]]
    op_avals = list(hoisted[0][0].in_avals[len(hoisted[0][1]) :])
    new_branches, start = [], 0
    for j, cs in hoisted:
        new_branches.append(_with_unused_inputs(j, const_avals, start, len(cs), op_avals))
        start += len(cs)
    outs = cond_p.bind(index, *consts, *ops, branches=tuple(new_branches))
    return list(outs), [0 if b else None for b in out_b]


def _cond_batch_select(
    vals: Sequence[Any], dims: Sequence[int | None], axis_size: int, branches: tuple[_ir.ClosedJaxpr, ...]
) -> tuple[list[Any], list[int | None]]:
    """vmap of a cond whose index differs per element, as JAX does it: a select over the
    outputs of every branch, each run on the whole batch. Branch ``i`` sees the operands
    only where the index is ``i``, elsewhere the same values through ``stop_gradient``:
    the lanes whose result is discarded then contribute no gradient, so a branch that is
    not finite where it is not taken (``log`` of a negative operand, say) cannot turn the
    discarded lanes' zero cotangents into NaN (JAX issue 1052)."""
    from ferrax._lax.custom import stop_gradient
    from ferrax._lax.elementwise import eq

    index, *ops = [batching.bdim_at_front(v, d, axis_size) for v, d in zip(vals, dims)]
    every = [True] * len(ops)
    outs = []
    for i, b in enumerate(branches):
        batched, _ = batching.batch_jaxpr(b, axis_size, every, True)
        taken = eq(index, np.int32(i))
        outs.append(ad.eval_closed(batched, *[_select_by(taken, [stop_gradient(x), x]) for x in ops]))
    n = len(branches[0].out_avals)
    return [_select_by(index, [o[k] for o in outs]) for k in range(n)], [0] * n


def _while_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, cond_jaxpr: _ir.ClosedJaxpr,
    body_jaxpr: _ir.ClosedJaxpr, cond_nconsts: int, body_nconsts: int,
) -> tuple[list[Any], list[int | None]]:
    cc, bc = cond_nconsts, body_nconsts
    cconst_dims, bconst_dims, init_dims = list(dims[:cc]), list(dims[cc : cc + bc]), list(dims[cc + bc :])
    cconst_b = [d is not None for d in cconst_dims]
    bconst_b = [d is not None for d in bconst_dims]
    # A carry is batched if it starts batched or the body makes it so.
    carry_b = [d is not None for d in init_dims]
    while True:
        out_b = batching.batch_jaxpr(body_jaxpr, axis_size, bconst_b + carry_b, False)[1]
        new = [x or y for x, y in zip(carry_b, out_b)]
        if new == carry_b:
            break
        carry_b = new
    pred_b = batching.batch_jaxpr(cond_jaxpr, axis_size, cconst_b + carry_b, False)[1][0]
    carry_dims: list[int | None]
    if pred_b:
        # The predicate differs per element: it stays batched (bool[B, ...]), every carry
        # is batched at axis 0 and the loop runs while any element's predicate holds, an
        # element whose predicate is false keeping its carry (the while primitive's
        # meaning when its predicate is not a scalar).
        carry_dims = [0] * len(carry_b)
        body = batching.batch_jaxpr_axes(body_jaxpr, axis_size, bconst_dims + carry_dims, carry_dims)
        cond = batching.batch_jaxpr_axes(cond_jaxpr, axis_size, cconst_dims + carry_dims, [0])
    else:
        # The predicate is the same for every element; it may already be batched (bool[s],
        # a prefix of every carry's shape, under a vmap within): the new batch axis goes
        # after that prefix.
        rank = len(cond_jaxpr.out_avals[0].shape)
        carry_dims = [rank if b else None for b in carry_b]
        body = batching.batch_jaxpr_axes(body_jaxpr, axis_size, bconst_dims + carry_dims, carry_dims)
        cond = batching.batch_jaxpr_axes(cond_jaxpr, axis_size, cconst_dims + carry_dims, [None])
    init = []
    for x, old, want in zip(vals[cc + bc :], init_dims, carry_dims):
        if want is None:
            init.append(x)
        elif old is None:
            init.append(batching.broadcast(x, axis_size, want))
        else:
            init.append(batching.moveaxis(x, old, want))
    cond_h, cextra = ad.hoist_consts(cond)
    body_h, bextra = ad.hoist_consts(body)
    outs = while_p.bind(
        *cextra, *vals[:cc], *bextra, *vals[cc : cc + bc], *init,
        cond_jaxpr=cond_h, body_jaxpr=body_h, cond_nconsts=len(cextra) + cc, body_nconsts=len(bextra) + bc,
    )
    return list(outs), carry_dims


def _scan_batch(
    vals: Sequence[Any], dims: Sequence[int | None], *, axis_size: int, jaxpr: _ir.ClosedJaxpr, num_consts: int,
    num_carry: int, **params: Any,
) -> tuple[list[Any], list[int | None]]:
    k, nc = num_consts, num_carry
    batched = [d is not None for d in dims]
    const_b, carry_b, xs_b = batched[:k], batched[k : k + nc], batched[k + nc :]
    ny = len(jaxpr.out_avals) - nc
    while True:
        out_b = batching.batch_jaxpr(jaxpr, axis_size, const_b + carry_b + xs_b, False)[1]
        new = [x or y for x, y in zip(carry_b, out_b[:nc])]
        if new == carry_b:
            break
        carry_b = new
    body, out_b = batching.batch_jaxpr(jaxpr, axis_size, const_b + carry_b + xs_b, carry_b + [False] * ny)
    body_h, extra = ad.hoist_consts(body)
    consts = batching.at_front(vals[:k], dims[:k])
    carry = [
        batching.bdim_at_front(v, d, axis_size) if b else v
        for v, d, b in zip(vals[k : k + nc], dims[k : k + nc], carry_b)
    ]
    # The scanned axis stays first; the batch axis goes second (first in each step's slice).
    xs = [v if d is None else batching.moveaxis(v, d, 1) for v, d in zip(vals[k + nc :], dims[k + nc :])]
    ops = [*extra, *consts, *carry, *xs]
    params = dict(params)
    if "linear" in params:
        params["linear"] = (False,) * len(ops)
    outs = scan_p.bind(*ops, jaxpr=body_h, num_consts=len(extra) + k, num_carry=nc, **params)
    return list(outs), [0 if b else None for b in carry_b] + [1 if b else None for b in out_b[nc:]]


cond_p.def_batch(_cond_batch)
while_p.def_batch(_while_batch)
scan_p.def_batch(_scan_batch)
