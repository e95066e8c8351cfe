//! Programmatic tests of the printer and the parser: every primitive built with
//! `JaxprBuilder` round-trips through text; long chains and deep nests print and parse
//! without recursion; arbitrary prefixes and mutations of valid texts never panic.

use ferrax_ir::text::{
    format_param_flat, parse_jaxpr, parse_jaxpr_with, print_closed_jaxpr, print_jaxpr, ReadError,
};
use ferrax_ir::{
    AbstractValue, Atom, Builtin, ClosedJaxpr, ConvDimensionNumbers, DType, DotDimensionNumbers,
    ExtensionPrimitive, GatherDimensionNumbers, GatherScatterMode, Jaxpr, JaxprBuilder, LitValue,
    Literal, Param, Params, Primitive, Registry, ScatterDimensionNumbers, Shape, TypeError,
};
use std::sync::Arc;
use std::time::Instant;

fn av(dtype: DType, dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).expect("valid shape"), dtype)
}

fn f32s(dims: &[i64]) -> AbstractValue {
    av(DType::F32, dims)
}

fn lit(value: LitValue, dtype: DType) -> Literal {
    Literal {
        value,
        dtype,
        weak_type: false,
    }
}

fn params(pairs: Vec<(&str, Param)>) -> Params {
    Params::new(pairs)
}

/// The collectives' cases name axes x and y (of size 2), as in a shard_map body printed
/// by itself: an open environment binding them.
fn open_axes() -> ferrax_ir::AxisEnv {
    ferrax_ir::AxisEnv::open().with_mesh(&ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap())
}

/// A closed jaxpr with these inputs whose body `f` builds.
fn sub(
    ins: &[AbstractValue],
    f: impl FnOnce(&mut JaxprBuilder, &[Atom]) -> Vec<Atom>,
) -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let xs: Vec<Atom> = ins
        .iter()
        .map(|a| Atom::Var(b.add_invar(a.clone())))
        .collect();
    let outs = f(&mut b, &xs);
    ClosedJaxpr::with_unknown_consts(Arc::new(b.build(outs).expect("sub-jaxpr builds")))
}

fn eqn1(b: &mut JaxprBuilder, prim: Builtin, ins: Vec<Atom>, ps: Params) -> Atom {
    Atom::Var(b.add_eqn(prim.into(), ins, ps).expect("eqn typechecks")[0])
}

