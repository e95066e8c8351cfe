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
    Params,
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


class _Tracer:
    __slots__ = ("_trace", "atom", "aval")


def test_tracing_builder_types() -> None:
    b = JaxprBuilder()
    params = Params("reduce_sum", {"axes": (0,), "out_sharding": None})
    assert_type(params.primitive, str)
    assert_type(params.to_dict(), dict[str, Any])
    staged = b.stage_args((np.ones(3, np.float32),), _Tracer, None, False)
    assert_type(staged, Any | None)
    x = b.add_invar(ShapedArray((3,), np.float32))
    assert_type(b.add_eqn_traced_one("reduce_sum", [x], params, _Tracer, None), _Tracer)
    assert_type(b.add_eqn_traced("neg", [x], {}, _Tracer, None), list[_Tracer])


def error_types(parse_error: ferrax.ParseError, type_error: ferrax.TypeCheckError) -> None:
    # Type-checked only: these attributes are set on the errors Rust raises.
    assert_type(parse_error.line, int)
    assert_type(parse_error.column, int)
    assert_type(type_error.eqn_index, int | None)


def test_error_types() -> None:
    assert callable(error_types)
    assert_type(ferrax.TypeCheckError("x").eqn_index, int | None)


# ------------------------------------------------------------------ the front end


def test_make_jaxpr_types() -> None:
    import ferrax.numpy as fnp

    def f(x: ferrax.Array, y: ferrax.Array) -> ferrax.Array:
        return fnp.sum(x * y + 1.0)

    maker = ferrax.make_jaxpr(f)
    closed = maker(np.ones(3, np.float32), np.ones(3, np.float32))
    assert_type(closed, ClosedJaxpr)
    assert_type(closed.jaxpr, Jaxpr)
    assert_type(ferrax.make_jaxpr(f, static_argnums=(1,))(np.ones(3), 2.0), ClosedJaxpr)
    assert_type(str(closed), str)


