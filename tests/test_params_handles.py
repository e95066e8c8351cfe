"""``ferrax._ir.Params``: a primitive's params converted once and given to the builder in
place of a dict (the staging fast paths do, for dot_general, broadcast_in_dim and
reduce_sum). An equation given one is the equation the dict gives, for every primitive
of a set of traced programs; given to another primitive it is a ``TypeCheckError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import ferrax
import ferrax.numpy as fnp
from ferrax import _ir, lax
from ferrax._ir import ExtensionPrimitive, JaxprBuilder, ShapedArray
from ferrax.errors import TypeCheckError

PROGRAMS: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    ("mlp", lambda w, b, x: fnp.sum(fnp.tanh(x @ w + b) ** 2), (np.ones((4, 3), np.float32), np.ones(3, np.float32), np.ones((2, 4), np.float32))),
    ("reductions", lambda x: (fnp.max(x, axis=1), fnp.mean(x, axis=0, keepdims=True), fnp.cumsum(x, axis=1)), (np.ones((3, 5), np.float32),)),
    ("indexing", lambda x, i: (x[i], x[1:, ::2], x.T, fnp.take(x, i, axis=1)), (np.ones((4, 6), np.float32), np.array([0, 2], np.int32))),
    ("shapes", lambda x: (fnp.concatenate([x, x]), x.reshape(-1), fnp.pad(x, 1), fnp.flip(x, 0)), (np.ones((2, 3), np.int32),)),
    ("control", lambda x: lax.cond(fnp.sum(x) > 0, lambda y: y * 2, lambda y: -y, x), (np.ones(3, np.float32),)),
    ("scan", lambda x: lax.scan(lambda c, y: (c + y, c * y), 0.0, x), (np.ones(4, np.float32),)),
    ("conv", lambda x, k: lax.conv(x, k, (1, 1), "SAME"), (np.ones((1, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32))),
    ("dtypes", lambda x: (x.astype(np.int8), fnp.argmax(x), x.astype(ferrax.dtypes.bfloat16)), (np.ones(3, np.float32),)),
]


def _rebuilt(closed: _ir.ClosedJaxpr, handles: bool) -> str:
    """The jaxpr's text once its equations are added again to a builder, each with its
    params as a dict or as a Params handle."""
    jaxpr = closed.jaxpr
    b = JaxprBuilder()
    env: dict[_ir.Var, Any] = {}
    for v in jaxpr.constvars:
        env[v] = b.add_constvar(v.aval)
    for v in jaxpr.invars:
        env[v] = b.add_invar(v.aval)
    for eqn in jaxpr.eqns:
        params: Any = eqn.params
        if handles:
            params = _ir.Params(eqn.primitive, params)
        ins = [env[x] if isinstance(x, _ir.Var) else x for x in eqn.inputs]
        for old, new in zip(eqn.outvars, b.add_eqn(eqn.primitive, ins, params)):
            env[old] = new
    outs = [env[x] if isinstance(x, _ir.Var) else x for x in jaxpr.outvars]
    return str(b.build(outs))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name,f,args", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_handles_build_the_equations_dicts_build(name: str, f: Callable[..., Any], args: tuple[Any, ...]) -> None:
    closed = ferrax.make_jaxpr(f)(*args)
    assert closed.jaxpr.eqns
    assert _rebuilt(closed, handles=True) == _rebuilt(closed, handles=False) == str(closed.jaxpr)
    for eqn in closed.jaxpr.eqns:
        handle = _ir.Params(eqn.primitive, eqn.params)
        assert handle.primitive == eqn.primitive
        assert str(handle.to_dict()) == str(eqn.params)
        assert repr(handle).startswith(f'Params("{eqn.primitive}", {{')


def _f32(*shape: int) -> ShapedArray:
    return ShapedArray(shape, np.float32)


def test_every_way_of_adding_an_equation_takes_a_handle() -> None:
    dims = _ir.Params("dot_general", {"dimension_numbers": (((1,), (0,)), ((), ())), "preferred_element_type": np.float32})
    b = JaxprBuilder()
    x, w = b.add_invar(_f32(2, 3)), b.add_invar(_f32(3, 4))
    (y,) = b.add_eqn("dot_general", [x, w], dims)
    ((z, aval),) = b.add_eqn_typed("dot_general", [x, w], dims)
    assert y.aval == z.aval == aval == _f32(2, 4)
    (t,) = b.add_eqn_traced("dot_general", [x, w], dims, _Tracer, None)
    one = b.add_eqn_traced_one("dot_general", [x, w], dims, _Tracer, "the trace")
    assert t.aval == one.aval == _f32(2, 4) and one._trace == "the trace"
    # The same type: the same shared aval object.
    assert one.aval is t.aval is aval
    out = b.new_var(_f32(2, 4))
    b.add_eqn_with_outvars("dot_general", [x, w], dims, [out])
    jaxpr = b.build([y, z, t.atom, one.atom, out])
    assert [str(e.params["dimension_numbers"]) for e in jaxpr.eqns] == ["(((1,), (0,)), ((), ()))"] * 5


def test_add_eqn_traced_one_takes_one_output_primitives() -> None:
    b = JaxprBuilder()
    x = b.add_invar(ShapedArray((3,), np.int32))
    # A tracer input: its `atom` is read.
    t = b.add_eqn_traced_one("neg", [x], {}, _Tracer, None)
    assert b.add_eqn_traced_one("add", [t, x], {}, _Tracer, None).aval == x.aval
    # sort of two operands has two outputs: refused, as add_eqn_traced would give two.
    sort = {"dimension": 0, "is_stable": True, "num_keys": 1}
    assert len(b.add_eqn_traced("sort", [x, x], sort, _Tracer, None)) == 2
    with pytest.raises(TypeError, match="sort does not have one output"):
        b.add_eqn_traced_one("sort", [x, x], sort, _Tracer, None)


class _Tracer:
    __slots__ = ("_trace", "atom", "aval")
    _trace: object
    atom: _ir.Var
    aval: ShapedArray


def test_a_handle_of_another_primitive_is_refused() -> None:
    b = JaxprBuilder()
    x = b.add_invar(_f32(3))
    promote = _ir.Params("broadcast_in_dim", {"shape": (2, 3), "broadcast_dimensions": (1,)})
    (ok,) = b.add_eqn("broadcast_in_dim", [x], promote)
    assert ok.aval == _f32(2, 3)
    with pytest.raises(TypeCheckError, match="params made for broadcast_in_dim given to an equation of reduce_sum"):
        b.add_eqn("reduce_sum", [x], promote)

    def rule(avals: Sequence[ShapedArray], params: dict[str, Any]) -> Sequence[ShapedArray]:
        return [avals[0]]

    first, second = ExtensionPrimitive("first", rule), ExtensionPrimitive("first", rule)
    mine = _ir.Params(first, {"n": 1})
    assert len(b.add_eqn(first, [x], mine)) == 1
    # The same name, another primitive: refused.
    with pytest.raises(TypeCheckError, match="params made for first"):
        b.add_eqn(second, [x], mine)


def test_bad_params_are_refused_where_a_dict_is() -> None:
    with pytest.raises(TypeCheckError, match="unknown primitive"):
        _ir.Params("no_such_primitive", {})
    with pytest.raises(TypeError):
        _ir.Params("add", {1: 2})  # type: ignore[dict-item]
    # A param the rule does not know: refused when the equation is added, as a dict is.
    stray = _ir.Params("neg", {"stray": 1})
    b = JaxprBuilder()
    x = b.add_invar(_f32(3))
    with pytest.raises(TypeCheckError) as from_handle:
        b.add_eqn("neg", [x], stray)
    with pytest.raises(TypeCheckError) as from_dict:
        b.add_eqn("neg", [x], {"stray": 1})
    assert str(from_handle.value) == str(from_dict.value)


def test_handles_kept_across_traces_record_what_jax_records() -> None:
    # The handles the fast paths keep from one trace to the next give JAX's equations.
    import jax

    w, b, x = np.ones((8, 4), np.float32), np.ones(4, np.float32), np.ones((2, 8), np.float32)
    f = lambda w, b, x: fnp.sum(fnp.tanh(x @ w + b))  # noqa: E731
    g = lambda w, b, x: jax.numpy.sum(jax.numpy.tanh(x @ w + b))  # noqa: E731
    first = str(ferrax.make_jaxpr(f)(w, b, x))
    assert first == str(ferrax.make_jaxpr(f)(w, b, x)) == str(jax.make_jaxpr(g)(w, b, x))