/// Operand types and params for one equation of each built-in.
fn case(prim: Builtin) -> (Vec<AbstractValue>, Params) {
    use Builtin::*;
    let none = Params::empty;
    match prim {
        Exp | Log | Log1p | Expm1 | Cos | Tan | Tanh | Logistic | Sqrt | Rsqrt => {
            (vec![f32s(&[2, 3])], none())
        }
        Sin => (vec![f32s(&[2])], params(vec![("accuracy", Param::None)])),
        ErfInv | Erf | Erfc | Lgamma | Digamma | Asin | Acos | Atan | Sinh | Cosh | Asinh
        | Acosh | Atanh | IsFinite => (vec![f32s(&[2, 3])], none()),
        Exp2 | Cbrt => (vec![f32s(&[2])], params(vec![("accuracy", Param::None)])),
        Atan2 => (vec![f32s(&[3]), f32s(&[])], none()),
        Neg | Abs | Sign => (vec![av(DType::I32, &[4])], none()),
        Square | Copy => (vec![f32s(&[3])], none()),
        Not => (vec![av(DType::Bool, &[3])], none()),
        IntegerPow => (vec![f32s(&[3])], params(vec![("y", Param::Int(-3))])),
        Floor | Ceil => (vec![f32s(&[3])], none()),
        Round => (
            vec![f32s(&[3])],
            params(vec![("rounding_method", Param::Int(1))]),
        ),
        Add | Sub | Mul | Div | Rem | Pow => (vec![f32s(&[3]), f32s(&[3])], none()),
        Max | Min => (vec![av(DType::I32, &[2]), av(DType::I32, &[2])], none()),
        And | Or | Xor => (vec![av(DType::U8, &[2]), av(DType::U8, &[])], none()),
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => {
            (vec![av(DType::I16, &[2]), av(DType::I16, &[2])], none())
        }
        Mulhi => (vec![av(DType::U32, &[2]), av(DType::U32, &[2])], none()),
        PopulationCount | Clz => (vec![av(DType::U32, &[3])], none()),
        BitcastConvertType => (
            vec![av(DType::U32, &[3])],
            params(vec![("new_dtype", Param::DType(DType::U8))]),
        ),
        Threefry2x32 => (
            vec![
                av(DType::U32, &[]),
                av(DType::U32, &[]),
                av(DType::U32, &[3]),
                av(DType::U32, &[3]),
            ],
            none(),
        ),
        Eq | Ne | Lt | Le | Gt | Ge => (vec![f32s(&[3]), f32s(&[])], none()),
        SelectN => (vec![av(DType::Bool, &[3]), f32s(&[3]), f32s(&[3])], none()),
        Clamp => (vec![f32s(&[]), f32s(&[3]), f32s(&[])], none()),
        ConvertElementType => (
            vec![f32s(&[3])],
            params(vec![
                ("new_dtype", Param::DType(DType::BF16)),
                ("weak_type", Param::Bool(false)),
                ("sharding", Param::None),
            ]),
        ),
        ReduceSum | ReduceMax | ReduceMin | ReduceProd => (
            vec![f32s(&[3, 4])],
            params(vec![
                ("axes", Param::ints(&[1])),
                ("out_sharding", Param::None),
            ]),
        ),
        ReduceAnd | ReduceOr | ReduceXor => (
            vec![av(DType::U16, &[3, 4])],
            params(vec![("axes", Param::ints(&[0, 1]))]),
        ),
        Nextafter => (vec![av(DType::BF16, &[3]), av(DType::BF16, &[])], none()),
        Igamma | Igammac | IgammaGradA => (vec![f32s(&[3]), f32s(&[])], none()),
        ReducePrecision => (
            vec![av(DType::F16, &[3])],
            params(vec![
                ("exponent_bits", Param::Int(4)),
                ("mantissa_bits", Param::Int(3)),
            ]),
        ),
        Argmax | Argmin => (
            vec![f32s(&[3, 4])],
            params(vec![
                ("axes", Param::ints(&[0])),
                ("index_dtype", Param::DType(DType::I32)),
            ]),
        ),
        BroadcastInDim => (
            vec![f32s(&[3])],
            params(vec![
                ("shape", Param::ints(&[2, 3])),
                ("broadcast_dimensions", Param::ints(&[1])),
                ("sharding", Param::None),
            ]),
        ),
        Reshape => (
            vec![f32s(&[3, 4])],
            params(vec![
                ("new_sizes", Param::ints(&[12])),
                ("dimensions", Param::None),
            ]),
        ),
        Transpose => (
            vec![f32s(&[3, 4, 5])],
            params(vec![("permutation", Param::ints(&[2, 0, 1]))]),
        ),
        Squeeze => (
            vec![f32s(&[1, 3])],
            params(vec![("dimensions", Param::ints(&[0]))]),
        ),
        ExpandDims => (
            vec![f32s(&[3])],
            params(vec![("dimensions", Param::ints(&[0, 2]))]),
        ),
        Concatenate => (
            vec![f32s(&[3, 2]), f32s(&[1, 2])],
            params(vec![("dimension", Param::Int(0))]),
        ),
        Split => (
            vec![f32s(&[5, 2])],
            params(vec![
                ("sizes", Param::ints(&[2, 0, 3])),
                ("axis", Param::Int(0)),
            ]),
        ),
        Stack => (
            vec![f32s(&[2, 3]), f32s(&[2, 3])],
            params(vec![("axis", Param::Int(1))]),
        ),
        Unstack => (vec![f32s(&[2, 3])], params(vec![("axis", Param::Int(1))])),
        Tile => (
            vec![f32s(&[2, 3])],
            params(vec![("reps", Param::ints(&[2, 1]))]),
        ),
        OptimizationBarrier => (vec![f32s(&[2, 3]), av(DType::I32, &[])], none()),
        Slice => (
            vec![f32s(&[5])],
            params(vec![
                ("start_indices", Param::ints(&[1])),
                ("limit_indices", Param::ints(&[4])),
                ("strides", Param::ints(&[2])),
            ]),
        ),
        DynamicSlice => (
            vec![f32s(&[5, 2]), av(DType::I32, &[]), av(DType::I32, &[])],
            params(vec![("slice_sizes", Param::ints(&[2, 2]))]),
        ),
        DynamicUpdateSlice => (
            vec![f32s(&[5]), f32s(&[2]), av(DType::I32, &[])],
            Params::empty(),
        ),
        DotGeneral => (
            vec![f32s(&[2, 3, 4]), f32s(&[2, 4, 5])],
            params(vec![
                (
                    "dimension_numbers",
                    Param::DotDims(Arc::new(DotDimensionNumbers {
                        lhs_contracting: vec![2],
                        rhs_contracting: vec![1],
                        lhs_batch: vec![0],
                        rhs_batch: vec![0],
                    })),
                ),
                ("precision", Param::None),
                ("preferred_element_type", Param::DType(DType::F32)),
            ]),
        ),
        ConvGeneralDilated => (
            vec![f32s(&[2, 5, 4, 3]), f32s(&[2, 3, 3, 4])],
            params(vec![
                ("window_strides", Param::ints(&[2, 1])),
                ("padding", Param::Pairs(vec![(1, 2), (0, -1)].into())),
                ("lhs_dilation", Param::ints(&[1, 2])),
                ("rhs_dilation", Param::ints(&[2, 1])),
                (
                    "dimension_numbers",
                    Param::ConvDims(Arc::new(ConvDimensionNumbers {
                        lhs_spec: vec![0, 3, 1, 2],
                        rhs_spec: vec![3, 2, 0, 1],
                        out_spec: vec![0, 3, 1, 2],
                    })),
                ),
                ("feature_group_count", Param::Int(1)),
                ("batch_group_count", Param::Int(1)),
                (
                    "precision",
                    Param::Str("(Precision.HIGHEST, Precision.DEFAULT)".into()),
                ),
                ("preferred_element_type", Param::DType(DType::F32)),
                ("out_sharding", Param::None),
            ]),
        ),
        Iota => (
            vec![],
            params(vec![
                ("dtype", Param::DType(DType::I32)),
                ("shape", Param::ints(&[4, 2])),
                ("dimension", Param::Int(1)),
            ]),
        ),
        Jit => {
            let j = sub(&[f32s(&[3])], |b, xs| {
                vec![eqn1(b, Sin, vec![xs[0]], Params::empty())]
            });
            (
                vec![f32s(&[3])],
                params(vec![
                    ("jaxpr", Param::Jaxpr(j)),
                    ("name", Param::Str(Arc::from("f"))),
                ]),
            )
        }
        Cond => {
            let branch = |p: Builtin| {
                sub(&[f32s(&[3])], |b, xs| {
                    vec![eqn1(b, p, vec![xs[0]], Params::empty())]
                })
            };
            (
                vec![av(DType::I32, &[]), f32s(&[3])],
                params(vec![(
                    "branches",
                    Param::Jaxprs(Arc::new(vec![branch(Sin), branch(Cos), branch(Neg)])),
                )]),
            )
        }
        While => {
            let i32s = av(DType::I32, &[]);
            let cond_j = sub(std::slice::from_ref(&i32s), |b, xs| {
                let five = b.literal(lit(LitValue::Int(5), DType::I32));
                vec![eqn1(b, Lt, vec![xs[0], five], Params::empty())]
            });
            let body_j = sub(std::slice::from_ref(&i32s), |b, xs| {
                let one = b.literal(lit(LitValue::Int(1), DType::I32));
                vec![eqn1(b, Add, vec![xs[0], one], Params::empty())]
            });
            (
                vec![i32s],
                params(vec![
                    ("cond_jaxpr", Param::Jaxpr(cond_j)),
                    ("body_jaxpr", Param::Jaxpr(body_j)),
                    ("cond_nconsts", Param::Int(0)),
                    ("body_nconsts", Param::Int(0)),
                ]),
            )
        }
        Scan => {
            let body = sub(&[f32s(&[]), f32s(&[])], |b, xs| {
                let s = eqn1(b, Add, vec![xs[0], xs[1]], Params::empty());
                let p = eqn1(b, Mul, vec![xs[0], xs[1]], Params::empty());
                vec![s, p]
            });
            (
                vec![f32s(&[]), f32s(&[4])],
                params(vec![
                    ("jaxpr", Param::Jaxpr(body)),
                    ("length", Param::Int(4)),
                    ("reverse", Param::Bool(true)),
                    ("num_consts", Param::Int(0)),
                    ("num_carry", Param::Int(1)),
                    ("linear", Param::Bools(Arc::from(vec![false, false]))),
                    ("unroll", Param::Bool(false)),
                    ("_split_transpose", Param::Bool(false)),
                ]),
            )
        }
        Gather => (
            vec![f32s(&[3, 4]), av(DType::I32, &[2, 1])],
            params(vec![
                (
                    "dimension_numbers",
                    Param::GatherDims(Arc::new(GatherDimensionNumbers {
                        offset_dims: vec![1],
                        collapsed_slice_dims: vec![0],
                        start_index_map: vec![0],
                        ..Default::default()
                    })),
                ),
                ("slice_sizes", Param::ints(&[1, 4])),
                ("mode", Param::Mode(GatherScatterMode::FillOrDrop)),
                ("fill_value", Param::Float(f64::NAN)),
                ("indices_are_sorted", Param::Bool(false)),
                ("unique_indices", Param::Bool(true)),
            ]),
        ),
        Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax => {
            let combiner = match prim {
                ScatterAdd => Some(Add),
                ScatterSub => Some(Sub),
                ScatterMul => Some(Mul),
                ScatterMin => Some(Min),
                ScatterMax => Some(Max),
                _ => None,
            };
            let update_jaxpr = match combiner {
                Some(op) => Param::Jaxpr(sub(&[f32s(&[]), f32s(&[])], |b, xs| {
                    vec![eqn1(b, op, vec![xs[0], xs[1]], Params::empty())]
                })),
                None => Param::None,
            };
            (
                vec![f32s(&[3, 4]), av(DType::I32, &[2, 2]), f32s(&[2])],
                params(vec![
                    (
                        "dimension_numbers",
                        Param::ScatterDims(Arc::new(ScatterDimensionNumbers {
                            inserted_window_dims: vec![0, 1],
                            scatter_dims_to_operand_dims: vec![0, 1],
                            ..Default::default()
                        })),
                    ),
                    ("mode", Param::Mode(GatherScatterMode::Clip)),
                    ("indices_are_sorted", Param::Bool(true)),
                    ("unique_indices", Param::Bool(false)),
                    ("update_jaxpr", update_jaxpr),
                    ("update_consts", Param::ints(&[])),
                ]),
            )
        }
        Rev => (
            vec![f32s(&[2, 3])],
            params(vec![("dimensions", Param::ints(&[1]))]),
        ),
        Sort => (
            vec![f32s(&[2, 3]), av(DType::I32, &[2, 3])],
            params(vec![
                ("dimension", Param::Int(1)),
                ("is_stable", Param::Bool(true)),
                ("num_keys", Param::Int(2)),
            ]),
        ),
        TopK => (
            vec![f32s(&[2, 3])],
            params(vec![("axis", Param::Int(1)), ("k", Param::Int(2))]),
        ),
        Cholesky => (vec![f32s(&[2, 3, 3])], params(vec![])),
        TriangularSolve => (
            vec![f32s(&[3, 3]), f32s(&[3, 2])],
            params(vec![
                ("left_side", Param::Bool(true)),
                ("lower", Param::Bool(false)),
                ("transpose_a", Param::Bool(true)),
                ("conjugate_a", Param::Bool(false)),
                ("unit_diagonal", Param::Bool(true)),
            ]),
        ),
        Lu => (vec![f32s(&[3, 2])], params(vec![])),
        Eigh => (
            vec![f32s(&[2, 2])],
            params(vec![
                ("lower", Param::Bool(false)),
                ("sort_eigenvalues", Param::Bool(true)),
                ("subset_by_index", Param::None),
                ("algorithm", Param::None),
            ]),
        ),
        Svd => (
            vec![f32s(&[3, 2])],
            params(vec![
                ("full_matrices", Param::Bool(false)),
                ("compute_uv", Param::Bool(true)),
                ("subset_by_index", Param::None),
                ("algorithm", Param::None),
            ]),
        ),
        Geqrf => (vec![f32s(&[3, 2])], params(vec![])),
        Geqp3 => (
            vec![f32s(&[3, 2]), av(DType::I32, &[2])],
            params(vec![("use_magma", Param::None)]),
        ),
        HouseholderProduct => (vec![f32s(&[3, 2]), f32s(&[2])], params(vec![])),
        Qr => (
            vec![f32s(&[3, 2])],
            params(vec![
                ("full_matrices", Param::Bool(false)),
                ("pivoting", Param::Bool(false)),
                ("use_magma", Param::None),
            ]),
        ),
        Cumsum | Cumprod | Cummax | Cummin | Cumlogsumexp => (
            vec![f32s(&[2, 3])],
            params(vec![
                ("axis", Param::Int(1)),
                ("reverse", Param::Bool(true)),
            ]),
        ),
        ReduceWindowSum | ReduceWindowMax | ReduceWindowMin | ReduceWindow | SelectAndGatherAdd
        | SelectAndScatterAdd => {
            // select_and_scatter_add takes no negative padding.
            let padding = if prim == SelectAndScatterAdd {
                vec![(1, 0), (0, 1)]
            } else {
                vec![(1, -1), (0, 2)]
            };
            let mut p = vec![
                ("window_dimensions", Param::ints(&[2, 1])),
                ("window_strides", Param::ints(&[1, 2])),
                ("padding", Param::Pairs(Arc::from(padding))),
            ];
            if prim != SelectAndScatterAdd {
                p.push(("base_dilation", Param::ints(&[2, 1])));
                p.push(("window_dilation", Param::ints(&[1, 3])));
            }
            let mut ins = vec![f32s(&[2, 3])];
            match prim {
                ReduceWindow => {
                    let mul = sub(&[f32s(&[]), f32s(&[])], |b, xs| {
                        vec![eqn1(b, Mul, vec![xs[0], xs[1]], Params::empty())]
                    });
                    p.push(("jaxpr", Param::Jaxpr(mul)));
                    p.push(("consts", Param::ints(&[])));
                    ins.push(f32s(&[]));
                }
                SelectAndGatherAdd => {
                    p.push(("select_prim", Param::Str(Arc::from("ge"))));
                    ins.push(f32s(&[2, 3]));
                }
                SelectAndScatterAdd => {
                    p.push(("select_prim", Param::Str(Arc::from("le"))));
                    ins.insert(0, f32s(&[2, 2]));
                }
                _ => {}
            }
            (ins, params(p))
        }
        AddAny => (vec![f32s(&[2, 3]), f32s(&[2, 3])], params(vec![])),
        DebugCallback => (
            vec![f32s(&[2, 3]), av(DType::I32, &[])],
            params(vec![
                (
                    "callback",
                    Param::Opaque(ferrax_ir::params::Opaque::named(
                        "<function debug_callback.<locals>._debug_callback.<locals>._flat_callback at 0xXXXXXXXXXXXX>",
                    )),
                ),
                ("effect", Param::Str("OrderedDebug".into())),
                ("partitioned", Param::Bool(false)),
            ]),
        ),
        DebugPrint => (
            vec![f32s(&[2, 3]), av(DType::I32, &[])],
            params(vec![
                ("fmt", Param::Str("x={x} y: {} (z)".into())),
                ("has_placeholders", Param::Bool(true)),
                (
                    "in_tree",
                    Param::Opaque(ferrax_ir::params::Opaque::named(
                        "PyTreeDef(((*, *), {'x': *}))",
                    )),
                ),
                ("logging_record", Param::None),
                (
                    "np_printoptions",
                    Param::Opaque(ferrax_ir::params::Opaque::named(
                        "(('edgeitems', 3), ('threshold', 1000), ('nanstr', 'nan'), ('formatter', None))",
                    )),
                ),
                ("ordered", Param::Bool(true)),
                ("partitioned", Param::Bool(false)),
                (
                    "static_args",
                    Param::Opaque(ferrax_ir::params::Opaque::named("((1, 'hi'),)")),
                ),
            ]),
        ),
        PureCallback => (
            vec![f32s(&[2, 3])],
            params(vec![
                (
                    "callback",
                    Param::Opaque(ferrax_ir::params::Opaque::named(
                        "_FlatCallback(callback_func=<function f at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))",
                    )),
                ),
                (
                    "result_avals",
                    Param::Avals(Arc::from(vec![
                        f32s(&[3]),
                        av(DType::I32, &[]).with_weak_type(true),
                    ])),
                ),
                ("sharding", Param::None),
                ("vmap_method", Param::Str("expand_dims".into())),
            ]),
        ),
        IoCallback => (
            vec![f32s(&[2, 3])],
            params(vec![
                (
                    "callback",
                    Param::Opaque(ferrax_ir::params::Opaque::named(
                        "_FlatCallback(callback_func=<function f at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))",
                    )),
                ),
                ("ordered", Param::Bool(true)),
                ("result_avals", Param::Avals(Arc::from(vec![f32s(&[3])]))),
                ("sharding", Param::None),
            ]),
        ),
        Pad => (
            vec![f32s(&[2, 3]), f32s(&[])],
            params(vec![(
                "padding_config",
                Param::Padding(vec![(1, -1, 1), (0, 2, 0)].into()),
            )]),
        ),
        CustomJvpCall | CustomVjpCall | Remat => {
            let j = Param::Jaxpr(sub(&[f32s(&[3])], |b, xs| {
                vec![eqn1(b, Sin, vec![xs[0]], Params::empty())]
            }));
            let ps = match prim {
                CustomJvpCall => ferrax_ir::generate::custom_jvp_params(j, "f"),
                CustomVjpCall => ferrax_ir::generate::custom_vjp_params(j, "f"),
                _ => ferrax_ir::generate::remat_params(j, true).with(
                    "policy",
                    Param::Opaque(ferrax_ir::Opaque::named(
                        "DotsSaveable(only_if_no_batch_dims=False)",
                    )),
                ),
            };
            (vec![f32s(&[3])], ps)
        }
        StopGradient => (vec![av(DType::I32, &[2])], params(vec![])),
        Psum | Pmax | Pmin => (
            vec![f32s(&[2, 3])],
            params(vec![
                ("axes", Param::names(&["x", "y"])),
                ("axis_index_groups", Param::None),
            ]),
        ),
        Pvary => (
            vec![f32s(&[2, 3])],
            params(vec![("axes", Param::names(&["x", "y"]))]),
        ),
        AxisIndex => (vec![], params(vec![("axis_name", Param::Str("y".into()))])),
        AllGather => (
            vec![f32s(&[2, 3])],
            params(vec![
                ("all_gather_dimension", Param::Int(0)),
                ("axis_index_groups", Param::None),
                ("axis_name", Param::names(&["y"])),
                ("axis_size", Param::Int(2)),
                ("tiled", Param::Bool(false)),
            ]),
        ),
        ReduceScatter => (
            vec![f32s(&[4, 3])],
            params(vec![
                ("axis_index_groups", Param::None),
                ("axis_name", Param::names(&["x"])),
                ("axis_size", Param::Int(2)),
                ("scatter_dimension", Param::Int(0)),
                ("tiled", Param::Bool(true)),
            ]),
        ),
        Ppermute => (
            vec![f32s(&[3])],
            params(vec![
                ("axis_name", Param::names(&["x"])),
                ("perm", Param::Pairs(Arc::from(vec![(0, 1), (1, 0)]))),
            ]),
        ),
        AllToAll => (
            vec![f32s(&[4, 3])],
            params(vec![
                ("axis_index_groups", Param::None),
                ("axis_name", Param::Str("x".into())),
                ("concat_axis", Param::Int(1)),
                ("split_axis", Param::Int(0)),
                ("tiled", Param::Bool(true)),
            ]),
        ),
        ShardMap => {
            let mut b = JaxprBuilder::with_axis_env(ferrax_ir::AxisEnv::of([("x", 2), ("y", 2)]));
            let x = b.add_invar(f32s(&[2, 3]));
            let s = b
                .add_eqn(
                    Builtin::Psum.into(),
                    vec![Atom::Var(x)],
                    params(vec![("axes", Param::names(&["y"]))]),
                )
                .unwrap();
            let body = b.build(vec![Atom::Var(s[0]), Atom::Var(x)]).unwrap();
            let p = |e: &[&[&str]]| {
                ferrax_ir::PartitionSpec::new(
                    e.iter()
                        .map(|d| d.iter().map(|n| Arc::from(*n)).collect())
                        .collect(),
                )
            };
            (
                vec![f32s(&[4, 6])],
                params(vec![
                    ("check_vma", Param::Bool(true)),
                    (
                        "in_specs",
                        Param::Specs(Arc::from(vec![p(&[&["x"], &["y"]])])),
                    ),
                    (
                        "jaxpr",
                        Param::Jaxpr(ClosedJaxpr::new(Arc::new(body), vec![]).unwrap()),
                    ),
                    (
                        "mesh",
                        Param::Mesh(Arc::new(
                            ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap(),
                        )),
                    ),
                    (
                        "newly_manual_axes",
                        Param::NameSet(Arc::from(vec![Arc::from("x"), Arc::from("y")])),
                    ),
                    (
                        "out_specs",
                        Param::Specs(Arc::from(vec![p(&[&["x"]]), p(&[&[], &["x", "y"]])])),
                    ),
                ]),
            )
        }
        ShardingConstraint => (
            vec![f32s(&[4, 2])],
            params(vec![
                (
                    "mesh",
                    Param::Mesh(Arc::new(
                        ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap(),
                    )),
                ),
                (
                    "spec",
                    Param::Spec(Arc::new(ferrax_ir::PartitionSpec::new(vec![vec![
                        "y".into(),
                        "x".into(),
                    ]]))),
                ),
            ]),
        ),
        RandomSeed | RandomWrap => (
            vec![if prim == RandomSeed { av(DType::I64, &[2]) } else { av(DType::U32, &[3, 2]) }],
            params(vec![("impl", Param::Str("fry".into()))]),
        ),
        RandomUnwrap | RandomClone => (vec![av(DType::KeyFry, &[2, 1])], params(vec![])),
        RandomBits => (
            vec![av(DType::KeyFry, &[3])],
            params(vec![("bit_width", Param::Int(16)), ("shape", Param::ints(&[2, 0]))]),
        ),
        RandomSplit => (
            vec![av(DType::KeyFry, &[])],
            params(vec![("shape", Param::ints(&[2, 3]))]),
        ),
        RandomFoldIn => (
            vec![av(DType::KeyFry, &[3]), av(DType::U32, &[])],
            params(vec![]),
        ),
        #[allow(unreachable_patterns)]
        other => panic!("add a test case for the new built-in {other:?}"),
    }
}