def test_array_operator_types() -> None:
    import ferrax.numpy as fnp

    x = fnp.ones((2, 3))
    assert_type(x, ferrax.Array)
    assert_type(x + 1, ferrax.Array)
    assert_type(1.0 - x, ferrax.Array)
    assert_type(x * x, ferrax.Array)
    assert_type(x / 2, ferrax.Array)
    assert_type(x // 2, ferrax.Array)
    assert_type(x % 2, ferrax.Array)
    assert_type(x**2, ferrax.Array)
    assert_type(-x, ferrax.Array)
    assert_type(abs(x), ferrax.Array)
    assert_type(x @ x.T, ferrax.Array)
    assert_type(x < 1, ferrax.Array)
    assert_type(x == x, ferrax.Array)
    assert_type((x > 0) & (x < 1), ferrax.Array)
    assert_type(x[0], ferrax.Array)
    assert_type(x.at[0].set(1.0), ferrax.Array)
    assert_type(x.shape, tuple[int, ...])
    assert_type(x.dtype, np.dtype[Any])
    assert_type(x.ndim, int)
    assert_type(x.sum(axis=0), ferrax.Array)
    assert_type(x.reshape(3, 2), ferrax.Array)
    assert_type(x.astype(np.int32), ferrax.Array)


def test_array_protocol_types() -> None:
    import copy
    import functools

    import ferrax.numpy as fnp

    x = fnp.ones((2, 3))
    i = fnp.arange(6).reshape(2, 3)
    assert_type(x.sum(dtype=np.float32, out=None), ferrax.Array)
    assert_type(x.max(initial=0.0), ferrax.Array)
    assert_type(x.argmax(keepdims=True), ferrax.Array)
    assert_type(x.transpose((1, 0)), ferrax.Array)
    assert_type(x.std(ddof=1), ferrax.Array)
    assert_type(x.round(1), ferrax.Array)
    assert_type(x.repeat(2, axis=0), ferrax.Array)
    assert_type(x.block_until_ready(), ferrax.Array)
    assert_type(x.copy(), ferrax.Array)
    assert_type(copy.deepcopy(x), ferrax.Array)
    assert_type(x.nbytes, int)
    assert_type(x.itemsize, int)
    assert_type(x.item(0), Any)
    assert_type(round(x), ferrax.Array)
    assert_type(divmod(x, 2), tuple[ferrax.Array, ferrax.Array])
    assert_type(i ^ 1, ferrax.Array)
    if hasattr(ferrax.lax, "shift_left"):  # the shift primitives land separately
        assert_type(1 << i, ferrax.Array)
        assert_type(i >> 1, ferrax.Array)
    assert_type(~i, ferrax.Array)
    assert_type(format(x[0, 0], ".4f"), str)
    assert_type(fnp.float32(i), ferrax.Array)
    assert_type(fnp.zeros(3, fnp.bfloat16), ferrax.Array)
    assert_type(x.astype(fnp.int8), ferrax.Array)
    assert_type(fnp.float32.dtype, np.dtype[Any])
    assert np.dtype(fnp.uint8) == np.uint8

    class Model:
        @functools.partial(ferrax.jit, static_argnums=0)
        def apply(self, v: ferrax.Array) -> ferrax.Array:
            return v * 2

    assert_type(Model().apply(x), ferrax.Array)
    traced = ferrax.jit(lambda v: v + 1).trace(x)
    assert_type(traced.jaxpr, ClosedJaxpr)
    assert_type(traced.lower().as_text(), str)


def test_numpy_function_types() -> None:
    import ferrax.numpy as fnp

    x = fnp.asarray(np.arange(6, dtype=np.float32)).reshape(2, 3)
    assert_type(fnp.sin(x), ferrax.Array)
    assert_type(fnp.exp(x), ferrax.Array)
    assert_type(fnp.sum(x), ferrax.Array)
    assert_type(fnp.mean(x, axis=1), ferrax.Array)
    assert_type(fnp.max(x), ferrax.Array)
    assert_type(fnp.argmax(x), ferrax.Array)
    assert_type(fnp.dot(x, x.T), ferrax.Array)
    assert_type(fnp.matmul(x, x.T), ferrax.Array)
    assert_type(fnp.where(x > 1, x, 0.0), ferrax.Array)
    assert_type(fnp.concatenate([x, x]), ferrax.Array)
    assert_type(fnp.zeros(3), ferrax.Array)
    assert_type(fnp.arange(4), ferrax.Array)
    assert_type(fnp.maximum(x, 1), ferrax.Array)


def test_lax_function_types() -> None:
    from ferrax import lax

    x = np.ones((2, 3), np.float32)
    assert_type(lax.add(x, 1.0), ferrax.Array)
    assert_type(lax.sin(x), ferrax.Array)
    assert_type(lax.integer_pow(x, 2), ferrax.Array)
    assert_type(lax.select_n(x > 0, x, x), ferrax.Array)
    assert_type(lax.clamp(0.0, x, 1.0), ferrax.Array)
    assert_type(lax.convert_element_type(x, np.int32), ferrax.Array)
    assert_type(lax.reduce_sum(x, (0,)), ferrax.Array)
    assert_type(lax.argmax(x, 1, np.int32), ferrax.Array)
    assert_type(lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)), ferrax.Array)
    assert_type(lax.reshape(x, (3, 2)), ferrax.Array)
    assert_type(lax.transpose(x, (1, 0)), ferrax.Array)
    assert_type(lax.concatenate([x, x], 0), ferrax.Array)
    assert_type(lax.slice(x, (0, 0), (1, 2)), ferrax.Array)
    assert_type(lax.dynamic_slice(x, (0, 1), (1, 2)), ferrax.Array)
    assert_type(lax.dynamic_update_slice(x, x[:1], (1, 0)), ferrax.Array)
    assert_type(lax.dot_general(x, x, (((1,), (1,)), ((), ()))), ferrax.Array)
    assert_type(lax.iota(np.int32, 3), ferrax.Array)
    assert_type(lax.stop_gradient(x), ferrax.Array)


def test_tree_util_types() -> None:
    from ferrax import tree_util

    tree = {"a": (1, 2), "b": [3.0]}
    leaves, treedef = tree_util.tree_flatten(tree)
    assert_type(leaves, list[Any])
    assert_type(treedef, tree_util.PyTreeDef)
    assert_type(treedef.num_leaves, int)
    assert_type(tree_util.tree_unflatten(treedef, leaves), Any)
    assert_type(tree_util.tree_leaves(tree), list[Any])
    assert_type(tree_util.tree_structure(tree), tree_util.PyTreeDef)
    assert_type(tree_util.tree_map(lambda v: v, tree), Any)
    assert_type(treedef.unflatten(leaves), Any)
    assert_type(treedef == treedef, bool)


