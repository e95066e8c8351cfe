"""What the type checker sees of the public IR API.

`mypy --strict` checks this file (tests/test_stubs.py runs it); each `assert_type` fails
the check if the declared type changes. It also runs as an ordinary test.
"""

from typing import Any, assert_type

import numpy as np

import ferrax
from ferrax.core import (
    ClosedJaxpr,
    ExtensionPrimitive,
    Jaxpr,
    JaxprBuilder,
    JaxprEqn,
    Literal,
    ShapedArray,
    Var,
    dce,
    parse_jaxpr,
    toposort,
    typecheck,
)


def test_shaped_array_types() -> None:
    a = ShapedArray((3, 4), np.float32)
    assert_type(a, ShapedArray)
    assert_type(a.shape, tuple[int, ...])
    assert_type(a.dtype, np.dtype[Any])
    assert_type(a.weak_type, bool)
    assert_type(a.ndim, int)
    assert_type(a.size, int)
    assert_type(a.str_short(), str)
    assert_type(a.update(weak_type=True), ShapedArray)
    assert_type(a == a, bool)
    assert_type(hash(a), int)
    assert_type(ShapedArray([2], "bfloat16", weak_type=True), ShapedArray)
    assert_type(ShapedArray((), np.dtype(np.int32)), ShapedArray)


def test_builder_and_jaxpr_types() -> None:
    b = JaxprBuilder()
    x = b.add_invar(ShapedArray((3,), np.float32))
    assert_type(x, Var)
    assert_type(x.aval, ShapedArray)
    c = b.add_constvar(ShapedArray((3,), np.float32))
    lit = b.literal(2.0, np.float32)
    assert_type(lit, Literal)
    assert_type(lit.val, bool | int | float)
    outs = b.add_eqn("mul", [x, c], {})
    assert_type(outs, list[Var])
    outs2 = b.add_eqn("add", [outs[0], lit], {})
    assert_type(b.new_var(ShapedArray((), "f32")), Var)
    j = b.build(outs2)
    assert_type(j, Jaxpr)
    assert_type(j.invars, list[Var])
    assert_type(j.constvars, list[Var])
    assert_type(j.outvars, list[Var | Literal])
    assert_type(j.in_avals, list[ShapedArray])
    assert_type(j.out_avals, list[ShapedArray])
    eqn = j.eqns[0]
    assert_type(eqn, JaxprEqn)
    assert_type(eqn.primitive, str)
    assert_type(eqn.inputs, list[Var | Literal])
    assert_type(eqn.outvars, list[Var])
    assert_type(eqn.params, dict[str, Any])

    cj = ClosedJaxpr(j, [np.zeros(3, np.float32)])
    assert_type(cj.jaxpr, Jaxpr)
    assert_type(cj.consts, list[Any])
    assert_type(cj.in_avals, list[ShapedArray])
    assert_type(cj.out_avals, list[ShapedArray])

    assert_type(typecheck(j), tuple[list[ShapedArray], list[ShapedArray]])


def pass_types(j: Jaxpr) -> None:
    # Type-checked but not run here: calling the passes and the parser is tested in
    # test_core.py.
    assert_type(dce(j, [True]), tuple[Jaxpr, list[bool]])
    assert_type(toposort(j), Jaxpr)
    assert_type(parse_jaxpr("{ lambda ; . let  in () }"), Jaxpr)
    assert_type(parse_jaxpr("", extensions=[]), Jaxpr)


def test_pass_types() -> None:
    assert callable(pass_types)


def test_extension_primitive_types() -> None:
    def rule(avals: list[ShapedArray], params: dict[str, object]) -> list[ShapedArray]:
        return avals

    prim = ExtensionPrimitive("identity_op", rule)
    assert_type(prim.name, str)
    b = JaxprBuilder()
    x = b.add_invar(ShapedArray((), "f32"))
    assert_type(b.add_eqn(prim, [x], {"k": 1}), list[Var])


def error_types(parse_error: ferrax.ParseError, type_error: ferrax.TypeCheckError) -> None:
    # Type-checked only: these attributes are set on the errors Rust raises.
    assert_type(parse_error.line, int)
    assert_type(parse_error.column, int)
    assert_type(type_error.eqn_index, int | None)


def test_error_types() -> None:
    assert callable(error_types)
    assert_type(ferrax.TypeCheckError("x").eqn_index, int | None)