/// Checks `print(parse(print(j))) == print(j)`, that the parsed jaxpr typechecks, and
/// that its non-jaxpr params equal the original's. Returns the text.
fn roundtrip(j: &Jaxpr, registry: &Registry) -> String {
    let text = print_jaxpr(j);
    let back = parse_jaxpr_with(&text, registry)
        .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{text}"));
    ferrax_ir::typecheck_in(&back, &open_axes()).expect("parsed jaxpr typechecks");
    assert_eq!(print_jaxpr(&back), text, "print(parse(text)) != text");
    assert_eq!(back.eqns().len(), j.eqns().len());
    for (e1, e2) in j.eqns().iter().zip(back.eqns()) {
        assert_eq!(e1.primitive().name(), e2.primitive().name());
        for (n2, _) in e2.params().iter() {
            assert!(e1.params().get(n2).is_some(), "param {n2} appeared: {text}");
        }
        for (n1, p1) in e1.params().iter() {
            let Some(p2) = e2.params().get(n1) else {
                // Only params JAX 0.10 does not print, at their defaults, may be lost.
                let default = match (n1, p1) {
                    ("sharding" | "out_sharding" | "accuracy", Param::None) => true,
                    ("precision" | "preferred_element_type", Param::None) => true,
                    ("linear", Param::Bools(v)) => v.iter().all(|b| !b),
                    ("_split_transpose", Param::Bool(b)) => !b,
                    _ => false,
                };
                assert!(default, "param {n1}={p1:?} was lost: {text}");
                continue;
            };
            match (p1, p2) {
                (Param::Jaxpr(_), Param::Jaxpr(_)) | (Param::Jaxprs(_), Param::Jaxprs(_)) => {}
                _ => assert_eq!(p1, p2, "param {n1} of {}", e1.primitive().name()),
            }
        }
    }
    text
}