def test_primitive_types() -> None:
    from ferrax.core import Primitive

    p = Primitive("typed_op")

    @p.def_impl
    def impl(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return x

    @p.def_abstract_eval
    def rule(x: ShapedArray) -> ShapedArray:
        return x

    # The decorators keep the rules' types.
    assert_type(impl(np.ones(2)), np.ndarray[Any, Any])
    assert_type(rule(ShapedArray((), np.float32)), ShapedArray)
    assert_type(p.bind(np.ones(2)), Any)
    assert_type(p.multiple_results, bool)


def test_dtypes_types() -> None:
    from ferrax import dtypes

    assert_type(dtypes.canonicalize("bfloat16"), np.dtype[Any])
    assert_type(dtypes.promote([(np.dtype(np.int8), False)]), tuple[np.dtype[Any], bool])
    assert_type(dtypes.result_type([(np.dtype(np.int8), True)]), tuple[np.dtype[Any], bool])
    assert_type(dtypes.default_float(), np.dtype[Any])
    assert_type(dtypes.canonical(np.dtype(np.float64)), np.dtype[Any])


def test_config_types() -> None:
    assert_type(ferrax.config.jax_enable_x64, bool)
    assert_type(ferrax.config.jax_num_cpu_devices, int)
    assert_type(ferrax.config.jax_compilation_cache_dir, str | None)
    assert_type(ferrax.config.jax_persistent_cache_min_compile_time_secs, float)
    assert_type(ferrax.config.update("jax_enable_x64", False), None)
    with ferrax.enable_x64(False):
        assert_type(ferrax.config.read("jax_enable_x64"), Any)


def error_class_types() -> None:
    # Every error is a FerraxError; the concretization ones are also TypeErrors.
    e: ferrax.FerraxError = ferrax.TracerBoolConversionError("x")
    t: TypeError = ferrax.ConcretizationError("x")
    assert e and t


def test_error_class_types() -> None:
    error_class_types()


def test_jit_and_cost_analysis_types() -> None:
    import ferrax

    def f(x: Any) -> Any:
        return x * 2.0

    x = np.ones(3, np.float32)
    jitted = ferrax.jit(f)
    assert_type(jitted.lower(x).as_text(), str)
    assert_type(jitted.trace(x).jaxpr, ClosedJaxpr)
    assert_type(ferrax.cost_analysis(f)(x), dict[str, Any])
    assert_type(ferrax.device_put(x), ferrax.Array)


# --------------------------------------------- issue 12's modules: random, nn, scipy, tree


def test_random_types() -> None:
    from ferrax import random

    k = random.key(0)
    assert_type(k, random.KeyArray)
    assert_type(random.PRNGKey(0), ferrax.Array)
    assert_type(random.key_data(k), ferrax.Array)
    assert_type(random.wrap_key_data(random.key_data(k)), random.KeyArray)
    assert_type(random.key_impl(k), str)
    # split and fold_in return the kind of key they are given (typed or raw).
    assert_type(random.split(k), Any)
    assert_type(random.fold_in(k, 1), Any)
    assert_type(random.bits(k, (2,)), ferrax.Array)
    assert callable(random_sampler_types)


def random_sampler_types(k: Any) -> None:
    # Type-checked but not run here (each sampler compiles its draw): test_random.py
    # runs them.
    from ferrax import random

    assert_type(random.uniform(k, (2,), minval=-1.0, maxval=1.0), ferrax.Array)
    assert_type(random.normal(k, (2, 3), np.float32), ferrax.Array)
    assert_type(random.randint(k, (3,), 0, 10), ferrax.Array)
    assert_type(random.bernoulli(k, 0.3, (4,)), ferrax.Array)
    assert_type(random.categorical(k, np.zeros(3, np.float32)), ferrax.Array)
    assert_type(random.choice(k, 5, (2,), replace=False), ferrax.Array)
    assert_type(random.permutation(k, 5), ferrax.Array)
    assert_type(random.truncated_normal(k, -1.0, 1.0, (2,)), ferrax.Array)
    assert_type(random.gumbel(k, (2,)), ferrax.Array)
    assert_type(random.exponential(k, (2,)), ferrax.Array)
    assert_type(random.gamma(k, 2.0, (2,)), ferrax.Array)
    assert_type(random.beta(k, 2.0, 3.0), ferrax.Array)
    assert_type(random.dirichlet(k, np.ones(3, np.float32)), ferrax.Array)


def test_nn_types() -> None:
    import ferrax.numpy as fnp
    from ferrax import nn

    x = fnp.linspace(-2.0, 2.0, 4)
    assert_type(nn.relu(x), ferrax.Array)
    assert_type(nn.gelu(x, approximate=False), ferrax.Array)
    assert_type(nn.sigmoid(x), ferrax.Array)
    assert_type(nn.silu(x), ferrax.Array)
    assert_type(nn.leaky_relu(x, negative_slope=0.1), ferrax.Array)
    assert_type(nn.softmax(x), ferrax.Array)
    assert_type(nn.log_softmax(x, axis=0), ferrax.Array)
    assert_type(nn.logsumexp(x), ferrax.Array)
    assert_type(nn.one_hot(fnp.arange(3), 3), ferrax.Array)
    assert_type(nn.standardize(x), ferrax.Array)
    assert_type(nn.glu(x), ferrax.Array)


def test_nn_initializers_types() -> None:
    from ferrax import random
    from ferrax.nn import initializers

    k = random.key(0)
    init = initializers.glorot_uniform()
    assert_type(init, initializers.Initializer)
    assert_type(init(k, (2, 3), np.float32), ferrax.Array)
    assert_type(initializers.zeros(k, (2,)), ferrax.Array)
    assert_type(initializers.ones(k, (2,), np.float32), ferrax.Array)
    assert_type(initializers.normal(0.1), initializers.Initializer)
    assert_type(initializers.he_normal()(k, (3, 2)), ferrax.Array)
    assert_type(initializers.variance_scaling(1.0, "fan_in", "truncated_normal"), initializers.Initializer)


def test_scipy_special_types() -> None:
    import ferrax.scipy.special as sp

    x = np.array([0.25, 0.5], np.float32)
    assert_type(sp.erf(x), ferrax.Array)
    assert_type(sp.erfinv(x), ferrax.Array)
    assert_type(sp.gammaln(x), ferrax.Array)
    assert_type(sp.digamma(x), ferrax.Array)
    assert_type(sp.expit(x), ferrax.Array)
    assert_type(sp.logit(x), ferrax.Array)
    assert_type(sp.xlogy(x, x), ferrax.Array)
    assert_type(sp.xlog1py(x, x), ferrax.Array)
    assert_type(sp.gammainc(x, x), ferrax.Array)
    assert_type(sp.gammaincc(x, 2), ferrax.Array)
    assert_type(ferrax.lax.igamma(x, x), ferrax.Array)
    assert_type(ferrax.lax.igammac(x, x), ferrax.Array)
    assert_type(ferrax.lax.igamma_grad_a(x, x), ferrax.Array)
    assert_type(ferrax.lax.random_gamma_grad(x, x), ferrax.Array)
    # logsumexp's result type follows return_sign.
    assert_type(sp.logsumexp(x), ferrax.Array)
    assert_type(sp.logsumexp(x, return_sign=True), tuple[ferrax.Array, ferrax.Array])


def test_tree_types() -> None:
    from ferrax import tree, tree_util

    t = {"a": (1, 2), "b": [3.0]}
    assert_type(tree.map(lambda v: v, t), Any)
    assert_type(tree.leaves(t), list[Any])
    assert_type(tree.structure(t), tree_util.PyTreeDef)
    assert_type(tree.flatten(t), tuple[list[Any], tree_util.PyTreeDef])
    assert_type(tree.unflatten(tree.structure(t), [1, 2, 3]), Any)
    assert_type(tree.reduce(lambda a, b: a + b, [1, 2]), Any)
    assert_type(tree.all([True, 1]), bool)
    assert_type(tree.map_with_path(lambda p, v: v, t), Any)
    with_paths = tree.leaves_with_path(t)
    assert_type(with_paths, list[tuple[tuple[Any, ...], Any]])
    assert_type(tree.flatten_with_path(t), tuple[list[tuple[tuple[Any, ...], Any]], tree_util.PyTreeDef])
    # tree_util's names for the same, and key paths.
    assert_type(tree_util.keystr(with_paths[0][0]), str)
    assert_type(tree_util.tree_flatten_with_path(t)[1], tree_util.PyTreeDef)
    assert_type(tree_util.tree_reduce(lambda a, b: a + b, [1, 2], 0), Any)
    assert_type(tree_util.tree_all([True]), bool)
    assert_type(tree_util.SequenceKey(0), tree_util.SequenceKey)
    assert_type(tree_util.DictKey("a"), tree_util.DictKey)
    assert_type(tree_util.GetAttrKey("a"), tree_util.GetAttrKey)
    add = tree_util.Partial(lambda a, b: a + b, 1)
    assert_type(add, tree_util.Partial)
    assert add(2) == 3


def test_register_dataclass_keeps_the_class() -> None:
    import dataclasses

    from ferrax import tree_util

    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    assert_type(Point(1.0, 2.0), Point)
    assert tree_util.tree_leaves(Point(1.0, 2.0)) == [1.0, 2.0]


def test_eval_shape_and_debug_types() -> None:
    from collections.abc import Callable

    import ferrax.numpy as fnp

    x = fnp.ones((2, 3))
    spec = ferrax.ShapeDtypeStruct((2, 3), np.float32)
    assert_type(spec, ferrax.ShapeDtypeStruct)
    assert_type(spec.shape, tuple[int, ...])
    out = ferrax.eval_shape(lambda v: v.sum(axis=0), spec)
    assert_type(out, Any)
    assert out.shape == (3,)
    assert_type(ferrax.device_get(x), Any)
    assert_type(ferrax.block_until_ready(x), ferrax.Array)
    # debug.print prints (None); without a format string it returns the printer.
    assert_type(ferrax.debug.print("{x}", x=x.sum()), Callable[..., None] | None)


def test_example_libraries_types() -> None:
    from ferrax.example_libraries import optimizers

    params = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    opt = optimizers.adam(1e-3)
    assert_type(opt, optimizers.Optimizer)
    opt_init, opt_update, get_params = opt
    state = opt_init(params)
    assert_type(state, optimizers.OptimizerState)
    assert_type(opt_update(0, params, state), optimizers.OptimizerState)
    assert_type(get_params(state), Any)
    assert_type(optimizers.sgd(optimizers.exponential_decay(0.1, 10, 0.5)), optimizers.Optimizer)
    assert_type(optimizers.piecewise_constant([10], [0.1, 0.01]), optimizers.Schedule)
    assert_type(optimizers.make_schedule(0.1), optimizers.Schedule)
    assert_type(optimizers.l2_norm(params), ferrax.Array)
    assert_type(optimizers.clip_grads(params, 1.0), Any)
    marked = optimizers.unpack_optimizer_state(state)
    assert_type(optimizers.pack_optimizer_state(marked), optimizers.OptimizerState)


def test_stax_types() -> None:
    from ferrax import random
    from ferrax.example_libraries import stax

    layer = stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2), stax.LogSoftmax)
    assert_type(layer, tuple[stax.InitFn, stax.ApplyFn])
    init_fun, apply_fun = layer
    out_shape, params = init_fun(random.key(0), (-1, 3))
    assert_type(out_shape, Any)
    assert out_shape == (-1, 2)
    assert_type(apply_fun(params, np.ones((1, 3), np.float32)), Any)
    assert_type(stax.Flatten, stax.Layer)
    assert_type(stax.FanOut(2), stax.Layer)


