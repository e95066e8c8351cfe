"""Tests of the IR bindings (`ferrax.core`): abstract values, the builder, jaxpr views,
closed jaxprs, extension primitives, text, typechecking and passes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ferrax
from ferrax import BuilderError, FerraxError, ParseError, PassError, TypeCheckError
from ferrax.core import (
    ClosedJaxpr,
    ExtensionPrimitive,
    Jaxpr,
    JaxprBuilder,
    Literal,
    ShapedArray,
    Var,
    dce,
    parse_jaxpr,
    toposort,
    typecheck,
)

# The canonical text of the jaxpr `make_canonical` builds.
CANONICAL = """\
{ lambda a:f32[8]; b:f32[8] c:f32[]. let
    d:f32[8] = mul b a
    e:f32[8] = add d 2.0:f32[]
    f:f32[] = reduce_sum[axes=(0,)] e
  in (f,) }"""

BF16 = np.dtype(ml_dtypes.bfloat16)


def f32(*shape: int) -> ShapedArray:
    return ShapedArray(shape, np.float32)


def make_canonical() -> Jaxpr:
    b = JaxprBuilder()
    a = b.add_constvar(f32(8))
    x = b.add_invar(f32(8))
    b.add_invar(f32())
    (d,) = b.add_eqn("mul", [x, a], {})
    (e,) = b.add_eqn("add", [d, b.literal(2.0, np.float32)], {})
    (f,) = b.add_eqn("reduce_sum", [e], {"axes": (0,)})
    return b.build([f])


def unary_jaxpr(prim: str, aval: ShapedArray) -> Jaxpr:
    b = JaxprBuilder()
    x = b.add_invar(aval)
    return b.build(b.add_eqn(prim, [x], {}))


def closed(j: Jaxpr, consts: Sequence[object] = ()) -> ClosedJaxpr:
    return ClosedJaxpr(j, consts)


# ------------------------------------------------------------------------ errors


def test_docstrings() -> None:
    from ferrax import _ir

    for name in _ir.__all__:
        obj = getattr(_ir, name)
        assert obj.__doc__, name
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            for attr, member in vars(obj).items():
                if not attr.startswith("_"):
                    assert member.__doc__, f"{name}.{attr}"


def test_error_hierarchy() -> None:
    for cls in (
        TypeCheckError,
        ParseError,
        ferrax.LoweringError,
        PassError,
        BuilderError,
        ferrax.ConcretizationError,
    ):
        assert issubclass(cls, FerraxError)
    assert issubclass(FerraxError, Exception)
    assert issubclass(ferrax.TracerBoolConversionError, ferrax.ConcretizationError)
    # As JAX's ConcretizationTypeError.
    assert issubclass(ferrax.ConcretizationError, TypeError)
    assert TypeCheckError.eqn_index is None
    assert TypeCheckError("made in Python").eqn_index is None
    assert set(ferrax.__all__) >= set(
        [
            "BuilderError",
            "ConcretizationError",
            "FerraxError",
            "LoweringError",
            "ParseError",
            "PassError",
            "TracerBoolConversionError",
            "TypeCheckError",
        ]
    )


# ----------------------------------------------------------------- ShapedArray


def test_shaped_array_fields() -> None:
    a = ShapedArray((3, 4), np.float32)
    assert a.shape == (3, 4)
    assert isinstance(a.shape, tuple)
    assert a.dtype == np.dtype(np.float32)
    assert a.dtype is np.dtype(np.float32)
    assert a.weak_type is False
    assert a.ndim == 2
    assert a.size == 12
    assert a.str_short() == "f32[3,4]"
    assert repr(a) == "ShapedArray(float32[3,4])"
    s = ShapedArray((), "int32", weak_type=True)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.weak_type
    assert s.str_short() == "i32[]"
    assert repr(s) == "ShapedArray(int32[], weak_type=True)"
    assert ShapedArray((0, 5), "f32").size == 0


def test_shaped_array_eq_hash() -> None:
    a = ShapedArray((3, 4), np.float32)
    assert a == ShapedArray([3, 4], "f32")
    assert hash(a) == hash(ShapedArray([3, 4], "float32"))
    assert a != ShapedArray((4, 3), np.float32)
    assert a != ShapedArray((3, 4), np.float64)
    assert a != ShapedArray((3, 4), np.float32, weak_type=True)
    assert a != "f32[3,4]"
    assert len({a, ShapedArray((3, 4), "f32"), ShapedArray((3,), "f32")}) == 2


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("bool", "bool"),
        ("int8", "i8"),
        ("int16", "i16"),
        ("int32", "i32"),
        ("int64", "i64"),
        ("uint8", "u8"),
        ("uint16", "u16"),
        ("uint32", "u32"),
        ("uint64", "u64"),
        ("float16", "f16"),
        ("bfloat16", "bf16"),
        ("float32", "f32"),
        ("float64", "f64"),
    ],
)
def test_shaped_array_dtype_forms(name: str, short: str) -> None:
    expected = BF16 if name == "bfloat16" else np.dtype(name)
    forms: list[Any] = [name, short, expected, expected.type]
    for form in forms:
        a = ShapedArray((2,), form)
        assert a.dtype == expected
        assert a.dtype.name == name
        assert a.str_short() == f"{short}[2]"


def test_shaped_array_dtype_python_types() -> None:
    assert ShapedArray((), float).dtype == np.float64
    assert ShapedArray((), bool).dtype == np.bool_
    assert ShapedArray((), ml_dtypes.bfloat16).dtype == BF16
    assert ShapedArray((), "f4").dtype == np.float32
    assert ShapedArray((), "single").dtype == np.float32
    # A non-native byte order names the same element type.
    assert ShapedArray((), np.dtype(">f4")).dtype == np.float32


def test_shaped_array_shape_forms() -> None:
    assert ShapedArray(np.zeros((2, 3)).shape, "f32").shape == (2, 3)
    assert ShapedArray([np.int64(2), np.int32(3)], "f32").shape == (2, 3)
    assert ShapedArray(range(3), "f32").shape == (0, 1, 2)


@pytest.mark.parametrize(
    ("dims", "valid"),
    [
        ((0, 2**40, 2**40), False),
        ((2**40, 0, 2**40), False),
        ((2**40, 2**40, 0), False),
        ((0, 2**40, 2**20), True),
        ((2**20, 2**40, 0), True),
        ((0, 2**63 - 1), True),
        ((2**63 - 1, 0), True),
    ],
)
def test_shape_validity_does_not_depend_on_order(dims: tuple[int, ...], valid: bool) -> None:
    """Issue 10: a shape is valid when the product of its nonzero dimensions fits in int64,
    whatever the order (XLA aborts on ``(2**40, 2**40, 0)``; both orders are refused)."""
    for order in (dims, dims[::-1]):
        if valid:
            assert ShapedArray(order, np.float32).shape == order
            if max(order) < 2**60:  # NumPy refuses arrays of 2**63 bytes, even empty ones
                assert ferrax.numpy.zeros(order).shape == order
        else:
            with pytest.raises(TypeCheckError, match="product of the nonzero dimensions overflows"):
                ShapedArray(order, np.float32)
            with pytest.raises(TypeCheckError, match="(?s)overflows.*test_core"):
                ferrax.numpy.zeros(order)


def test_shaped_array_errors() -> None:
    with pytest.raises(TypeCheckError, match="negative"):
        ShapedArray((3, -1), np.float32)
    with pytest.raises(TypeCheckError, match="overflow"):
        ShapedArray((2**40, 2**40), np.float32)
    with pytest.raises(TypeCheckError, match="int64"):
        ShapedArray((2**70,), np.float32)
    with pytest.raises(TypeCheckError, match="unknown dtype 'float7'"):
        ShapedArray((3,), "float7")
    with pytest.raises(TypeCheckError, match="complex64"):
        ShapedArray((3,), np.complex64)
    with pytest.raises(TypeCheckError, match="dtype"):
        ShapedArray((3,), object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ShapedArray("abc", np.float32)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ShapedArray((1.5,), np.float32)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ShapedArray(3, np.float32)  # type: ignore[arg-type]


def test_shaped_array_update() -> None:
    a = ShapedArray((3,), np.float32)
    assert a.update(shape=(4, 5)) == ShapedArray((4, 5), np.float32)
    assert a.update(dtype="i32") == ShapedArray((3,), np.int32)
    assert a.update(weak_type=True) == ShapedArray((3,), np.float32, True)
    assert a.update() == a
    with pytest.raises(TypeCheckError):
        a.update(shape=(-1,))


def test_shaped_array_is_frozen() -> None:
    a = ShapedArray((3,), np.float32)
    with pytest.raises(AttributeError):
        a.shape = (4,)  # type: ignore[misc]


# --------------------------------------------------------------------- builder


def test_builder_builds_and_views() -> None:
    b = JaxprBuilder()
    c = b.add_constvar(f32(8))
    x = b.add_invar(f32(8))
    y = b.add_invar(f32())
    assert isinstance(x, Var)
    assert x.aval == f32(8)
    assert x == x and x != c and hash(x) == hash(x)
    (d,) = b.add_eqn("mul", [x, c], {})
    assert d.aval == f32(8)
    two = b.literal(2.0, np.float32)
    (e,) = b.add_eqn("add", [d, two], {})
    (f,) = b.add_eqn("reduce_sum", [e], {"axes": [0]})
    j = b.build([f, y])

    assert [v.aval for v in j.constvars] == [f32(8)]
    assert [v.aval for v in j.invars] == [f32(8), f32()]
    assert j.in_avals == [f32(8), f32()]
    assert j.out_avals == [f32(), f32()]
    assert [e.primitive for e in j.eqns] == ["mul", "add", "reduce_sum"]
    mul, add, rsum = j.eqns
    # Variables of one jaxpr compare equal through every view of it.
    assert mul.inputs == [j.invars[0], j.constvars[0]]
    assert add.inputs[0] == mul.outvars[0]
    assert add.inputs[1] == Literal_of(2.0, np.float32)
    assert rsum.outvars[0] == j.outvars[0]
    assert j.outvars[1] == j.invars[1]
    assert hash(rsum.outvars[0]) == hash(j.outvars[0])
    assert mul.params == {} and rsum.params == {"axes": (0,)}
    # A builder's variables are not the built jaxpr's.
    assert x != j.invars[0]
    assert len({*j.invars, *j.invars, *j.constvars}) == 3


def Literal_of(value: bool | int | float, dtype: Any, weak_type: bool = False) -> Literal:
    return JaxprBuilder().literal(value, dtype, weak_type)


def test_builder_literal_outputs_and_inputs() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32())
    one = b.literal(1, np.float32)
    (y,) = b.add_eqn("add", [x, one], {})
    j = b.build([y, b.literal(True, np.bool_), b.literal(3, "i32", weak_type=True)])
    outs = j.outvars
    assert isinstance(outs[1], Literal) and outs[1].val is True
    assert isinstance(outs[2], Literal) and outs[2].val == 3
    assert type(outs[2].val) is int
    assert outs[2].aval == ShapedArray((), np.int32, weak_type=True)
    lit = j.eqns[0].inputs[1]
    assert isinstance(lit, Literal)
    assert lit.val == 1.0 and type(lit.val) is float
    assert lit.aval == f32()
    assert j.out_avals[1:] == [ShapedArray((), bool), ShapedArray((), "i32", True)]


def test_literal_values() -> None:
    b = JaxprBuilder()
    assert b.literal(2, np.float32).val == 2.0
    assert b.literal(np.float32(1.5), "f32").val == 1.5
    assert b.literal(np.int64(7), np.int8).val == 7
    assert b.literal(True, np.int32).val == 1
    assert b.literal(np.bool_(False), bool).val is False
    assert b.literal(255, np.uint8).val == 255
    assert b.literal(-(2**63), np.int64).val == -(2**63)
    assert b.literal(1.0, "bf16").aval == ShapedArray((), "bfloat16")
    nan = b.literal(float("nan"), np.float32)
    assert nan == b.literal(float("nan"), np.float32)
    assert b.literal(1, "i32") != b.literal(1, "i64")
    assert b.literal(1, "i32") != b.literal(1, "i32", weak_type=True)
    assert hash(b.literal(1.0, "f32")) == hash(b.literal(1, "f32"))
    assert repr(b.literal(2.0, "f32")) == "Literal(2.0:f32[])"


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (300, np.uint8),
        (-1, np.uint32),
        (2**31, np.int32),
        (2**64, np.uint64),
        (2.5, np.int32),
        (1, np.bool_),
        (1.0, "bool"),
    ],
)
def test_literal_does_not_fit(value: bool | int | float, dtype: Any) -> None:
    with pytest.raises(TypeCheckError, match="does not fit"):
        JaxprBuilder().literal(value, dtype)


def test_literal_bad_value_type() -> None:
    with pytest.raises((TypeError, TypeCheckError)):
        JaxprBuilder().literal("1", np.int32)  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="unknown dtype"):
        JaxprBuilder().literal(1, "int3")


def test_builder_foreign_vars() -> None:
    b1, b2 = JaxprBuilder(), JaxprBuilder()
    x1 = b1.add_invar(f32(3))
    x2 = b2.add_invar(f32(3))
    with pytest.raises(TypeCheckError, match="variable from another jaxpr"):
        b2.add_eqn("add", [x2, x1], {})
    with pytest.raises(TypeCheckError, match="variable from another jaxpr"):
        b2.build([x1])
    j = b1.build([x1])
    b3 = JaxprBuilder()
    with pytest.raises(TypeCheckError, match="variable from another jaxpr"):
        b3.add_eqn("neg", [j.invars[0]], {})
    with pytest.raises(TypeCheckError, match="variable from another jaxpr"):
        b3.add_eqn_with_outvars("neg", [], {}, [x2])
    # The failed calls left b2 usable.
    (y,) = b2.add_eqn("neg", [x2], {})
    assert [e.primitive for e in b2.build([y]).eqns] == ["neg"]


def test_builder_bad_primitive() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    with pytest.raises(TypeCheckError, match="unknown primitive 'frobnicate'"):
        b.add_eqn("frobnicate", [x], {})
    with pytest.raises(TypeError):
        b.add_eqn(42, [x], {})  # type: ignore[arg-type]


def test_builder_bad_inputs() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    with pytest.raises(TypeError, match="Var or a Literal"):
        b.add_eqn("neg", [np.zeros(3)], {})  # type: ignore[list-item]
    with pytest.raises(TypeError):
        b.add_eqn("neg", "x", {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        b.add_eqn("neg", [x], {1: 2})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        b.add_invar((3,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="outputs must be Vars"):
        b.add_eqn_with_outvars("neg", [x], {}, [b.literal(1.0, "f32")])  # type: ignore[list-item]


def test_builder_params_errors() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3, 4))
    with pytest.raises(TypeCheckError, match="unknown param 'foo'") as info:
        b.add_eqn("neg", [x], {"foo": 1})
    assert info.value.eqn_index == 0
    with pytest.raises(TypeCheckError, match="missing param 'axes'"):
        b.add_eqn("reduce_sum", [x], {})
    with pytest.raises(TypeCheckError, match="'axes' must be a tuple of ints, got a str"):
        b.add_eqn("reduce_sum", [x], {"axes": "0"})
    with pytest.raises(TypeCheckError, match="'axes' must be a tuple of ints"):
        b.add_eqn("reduce_sum", [x], {"axes": (True, False)})
    with pytest.raises(TypeCheckError, match="'axes' must be a tuple of ints"):
        b.add_eqn("reduce_sum", [x], {"axes": object()})
    with pytest.raises(TypeCheckError, match="'new_dtype' must be a dtype"):
        b.add_eqn("convert_element_type", [x], {"new_dtype": "float7"})
    with pytest.raises(TypeCheckError, match="'y' must be a int"):
        b.add_eqn("integer_pow", [x], {"y": 2.0})
    with pytest.raises(TypeCheckError, match="'dimension_numbers'"):
        b.add_eqn("dot_general", [x, x], {"dimension_numbers": ((1,), (0,))})
    with pytest.raises(TypeCheckError, match="'axes'"):
        b.add_eqn("reduce_sum", [x], {"axes": (5,)})
    # The failures added no equation.
    (y,) = b.add_eqn("neg", [x], {})
    assert len(b.build([y]).eqns) == 1


def test_builder_shape_mismatch_names_the_equation() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    y = b.add_invar(f32(4))
    (z,) = b.add_eqn("neg", [x], {})
    with pytest.raises(TypeCheckError) as info:
        b.add_eqn("add", [z, y], {})
    message = str(info.value)
    assert "eqn 1" in message and "add" in message
    assert "[3]" in message and "[4]" in message
    assert info.value.eqn_index == 1
    with pytest.raises(TypeCheckError, match="eqn 1 .*sin"):
        b.add_eqn("sin", [b.add_invar(ShapedArray((), np.int32))], {})
    with pytest.raises(TypeCheckError, match="operands"):
        b.add_eqn("add", [x], {})


def test_builder_is_spent_after_build() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32())
    b.build([x])
    for call in (
        lambda: b.add_invar(f32()),
        lambda: b.add_constvar(f32()),
        lambda: b.new_var(f32()),
        lambda: b.add_eqn("neg", [x], {}),
        lambda: b.build([x]),
        lambda: b.build_toposorted([x]),
    ):
        with pytest.raises(BuilderError, match="already built"):
            call()
    assert "built" in repr(b)


def test_builder_is_spent_after_failed_build() -> None:
    b = JaxprBuilder()
    v = b.new_var(f32())
    with pytest.raises(TypeCheckError):
        b.build([v])  # `v` is never bound.
    with pytest.raises(BuilderError):
        b.build([v])


def test_builder_params_kind_conversion_both_ways() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(2, 3))
    w = b.add_invar(f32(3, 4))
    (c,) = b.add_eqn("convert_element_type", [x], {"new_dtype": "float16", "weak_type": False})
    (c2,) = b.add_eqn("convert_element_type", [x], {"new_dtype": np.int32})
    (c3,) = b.add_eqn("convert_element_type", [x], {"new_dtype": ml_dtypes.bfloat16})
    assert c.aval.dtype == np.float16
    assert c2.aval.dtype == np.int32
    assert c3.aval.dtype == BF16
    (r,) = b.add_eqn("reduce_sum", [x], {"axes": [np.int64(1)]})
    (bc,) = b.add_eqn(
        "broadcast_in_dim",
        [r],
        {"shape": np.array([4, 2]).tolist(), "broadcast_dimensions": [1], "sharding": None},
    )
    (dot,) = b.add_eqn(
        "dot_general",
        [x, w],
        {
            "dimension_numbers": [[[1], [0]], [[], []]],
            "precision": None,
            "preferred_element_type": None,
        },
    )
    (dot64,) = b.add_eqn(
        "dot_general",
        [x, w],
        {"dimension_numbers": (((1,), (0,)), ((), ())), "preferred_element_type": "float64"},
    )
    (io,) = b.add_eqn("iota", [], {"dtype": "int32", "shape": (5,), "dimension": 0})
    (rs,) = b.add_eqn("reshape", [x], {"new_sizes": (3, 2), "dimensions": None})
    j = b.build([c, c2, c3, bc, dot, dot64, io, rs])
    assert j.out_avals == [
        ShapedArray((2, 3), np.float16),
        ShapedArray((2, 3), np.int32),
        ShapedArray((2, 3), BF16),
        f32(4, 2),
        f32(2, 4),
        ShapedArray((2, 4), np.float64),
        ShapedArray((5,), np.int32),
        f32(3, 2),
    ]
    params = [e.params for e in j.eqns]
    assert params[0] == {"new_dtype": np.dtype(np.float16), "weak_type": False}
    assert params[0]["new_dtype"] is np.dtype(np.float16)
    assert params[2]["new_dtype"] == BF16
    assert params[3] == {"axes": (1,)}
    assert params[4] == {"shape": (4, 2), "broadcast_dimensions": (1,), "sharding": None}
    assert params[5] == {
        "dimension_numbers": (((1,), (0,)), ((), ())),
        "precision": None,
        "preferred_element_type": None,
    }
    assert params[6]["preferred_element_type"] == np.float64
    assert params[7] == {"dtype": np.dtype(np.int32), "shape": (5,), "dimension": 0}
    assert params[8] == {"new_sizes": (3, 2), "dimensions": None}
    v = params[5]["dimension_numbers"][0][0]
    assert type(v) is tuple and all(type(i) is int for i in v)
    # A NumPy int stays one, as JAX keeps it (and prints it `np.int64(1)`).
    (axis,) = params[3]["axes"]
    assert type(params[3]["axes"]) is tuple and type(axis) is np.int64
    assert "axes=(np.int64(1),)" in str(j)

    # Reading the params back in gives the same equations.
    b2 = JaxprBuilder()
    ins = [b2.add_invar(a) for a in j.in_avals]
    env: dict[Var, Var] = dict(zip(j.invars, ins))
    for eqn in j.eqns:
        args = [env[v] for v in eqn.inputs if isinstance(v, Var)]
        env.update(zip(eqn.outvars, b2.add_eqn(eqn.primitive, args, eqn.params)))
    j2 = b2.build([env[v] for v in j.outvars if isinstance(v, Var)])
    assert [e.params for e in j2.eqns] == params
    assert j2.out_avals == j.out_avals


def make_sub_jaxprs() -> tuple[Jaxpr, ClosedJaxpr, ClosedJaxpr]:
    sin = closed(unary_jaxpr("sin", f32(3)))
    cos = closed(unary_jaxpr("cos", f32(3)))
    b = JaxprBuilder()
    i = b.add_invar(ShapedArray((), np.int32))
    x = b.add_invar(f32(3))
    (y,) = b.add_eqn("jit", [x], {"jaxpr": sin, "name": "f"})
    (z,) = b.add_eqn("cond", [i, y], {"branches": [sin, cos]})
    return b.build([z]), sin, cos


def test_nested_closed_jaxpr_params() -> None:
    j, sin, cos = make_sub_jaxprs()
    jit_eqn, cond_eqn = j.eqns
    sub = jit_eqn.params["jaxpr"]
    assert isinstance(sub, ClosedJaxpr)
    assert sub == sin and hash(sub) == hash(sin)
    assert sub.jaxpr == sin.jaxpr and sub.jaxpr != cos.jaxpr
    assert jit_eqn.params["name"] == "f"
    branches = cond_eqn.params["branches"]
    assert type(branches) is tuple and branches == (sin, cos)
    assert [e.primitive for e in branches[1].jaxpr.eqns] == ["cos"]
    assert typecheck(j) == ([ShapedArray((), np.int32), f32(3)], [f32(3)])


def test_nested_jaxpr_type_errors() -> None:
    sin = closed(unary_jaxpr("sin", f32(3)))
    sin4 = closed(unary_jaxpr("sin", f32(4)))
    b = JaxprBuilder()
    x = b.add_invar(f32(4))
    i = b.add_invar(ShapedArray((), np.int32))
    with pytest.raises(TypeCheckError, match="f32\\[4\\]"):
        b.add_eqn("jit", [x], {"jaxpr": sin})
    with pytest.raises(TypeCheckError, match="branches"):
        b.add_eqn("cond", [i, x], {"branches": (sin, sin4)})
    with pytest.raises(TypeCheckError, match="'jaxpr' must be a jaxpr"):
        b.add_eqn("jit", [x], {"jaxpr": sin4.jaxpr})


def test_add_eqn_with_outvars_and_build_toposorted() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    y = b.new_var(f32(3))
    z = b.new_var(f32(3))
    b.add_eqn_with_outvars("sin", [y], {}, [z])  # uses y before it is bound
    b.add_eqn_with_outvars("neg", [x], {}, [y])
    j = b.build_toposorted([z])
    assert [e.primitive for e in j.eqns] == ["neg", "sin"]
    assert j.eqns[1].inputs == j.eqns[0].outvars


def test_add_eqn_with_outvars_out_of_order_fails_plain_build() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    y, z = b.new_var(f32(3)), b.new_var(f32(3))
    b.add_eqn_with_outvars("sin", [y], {}, [z])
    b.add_eqn_with_outvars("neg", [x], {}, [y])
    with pytest.raises(TypeCheckError, match="before it is bound"):
        b.build([z])


def test_add_eqn_with_outvars_wrong_types_and_cycles() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    y = b.new_var(f32(4))
    b.add_eqn_with_outvars("neg", [x], {}, [y])
    with pytest.raises(TypeCheckError, match="differ from the rule"):
        b.build([y])
    c = JaxprBuilder()
    p, q = c.new_var(f32()), c.new_var(f32())
    c.add_eqn_with_outvars("neg", [q], {}, [p])
    c.add_eqn_with_outvars("neg", [p], {}, [q])
    with pytest.raises(TypeCheckError, match="cycle"):
        c.build_toposorted([p])


# ------------------------------------------------------------------- ClosedJaxpr


def test_closed_jaxpr_consts() -> None:
    j = make_canonical()
    arr = np.arange(8, dtype=np.float32)
    before = sys.getrefcount(arr)
    cj = ClosedJaxpr(j, [arr])
    assert cj.consts[0] is arr
    assert cj.jaxpr == j
    assert cj.in_avals == [f32(8), f32()]
    assert cj.out_avals == [f32()]
    assert cj == cj and cj != ClosedJaxpr(j, [arr])
    assert cj.consts[0] is ClosedJaxpr(j, (arr,)).consts[0]
    del cj
    assert sys.getrefcount(arr) == before
    # Any object is held as it is: the constant takes its constvar's type.
    marker = object()
    assert ClosedJaxpr(j, [marker]).consts == [marker]


def test_closed_jaxpr_const_count() -> None:
    j = make_canonical()
    with pytest.raises(TypeCheckError, match="1 constvars but 0 constants"):
        ClosedJaxpr(j, [])
    with pytest.raises(TypeCheckError, match="1 constvars but 2 constants"):
        ClosedJaxpr(j, [np.zeros(8), np.zeros(8)])
    with pytest.raises(TypeError):
        ClosedJaxpr(j, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ClosedJaxpr(j.eqns[0], [])  # type: ignore[arg-type]


def test_closed_jaxpr_consts_in_params() -> None:
    b = JaxprBuilder()
    k = b.add_constvar(f32(3))
    x = b.add_invar(f32(3))
    inner = b.build(b.add_eqn("mul", [x, k], {}))
    arr = np.ones(3, np.float32)
    cj = ClosedJaxpr(inner, [arr])
    outer = JaxprBuilder()
    y = outer.add_invar(f32(3))
    j = outer.build(outer.add_eqn("jit", [y], {"jaxpr": cj}))
    sub = j.eqns[0].params["jaxpr"]
    assert sub.consts[0] is arr
    assert sub.in_avals == [f32(3)]


# ------------------------------------------------------------ ExtensionPrimitive


def test_extension_primitive_rule_is_called() -> None:
    calls: list[tuple[list[ShapedArray], dict[str, Any]]] = []

    def rule(avals: list[ShapedArray], params: dict[str, Any]) -> Sequence[ShapedArray]:
        calls.append((avals, params))
        (x,) = avals
        return [x.update(shape=(*x.shape, params["n"])), x]

    sub = closed(unary_jaxpr("sin", f32()))
    prim = ExtensionPrimitive("tile_last", rule)
    assert prim.name == "tile_last" and prim.abstract_eval is rule
    assert repr(prim) == "ExtensionPrimitive('tile_last')"
    b = JaxprBuilder()
    x = b.add_invar(f32(2))
    params: dict[str, object] = {
        "n": 3,
        "scale": 0.5,
        "flag": True,
        "mode": "wrap",
        "axes": [0, 1],
        "mask": (True, False),
        "dtype": np.dtype(np.float16),
        "dtype_type": np.int8,
        "body": sub,
        "bodies": (sub, sub),
        "none": None,
        "empty": (),
        "dims": (((1,), (0,)), ((), ())),
    }
    y, z = b.add_eqn(prim, [x], params)
    assert y.aval == f32(2, 3) and z.aval == f32(2)
    assert len(calls) == 1
    avals, seen = calls[0]
    assert avals == [f32(2)]
    expected: dict[str, object] = {
        "n": 3,
        "scale": 0.5,
        "flag": True,
        "mode": "wrap",
        "axes": (0, 1),
        "mask": (True, False),
        "dtype": np.dtype(np.float16),
        "dtype_type": np.dtype(np.int8),
        "body": sub,
        "bodies": (sub, sub),
        "none": None,
        "empty": (),
        "dims": (((1,), (0,)), ((), ())),
    }
    assert seen == expected
    j = b.build([y, z])
    assert len(calls) == 1  # checked when added: build does not run the rule again
    (eqn,) = j.eqns
    assert eqn.primitive == "tile_last"
    assert eqn.params == expected
    assert typecheck(j) == ([f32(2)], [f32(2, 3), f32(2)])
    assert len(calls) == 2
    # Variables made apart from their equation: build checks the equation with the rule.
    b = JaxprBuilder()
    x = b.add_invar(f32(2))
    outs = [b.new_var(f32(2, 3)), b.new_var(f32(2))]
    b.add_eqn_with_outvars(prim, [x], params, outs)
    b.build(outs)
    assert len(calls) == 3
    b = JaxprBuilder()
    x = b.add_invar(f32(2))
    outs = [b.new_var(f32(2, 3)), b.new_var(f32(3))]
    b.add_eqn_with_outvars(prim, [x], params, outs)
    with pytest.raises(TypeCheckError):
        b.build(outs)


def test_extension_primitive_rule_raising() -> None:
    def rule(avals: list[ShapedArray], params: dict[str, Any]) -> Sequence[ShapedArray]:
        raise ValueError("operand must be square")

    prim = ExtensionPrimitive("inverse", rule)
    b = JaxprBuilder()
    x = b.add_invar(f32(2, 3))
    b.add_eqn("neg", [x], {})
    with pytest.raises(TypeCheckError) as info:
        b.add_eqn(prim, [x], {})
    message = str(info.value)
    assert "ValueError: operand must be square" in message
    assert "inverse" in message and "eqn 1" in message
    assert info.value.eqn_index == 1
    # The rule's own exception (and its traceback) is kept as the cause.
    cause = info.value.__cause__
    assert isinstance(cause, ValueError) and str(cause) == "operand must be square"
    assert cause.__traceback__ is not None


def returning(result: object) -> Callable[[list[ShapedArray], dict[str, Any]], Any]:
    return lambda avals, params: result


def test_extension_primitive_rule_bad_result() -> None:
    results: list[object] = [f32(), [f32(), "x"], 3, "f32[]"]
    for result in results:
        prim = ExtensionPrimitive("bad", returning(result))
        b = JaxprBuilder()
        x = b.add_invar(f32())
        with pytest.raises(TypeCheckError, match="sequence of ShapedArray"):
            b.add_eqn(prim, [x], {})
    empty = ExtensionPrimitive("effect", lambda avals, params: ())
    b = JaxprBuilder()
    x = b.add_invar(f32())
    assert b.add_eqn(empty, [x], {}) == []


def test_extension_primitive_reentrant_builder() -> None:
    b = JaxprBuilder()

    def rule(avals: list[ShapedArray], params: dict[str, Any]) -> Sequence[ShapedArray]:
        b.add_invar(f32())
        return avals

    prim = ExtensionPrimitive("sneaky", rule)
    x = b.add_invar(f32())
    with pytest.raises(TypeCheckError, match="BuilderError: the JaxprBuilder is in use"):
        b.add_eqn(prim, [x], {})
    # Still usable afterwards.
    (y,) = b.add_eqn("neg", [x], {})
    b.build([y])


def test_extension_primitive_param_errors() -> None:
    prim = ExtensionPrimitive("p", lambda avals, params: avals)
    b = JaxprBuilder()
    x = b.add_invar(f32())
    # Any other object is kept as it is, an opaque param (a rule, a record of what the
    # primitive's rules need), and handed back as the same object.
    rule = lambda: 0  # noqa: E731
    b2 = JaxprBuilder()
    (out,) = b2.add_eqn(prim, [b2.add_invar(f32())], {"f": rule})
    assert b2.build([out]).eqns[0].params["f"] is rule
    with pytest.raises(TypeCheckError, match="unsupported type"):
        b.add_eqn(prim, [x], {"mixed": (1, "a")})
    with pytest.raises(TypeCheckError, match="unsupported type"):
        b.add_eqn(prim, [x], {"big": 2**70})


@pytest.mark.parametrize("name", ["p", "_", "_x1", "MyPrim", "a1b2", "True", "None"])
def test_every_accepted_extension_name_prints_and_parses_back(name: str) -> None:
    prim = ExtensionPrimitive(name, lambda avals, params: avals)
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    (y,) = b.add_eqn(prim, [x], {name: 1})
    text = str(b.build([y]))
    assert f"= {name}[{name}=1]" in text
    assert str(parse_jaxpr(text, extensions=[prim])) == text


def test_extension_param_names_must_be_identifiers() -> None:
    prim = ExtensionPrimitive("p", lambda avals, params: avals)
    for bad in ["bad name", "k=1", "", "1k"]:
        b = JaxprBuilder()
        x = b.add_invar(f32())
        with pytest.raises(TypeCheckError, match="parameter's name"):
            b.add_eqn(prim, [x], {bad: 1})


def test_extension_primitive_construction_errors() -> None:
    with pytest.raises(ValueError, match="built-in"):
        ExtensionPrimitive("add", lambda avals, params: avals)
    with pytest.raises(ValueError, match="identifier"):
        ExtensionPrimitive("my prim", lambda avals, params: avals)
    with pytest.raises(ValueError, match="identifier"):
        ExtensionPrimitive("", lambda avals, params: avals)
    # Names the text could not read back: punctuation, a leading digit, a keyword.
    for bad in ["a-b", "a=b", "1a", "a.b", "x[0]", "é"]:
        with pytest.raises(ValueError, match="identifier"):
            ExtensionPrimitive(bad, lambda avals, params: avals)
    for keyword in ["lambda", "let", "in"]:
        with pytest.raises(ValueError, match="keyword"):
            ExtensionPrimitive(keyword, lambda avals, params: avals)
    with pytest.raises(TypeError, match="callable"):
        ExtensionPrimitive("p", 3)  # type: ignore[arg-type]


# ------------------------------------------------------------------- typecheck


def test_typecheck() -> None:
    j = make_canonical()
    ins, outs = typecheck(j)
    assert ins == [f32(8), f32()] and outs == [f32()]
    with pytest.raises(TypeError):
        typecheck(ClosedJaxpr(j, [np.zeros(8)]))  # type: ignore[arg-type]


# ==================================================================================
# Below: tests of the printer, the parser and the passes (dce, toposort). They are
# written against the contract and fail until those land in ferrax-ir.
# ==================================================================================


def test_text_print_canonical() -> None:
    assert str(make_canonical()) == CANONICAL
    assert repr(make_canonical()) == CANONICAL
    assert str(ClosedJaxpr(make_canonical(), [np.zeros(8, np.float32)])) == CANONICAL


def test_text_parse_canonical() -> None:
    j = parse_jaxpr(CANONICAL)
    assert str(j) == CANONICAL
    assert j.in_avals == [f32(8), f32()]
    assert [v.aval for v in j.constvars] == [f32(8)]
    assert [e.primitive for e in j.eqns] == ["mul", "add", "reduce_sum"]
    assert j.eqns[2].params == {"axes": (0,)}
    lit = j.eqns[1].inputs[1]
    assert isinstance(lit, Literal) and lit.val == 2.0 and lit.aval == f32()
    cj = ClosedJaxpr(j, [np.ones(8, np.float32)])
    assert cj.out_avals == [f32()]


def roundtrip(j: Jaxpr, extensions: Sequence[ExtensionPrimitive] = ()) -> None:
    text = str(j)
    # A sub-jaxpr held twice prints once, first, as JAX's `let NAME = { ... } in`.
    assert text.startswith("{ lambda ") or text.startswith("let ")
    again = parse_jaxpr(text, extensions=extensions)
    assert str(again) == text
    assert again.in_avals == j.in_avals and again.out_avals == j.out_avals
    assert [e.primitive for e in again.eqns] == [e.primitive for e in j.eqns]


def test_text_roundtrip_params_and_nested() -> None:
    j, _, _ = make_sub_jaxprs()
    roundtrip(j)
    b = JaxprBuilder()
    x = b.add_invar(f32(2, 3))
    w = b.add_invar(f32(3, 4))
    (d,) = b.add_eqn(
        "dot_general",
        [x, w],
        {"dimension_numbers": (((1,), (0,)), ((), ())), "precision": None,
         "preferred_element_type": np.float32},
    )
    (c,) = b.add_eqn("convert_element_type", [d], {"new_dtype": "bfloat16", "weak_type": False})
    (t,) = b.add_eqn("transpose", [x], {"permutation": (1, 0)})
    (k,) = b.add_eqn("mul", [t, b.literal(-0.5, np.float32)], {})
    j2 = b.build([c, k, b.literal(7, np.int32), b.literal(True, bool)])
    roundtrip(j2)
    parsed = parse_jaxpr(str(j2))
    assert parsed.eqns[0].params["dimension_numbers"] == (((1,), (0,)), ((), ()))
    assert parsed.eqns[1].params["new_dtype"] == BF16
    assert [o.val for o in parsed.outvars if isinstance(o, Literal)] == [7, True]


def test_text_roundtrip_extension_primitive() -> None:
    prim = ExtensionPrimitive("my_op", lambda avals, params: avals)
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    j = b.build(b.add_eqn(prim, [x], {"k": 2}))
    roundtrip(j, [prim])
    with pytest.raises(FerraxError):
        parse_jaxpr(str(j))  # my_op is unknown without the extension


def test_text_parse_error_line_and_column() -> None:
    text = "{ lambda ; a:f32[]. let\n    b:f32[] = sin a\n  in (b,) ]"
    with pytest.raises(ParseError) as info:
        parse_jaxpr(text)
    assert (info.value.line, info.value.column) == (3, 11)
    assert isinstance(info.value, FerraxError)
    with pytest.raises(ParseError) as info2:
        parse_jaxpr("{ lambda ; a:f32[3. let\n  in (a,) }")
    assert info2.value.line == 1 and info2.value.column > 1
    with pytest.raises(ParseError):
        parse_jaxpr("")


def test_text_parse_ill_typed_is_typecheck_error() -> None:
    unbound = "{ lambda ; a:f32[]. let\n    b:f32[] = sin z\n  in (b,) }"
    with pytest.raises(TypeCheckError, match="z"):
        parse_jaxpr(unbound)
    wrong_type = "{ lambda ; a:f32[]. let\n    b:f32[3] = sin a\n  in (b,) }"
    with pytest.raises(TypeCheckError):
        parse_jaxpr(wrong_type)
    twice = "{ lambda ; a:f32[]. let\n    a:f32[] = sin a\n  in (a,) }"
    with pytest.raises(TypeCheckError):
        parse_jaxpr(twice)


def make_dead_code() -> Jaxpr:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    y = b.add_invar(f32(3))
    (s,) = b.add_eqn("sin", [x], {})
    (dead,) = b.add_eqn("exp", [x], {})
    (c,) = b.add_eqn("cos", [y], {})
    (m,) = b.add_eqn("mul", [s, s], {})
    del dead
    return b.build([m, c])


def test_pass_dce() -> None:
    j = make_dead_code()
    kept, used_inputs = dce(j, [True, False])
    assert used_inputs == [True, False]
    assert [e.primitive for e in kept.eqns] == ["sin", "mul"]
    assert kept.in_avals == [f32(3)] and kept.out_avals == [f32(3)]
    typecheck(kept)
    everything, used = dce(j, [True, True])
    assert used == [True, True]
    assert [e.primitive for e in everything.eqns] == ["sin", "cos", "mul"]
    nothing, used = dce(j, (False, False))
    assert used == [False, False] and nothing.eqns == [] and nothing.out_avals == []


def test_pass_dce_flag_count() -> None:
    j = make_dead_code()
    with pytest.raises(PassError, match="flags"):
        dce(j, [True])
    with pytest.raises(TypeError):
        dce(j, [1, 0])  # type: ignore[list-item]


def test_pass_toposort() -> None:
    b = JaxprBuilder()
    x = b.add_invar(f32(3))
    (a,) = b.add_eqn("sin", [x], {})
    (bb,) = b.add_eqn("cos", [x], {})
    (unused,) = b.add_eqn("exp", [x], {})
    (c,) = b.add_eqn("mul", [bb, bb], {})
    del unused
    j = b.build([c, a])
    sorted_j = toposort(j)
    assert [e.primitive for e in sorted_j.eqns] == ["cos", "mul", "sin", "exp"]
    assert typecheck(sorted_j) == typecheck(j)


def test_abstract_eval_runs_the_rust_rule() -> None:
    from ferrax._ir import abstract_eval

    f32_3 = ShapedArray((3,), np.float32)
    (out,) = abstract_eval("add", [f32_3, ShapedArray((), np.float32)], {})
    assert out == f32_3
    (out,) = abstract_eval("reduce_sum", [ShapedArray((2, 3), np.float32)], {"axes": (1,)})
    assert out == ShapedArray((2,), np.float32)
    (out,) = abstract_eval("lt", [f32_3, f32_3], {})
    assert out.dtype == np.bool_
    with pytest.raises(TypeCheckError, match=r"add operand shapes \[3\] and \[4\] differ"):
        abstract_eval("add", [f32_3, ShapedArray((4,), np.float32)], {})
    with pytest.raises(TypeCheckError, match="unknown primitive"):
        abstract_eval("no_such_primitive", [f32_3], {})
    with pytest.raises(TypeCheckError, match="missing param 'axes'"):
        abstract_eval("reduce_sum", [f32_3], {})