#[test]
fn every_builtin_roundtrips() {
    let reg = Registry::new();
    for &prim in Builtin::ALL {
        let (ins, ps) = case(prim);
        let mut b = JaxprBuilder::with_axis_env(open_axes());
        let xs: Vec<Atom> = ins
            .iter()
            .map(|a| Atom::Var(b.add_invar(a.clone())))
            .collect();
        let outs = b
            .add_eqn(prim.into(), xs, ps)
            .unwrap_or_else(|e| panic!("{}: {e}", prim.name()));
        let j = b
            .build(outs.into_iter().map(Atom::Var).collect())
            .expect("builds");
        let text = roundtrip(&j, &reg);
        assert!(text.contains(prim.name()), "{text}");
    }
}

#[test]
fn all_builtins_in_one_jaxpr() {
    // Every case as an equation of one jaxpr with constvars and literal outputs.
    let mut b = JaxprBuilder::with_axis_env(open_axes());
    let c = b.add_constvar(f32s(&[3]));
    let mut outs = vec![Atom::Var(c)];
    for &prim in Builtin::ALL {
        let (ins, ps) = case(prim);
        let xs: Vec<Atom> = ins
            .iter()
            .map(|a| Atom::Var(b.add_invar(a.clone())))
            .collect();
        let o = b.add_eqn(prim.into(), xs, ps).expect("typechecks");
        outs.extend(o.into_iter().map(Atom::Var));
    }
    outs.push(b.literal(lit(LitValue::Float(2.5), DType::F32)));
    let j = b.build(outs).expect("builds");
    let text = roundtrip(&j, &Registry::new());
    assert!(text.starts_with("{ lambda a:f32[3]; b:"), "{text}");
    assert!(text.ends_with(" 2.5:f32[]) }"), "{text}");
    let cj = ClosedJaxpr::with_unknown_consts(Arc::new(j));
    assert_eq!(print_closed_jaxpr(&cj), text);
    assert_eq!(cj.to_string(), text);
}

#[test]
fn exact_layout() {
    // The layout of the format's example, built programmatically.
    let mut b = JaxprBuilder::new();
    let a = b.add_constvar(f32s(&[8]));
    let x = b.add_invar(f32s(&[8]));
    b.add_invar(f32s(&[]));
    let d = eqn1(
        &mut b,
        Builtin::Mul,
        vec![Atom::Var(x), Atom::Var(a)],
        Params::empty(),
    );
    let two = b.literal(lit(LitValue::Float(2.0), DType::F32));
    let e = eqn1(&mut b, Builtin::Add, vec![d, two], Params::empty());
    let f = eqn1(
        &mut b,
        Builtin::ReduceSum,
        vec![e],
        params(vec![
            ("axes", Param::ints(&[0])),
            ("out_sharding", Param::None),
        ]),
    );
    let j = b.build(vec![f]).expect("builds");
    assert_eq!(
        print_jaxpr(&j),
        "{ lambda a:f32[8]; b:f32[8] c:f32[]. let
    d:f32[8] = mul b a
    e:f32[8] = add d 2.0:f32[]
    f:f32[] = reduce_sum[axes=(0,) out_sharding=None] e
  in (f,) }"
    );
    // No inputs, no outputs.
    let j = JaxprBuilder::new().build(vec![]).expect("builds");
    assert_eq!(print_jaxpr(&j), "{ lambda ; . let  in () }");
    assert_eq!(
        print_jaxpr(&parse_jaxpr("{ lambda ; . let\n  in () }").expect("parses")),
        print_jaxpr(&j)
    );
}