def test_linalg_types() -> None:
    import ferrax.numpy as fnp
    import ferrax.scipy.linalg as sla
    from ferrax.numpy import linalg as la

    a = fnp.eye(3) * 2.0
    b = fnp.ones((3,))
    assert_type(la.cholesky(a), ferrax.Array)
    assert_type(la.solve(a, b), ferrax.Array)
    assert_type(la.inv(a), ferrax.Array)
    assert_type(la.det(a), ferrax.Array)
    sign, logabsdet = la.slogdet(a)
    assert_type(sign, ferrax.Array)
    assert_type(logabsdet, ferrax.Array)
    w, v = la.eigh(a)
    assert_type(w, ferrax.Array)
    assert_type(v, ferrax.Array)
    assert_type(la.eigvalsh(a), ferrax.Array)
    assert_type(la.svdvals(a), ferrax.Array)
    assert_type(la.norm(a), ferrax.Array)
    assert_type(la.matrix_power(a, 2), ferrax.Array)
    assert_type(la.pinv(a), ferrax.Array)
    assert_type(la.matrix_rank(a), ferrax.Array)
    assert_type(la.lstsq(a, b), tuple[ferrax.Array, ferrax.Array, ferrax.Array, ferrax.Array])
    assert_type(sla.cholesky(a, lower=True), ferrax.Array)
    assert_type(sla.cho_factor(a), tuple[ferrax.Array, bool])
    assert_type(sla.solve_triangular(a, b, lower=True), ferrax.Array)
    assert_type(sla.lu_factor(a), tuple[ferrax.Array, ferrax.Array])
    assert_type(sla.det(a), ferrax.Array)
    assert_type(sla.inv(a), ferrax.Array)
    assert_type(sla.solve(a, b), ferrax.Array)
    assert float(la.det(a)) == 8.0


def test_callback_types() -> None:
    from collections.abc import Callable

    import ferrax.experimental
    import ferrax.numpy as fnp

    x = fnp.ones((2,))
    spec = ferrax.ShapeDtypeStruct((2,), np.float32)
    assert_type(ferrax.pure_callback(lambda v: np.asarray(v) * 2, spec, x), Any)
    assert_type(ferrax.experimental.io_callback(lambda v: np.asarray(v), spec, x), Any)
    assert_type(ferrax.debug.callback(lambda v: None, x), Callable[..., None] | None)
