"""Transpose rules of extension primitives, given from Python as jaxprs.

``_ir.ExtensionPrimitive(name, abstract_eval, transpose)``: the transpose pass calls
``transpose(avals, linear, params)`` for an equation linear in some operand and emits a
``jit`` named ``transpose(<name>)`` of the jaxpr it returns. ``Primitive.
def_transpose_jaxpr`` gives one to a Python primitive, so reverse mode (``ferrax.grad``,
``ferrax.vjp``) goes through it; gradients are compared with JAX's of the same function
written with ``jax.numpy``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ferrax
from ferrax import PassError, _ir, lax
from ferrax._interpreters import ad
from ferrax.core import Primitive, ShapedArray
from ferrax.errors import ReverseModeError

NDArray = np.ndarray[Any, Any]


def _zeros(aval: ShapedArray) -> NDArray:
    return np.zeros(aval.shape, aval.dtype)


def _same_type(x: ShapedArray) -> ShapedArray:
    return ShapedArray(x.shape, x.dtype)


def scale2_primitive(name: str, with_transpose: bool) -> Primitive:
    """``name(x) = 2 * x``, linear (its JVP applies it to the tangent), with a transpose
    rule (itself: it is self-adjoint) if asked."""
    p = Primitive(name)
    p.def_impl(lambda x: 2 * x)
    p.def_abstract_eval(_same_type)
    ad.deflinear(p)
    if with_transpose:

        def transpose(avals: list[ShapedArray], linear: list[bool]) -> _ir.ClosedJaxpr:
            assert linear == [True]
            return ferrax.make_jaxpr(lambda ct: p.bind(ct))(_zeros(avals[0]))

        p.def_transpose_jaxpr(transpose)
    return p


SCALE2 = scale2_primitive("scale2", with_transpose=True)

# ``mul_by(x, y) = factor * x * y``, bilinear (its JVP is the product rule, applying it
# to a tangent and a primal); its transpose rule handles ``y`` linear only, taking ``x``
# and the cotangent.
MUL_BY = Primitive("mul_by")
MUL_BY.def_impl(lambda x, y, *, factor: (factor * x * y).astype(y.dtype))
MUL_BY.def_abstract_eval(lambda x, y, *, factor: _same_type(y))
ad.defjvp(
    MUL_BY,
    lambda t, ans, x, y, *, factor: MUL_BY.bind(t, y, factor=factor),
    lambda t, ans, x, y, *, factor: MUL_BY.bind(x, t, factor=factor),
)
TRANSPOSE_CALLS: list[tuple[list[bool], dict[str, Any]]] = []


def _mul_by_transpose(avals: list[ShapedArray], linear: list[bool], **params: Any) -> _ir.ClosedJaxpr:
    TRANSPOSE_CALLS.append((linear, params))
    if linear != [False, True]:
        raise NotImplementedError("mul_by is linear in y only")
    return ferrax.make_jaxpr(lambda x, ct: MUL_BY.bind(x, ct, **params))(_zeros(avals[0]), _zeros(avals[1]))


MUL_BY.def_transpose_jaxpr(_mul_by_transpose)

XS = [np.linspace(-1.0, 2.0, 5, dtype=np.float32), np.float32(0.5), np.arange(6, dtype=np.float64).reshape(2, 3)]


@pytest.mark.parametrize("x", XS, ids=lambda x: str(np.shape(x)))
def test_grad_through_a_transpose_rule(x: NDArray) -> None:
    g = ferrax.grad(lambda x: (SCALE2.bind(x) * x).sum())(x)
    expected = jax.grad(lambda x: (2 * x * x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(expected), rtol=1e-6)
    assert np.asarray(g).dtype == np.asarray(expected).dtype
    # Linear only: the gradient is 2 everywhere.
    np.testing.assert_array_equal(np.asarray(ferrax.grad(lambda x: SCALE2.bind(x).sum())(x)), np.full(np.shape(x), 2.0))


def test_second_order_through_a_transpose_rule() -> None:
    x = XS[0]
    gg = ferrax.grad(lambda x: ferrax.grad(lambda y: (SCALE2.bind(y) * y * y).sum())(x).sum())(x)
    expected = jax.grad(lambda x: jax.grad(lambda y: (2 * y**3).sum())(x).sum())(x)
    np.testing.assert_allclose(np.asarray(gg), np.asarray(expected), rtol=1e-5)


def test_gradient_jaxpr_calls_the_rule_as_a_jit() -> None:
    text = str(ferrax.make_jaxpr(ferrax.grad(lambda x: SCALE2.bind(x).sum()))(XS[0]))
    assert "name='transpose(scale2)'" in text, text
    assert "jaxpr={ lambda ; " in text and "= scale2 " in text, text


def test_non_linear_operands_and_params_reach_the_rule() -> None:
    x = np.array([1.0, -2.0, 3.0], np.float32)
    y = np.array([0.5, 0.25, -1.0], np.float32)
    TRANSPOSE_CALLS.clear()
    out, pullback = ferrax.vjp(lambda y: MUL_BY.bind(x, lax.sin(y), factor=3.0), y)
    ct = np.array([1.0, 2.0, -1.0], np.float32)
    (g,) = pullback(ct)
    _, jax_pullback = jax.vjp(lambda y: 3.0 * x * jnp.sin(y), y)
    (expected,) = jax_pullback(ct)
    np.testing.assert_allclose(np.asarray(out), 3.0 * x * np.sin(y), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g), np.asarray(expected), rtol=1e-6)
    assert TRANSPOSE_CALLS == [([False, True], {"factor": 3.0})]


def test_without_a_rule_reverse_mode_says_so() -> None:
    p = scale2_primitive("scale2_no_rule", with_transpose=False)
    # Forward mode needs no transpose.
    _, t = ferrax.jvp(p.bind, (XS[0],), (np.ones(5, np.float32),))
    np.testing.assert_array_equal(np.asarray(t), np.full(5, 2.0, np.float32))
    with pytest.raises(ReverseModeError, match="scale2_no_rule has no transpose rule") as info:
        ferrax.grad(lambda x: p.bind(x).sum())(XS[0])
    assert "test_extension_transpose.py" in str(info.value)  # the user's line


def test_a_failing_rule_is_a_reverse_mode_error_with_its_message() -> None:
    x = np.ones(3, np.float32)
    # The tangent is linear in mul_by's first operand: the rule refuses.
    with pytest.raises(ReverseModeError, match="NotImplementedError: mul_by is linear in y only") as info:
        ferrax.grad(lambda x: MUL_BY.bind(x, np.ones(3, np.float32), factor=1.0).sum())(x)
    cause = info.value.__cause__
    assert isinstance(cause, PassError)
    assert isinstance(cause.__cause__, NotImplementedError)  # the rule's own exception
    assert "test_extension_transpose.py" in str(info.value)


# ----- the binding: _ir.ExtensionPrimitive(name, abstract_eval, transpose)


def _linear_jaxpr(prim: _ir.ExtensionPrimitive) -> _ir.Jaxpr:
    """``(x, t) -> prim(x, neg t)`` with f32[3] operands."""
    a = ShapedArray((3,), np.float32)
    b = _ir.JaxprBuilder()
    x, t = b.add_invar(a), b.add_invar(a)
    (n,) = b.add_eqn("neg", [t], {})
    (y,) = b.add_eqn(prim, [x, n], {"k": 2})
    return b.build([y])


def _two_operands(avals: list[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
    return [avals[1]]


def test_binding_calls_the_rule_with_avals_flags_and_params() -> None:
    seen: list[Any] = []

    def rule(avals: list[ShapedArray], linear: list[bool], params: dict[str, Any]) -> _ir.ClosedJaxpr:
        seen.append((avals, linear, params))
        # (x, ct) -> x * ct
        return ferrax.make_jaxpr(lax.mul)(_zeros(avals[0]), _zeros(avals[1]))

    prim = _ir.ExtensionPrimitive("ext_mul", _two_operands, rule)
    assert prim.transpose is rule
    tj = _ir.transpose(_linear_jaxpr(prim), [False, True])
    a = ShapedArray((3,), np.float32)
    assert seen == [([a, a], [False, True], {"k": 2})]
    assert [e.primitive for e in tj.eqns] == ["jit", "neg"]
    assert tj.eqns[0].params["name"] == "transpose(ext_mul)"
    assert [v.aval for v in tj.invars] == [a, a] and [v.aval for v in tj.outvars] == [a]
    # Not linear in the extension: copied forward, the rule is not called.
    _ir.transpose(_linear_jaxpr(prim), [False, False])
    assert len(seen) == 1


def test_an_inlined_rule_is_copied_in_place() -> None:
    def rule(avals: list[ShapedArray], linear: list[bool], params: dict[str, Any]) -> _ir.ClosedJaxpr:
        return ferrax.make_jaxpr(lambda x, ct: lax.mul(lax.sin(x), ct))(_zeros(avals[0]), _zeros(avals[1]))

    prim = _ir.ExtensionPrimitive("ext_inl", _two_operands, rule, inline_transpose=True)
    assert prim.inline_transpose and not _ir.ExtensionPrimitive("ext_jit", _two_operands, rule).inline_transpose
    tj = _ir.transpose(_linear_jaxpr(prim), [False, True])
    # The rule's sin and mul in place of a jit call, then neg's transpose.
    assert [e.primitive for e in tj.eqns] == ["sin", "mul", "neg"]
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    ct = np.linspace(2, 3, 3, dtype=np.float32)
    (got,) = ferrax.eval_jaxpr(tj, [], x, ct)
    np.testing.assert_allclose(np.asarray(got), -np.sin(x) * ct, rtol=1e-6)
    assert _ir.ExtensionPrimitive("ext_plain", _two_operands).transpose is None


@pytest.mark.parametrize(
    "result, message",
    [
        (None, "the transpose rule must return a ClosedJaxpr, got None"),
        ("jaxpr", "the transpose rule must return a ClosedJaxpr, got"),
        # Wrong signature: takes only the cotangent.
        (ferrax.make_jaxpr(lax.neg)(np.zeros(3, np.float32)), r"it returned a jaxpr of type \(f32\[3\]\) -> \(f32\[3\]\)"),
    ],
)
def test_binding_rejects_a_bad_result(result: Any, message: str) -> None:
    prim = _ir.ExtensionPrimitive("ext_bad", _two_operands, lambda avals, linear, params: result)
    with pytest.raises(PassError, match=message) as info:
        _ir.transpose(_linear_jaxpr(prim), [False, True])
    assert "equation 1 (ext_bad): the transpose rule of ext_bad failed" in str(info.value)


def test_binding_rule_exception_is_the_cause() -> None:
    def rule(avals: list[ShapedArray], linear: list[bool], params: dict[str, Any]) -> _ir.ClosedJaxpr:
        raise KeyError("nope")

    prim = _ir.ExtensionPrimitive("ext_raises", _two_operands, rule)
    with pytest.raises(PassError, match="KeyError: 'nope'") as info:
        _ir.transpose(_linear_jaxpr(prim), [False, True])
    assert isinstance(info.value.__cause__, KeyError)


def test_binding_transpose_must_be_callable() -> None:
    with pytest.raises(TypeError, match="transpose must be callable or None, got"):
        _ir.ExtensionPrimitive("ext_x", _two_operands, 3)  # type: ignore[arg-type]