#[test]
fn nested_names_and_layout() {
    // cond inside jit inside while's body: one counter runs through the nested jaxprs;
    // a jit's jaxpr takes the names of the equation's inputs and outputs (JAX's
    // suggestions). Short jaxprs and params fit on one line, long ones break.
    let text = "{ lambda ; a:i32[] b:f32[3]. let
    c:i32[] d:f32[3] = while[
      body_jaxpr={ lambda ; e:i32[] f:f32[3]. let
          g:i32[] = add e 1:i32[]
          h:f32[3] = jit[
            name=inner
            jaxpr={ lambda ; f:f32[3]. let
                h:f32[3] = cond[
                  branches=(
                    { lambda ; i:f32[3]. let j:f32[3] = sin i in (j,) }
                    { lambda ; k:f32[3]. let l:f32[3] = cos k in (l,) }
                  )
                ] 0:i32[] f
              in (h,) }
          ] f
          m:f32[3] = mul h 2.0:f32[]
        in (g, m) }
      body_nconsts=0
      cond_jaxpr={ lambda ; n:i32[] o:f32[3]. let
          p:bool[] = lt n 10:i32[]
        in (p,) }
      cond_nconsts=0
    ] a b
  in (c, d) }";
    let j = parse_jaxpr(text).expect("parses");
    assert_eq!(print_jaxpr(&j), text);
}

#[test]
fn literals_of_every_dtype() {
    let values: Vec<(LitValue, DType)> = vec![
        (LitValue::Bool(true), DType::Bool),
        (LitValue::Bool(false), DType::Bool),
        (LitValue::Int(i8::MIN as i64), DType::I8),
        (LitValue::Int(i16::MAX as i64), DType::I16),
        (LitValue::Int(i32::MIN as i64), DType::I32),
        (LitValue::Int(i64::MIN), DType::I64),
        (LitValue::Int(i64::MAX), DType::I64),
        (LitValue::Int(255), DType::U8),
        (LitValue::Int(65535), DType::U16),
        (LitValue::Int(u32::MAX as i64), DType::U32),
        (LitValue::Int(i64::MAX), DType::U64),
        (LitValue::Float(0.5), DType::F16),
        (LitValue::Float(65504.0), DType::F16),
        (LitValue::Float(0.10009765625), DType::BF16),
        (LitValue::Float(0.1f32 as f64), DType::F32),
        (LitValue::Float(f32::MIN_POSITIVE as f64), DType::F32),
        (LitValue::Float(0.1), DType::F64),
        (LitValue::Float(5e-324), DType::F64),
        (LitValue::Float(1e300), DType::F64),
        (LitValue::Float(-0.0), DType::F32),
        (LitValue::Float(f64::INFINITY), DType::F32),
        (LitValue::Float(f64::NEG_INFINITY), DType::F64),
        (LitValue::Float(f64::NAN), DType::F64),
        (LitValue::Float(123456789.0), DType::F64),
        (LitValue::Float(1e16), DType::F64),
    ];
    let mut b = JaxprBuilder::new();
    let outs: Vec<Atom> = values.iter().map(|&(v, d)| b.literal(lit(v, d))).collect();
    let j = b.build(outs).expect("builds");
    roundtrip(&j, &Registry::new());
    let back = parse_jaxpr(&print_jaxpr(&j)).expect("parses");
    for (i, &(v, d)) in values.iter().enumerate() {
        let Atom::Lit(l) = back.outvars()[i] else {
            panic!("output {i} is not a literal")
        };
        let got = back.literal(l);
        assert_eq!(got.dtype, d);
        match (got.value, v) {
            (LitValue::Float(x), LitValue::Float(y)) => {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "{x} vs {y}"
                )
            }
            (x, y) => assert_eq!(x, y),
        }
    }
}

/// An extension primitive returning its operands' types, with any params.
struct PassThrough;

impl ExtensionPrimitive for PassThrough {
    fn name(&self) -> &str {
        "pass_through"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        Ok(inputs.to_vec())
    }
}

/// An extension primitive with no outputs.
struct Effect;

impl ExtensionPrimitive for Effect {
    fn name(&self) -> &str {
        "effect"
    }
    fn abstract_eval(&self, _: &[AbstractValue], _: &Params) -> Result<Vec<AbstractValue>, String> {
        Ok(vec![])
    }
}

fn ext_registry() -> (Registry, Primitive, Primitive) {
    let pt: Arc<dyn ExtensionPrimitive> = Arc::new(PassThrough);
    let ef: Arc<dyn ExtensionPrimitive> = Arc::new(Effect);
    let mut r = Registry::new();
    r.register(pt.clone()).unwrap();
    r.register(ef.clone()).unwrap();
    (r, Primitive::Extension(pt), Primitive::Extension(ef))
}

#[test]
fn extension_params_keep_their_kind() {
    let (reg, pt, ef) = ext_registry();
    let s = |x: &str| Param::Str(Arc::from(x));
    let inner = sub(&[f32s(&[])], |b, xs| {
        vec![eqn1(b, Builtin::Exp, vec![xs[0]], Params::empty())]
    });
    let ps = params(vec![
        ("none", Param::None),
        ("t", Param::Bool(true)),
        ("i", Param::Int(i64::MIN)),
        ("f1", Param::Float(0.1)),
        ("f2", Param::Float(-0.0)),
        ("f3", Param::Float(1e300)),
        ("f4", Param::Float(f64::NEG_INFINITY)),
        ("f5", Param::Float(5e-324)),
        ("f6", Param::Float(3.0)),
        ("s1", s("sin")),
        ("s2", s("<lambda>")),
        ("s3", s("two words")),
        ("s4", s("12")),
        ("s5", s("float32")),
        ("s6", s("")),
        ("s7", s("it's \"quoted\"\n\t\\ λ")),
        ("s8", s("(A, B)")),
        ("s9", s("(A,)")),
        ("s10", s("[x]")),
        ("s11", s("True")),
        ("s12", s("None")),
        ("s13", s("1e5")),
        ("s14", s("a=b")),
        ("s15", s("{")),
        ("s16", s(".x")),
        ("s17", s("\u{7f}\u{1}")),
        ("s18", s("(1, 2)")),
        ("s19", s("inf")),
        // The name of the shared jaxpr below (`inner`, held three times): quoted.
        ("s20", s("jaxpr")),
        ("ints", Param::ints(&[1, -2, i64::MAX])),
        ("one", Param::ints(&[7])),
        ("bools", Param::Bools(Arc::from(vec![true]))),
        ("dt", Param::DType(DType::BF16)),
        (
            "dims",
            Param::DotDims(Arc::new(DotDimensionNumbers {
                lhs_contracting: vec![1, 2],
                rhs_contracting: vec![0, 1],
                lhs_batch: vec![],
                rhs_batch: vec![],
            })),
        ),
        ("j", Param::Jaxpr(inner.clone())),
        ("js", Param::Jaxprs(Arc::new(vec![inner.clone(), inner]))),
    ]);
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[2]));
    let outs = b
        .add_eqn(pt.clone(), vec![Atom::Var(x)], ps)
        .expect("typechecks");
    b.add_eqn(
        ef.clone(),
        vec![Atom::Var(outs[0]), Atom::Var(x)],
        Params::empty(),
    )
    .expect("typechecks");
    b.add_eqn(ef, vec![], params(vec![("k", Param::Int(1))]))
        .expect("typechecks");
    let j = b.build(vec![Atom::Var(outs[0])]).expect("builds");
    let text = roundtrip(&j, &reg);
    // `inner` is held three times: printed first, as `let jaxpr = ...`, it names `a`, `b`.
    assert!(
        text.starts_with("let jaxpr = { lambda ; a:f32[]."),
        "{text}"
    );
    assert!(text.contains("j=jaxpr\n      js=(jaxpr jaxpr)\n"), "{text}");
    assert!(text.contains("\n    effect d c\n"), "{text}");
    assert!(text.contains("s20='jaxpr'"), "{text}");
    assert!(text.contains("\n    effect[k=1] \n"), "{text}");
    assert!(text.contains("s4='12'"), "{text}");
    assert!(text.contains("s8=(A, B)"), "{text}");

    // Empty tuples print `()` whatever their kind, and read back as empty int tuples.
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[2]));
    let ps = params(vec![
        ("e1", Param::Bools(Arc::from(vec![]))),
        ("e2", Param::Jaxprs(Arc::new(vec![]))),
        ("e3", Param::ints(&[])),
    ]);
    let outs = b.add_eqn(pt, vec![Atom::Var(x)], ps).expect("typechecks");
    let j = b.build(vec![Atom::Var(outs[0])]).expect("builds");
    let text = print_jaxpr(&j);
    assert!(text.contains("pass_through[e1=() e2=() e3=()] a"), "{text}");
    let back = parse_jaxpr_with(&text, &reg).expect("parses");
    assert_eq!(print_jaxpr(&back), text);
    assert_eq!(
        format_param_flat(&Param::Jaxprs(Arc::new(vec![]))).as_deref(),
        Some("()")
    );
}

