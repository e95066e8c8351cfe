"""Pattern matching and term rewriting of jaxprs (run in Rust, ``ferrax-ir``'s
``passes::rewrite``).

Rules read like jaxpr equations with holes, one per line, each with a name::

    mul_one:  mul ?x 1.0 => ?x
    log_exp:  log (exp ?x) => ?x
    square:   integer_pow[y=2] ?x => mul ?x ?x
    sub_self: sub ?x ?x => mul ?x 0.0 if float(?x)
    same:     convert_element_type[new_dtype=?t] ?x:?t[*] => ?x

- ``?x`` matches any operand (a variable or a literal); the same hole twice matches the
  same operand twice; ``(prim ...)`` matches a variable computed by such an equation.
- ``?x:f32[3]``, ``?x:f32[*]`` (any shape), ``?x:?t[?s]`` (dtype and shape holes),
  ``?x:_[]`` (any scalar) constrain an operand's type.
- ``1.0`` matches a literal of that value in any dtype; ``1.0:f32[]`` only that type.
- ``prim[name=value]`` requires a param's value; ``prim[name=?p]`` binds it; params not
  written are free.
- Conditions after ``if``, separated by commas: ``float(?x)``, ``int(?x)``,
  ``bool(?x)``, ``literal(?x)``, ``scalar(?x)``, ``weak(?x)`` (each may follow
  ``not``), ``same_type(?x, ?y)``, ``dtype(?x) = f32``, ``rank(?x) = 2``,
  ``shape(?x) = (2, 3)``, ``?p = value`` (``=`` or ``!=``).
- The right side uses the holes the left side binds (any other is refused when the
  rule is read), literals (``2.0:f32[]``, or untyped to take the other operands' dtype,
  weakly typed) and built-in primitives. A match is replaced only where the right side
  has exactly the type of what it replaces (dtype, shape and weak type).

A rule set is applied everywhere (inside ``jit``, ``cond``, ``while_loop`` and ``scan``
bodies too) until no rule applies; a set whose rules keep firing stops after
``max_iterations`` passes with a :class:`RewriteError` naming them. Equations with
effects (``debug.print``, callbacks) are never rewritten.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ferrax import _ir
from ferrax._ir import RewriteError, RuleSet
from ferrax._staging import _arg_aval, trace_to_jaxpr
from ferrax.tree_util import tree_flatten, tree_unflatten

__all__ = ["ALGEBRAIC", "RewriteError", "RuleSet", "rewrite", "rewrite_jaxpr", "rules"]

#: The built-in algebraic simplifications: ``x + 0``, ``x * 1``, ``x / 1``,
#: ``neg (neg x)``, ``not (not x)``, ``log (exp x)``, ``x - (-y)``, ``x + (-y)``, a
#: conversion to the operand's own dtype, ``x ** 1`` and ``x ** 2``.
ALGEBRAIC: RuleSet = RuleSet.algebraic()

DEFAULT_MAX_ITERATIONS = 100


def rules(text: str) -> RuleSet:
    """Reads rules, one per ``name: lhs => rhs [if conditions]`` (a line not starting
    with ``name:`` continues the rule above; ``#`` starts a comment). Unreadable text is
    a :class:`ferrax.errors.ParseError` with ``.line`` and ``.column``."""
    return RuleSet(text)


def _rule_set(rule_set: RuleSet | str) -> RuleSet:
    """A rule set, read from text if given text."""
    rs = RuleSet(rule_set) if isinstance(rule_set, str) else rule_set
    if not isinstance(rs, RuleSet):
        raise TypeError(f"rules must be a RuleSet or rule text, not {type(rule_set).__name__}")
    return rs


def rewrite_jaxpr(
    closed_jaxpr: _ir.ClosedJaxpr,
    rule_set: RuleSet | str,
    *,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> _ir.ClosedJaxpr:
    """The closed jaxpr with the rules applied to a fixpoint (same inputs, outputs and
    constants); dead equations are removed and the result is typechecked."""
    if not isinstance(closed_jaxpr, _ir.ClosedJaxpr):
        raise TypeError(f"rewrite_jaxpr takes a ClosedJaxpr, not {type(closed_jaxpr).__name__}")
    jaxpr, _, _ = _ir.rewrite(closed_jaxpr.jaxpr, _rule_set(rule_set), max_iterations)
    return _ir.ClosedJaxpr(jaxpr, closed_jaxpr.consts)


def rewrite(
    f: Callable[..., Any],
    rule_set: RuleSet | str,
    *,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> Callable[..., Any]:
    """``f`` with its program rewritten: each call traces ``f`` on the arguments' types,
    applies the rules to the jaxpr and runs the result. The rewritten function works
    eagerly and under ``jit``, ``grad``, ``vmap`` and the other transformations, which
    see the rewritten program (so ``grad`` differentiates what the rules made)."""
    rs = _rule_set(rule_set)

    @functools.wraps(f)
    def rewritten(*args: Any) -> Any:
        from ferrax._jit import eval_jaxpr

        flat, in_tree = tree_flatten(tuple(args))
        avals = [_arg_aval(x, i) for i, x in enumerate(flat)]
        closed, out_tree = trace_to_jaxpr(f, avals, in_tree)
        jaxpr, _, _ = _ir.rewrite(closed.jaxpr, rs, max_iterations)
        outs = eval_jaxpr(jaxpr, closed.consts, *flat)
        return tree_unflatten(out_tree, outs)

    return rewritten