/// A chain `sin`, `mul`, `add` of about `n` equations.
fn chain(n: usize) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let a = Atom::Var(b.add_invar(f32s(&[8])));
    let mut x = a;
    for i in 0..n {
        x = match i % 3 {
            0 => eqn1(&mut b, Builtin::Sin, vec![x], Params::empty()),
            1 => eqn1(&mut b, Builtin::Mul, vec![x, a], Params::empty()),
            _ => {
                let two = b.literal(lit(LitValue::Float(2.0), DType::F32));
                eqn1(&mut b, Builtin::Add, vec![x, two], Params::empty())
            }
        };
    }
    b.build(vec![x]).expect("builds")
}

#[test]
fn long_chain() {
    let n = if cfg!(debug_assertions) {
        200_000
    } else {
        1_000_000
    };
    let j = chain(n);
    let t = Instant::now();
    let text = print_jaxpr(&j);
    let print_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let back = parse_jaxpr(&text).expect("the chain parses");
    let parse_s = t.elapsed().as_secs_f64();
    eprintln!(
        "chain of {n}: print {:.0} ns/eqn, parse {:.0} ns/eqn ({} bytes)",
        print_s * 1e9 / n as f64,
        parse_s * 1e9 / n as f64,
        text.len()
    );
    assert_eq!(back.eqns().len(), n);
    assert_eq!(print_jaxpr(&back), text);
    // Names past a few letters: the keywords are names as JAX gives them (`in`, `let`),
    // and so are words that look like literals (`inf`, `nan`).
    assert!(text.contains("\n    in:f32[8] = "));
    assert!(text.contains("\n    let:f32[8] = "));
    assert!(text.matches(" let\n").count() == 1);
    assert!(text.contains("\n    les:f32[8] = ") && text.contains("\n    leu:f32[8] = "));
    assert!(text.contains("\n    inf:f32[8] = "));
    assert!(text.contains("\n    nan:f32[8] = "));
    if !cfg!(debug_assertions) {
        // Targets are 1 us (print) and 2 us (parse) per equation on an idle machine; the
        // bounds here are loose so that only a gross (e.g. quadratic) regression fails
        // while other tests run in parallel.
        assert!(
            print_s * 1e9 / (n as f64) < 10_000.0,
            "printing is too slow"
        );
        assert!(parse_s * 1e9 / (n as f64) < 20_000.0, "parsing is too slow");
    }
}

const DEPTH: usize = 100_000;

/// `DEPTH` nested `jit`s around `sin`.
fn jit_nest(depth: usize) -> Jaxpr {
    let mut inner = {
        let mut b = JaxprBuilder::new();
        let x = Atom::Var(b.add_invar(f32s(&[])));
        let y = eqn1(&mut b, Builtin::Sin, vec![x], Params::empty());
        b.build(vec![y]).expect("builds")
    };
    for _ in 0..depth {
        let mut b = JaxprBuilder::new();
        let x = Atom::Var(b.add_invar(f32s(&[])));
        let cj = ClosedJaxpr::with_unknown_consts(Arc::new(inner));
        let y = eqn1(
            &mut b,
            Builtin::Jit,
            vec![x],
            params(vec![
                ("jaxpr", Param::Jaxpr(cj)),
                ("name", Param::Str(Arc::from("f"))),
            ]),
        );
        inner = b.build(vec![y]).expect("builds");
    }
    inner
}

#[test]
fn deep_jit_nest() {
    // Runs on the default 2 MiB test thread: nothing may recurse over the depth.
    let j = jit_nest(DEPTH);
    let text = print_jaxpr(&j);
    // Indentation is capped, so the text is linear in the depth.
    assert!(text.len() < DEPTH * 1_200, "text is {} bytes", text.len());
    let max_indent = text
        .lines()
        .map(|l| l.len() - l.trim_start().len())
        .max()
        .unwrap_or(0);
    assert!(max_indent <= 6 * 34 + 4, "indent {max_indent}");
    let back = parse_jaxpr(&text).expect("the nest parses");
    ferrax_ir::typecheck_in(&back, &open_axes()).expect("typechecks");
    assert_eq!(print_jaxpr(&back), text);
}

/// A nest cycling through `jit`, `cond`, `while` and `scan`, `depth` levels deep.
fn mixed_nest(depth: usize) -> Jaxpr {
    let s = f32s(&[]);
    let mut inner = sub(std::slice::from_ref(&s), |b, xs| {
        vec![eqn1(b, Builtin::Sin, vec![xs[0]], Params::empty())]
    });
    for level in 0..depth {
        let body = inner.clone();
        inner = sub(std::slice::from_ref(&s), |b, xs| {
            let x = xs[0];
            let y = match level % 4 {
                0 => eqn1(
                    b,
                    Builtin::Jit,
                    vec![x],
                    params(vec![("jaxpr", Param::Jaxpr(body))]),
                ),
                1 => {
                    let zero = b.literal(lit(LitValue::Int(0), DType::I32));
                    let other = sub(&[f32s(&[])], |b, ys| {
                        vec![eqn1(b, Builtin::Neg, vec![ys[0]], Params::empty())]
                    });
                    eqn1(
                        b,
                        Builtin::Cond,
                        vec![zero, x],
                        params(vec![(
                            "branches",
                            Param::Jaxprs(Arc::new(vec![body, other])),
                        )]),
                    )
                }
                2 => {
                    let cond_j = sub(&[f32s(&[])], |b, ys| {
                        let one = b.literal(lit(LitValue::Float(1.0), DType::F32));
                        vec![eqn1(b, Builtin::Lt, vec![ys[0], one], Params::empty())]
                    });
                    eqn1(
                        b,
                        Builtin::While,
                        vec![x],
                        params(vec![
                            ("cond_jaxpr", Param::Jaxpr(cond_j)),
                            ("body_jaxpr", Param::Jaxpr(body)),
                            ("cond_nconsts", Param::Int(0)),
                            ("body_nconsts", Param::Int(0)),
                        ]),
                    )
                }
                _ => eqn1(
                    b,
                    Builtin::Scan,
                    vec![x],
                    params(vec![
                        ("jaxpr", Param::Jaxpr(body)),
                        ("length", Param::Int(2)),
                        ("reverse", Param::Bool(false)),
                        ("num_consts", Param::Int(0)),
                        ("num_carry", Param::Int(1)),
                    ]),
                ),
            };
            vec![y]
        });
    }
    let mut b = JaxprBuilder::new();
    let x = Atom::Var(b.add_invar(s));
    let y = eqn1(
        &mut b,
        Builtin::Jit,
        vec![x],
        params(vec![("jaxpr", Param::Jaxpr(inner))]),
    );
    b.build(vec![y]).expect("builds")
}

#[test]
fn deep_mixed_nest() {
    let depth = if cfg!(debug_assertions) {
        20_000
    } else {
        DEPTH
    };
    let j = mixed_nest(depth);
    let text = print_jaxpr(&j);
    let back = parse_jaxpr(&text).expect("the nest parses");
    assert_eq!(print_jaxpr(&back), text);
}

#[test]
fn deep_errors_do_not_overflow() {
    // An unbound variable at the bottom of a deep nest: the error names the outermost
    // enclosing equations only, and can be displayed and dropped.
    let j = jit_nest(DEPTH);
    let text = print_jaxpr(&j);
    let bad = text.replacen("= sin a", "= sin zz", 1);
    assert_ne!(bad, text);
    let err = parse_jaxpr(&bad).expect_err("unbound variable");
    let msg = err.to_string();
    assert!(
        msg.contains("variable 'zz' is used before it is bound"),
        "{}",
        &msg[..200.min(msg.len())]
    );
    assert_eq!(
        msg.matches("in param 'jaxpr'").count(),
        ferrax_ir::text::MAX_ERROR_NESTING
    );
    match &err {
        ReadError::Type(TypeError::SubJaxpr { .. }) => {}
        other => panic!("unexpected error {other:?}"),
    }
    drop(err);

    // A deep nest cut short.
    let cut = &text[..text.len() / 2];
    let err = parse_jaxpr(cut).expect_err("truncated");
    assert!(err.to_string().contains("end of input") || matches!(err, ReadError::Parse(_)));

    // Unclosed `{` and `(` in params, very deep.
    let opens = "{ lambda ; a:f32[]. let b:f32[] = jit[jaxpr=".repeat(DEPTH);
    assert!(parse_jaxpr(&opens).is_err());
    let tuple = format!(
        "{{ lambda ; a:f32[]. let b:f32[] = pass_through[x={}1{}] a in (b,) }}",
        "(".repeat(DEPTH),
        ")".repeat(DEPTH)
    );
    let (reg, _, _) = ext_registry();
    let err = parse_jaxpr_with(&tuple, &reg).expect_err("too deep");
    assert!(err.to_string().contains("nested too deeply"), "{err}");
}

/// Parses `text`; if it is accepted, it must typecheck and print stably.
fn check_accepted(text: &str, reg: &Registry) {
    if let Ok(j) = parse_jaxpr_with(text, reg) {
        ferrax_ir::typecheck_in(&j, &open_axes()).expect("accepted text typechecks");
        let printed = print_jaxpr(&j);
        let again = parse_jaxpr_with(&printed, reg).unwrap_or_else(|e| {
            panic!("printed form does not parse: {e}\n{printed}\nfrom\n{text}")
        });
        assert_eq!(print_jaxpr(&again), printed, "unstable print of\n{text}");
    }
}

fn seeds() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jaxprs");
    let mut v: Vec<String> = [
        "nested_all",
        "extension_params",
        "keyword_names",
        "whitespace",
        "jax_shared",
        "jax_jit_dropvar",
        "literals",
    ]
    .iter()
    .filter_map(|n| std::fs::read_to_string(dir.join(format!("{n}.jaxpr"))).ok())
    .map(|t| {
        t.lines()
            .filter(|l| !l.starts_with(";;"))
            .take_while(|l| !l.starts_with("; "))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .collect();
    let mut b = JaxprBuilder::with_axis_env(open_axes());
    for &prim in Builtin::ALL {
        let (ins, ps) = case(prim);
        let xs: Vec<Atom> = ins
            .iter()
            .map(|a| Atom::Var(b.add_invar(a.clone())))
            .collect();
        b.add_eqn(prim.into(), xs, ps).expect("typechecks");
    }
    v.push(print_jaxpr(&b.build(vec![]).expect("builds")));
    v
}

fn fuzz_registry() -> Registry {
    let (mut reg, _, _) = ext_registry();
    // The corpus's extension primitives.
    struct Named(&'static str, bool);
    impl ExtensionPrimitive for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn abstract_eval(
            &self,
            i: &[AbstractValue],
            _: &Params,
        ) -> Result<Vec<AbstractValue>, String> {
            Ok(if self.1 { i.to_vec() } else { vec![] })
        }
    }
    reg.register(Arc::new(Named("test_ext", true))).unwrap();
    reg.register(Arc::new(Named("test_effect", false))).unwrap();
    reg
}

#[test]
fn every_prefix_is_handled() {
    let reg = fuzz_registry();
    for seed in seeds() {
        assert!(
            parse_jaxpr_with(&seed, &reg).is_ok(),
            "seed does not parse:\n{seed}"
        );
        for (i, _) in seed.char_indices() {
            check_accepted(&seed[..i], &reg);
        }
    }
}

/// A small linear congruential generator (no dependencies).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ";",
    "=",
    ":",
    ".",
    " ",
    "\n",
    "'",
    "\"",
    "\\",
    "_",
    "a",
    "b",
    "in",
    "let",
    "lambda",
    "inf",
    "nan",
    "True",
    "None",
    "-",
    "0",
    "1",
    "9",
    "1e5",
    "2.0",
    "f32",
    "i32",
    "bool",
    "u8",
    "[]",
    ":f32[]",
    "sin",
    "add",
    "jit",
    "cond",
    "jaxpr=",
    "é",
    "λ",
    "\u{0}",
    "\u{7f}",
    "9223372036854775808",
    "{ lambda ; . let in () }",
];

fn mutate(rng: &mut Lcg, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = chars.clone();
    for _ in 0..1 + rng.below(3) {
        let n = out.len();
        let at = rng.below(n + 1);
        match rng.below(5) {
            0 => {
                let len = rng.below(8).min(n - at.min(n));
                out.drain(at..at + len);
            }
            1 | 2 => {
                let piece = PIECES[rng.below(PIECES.len())];
                out.splice(at..at, piece.chars());
            }
            3 => {
                // Duplicate a slice.
                let len = rng.below(40).min(n - at.min(n));
                let copy: Vec<char> = out[at..at + len].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, copy);
            }
            _ => {
                if at < n {
                    out[at] = char::from_u32(rng.below(0x250) as u32).unwrap_or('?');
                }
            }
        }
    }
    out.into_iter().collect()
}

#[test]
fn random_mutations_never_panic() {
    let reg = fuzz_registry();
    let seeds = seeds();
    let mut rng = Lcg(0x5eed_1234_abcd_ef01);
    let rounds = if cfg!(debug_assertions) {
        4_000
    } else {
        40_000
    };
    let mut accepted = 0;
    for i in 0..rounds {
        let seed = &seeds[i % seeds.len()];
        let text = mutate(&mut rng, seed);
        if parse_jaxpr_with(&text, &reg).is_ok() {
            accepted += 1;
        }
        check_accepted(&text, &reg);
    }
    // Some mutations (whitespace, names) keep the text valid.
    assert!(accepted > 0);
}

#[test]
fn errors_point_at_the_token() {
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "{ lambda ; a:f32[3]. let\n    b:f32[3] = frob a\n  in (b,) }",
            2,
            16,
            "unknown primitive 'frob'",
        ),
        (
            "{ lambda ; a:f33[3]. let\n  in (a,) }",
            1,
            14,
            "unknown dtype 'f33'",
        ),
        (
            "{ lambda ; a:f32[9223372036854775807,2]. let in (a,) }",
            1,
            14,
            "overflows i64",
        ),
        (
            "{ lambda ; a:f32[3]. let\n  in (a,)",
            2,
            10,
            "found end of input",
        ),
        (
            "{ lambda ; a:f32[3]. let\n  b:f32[3] = sin a\n    in (b, }",
            3,
            12,
            "expected an output variable",
        ),
        (
            "{ lambda ; a:i64[]. let in (99999999999999999999:i64[],) }",
            1,
            29,
            "overflows i64",
        ),
        ("  \n\n   é", 3, 4, "expected '{'"),
    ];
    for &(text, line, column, msg) in cases {
        match parse_jaxpr(text) {
            Err(ReadError::Parse(e)) => {
                assert_eq!((e.line, e.column), (line, column), "{e}");
                assert!(e.message.contains(msg), "{e}");
            }
            other => panic!("{text}: expected a parse error, got {other:?}"),
        }
    }
}

/// JAX's width rule: a jaxpr is one line when that line (its final ` }` included) fits
/// in 80 columns; otherwise it breaks, and each equation's own groups decide again.
/// (Checked with JAX 0.10.2: `lambda a: jnp.expm1(a + 1.0)` on f32[1] prints 81
/// characters, so it breaks.)
#[test]
fn width_rule_at_the_boundary() {
    let mut seen = (false, false);
    for n in 1..30 {
        for (lit, prim) in ["1.0", "1.25", "1.125"]
            .iter()
            .flat_map(|l| ["cos", "tanh", "expm1", "logistic"].map(|p| (l, p)))
        {
            let dims = vec!["1"; n].join(",");
            let one_line = format!(
                "{{ lambda ; a:f32[{dims}]. let b:f32[{dims}] = add a {lit}:f32[]; c:f32[{dims}] = {prim} b in (c,) }}"
            );
            let printed = print_jaxpr(&parse_jaxpr(&one_line).expect("parses"));
            let group = one_line.len();
            if group <= 80 {
                assert_eq!(printed, one_line, "group of {group} columns");
                seen.0 |= group == 80;
            } else {
                let broken = format!(
                    "{{ lambda ; a:f32[{dims}]. let\n    b:f32[{dims}] = add a {lit}:f32[]\n    c:f32[{dims}] = {prim} b\n  in (c,) }}"
                );
                assert_eq!(printed, broken, "group of {group} columns");
                seen.1 |= group == 81;
            }
        }
    }
    assert!(seen.0 && seen.1, "both sides of the boundary were printed");
}

/// A fuzzing finding (fuzz/findings): a long equation's inputs wrap onto a line that
/// starts with a literal (`False:bool[]`, `inf:f32[]`, ...), which was read as the next
/// equation's binders. What follows decides: binders then `=`, or not.
#[test]
fn literal_at_the_start_of_a_wrapped_line() {
    for lit in ["False:bool[]", "True:bool[]"] {
        let text = format!("{{ lambda ; b:bool[]. let a:bool[] = and b\n    {lit}\n  in (a,) }}");
        let j = ferrax_ir::text::parse_jaxpr(&text).unwrap();
        assert_eq!(j.eqns().len(), 1);
        let again = ferrax_ir::text::parse_jaxpr(&ferrax_ir::text::print_jaxpr(&j)).unwrap();
        assert_eq!(
            ferrax_ir::text::print_jaxpr(&again),
            ferrax_ir::text::print_jaxpr(&j)
        );
    }
    for lit in ["inf:f32[]", "nan:f32[]", "-inf:f32[]"] {
        let text = format!("{{ lambda ; b:f32[]. let a:f32[] = add b\n    {lit}\n    c:f32[] = sin a\n  in (c,) }}");
        let j = ferrax_ir::text::parse_jaxpr(&text).unwrap();
        assert_eq!(j.eqns().len(), 2, "{text}");
    }
    // A variable named like a literal, binding at a line start, stays a binder.
    let text = "{ lambda ; b:f32[]. let\n    nan:f32[] = sin b\n    inf:f32[] c:f32[] = jit[\n      jaxpr={ lambda ; d:f32[]. let  in (d, d) }\n      name=f\n    ] nan\n  in (inf, c) }";
    let j = ferrax_ir::text::parse_jaxpr(text).unwrap();
    assert_eq!(j.eqns().len(), 2);
}

/// Finding 1 of fuzz/README.md: a float literal keeps its value as written, so text whose
/// decimal is not exact in the dtype prints back unchanged; evaluation and lowering round it.
#[test]
fn inexact_float_literals_keep_their_text() {
    let finding = include_str!("../../../fuzz/findings/text_literal_printed_as_f64.jaxpr");
    for text in [
        finding.trim_end(),
        "{ lambda ; . let  in (0.1:f32[],) }",
        "{ lambda ; . let  in (0.10000000149011612:f32[],) }",
        "{ lambda ; . let  in (0.1:bf16[], 1e-05:f16[], 100000.0:f16[], 0.1:f64[]) }",
    ] {
        let j = ferrax_ir::text::parse_jaxpr(text).unwrap();
        assert_eq!(ferrax_ir::text::print_jaxpr(&j).trim_end(), text);
    }
    // Rounded where used: the evaluator holds the dtype's nearest value ...
    let j = ferrax_ir::text::parse_jaxpr(
        "{ lambda ; . let  in (0.1:f32[], 0.1:bf16[], 100000.0:f16[], 0.1:f64[]) }",
    )
    .unwrap();
    let out = ferrax_ir::eval::eval_jaxpr(&j, &[], &[]).unwrap();
    let vals: Vec<f64> = out.iter().map(|a| a.to_f64_vec()[0]).collect();
    assert_eq!(vals[0], 0.1f32 as f64);
    assert_eq!(vals[1], 0.10009765625); // bf16's nearest to 0.1
    assert_eq!(vals[2], f64::INFINITY); // beyond f16's range
    assert_eq!(vals[3], 0.1);
    // ... and so does the lowering (f32 as its exact bits, f16 overflowing to infinity).
    let hlo = ferrax_ir::lower::stablehlo::lower_jaxpr(&j, "m").unwrap();
    assert!(
        hlo.contains(&format!("0x{:08X}", 0.1f32.to_bits())),
        "{hlo}"
    );
    assert!(hlo.contains("0x7C00"), "{hlo}");
}

#[test]
fn numpy_scalars_in_params_read_as_their_numbers() {
    // JAX 0.10.2 prints `jnp.pad(x, 1)`'s padding with NumPy ints.
    let jax = "{ lambda ; a:f32[3] b:f32[]. let
    c:f32[5] = pad[padding_config=((np.int64(1), np.int64(1), 0),)] a b
  in (c,) }";
    let j = parse_jaxpr(jax).unwrap();
    let plain = parse_jaxpr(&jax.replace("np.int64(1)", "1")).unwrap();
    // The same jaxpr (equal params), printed back as it was written.
    assert_eq!(j.eqns()[0].params(), plain.eqns()[0].params());
    assert_eq!(print_jaxpr(&j), jax);
    let p = j.eqns()[0].params();
    assert_eq!(p.numpy_int("padding_config", 0), Some(DType::I64));
    assert_eq!(p.numpy_int("padding_config", 2), None);
    // A vmap's dimensions (an int tuple) and a NumPy int of another width.
    let vmapped = "{ lambda ; a:f32[3]. let
    b:f32[1,3] = broadcast_in_dim[broadcast_dimensions=(np.int32(1),)] a
    c:f32[] = reduce_sum[axes=(0, np.uint8(1)) out_sharding=None] b
  in (c,) }";
    assert_eq!(print_jaxpr(&parse_jaxpr(vmapped).unwrap()), vmapped);
    for (bad, want) in [
        ("np.int64(x)", "a number in np.int64(...)"),
        ("np.int64(1", "')' after the number"),
    ] {
        let e = parse_jaxpr(&jax.replacen("np.int64(1)", bad, 1)).unwrap_err();
        assert!(e.to_string().contains(want), "{bad}: {e}");
    }
    // Other names followed by '(' are records as before.
    assert!(parse_jaxpr(&jax.replacen("np.int64(1)", "np.int128(1)", 1)).is_err());
}

#[test]
fn u64_literals_above_i64_max() {
    // JAX prints `x ^ np.uint64(2**64 - 1)` with the full value; the IR holds its bits.
    let jax = "{ lambda ; a:u64[3]. let
    b:u64[3] = xor a 18446744073709551615:u64[]
    c:u64[3] = mul b 11400714819323198485:u64[]
  in (c,) }";
    let j = parse_jaxpr(jax).unwrap();
    assert_eq!(print_jaxpr(&j), jax);
    let lit = &j.literals()[0];
    assert_eq!(lit.value, LitValue::Int(-1));
    assert!(lit.is_well_typed());
    let x =
        ferrax_ir::eval::HostArray::from_i64(Shape::new(&[3]).unwrap(), DType::U64, vec![0, 1, 7])
            .unwrap();
    let out = ferrax_ir::eval::eval_jaxpr(&j, &[], &[x]).unwrap();
    let want: Vec<i64> = [0u64, 1, 7]
        .iter()
        .map(|&v| ((v ^ u64::MAX).wrapping_mul(11400714819323198485)) as i64)
        .collect();
    assert_eq!(out[0].as_i64().unwrap(), want.as_slice());
    // Past u64, or a signed dtype past i64: a parse error naming the width.
    let e = parse_jaxpr(&jax.replace("18446744073709551615", "18446744073709551616")).unwrap_err();
    assert!(e.to_string().contains("overflows u64"), "{e}");
    let e = parse_jaxpr("{ lambda ; . let  in (9223372036854775808:i64[],) }").unwrap_err();
    assert!(e.to_string().contains("overflows i64"), "{e}");
}

#[test]
fn dropped_outputs_of_a_jit_read_back() {
    // One unused output of a jit: `_` passes into the inner jaxpr, as JAX prints it.
    let one = "{ lambda ; a:f32[]. let
    _:f32[] b:f32[] = jit[
      name=sin
      jaxpr={ lambda ; a:f32[]. let _:f32[] = sin a; b:f32[] = cos a in (_, b) }
    ] a
  in (b,) }";
    assert_eq!(print_jaxpr(&parse_jaxpr(one).unwrap()), one);
    // Two: `_` twice in the inner jaxpr would read back as its latest binding (fuzz
    // finding: an ill-typed or silently rewired jaxpr), so the inner ones are named.
    let two = "{ lambda ; a:f32[] b:i32[]. let
    _:f32[] _:i32[] c:f32[] = jit[
      name=f
      jaxpr={ lambda ; a:f32[] b:i32[]. let
          d:f32[] = sin a
          e:i32[] = neg b
          c:f32[] = cos a
        in (d, e, c) }
    ] a b
  in (c,) }";
    let j = parse_jaxpr(two).unwrap();
    let text = print_jaxpr(&j);
    assert_eq!(text, two);
    assert_eq!(print_jaxpr(&parse_jaxpr(&text).unwrap()), text);
}
