//! The shape/dtype rules of every built-in primitive, case by case.
//!
//! Each case calls `Builtin::abstract_eval` and either expects output types (weak types
//! included, as JAX 0.10.2 gives them; the cases were checked with `jax.make_jaxpr` and
//! `Primitive.bind`) or a `RuleError` of a given variant whose message names what
//! mismatched. `every_builtin_has_accepting_and_rejecting_cases` keeps the tables covering
//! the whole catalogue.

use ferrax_ir::DType::{BF16, F16, F32, F64, I16, I32, I64, I8, U16, U32, U64, U8};
use ferrax_ir::{
    AbstractValue, Atom, AxisEnv, Builtin, ClosedJaxpr, ConvDimensionNumbers, DType,
    DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, JaxprBuilder, LitValue,
    Literal, Opaque, Param, ParamKind, Params, RuleError, ScatterDimensionNumbers, Shape,
    ShapeError,
};
use std::collections::HashMap;
use std::sync::Arc;

const BOOL: DType = DType::Bool;

// ---------------------------------------------------------------------------------------
// Helpers.

/// A strongly typed abstract value.
fn a(dtype: DType, dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap(), dtype)
}

/// The same value, weakly typed.
fn w(x: AbstractValue) -> AbstractValue {
    x.with_weak_type(true)
}

fn ps<const N: usize>(pairs: [(&str, Param); N]) -> Params {
    Params::new(pairs)
}

fn no_params() -> Params {
    Params::empty()
}

fn ints(v: &[i64]) -> Param {
    Param::ints(v)
}

fn dn(lc: &[i64], rc: &[i64], lb: &[i64], rb: &[i64]) -> Param {
    Param::DotDims(Arc::new(DotDimensionNumbers {
        lhs_contracting: lc.to_vec(),
        rhs_contracting: rc.to_vec(),
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
    }))
}

/// A closed jaxpr with these input types whose body `f` builds from the input atoms.
fn closed(
    ins: &[AbstractValue],
    f: impl FnOnce(&mut JaxprBuilder, &[Atom]) -> Vec<Atom>,
) -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let vars: Vec<Atom> = ins
        .iter()
        .map(|x| Atom::Var(b.add_invar(x.clone())))
        .collect();
    let outs = f(&mut b, &vars);
    ClosedJaxpr::new(Arc::new(b.build(outs).unwrap()), vec![]).unwrap()
}

/// Applies a primitive inside a builder; returns its outputs as atoms.
fn app(b: &mut JaxprBuilder, prim: Builtin, ins: &[Atom], params: Params) -> Vec<Atom> {
    b.add_eqn(prim.into(), ins.to_vec(), params)
        .unwrap()
        .into_iter()
        .map(Atom::Var)
        .collect()
}

fn app1(b: &mut JaxprBuilder, prim: Builtin, ins: &[Atom]) -> Atom {
    app(b, prim, ins, no_params())[0]
}

fn lit(b: &mut JaxprBuilder, value: LitValue, dtype: DType) -> Atom {
    b.literal(Literal {
        value,
        dtype,
        weak_type: false,
    })
}

/// The variant of a rule error, for matching in tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Arity,
    MissingParam,
    UnknownParam,
    ParamKind,
    BadParam,
    DType,
    Operands,
    Shape,
    SubJaxpr,
    UnboundAxis,
}

fn kind_of(e: &RuleError) -> Variant {
    match e {
        RuleError::Arity { .. } => Variant::Arity,
        RuleError::MissingParam { .. } => Variant::MissingParam,
        RuleError::UnknownParam { .. } => Variant::UnknownParam,
        RuleError::ParamKind { .. } => Variant::ParamKind,
        RuleError::BadParam { .. } => Variant::BadParam,
        RuleError::DType { .. } => Variant::DType,
        RuleError::Operands { .. } => Variant::Operands,
        RuleError::Shape(_) => Variant::Shape,
        RuleError::SubJaxpr { .. } => Variant::SubJaxpr,
        RuleError::Extension { .. } => panic!("a built-in gave an extension error: {e}"),
        RuleError::UnboundAxis { .. } => Variant::UnboundAxis,
        RuleError::AxisSizeUnknown { .. } => panic!("a closed environment gave {e}"),
    }
}

enum Expect {
    Accept(Vec<AbstractValue>),
    Reject(Variant, Vec<&'static str>),
}

struct Case {
    label: String,
    prim: Builtin,
    inputs: Vec<AbstractValue>,
    params: Params,
    expect: Expect,
    /// The axis environment (closed), for the collectives' cases.
    env: Option<AxisEnv>,
}

#[derive(Default)]
struct Table(Vec<Case>, Option<AxisEnv>);

impl Table {
    /// The rule accepts and gives exactly `outs` (weak types included).
    fn ok(
        &mut self,
        label: &str,
        prim: Builtin,
        inputs: Vec<AbstractValue>,
        params: Params,
        outs: Vec<AbstractValue>,
    ) {
        self.0.push(Case {
            label: label.to_owned(),
            prim,
            inputs,
            params,
            expect: Expect::Accept(outs),
            env: self.1.clone(),
        });
    }

    /// The rule rejects with an error of `kind` whose message contains every needle.
    fn err(
        &mut self,
        label: &str,
        prim: Builtin,
        inputs: Vec<AbstractValue>,
        params: Params,
        kind: Variant,
        needles: &[&'static str],
    ) {
        self.0.push(Case {
            label: label.to_owned(),
            prim,
            inputs,
            params,
            expect: Expect::Reject(kind, needles.to_vec()),
            env: self.1.clone(),
        });
    }
}

fn types(avals: &[AbstractValue]) -> String {
    let v: Vec<String> = avals
        .iter()
        .map(|x| format!("{}{x}", if x.weak_type { "~" } else { "" }))
        .collect();
    format!("({})", v.join(", "))
}

/// Runs the cases and reports every failure at once.
fn run(cases: &[Case]) {
    let mut failures = Vec::new();
    for c in cases {
        let got = match &c.env {
            Some(env) => c.prim.abstract_eval_in(&c.inputs, &c.params, env),
            None => c.prim.abstract_eval(&c.inputs, &c.params),
        };
        let site = format!("[{}] {} {}", c.prim.name(), c.label, types(&c.inputs));
        match (&c.expect, got) {
            (Expect::Accept(want), Ok(outs)) => {
                if &outs != want {
                    failures.push(format!(
                        "{site}: gave {} but expected {}",
                        types(&outs),
                        types(want)
                    ));
                }
            }
            (Expect::Accept(want), Err(e)) => failures.push(format!(
                "{site}: rejected ({e}) but expected {}",
                types(want)
            )),
            (Expect::Reject(kind, _), Ok(outs)) => failures.push(format!(
                "{site}: accepted, giving {}, but expected a {kind:?} error",
                types(&outs)
            )),
            (Expect::Reject(kind, needles), Err(e)) => {
                if kind_of(&e) != *kind {
                    failures.push(format!("{site}: {e:?} is not a {kind:?} error"));
                }
                let msg = e.to_string();
                for n in needles {
                    if !msg.contains(n) {
                        failures.push(format!("{site}: message '{msg}' lacks '{n}'"));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn table(fill: fn(&mut Table)) -> Vec<Case> {
    let mut t = Table::default();
    fill(&mut t);
    t.0
}

// ---------------------------------------------------------------------------------------
// Unary elementwise.

const UNARY_FLOAT: [Builtin; 11] = [
    Builtin::Exp,
    Builtin::Log,
    Builtin::Log1p,
    Builtin::Expm1,
    Builtin::Sin,
    Builtin::Cos,
    Builtin::Tan,
    Builtin::Tanh,
    Builtin::Logistic,
    Builtin::Sqrt,
    Builtin::Rsqrt,
];

fn unary_cases(t: &mut Table) {
    for p in UNARY_FLOAT {
        t.ok(
            "f32",
            p,
            vec![a(F32, &[2, 3])],
            no_params(),
            vec![a(F32, &[2, 3])],
        );
        t.ok(
            "f16",
            p,
            vec![a(F16, &[4])],
            no_params(),
            vec![a(F16, &[4])],
        );
        t.ok(
            "bf16",
            p,
            vec![a(BF16, &[])],
            no_params(),
            vec![a(BF16, &[])],
        );
        t.ok(
            "f64",
            p,
            vec![a(F64, &[0])],
            no_params(),
            vec![a(F64, &[0])],
        );
        t.ok(
            "weak kept",
            p,
            vec![w(a(F32, &[]))],
            no_params(),
            vec![w(a(F32, &[]))],
        );
        t.ok(
            "accuracy=None",
            p,
            vec![a(F32, &[3])],
            ps([("accuracy", Param::None)]),
            vec![a(F32, &[3])],
        );
        // JAX: "sin does not accept dtype int32".
        t.err(
            "i32",
            p,
            vec![a(I32, &[3])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype i32", "float"],
        );
        t.err(
            "u8",
            p,
            vec![a(U8, &[3])],
            no_params(),
            Variant::DType,
            &["u8"],
        );
        t.err(
            "bool",
            p,
            vec![a(BOOL, &[3])],
            no_params(),
            Variant::DType,
            &["bool"],
        );
        t.err(
            "two operands",
            p,
            vec![a(F32, &[3]), a(F32, &[3])],
            no_params(),
            Variant::Arity,
            &["takes 1 operands but was given 2"],
        );
        t.err(
            "no operand",
            p,
            vec![],
            no_params(),
            Variant::Arity,
            &["given 0"],
        );
        t.err(
            "accuracy as int",
            p,
            vec![a(F32, &[3])],
            ps([("accuracy", Param::Int(1))]),
            Variant::ParamKind,
            &["accuracy", "None"],
        );
    }

    // abs: signed ints and floats (JAX: "abs does not accept dtype uint8").
    for d in [I8, I16, I32, I64, F16, BF16, F32, F64] {
        t.ok(
            "signed",
            Builtin::Abs,
            vec![a(d, &[2])],
            no_params(),
            vec![a(d, &[2])],
        );
    }
    t.ok(
        "weak",
        Builtin::Abs,
        vec![w(a(I32, &[]))],
        no_params(),
        vec![w(a(I32, &[]))],
    );
    for d in [U8, U16, U32, U64, BOOL] {
        t.err(
            "unsigned or bool",
            Builtin::Abs,
            vec![a(d, &[2])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype", "signed int or float"],
        );
    }

    // neg, sign, square: any number, unsigned included (JAX: `a:u8[3] = neg b`), not bool.
    for p in [Builtin::Neg, Builtin::Sign, Builtin::Square] {
        for d in [I8, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64] {
            t.ok(
                "numeric",
                p,
                vec![a(d, &[3])],
                no_params(),
                vec![a(d, &[3])],
            );
        }
        t.ok(
            "weak",
            p,
            vec![w(a(F32, &[3]))],
            no_params(),
            vec![w(a(F32, &[3]))],
        );
        t.err(
            "bool",
            p,
            vec![a(BOOL, &[3])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype bool", "numeric"],
        );
        t.err(
            "arity",
            p,
            vec![],
            no_params(),
            Variant::Arity,
            &["takes 1"],
        );
    }

    // copy: anything, bool included (JAX: `a:bool[3] = copy b`).
    for d in DType::ALL {
        t.ok(
            "any",
            Builtin::Copy,
            vec![a(d, &[3])],
            no_params(),
            vec![a(d, &[3])],
        );
    }
    t.ok(
        "weak",
        Builtin::Copy,
        vec![w(a(F32, &[]))],
        no_params(),
        vec![w(a(F32, &[]))],
    );
    t.err(
        "arity",
        Builtin::Copy,
        vec![a(F32, &[]), a(F32, &[])],
        no_params(),
        Variant::Arity,
        &["takes 1", "given 2"],
    );
    t.err(
        "params",
        Builtin::Copy,
        vec![a(F32, &[])],
        ps([("y", Param::Int(2))]),
        Variant::UnknownParam,
        &["unknown param 'y'"],
    );

    // not: bool or integers.
    for d in [BOOL, I8, U32, I64] {
        t.ok(
            "bitwise",
            Builtin::Not,
            vec![a(d, &[2])],
            no_params(),
            vec![a(d, &[2])],
        );
    }
    t.err(
        "f32",
        Builtin::Not,
        vec![a(F32, &[2])],
        no_params(),
        Variant::DType,
        &["operand 0 has dtype f32", "bool or an integer"],
    );

    // integer_pow: numbers; integers only to non-negative powers.
    let y = |n| ps([("y", Param::Int(n))]);
    t.ok(
        "i32 ^ 2",
        Builtin::IntegerPow,
        vec![a(I32, &[3])],
        y(2),
        vec![a(I32, &[3])],
    );
    t.ok(
        "u8 ^ 0",
        Builtin::IntegerPow,
        vec![a(U8, &[])],
        y(0),
        vec![a(U8, &[])],
    );
    t.ok(
        "f32 ^ -2",
        Builtin::IntegerPow,
        vec![a(F32, &[3])],
        y(-2),
        vec![a(F32, &[3])],
    );
    t.ok(
        "weak",
        Builtin::IntegerPow,
        vec![w(a(F32, &[3]))],
        y(3),
        vec![w(a(F32, &[3]))],
    );
    // JAX: "Integers cannot be raised to negative powers".
    t.err(
        "i32 ^ -2",
        Builtin::IntegerPow,
        vec![a(I32, &[3])],
        y(-2),
        Variant::BadParam,
        &["param 'y'", "i32[3]", "negative power -2"],
    );
    t.err(
        "bool",
        Builtin::IntegerPow,
        vec![a(BOOL, &[3])],
        y(2),
        Variant::DType,
        &["dtype bool"],
    );
    t.err(
        "no y",
        Builtin::IntegerPow,
        vec![a(F32, &[3])],
        no_params(),
        Variant::MissingParam,
        &["missing param 'y'"],
    );
    t.err(
        "y as float",
        Builtin::IntegerPow,
        vec![a(F32, &[3])],
        ps([("y", Param::Float(2.0))]),
        Variant::ParamKind,
        &["param 'y' must be a int, got a float"],
    );

    // floor, ceil, round: floats only (JAX: "floor does not accept dtype int32");
    // round's rounding_method is 0 (away from zero) or 1 (to nearest even).
    let method = |m| ps([("rounding_method", Param::Int(m))]);
    for (p, params) in [
        (Builtin::Floor, no_params()),
        (Builtin::Ceil, no_params()),
        (Builtin::Round, method(0)),
        (Builtin::Round, method(1)),
    ] {
        for d in [F32, F16, BF16, F64] {
            t.ok(
                "float",
                p,
                vec![a(d, &[2, 3])],
                params.clone(),
                vec![a(d, &[2, 3])],
            );
        }
        t.ok(
            "weak kept",
            p,
            vec![w(a(F32, &[]))],
            params.clone(),
            vec![w(a(F32, &[]))],
        );
        for (d, name, needle) in [
            (I32, "i32", "operand 0 has dtype i32"),
            (U8, "u8", "operand 0 has dtype u8"),
            (BOOL, "bool", "operand 0 has dtype bool"),
        ] {
            t.err(
                name,
                p,
                vec![a(d, &[3])],
                params.clone(),
                Variant::DType,
                &[needle, "float"],
            );
        }
        t.err(
            "two operands",
            p,
            vec![a(F32, &[3]), a(F32, &[3])],
            params.clone(),
            Variant::Arity,
            &["takes 1 operands but was given 2"],
        );
    }
    t.err(
        "floor accuracy",
        Builtin::Floor,
        vec![a(F32, &[3])],
        ps([("accuracy", Param::None)]),
        Variant::UnknownParam,
        &["accuracy"],
    );
    t.err(
        "round method 2",
        Builtin::Round,
        vec![a(F32, &[3])],
        method(2),
        Variant::BadParam,
        &["param 'rounding_method'", "2 is not a RoundingMethod"],
    );
    t.err(
        "round without method",
        Builtin::Round,
        vec![a(F32, &[3])],
        no_params(),
        Variant::MissingParam,
        &["missing param 'rounding_method'"],
    );
}

// ---------------------------------------------------------------------------------------
// Special functions and the rest of the trigonometric family (issue 12).

/// Float in, same type out; of these only `exp2` and `cbrt` carry JAX's `accuracy`.
const SPECIAL_UNARY: [Builtin; 15] = [
    Builtin::ErfInv,
    Builtin::Erf,
    Builtin::Erfc,
    Builtin::Lgamma,
    Builtin::Digamma,
    Builtin::Exp2,
    Builtin::Cbrt,
    Builtin::Asin,
    Builtin::Acos,
    Builtin::Atan,
    Builtin::Sinh,
    Builtin::Cosh,
    Builtin::Asinh,
    Builtin::Acosh,
    Builtin::Atanh,
];

fn special_function_cases(t: &mut Table) {
    for p in SPECIAL_UNARY {
        for d in [F16, BF16, F32, F64] {
            t.ok(
                "float",
                p,
                vec![a(d, &[2, 3])],
                no_params(),
                vec![a(d, &[2, 3])],
            );
        }
        t.ok(
            "weak kept",
            p,
            vec![w(a(F32, &[]))],
            no_params(),
            vec![w(a(F32, &[]))],
        );
        t.ok(
            "empty",
            p,
            vec![a(F32, &[0, 4])],
            no_params(),
            vec![a(F32, &[0, 4])],
        );
        // JAX: "erf does not accept dtype int32".
        for d in [I32, U8, BOOL] {
            t.err(
                "not float",
                p,
                vec![a(d, &[3])],
                no_params(),
                Variant::DType,
                &["operand 0 has dtype", "float"],
            );
        }
        t.err(
            "two operands",
            p,
            vec![a(F32, &[3]), a(F32, &[3])],
            no_params(),
            Variant::Arity,
            &["takes 1 operands but was given 2"],
        );
        if matches!(p, Builtin::Exp2 | Builtin::Cbrt) {
            t.ok(
                "accuracy=None",
                p,
                vec![a(F32, &[3])],
                ps([("accuracy", Param::None)]),
                vec![a(F32, &[3])],
            );
            t.err(
                "accuracy as int",
                p,
                vec![a(F32, &[3])],
                ps([("accuracy", Param::Int(1))]),
                Variant::ParamKind,
                &["accuracy", "None"],
            );
        } else {
            t.err(
                "no accuracy param",
                p,
                vec![a(F32, &[3])],
                ps([("accuracy", Param::None)]),
                Variant::UnknownParam,
                &["unknown param 'accuracy'"],
            );
        }
    }

    // atan2: two floats of one dtype (JAX: "atan2 does not accept dtype int32"; lax.atan2
    // does not promote, "requires arguments to have the same dtypes").
    binary_common(t, Builtin::Atan2, F32, F32);
    for d in [F16, BF16, F64] {
        t.ok(
            "float",
            Builtin::Atan2,
            vec![a(d, &[2]), a(d, &[2])],
            no_params(),
            vec![a(d, &[2])],
        );
    }
    for d in [I32, U8, BOOL] {
        t.err(
            "not float",
            Builtin::Atan2,
            vec![a(d, &[2]), a(d, &[2])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype", "float"],
        );
    }
    t.err(
        "dtypes differ",
        Builtin::Atan2,
        vec![a(F16, &[2]), a(F32, &[2])],
        no_params(),
        Variant::Operands,
        &["f16 and f32 differ"],
    );

    // is_finite: a float in, bool of its shape and weak type out.
    for d in [F16, BF16, F32, F64] {
        t.ok(
            "float",
            Builtin::IsFinite,
            vec![a(d, &[2, 3])],
            no_params(),
            vec![a(BOOL, &[2, 3])],
        );
    }
    t.ok(
        "weak kept",
        Builtin::IsFinite,
        vec![w(a(F32, &[]))],
        no_params(),
        vec![w(a(BOOL, &[]))],
    );
    for d in [I32, U8, BOOL] {
        t.err(
            "not float",
            Builtin::IsFinite,
            vec![a(d, &[3])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype", "float"],
        );
    }
    t.err(
        "arity",
        Builtin::IsFinite,
        vec![],
        no_params(),
        Variant::Arity,
        &["given 0"],
    );
    t.err(
        "no params",
        Builtin::IsFinite,
        vec![a(F32, &[3])],
        ps([("accuracy", Param::None)]),
        Variant::UnknownParam,
        &["accuracy"],
    );
}

// ---------------------------------------------------------------------------------------
// Binary elementwise.

const COMPARISONS: [Builtin; 6] = [
    Builtin::Eq,
    Builtin::Ne,
    Builtin::Lt,
    Builtin::Le,
    Builtin::Gt,
    Builtin::Ge,
];

/// Shape and weak-type cases every binary primitive shares; `d` is a dtype it accepts and
/// `out` its output dtype.
fn binary_common(t: &mut Table, p: Builtin, d: DType, out: DType) {
    t.ok(
        "same shape",
        p,
        vec![a(d, &[2, 3]), a(d, &[2, 3])],
        no_params(),
        vec![a(out, &[2, 3])],
    );
    // JAX 0.10 prints `b:f32[5] = mul a 3.0:f32[]`: a rank-0 operand broadcasts.
    t.ok(
        "rank-0 rhs",
        p,
        vec![a(d, &[5]), a(d, &[])],
        no_params(),
        vec![a(out, &[5])],
    );
    t.ok(
        "rank-0 lhs",
        p,
        vec![a(d, &[]), a(d, &[2, 3])],
        no_params(),
        vec![a(out, &[2, 3])],
    );
    t.ok(
        "scalars",
        p,
        vec![a(d, &[]), a(d, &[])],
        no_params(),
        vec![a(out, &[])],
    );
    t.ok(
        "empty",
        p,
        vec![a(d, &[0, 3]), a(d, &[0, 3])],
        no_params(),
        vec![a(out, &[0, 3])],
    );
    // Weakly typed only when both operands are (JAX: `~bool[3]` for `lt` of two weak
    // operands too).
    t.ok(
        "both weak",
        p,
        vec![w(a(d, &[3])), w(a(d, &[]))],
        no_params(),
        vec![w(a(out, &[3]))],
    );
    t.ok(
        "one weak",
        p,
        vec![w(a(d, &[3])), a(d, &[])],
        no_params(),
        vec![a(out, &[3])],
    );
    t.ok(
        "other weak",
        p,
        vec![a(d, &[3]), w(a(d, &[3]))],
        no_params(),
        vec![a(out, &[3])],
    );
    t.err(
        "shapes [3] and [4]",
        p,
        vec![a(d, &[3]), a(d, &[4])],
        no_params(),
        Variant::Operands,
        &["[3] and [4]"],
    );
    t.err(
        "ranks differ",
        p,
        vec![a(d, &[3]), a(d, &[1, 3])],
        no_params(),
        Variant::Operands,
        &["[3] and [1,3]", "different ranks"],
    );
    // JAX 0.10: operands of equal rank broadcast their size-1 dimensions implicitly
    // (`lax.add(f32[4,3], f32[1,3])` is f32[4,3]).
    t.ok(
        "size-1 rhs",
        p,
        vec![a(d, &[4, 3]), a(d, &[1, 3])],
        no_params(),
        vec![a(out, &[4, 3])],
    );
    t.ok(
        "size-1 on both sides",
        p,
        vec![a(d, &[4, 1]), a(d, &[1, 3])],
        no_params(),
        vec![a(out, &[4, 3])],
    );
    t.ok(
        "size-1 against 0",
        p,
        vec![a(d, &[1, 3]), a(d, &[0, 3])],
        no_params(),
        vec![a(out, &[0, 3])],
    );
    t.ok(
        "all size 1",
        p,
        vec![a(d, &[1, 1]), a(d, &[1, 1])],
        no_params(),
        vec![a(out, &[1, 1])],
    );
    t.err(
        "size 2 against 3",
        p,
        vec![a(d, &[2, 3]), a(d, &[3, 3])],
        no_params(),
        Variant::Operands,
        &["differ in dimension 0 (2 and 3, neither of them 1)"],
    );
    t.err(
        "one operand",
        p,
        vec![a(d, &[3])],
        no_params(),
        Variant::Arity,
        &["takes 2 operands but was given 1"],
    );
    t.err(
        "three operands",
        p,
        vec![a(d, &[]), a(d, &[]), a(d, &[])],
        no_params(),
        Variant::Arity,
        &["given 3"],
    );
}

fn binary_cases(t: &mut Table) {
    for p in [
        Builtin::Add,
        Builtin::Sub,
        Builtin::Mul,
        Builtin::Div,
        Builtin::Rem,
    ] {
        binary_common(t, p, F32, F32);
        for d in [I8, I32, I64, U8, U32, U64, F16, BF16, F64] {
            t.ok(
                "numeric",
                p,
                vec![a(d, &[2]), a(d, &[2])],
                no_params(),
                vec![a(d, &[2])],
            );
        }
        // JAX: "add does not accept dtype bool at position 0".
        t.err(
            "bool",
            p,
            vec![a(BOOL, &[2]), a(BOOL, &[2])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype bool", "numeric"],
        );
        // JAX: "lax.add requires arguments to have the same dtypes, got float32, int32".
        t.err(
            "f32 and i32",
            p,
            vec![a(F32, &[3]), a(I32, &[3])],
            no_params(),
            Variant::Operands,
            &["dtypes f32 and i32 differ"],
        );
        t.err(
            "f32 and f64 scalars",
            p,
            vec![a(F32, &[]), a(F64, &[])],
            no_params(),
            Variant::Operands,
            &["f32 and f64"],
        );
    }

    // add_any (JAX's add_jaxvals_p): two operands of exactly one type, the first's out.
    let aa = Builtin::AddAny;
    for d in [F32, BF16, I32, U8] {
        t.ok(
            "one type",
            aa,
            vec![a(d, &[2, 3]), a(d, &[2, 3])],
            no_params(),
            vec![a(d, &[2, 3])],
        );
    }
    t.ok(
        "the first operand's weak type",
        aa,
        vec![w(a(F32, &[])), a(F32, &[])],
        no_params(),
        vec![w(a(F32, &[]))],
    );
    t.err(
        "no broadcasting of a scalar",
        aa,
        vec![a(F32, &[3]), a(F32, &[])],
        no_params(),
        Variant::Operands,
        &["add_any sums two values of one type", "f32[3]", "f32[]"],
    );
    t.err(
        "no size-1 broadcasting",
        aa,
        vec![a(F32, &[2, 3]), a(F32, &[1, 3])],
        no_params(),
        Variant::Operands,
        &["f32[2,3]", "f32[1,3]"],
    );
    t.err(
        "two dtypes",
        aa,
        vec![a(F32, &[3]), a(F64, &[3])],
        no_params(),
        Variant::Operands,
        &["f32[3]", "f64[3]"],
    );
    t.err(
        "bool",
        aa,
        vec![a(BOOL, &[2]), a(BOOL, &[2])],
        no_params(),
        Variant::DType,
        &["operand 0 has dtype bool", "numeric"],
    );
    t.err(
        "one operand",
        aa,
        vec![a(F32, &[3])],
        no_params(),
        Variant::Arity,
        &["takes 2"],
    );

    // pow: a float base; the exponent of the base's dtype or any integer dtype.
    binary_common(t, Builtin::Pow, F32, F32);
    t.ok(
        "f32 ^ i32",
        Builtin::Pow,
        vec![a(F32, &[3]), a(I32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "f64 ^ u8 scalar",
        Builtin::Pow,
        vec![a(F64, &[3]), a(U8, &[])],
        no_params(),
        vec![a(F64, &[3])],
    );
    t.ok(
        "weak f32 ^ weak i32",
        Builtin::Pow,
        vec![w(a(F32, &[3])), w(a(I32, &[3]))],
        no_params(),
        vec![w(a(F32, &[3]))],
    );
    t.err(
        "i32 ^ i32",
        Builtin::Pow,
        vec![a(I32, &[3]), a(I32, &[3])],
        no_params(),
        Variant::DType,
        &["operand 0 has dtype i32", "float"],
    );
    t.err(
        "f32 ^ bool",
        Builtin::Pow,
        vec![a(F32, &[3]), a(BOOL, &[3])],
        no_params(),
        Variant::DType,
        &["operand 1 has dtype bool"],
    );
    t.err(
        "f32 ^ f64",
        Builtin::Pow,
        vec![a(F32, &[3]), a(F64, &[3])],
        no_params(),
        Variant::Operands,
        &["f32 and f64 differ"],
    );
    t.err(
        "f32 ^ i32 shapes",
        Builtin::Pow,
        vec![a(F32, &[3]), a(I32, &[2])],
        no_params(),
        Variant::Operands,
        &["[3] and [2]"],
    );

    // max, min: any dtype, bool included.
    for p in [Builtin::Max, Builtin::Min] {
        binary_common(t, p, F32, F32);
        for d in DType::ALL {
            t.ok(
                "any",
                p,
                vec![a(d, &[2]), a(d, &[])],
                no_params(),
                vec![a(d, &[2])],
            );
        }
        t.err(
            "bool and i8",
            p,
            vec![a(BOOL, &[2]), a(I8, &[2])],
            no_params(),
            Variant::Operands,
            &["bool and i8"],
        );
    }

    // Shifts and mulhi: integers only (JAX: "Accepted dtypes ... are subtypes of
    // integer").
    for p in [
        Builtin::ShiftLeft,
        Builtin::ShiftRightLogical,
        Builtin::ShiftRightArithmetic,
        Builtin::Mulhi,
    ] {
        binary_common(t, p, I8, I8);
        binary_common(t, p, U32, U32);
        for d in DType::ALL.iter().copied().filter(|d| d.is_int()) {
            t.ok(
                "every integer dtype",
                p,
                vec![a(d, &[3]), a(d, &[3])],
                no_params(),
                vec![a(d, &[3])],
            );
        }
        for (bad, message) in [
            (BOOL, "operand 0 has dtype bool"),
            (F32, "operand 0 has dtype f32"),
        ] {
            t.err(
                "not an integer",
                p,
                vec![a(bad, &[2]), a(bad, &[2])],
                no_params(),
                Variant::DType,
                &[message, "an integer dtype"],
            );
        }
        t.err(
            "i32 and u32",
            p,
            vec![a(I32, &[2]), a(U32, &[2])],
            no_params(),
            Variant::Operands,
            &["i32 and u32"],
        );
    }

    // and, or, xor: bool or integers.
    for p in [Builtin::And, Builtin::Or, Builtin::Xor] {
        binary_common(t, p, BOOL, BOOL);
        binary_common(t, p, U32, U32);
        t.err(
            "f32",
            p,
            vec![a(F32, &[2]), a(F32, &[2])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype f32", "bool or an integer"],
        );
        t.err(
            "bool and i32",
            p,
            vec![a(BOOL, &[2]), a(I32, &[2])],
            no_params(),
            Variant::Operands,
            &["bool and i32"],
        );
    }

    // Comparisons: any dtype of one kind in, bool out.
    for p in COMPARISONS {
        binary_common(t, p, F32, BOOL);
        binary_common(t, p, BOOL, BOOL);
        for d in DType::ALL {
            t.ok(
                "bool out",
                p,
                vec![a(d, &[4]), a(d, &[4])],
                no_params(),
                vec![a(BOOL, &[4])],
            );
        }
        t.err(
            "f32 and f16",
            p,
            vec![a(F32, &[4]), a(F16, &[4])],
            no_params(),
            Variant::Operands,
            &["f32 and f16"],
        );
    }
}

// ---------------------------------------------------------------------------------------
// select_n, clamp, convert_element_type.

fn select_clamp_convert_cases(t: &mut Table) {
    let s = Builtin::SelectN;
    t.ok(
        "bool scalar predicate",
        s,
        vec![a(BOOL, &[]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "bool array predicate",
        s,
        vec![a(BOOL, &[3]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "i32 predicate, 3 cases",
        s,
        vec![a(I32, &[3]), a(I8, &[3]), a(I8, &[3]), a(I8, &[3])],
        no_params(),
        vec![a(I8, &[3])],
    );
    // JAX: "select `which` must be boolean or integer type" — any integer.
    t.ok(
        "u8 predicate",
        s,
        vec![a(U8, &[]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "i64 predicate",
        s,
        vec![a(I64, &[2]), a(BOOL, &[2]), a(BOOL, &[2])],
        no_params(),
        vec![a(BOOL, &[2])],
    );
    t.ok(
        "one case",
        s,
        vec![a(I32, &[3]), a(F32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "weak cases",
        s,
        vec![a(BOOL, &[]), w(a(F32, &[3])), w(a(F32, &[3]))],
        no_params(),
        vec![w(a(F32, &[3]))],
    );
    t.ok(
        "one weak case",
        s,
        vec![w(a(BOOL, &[])), w(a(F32, &[3])), a(F32, &[3])],
        no_params(),
        vec![a(F32, &[3])],
    );
    // JAX: "select with boolean `which` cannot have > 2 cases."
    t.err(
        "bool predicate, 3 cases",
        s,
        vec![a(BOOL, &[]), a(F32, &[3]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        Variant::Operands,
        &["bool predicate", "at most 2 cases, got 3"],
    );
    t.err(
        "f32 predicate",
        s,
        vec![a(F32, &[]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        Variant::DType,
        &["operand 0 has dtype f32", "bool or an integer"],
    );
    t.err(
        "predicate shape",
        s,
        vec![a(BOOL, &[2]), a(F32, &[3]), a(F32, &[3])],
        no_params(),
        Variant::Operands,
        &["predicate shape [2]", "[3]"],
    );
    t.err(
        "case dtypes",
        s,
        vec![a(BOOL, &[]), a(F32, &[3]), a(I32, &[3])],
        no_params(),
        Variant::Operands,
        &["case 1 has type i32[3]", "case 0 has type f32[3]"],
    );
    t.err(
        "case shapes",
        s,
        vec![a(I32, &[]), a(F32, &[3]), a(F32, &[3]), a(F32, &[2])],
        no_params(),
        Variant::Operands,
        &["case 2 has type f32[2]"],
    );
    t.err(
        "no case",
        s,
        vec![a(BOOL, &[])],
        no_params(),
        Variant::Arity,
        &["at least 2", "given 1"],
    );

    let c = Builtin::Clamp;
    t.ok(
        "scalar bounds",
        c,
        vec![a(F32, &[]), a(F32, &[3]), a(F32, &[])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.ok(
        "array bounds",
        c,
        vec![a(I32, &[2, 3]), a(I32, &[2, 3]), a(I32, &[])],
        no_params(),
        vec![a(I32, &[2, 3])],
    );
    // JAX's clamp takes any dtype: `a:bool[3] = clamp b c d`.
    t.ok(
        "bool",
        c,
        vec![a(BOOL, &[]), a(BOOL, &[3]), a(BOOL, &[])],
        no_params(),
        vec![a(BOOL, &[3])],
    );
    t.ok(
        "all weak",
        c,
        vec![w(a(F32, &[])), w(a(F32, &[3])), w(a(F32, &[]))],
        no_params(),
        vec![w(a(F32, &[3]))],
    );
    // JAX: `float32[3]`, not weak, when only the operand is weak.
    t.ok(
        "operand weak only",
        c,
        vec![a(F32, &[]), w(a(F32, &[3])), a(F32, &[])],
        no_params(),
        vec![a(F32, &[3])],
    );
    t.err(
        "min shape",
        c,
        vec![a(F32, &[2]), a(F32, &[3]), a(F32, &[])],
        no_params(),
        Variant::Operands,
        &["min has shape [2]", "[3]"],
    );
    t.err(
        "max shape",
        c,
        vec![a(F32, &[]), a(F32, &[3]), a(F32, &[3, 1])],
        no_params(),
        Variant::Operands,
        &["max has shape [3,1]"],
    );
    t.err(
        "max dtype",
        c,
        vec![a(F32, &[]), a(F32, &[3]), a(F64, &[])],
        no_params(),
        Variant::Operands,
        &["max has dtype f64", "operand has dtype f32"],
    );
    t.err(
        "min dtype",
        c,
        vec![a(I32, &[]), a(F32, &[3]), a(F32, &[])],
        no_params(),
        Variant::Operands,
        &["min has dtype i32"],
    );
    t.err(
        "two operands",
        c,
        vec![a(F32, &[]), a(F32, &[3])],
        no_params(),
        Variant::Arity,
        &["takes 3"],
    );

    let cv = Builtin::ConvertElementType;
    let to = |d, weak| {
        ps([
            ("new_dtype", Param::DType(d)),
            ("weak_type", Param::Bool(weak)),
            ("sharding", Param::None),
        ])
    };
    t.ok(
        "f32 -> i32",
        cv,
        vec![a(F32, &[3])],
        to(I32, false),
        vec![a(I32, &[3])],
    );
    t.ok(
        "weak_type=True",
        cv,
        vec![a(F32, &[3])],
        to(I32, true),
        vec![w(a(I32, &[3]))],
    );
    // The output's weak type is the param's, not the operand's.
    t.ok(
        "weak -> bool strong",
        cv,
        vec![w(a(F32, &[3]))],
        to(BOOL, false),
        vec![a(BOOL, &[3])],
    );
    t.ok(
        "no weak_type param",
        cv,
        vec![w(a(U8, &[]))],
        ps([("new_dtype", Param::DType(F16))]),
        vec![a(F16, &[])],
    );
    t.err(
        "no new_dtype",
        cv,
        vec![a(F32, &[3])],
        ps([("weak_type", Param::Bool(false))]),
        Variant::MissingParam,
        &["missing param 'new_dtype'"],
    );
    t.err(
        "new_dtype as str",
        cv,
        vec![a(F32, &[3])],
        ps([("new_dtype", Param::Str("int32".into()))]),
        Variant::ParamKind,
        &["param 'new_dtype' must be a dtype, got a str"],
    );
    t.err(
        "sharding given",
        cv,
        vec![a(F32, &[3])],
        ps([
            ("new_dtype", Param::DType(I32)),
            ("sharding", Param::Int(0)),
        ]),
        Variant::ParamKind,
        &["param 'sharding' must be a None"],
    );
    t.err(
        "two operands",
        cv,
        vec![a(F32, &[3]), a(F32, &[3])],
        to(I32, false),
        Variant::Arity,
        &["takes 1"],
    );
}

// ---------------------------------------------------------------------------------------
// Reductions and argmax/argmin.

fn reduction_cases(t: &mut Table) {
    let axes = |v: &[i64]| ps([("axes", ints(v))]);
    for p in [
        Builtin::ReduceSum,
        Builtin::ReduceMax,
        Builtin::ReduceMin,
        Builtin::ReduceProd,
    ] {
        t.ok(
            "axis 0",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[0]),
            vec![a(F32, &[2])],
        );
        t.ok(
            "axis 1",
            p,
            vec![a(I32, &[3, 2])],
            axes(&[1]),
            vec![a(I32, &[3])],
        );
        t.ok(
            "all axes",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[1, 0]),
            vec![a(F32, &[])],
        );
        t.ok(
            "no axes",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[]),
            vec![a(F32, &[3, 2])],
        );
        t.ok("scalar", p, vec![a(F64, &[])], axes(&[]), vec![a(F64, &[])]);
        t.ok(
            "middle axis",
            p,
            vec![a(U8, &[2, 0, 4])],
            axes(&[1]),
            vec![a(U8, &[2, 4])],
        );
        t.ok(
            "weak kept",
            p,
            vec![w(a(F32, &[3]))],
            axes(&[0]),
            vec![w(a(F32, &[]))],
        );
        t.ok(
            "out_sharding=None",
            p,
            vec![a(F32, &[3])],
            ps([("axes", ints(&[0])), ("out_sharding", Param::None)]),
            vec![a(F32, &[])],
        );
        // JAX: "duplicate value in 'axes' of reduction: (0, 0)".
        t.err(
            "duplicate axis",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[0, 0]),
            Variant::BadParam,
            &["param 'axes'", "axis 0 appears twice"],
        );
        // JAX: "reduction axes (2,) contains out-of-bounds indices for float32[3,2]".
        t.err(
            "axis 2 of rank 2",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[2]),
            Variant::BadParam,
            &["param 'axes'", "axis 2 is out of range for rank 2"],
        );
        t.err(
            "negative axis",
            p,
            vec![a(F32, &[3, 2])],
            axes(&[-1]),
            Variant::BadParam,
            &["axis -1 is out of range"],
        );
        t.err(
            "no axes",
            p,
            vec![a(F32, &[3])],
            no_params(),
            Variant::MissingParam,
            &["missing param 'axes'"],
        );
        t.err(
            "axes as int",
            p,
            vec![a(F32, &[3])],
            ps([("axes", Param::Int(0))]),
            Variant::ParamKind,
            &["param 'axes' must be a tuple of ints, got a int"],
        );
        t.err(
            "axis instead of axes",
            p,
            vec![a(F32, &[3])],
            ps([("axes", ints(&[0])), ("axis", ints(&[0]))]),
            Variant::UnknownParam,
            &["unknown param 'axis'"],
        );
        t.err(
            "two operands",
            p,
            vec![a(F32, &[3]), a(F32, &[3])],
            axes(&[0]),
            Variant::Arity,
            &["takes 1"],
        );
    }
    // reduce_sum and reduce_prod take numbers (JAX: "reduce_sum does not accept dtype
    // bool"); reduce_max and reduce_min take anything.
    for p in [Builtin::ReduceSum, Builtin::ReduceProd] {
        t.err(
            "bool",
            p,
            vec![a(BOOL, &[3])],
            axes(&[0]),
            Variant::DType,
            &["operand 0 has dtype bool", "numeric"],
        );
    }
    for p in [Builtin::ReduceMax, Builtin::ReduceMin] {
        t.ok(
            "bool",
            p,
            vec![a(BOOL, &[3, 2])],
            axes(&[0]),
            vec![a(BOOL, &[2])],
        );
    }

    let am = |axes: &[i64], d: DType| ps([("axes", ints(axes)), ("index_dtype", Param::DType(d))]);
    for p in [Builtin::Argmax, Builtin::Argmin] {
        t.ok(
            "axis 1",
            p,
            vec![a(F32, &[3, 4])],
            am(&[1], I32),
            vec![a(I32, &[3])],
        );
        t.ok(
            "axis 0",
            p,
            vec![a(F32, &[3, 4])],
            am(&[0], I64),
            vec![a(I64, &[4])],
        );
        t.ok(
            "u8 index",
            p,
            vec![a(F32, &[3, 4])],
            am(&[1], U8),
            vec![a(U8, &[3])],
        );
        // JAX accepts any operand dtype: `a:i32[] = argmax[...] b` with b:bool[3].
        t.ok(
            "bool operand",
            p,
            vec![a(BOOL, &[3])],
            am(&[0], I32),
            vec![a(I32, &[])],
        );
        // JAX strips the weak type.
        t.ok(
            "weak operand",
            p,
            vec![w(a(F32, &[3]))],
            am(&[0], I32),
            vec![a(I32, &[])],
        );
        t.err(
            "two axes",
            p,
            vec![a(F32, &[3, 4])],
            am(&[0, 1], I32),
            Variant::BadParam,
            &["param 'axes'", "exactly one axis", "[0, 1]"],
        );
        t.err(
            "no axis",
            p,
            vec![a(F32, &[3, 4])],
            am(&[], I32),
            Variant::BadParam,
            &["exactly one axis"],
        );
        t.err(
            "axis out of range",
            p,
            vec![a(F32, &[3, 4])],
            am(&[2], I32),
            Variant::BadParam,
            &["axis 2 is out of range for rank 2"],
        );
        t.err(
            "scalar operand",
            p,
            vec![a(F32, &[])],
            am(&[0], I32),
            Variant::BadParam,
            &["axis 0 is out of range for rank 0"],
        );
        // JAX: "argmin and argmax require non-empty reduced dimension".
        t.err(
            "empty axis",
            p,
            vec![a(F32, &[0, 4])],
            am(&[0], I32),
            Variant::BadParam,
            &["axis 0 of f32[0,4] is empty"],
        );
        // JAX: "index_dtype must be an integer type, but got float32".
        t.err(
            "f32 index_dtype",
            p,
            vec![a(F32, &[3])],
            am(&[0], F32),
            Variant::BadParam,
            &["param 'index_dtype'", "integer dtype, got f32"],
        );
        t.err(
            "bool index_dtype",
            p,
            vec![a(F32, &[3])],
            am(&[0], BOOL),
            Variant::BadParam,
            &["index_dtype", "got bool"],
        );
        t.err(
            "no index_dtype",
            p,
            vec![a(F32, &[3])],
            ps([("axes", ints(&[0]))]),
            Variant::MissingParam,
            &["missing param 'index_dtype'"],
        );
    }
}

// ---------------------------------------------------------------------------------------
// Shape manipulation.

fn shape_cases(t: &mut Table) {
    // pad: JAX's rule (operand and a scalar padding value of one dtype, interior >= 0,
    // negative low/high crop, no dimension below 0).
    let pd = Builtin::Pad;
    let pc = |c: &[(i64, i64, i64)]| ps([("padding_config", Param::Padding(c.to_vec().into()))]);
    t.ok(
        "low, high and interior",
        pd,
        vec![a(F32, &[2, 3]), a(F32, &[])],
        pc(&[(1, -1, 1), (0, 2, 0)]),
        vec![a(F32, &[3, 5])],
    );
    t.ok(
        "cropped to nothing, an empty operand, weak only if both are",
        pd,
        vec![w(a(I32, &[2, 0])), w(a(I32, &[]))],
        pc(&[(-1, -1, 0), (1, 0, 3)]),
        vec![w(a(I32, &[0, 1]))],
    );
    t.ok(
        "a weak operand and a strong value",
        pd,
        vec![w(a(F32, &[2])), a(F32, &[])],
        pc(&[(0, 0, 2)]),
        vec![a(F32, &[4])],
    );
    t.ok(
        "a scalar",
        pd,
        vec![a(BOOL, &[]), a(BOOL, &[])],
        pc(&[]),
        vec![a(BOOL, &[])],
    );
    // JAX: "pad operand and padding_value must be same dtype: got float32 and int32."
    t.err(
        "two dtypes",
        pd,
        vec![a(F32, &[2]), a(I32, &[])],
        pc(&[(0, 0, 0)]),
        Variant::Operands,
        &["pad operand and padding_value must be same dtype: got f32 and i32"],
    );
    t.err(
        "a padding value that is not a scalar",
        pd,
        vec![a(F32, &[2]), a(F32, &[1])],
        pc(&[(0, 0, 0)]),
        Variant::Operands,
        &["padding_value must be a scalar, got f32[1]"],
    );
    t.err(
        "config of another rank",
        pd,
        vec![a(F32, &[2, 3]), a(F32, &[])],
        pc(&[(0, 0, 0)]),
        Variant::BadParam,
        &["has 1 entries but the operand f32[2,3] has rank 2"],
    );
    t.err(
        "negative interior",
        pd,
        vec![a(F32, &[2]), a(F32, &[])],
        pc(&[(0, 0, -1)]),
        Variant::BadParam,
        &["interior padding must be nonnegative, got ((0, 0, -1))"],
    );
    t.err(
        "cropped below zero",
        pd,
        vec![a(F32, &[2, 3]), a(F32, &[])],
        pc(&[(-2, -1, 0), (0, 0, 0)]),
        Variant::BadParam,
        &[
            "dimension size after padding is not at least 0",
            "((-2, -1, 0), (0, 0, 0))",
        ],
    );
    t.err(
        "overflowing",
        pd,
        vec![a(F32, &[3]), a(F32, &[])],
        pc(&[(i64::MAX, 0, 1)]),
        Variant::Shape,
        &["overflows i64"],
    );
    t.err(
        "interior overflowing",
        pd,
        vec![a(F32, &[3]), a(F32, &[])],
        pc(&[(0, 0, i64::MAX)]),
        Variant::Shape,
        &["overflows i64"],
    );
    // The exact size, as JAX computes it with Python ints: 2 * (2^62 - 1) + 3 overflows
    // i64 on the way, but cropping by i64::MAX brings it back to 2.
    t.ok(
        "intermediate overflow cropped back",
        pd,
        vec![a(F32, &[3]), a(F32, &[])],
        pc(&[(-i64::MAX, 0, (1 << 62) - 1)]),
        vec![a(F32, &[2])],
    );
    t.err(
        "one operand",
        pd,
        vec![a(F32, &[3])],
        pc(&[(0, 0, 0)]),
        Variant::Arity,
        &["takes 2"],
    );

    let bid = |shape: &[i64], dims: &[i64]| {
        ps([
            ("shape", ints(shape)),
            ("broadcast_dimensions", ints(dims)),
            ("sharding", Param::None),
        ])
    };
    let b = Builtin::BroadcastInDim;
    t.ok(
        "row",
        b,
        vec![w(a(F32, &[3]))],
        bid(&[2, 3], &[1]),
        vec![w(a(F32, &[2, 3]))],
    );
    t.ok(
        "column",
        b,
        vec![a(F32, &[2])],
        bid(&[2, 3], &[0]),
        vec![a(F32, &[2, 3])],
    );
    t.ok(
        "size 1",
        b,
        vec![a(I8, &[1, 3])],
        bid(&[2, 3], &[0, 1]),
        vec![a(I8, &[2, 3])],
    );
    t.ok(
        "scalar",
        b,
        vec![a(BOOL, &[])],
        bid(&[2, 0, 4], &[]),
        vec![a(BOOL, &[2, 0, 4])],
    );
    t.ok(
        "identity",
        b,
        vec![a(F32, &[2, 3])],
        bid(&[2, 3], &[0, 1]),
        vec![a(F32, &[2, 3])],
    );
    t.ok(
        "expand_dims style",
        b,
        vec![a(F32, &[3, 4])],
        bid(&[1, 3, 1, 4], &[1, 3]),
        vec![a(F32, &[1, 3, 1, 4])],
    );
    t.err(
        "dims count",
        b,
        vec![a(F32, &[3])],
        bid(&[2, 3], &[0, 1]),
        Variant::BadParam,
        &[
            "param 'broadcast_dimensions'",
            "has 2 entries",
            "f32[3] has rank 1",
        ],
    );
    t.err(
        "dim out of range",
        b,
        vec![a(F32, &[3])],
        bid(&[2, 3], &[2]),
        Variant::BadParam,
        &["broadcast_dimensions", "axis 2 is out of range for rank 2"],
    );
    t.err(
        "duplicate dims",
        b,
        vec![a(F32, &[1, 1])],
        bid(&[2, 3], &[1, 1]),
        Variant::BadParam,
        &["axis 1 appears twice"],
    );
    // A crate restriction (JAX's rule would accept a transposing broadcast).
    t.err(
        "non-increasing",
        b,
        vec![a(F32, &[3, 2])],
        bid(&[2, 3], &[1, 0]),
        Variant::BadParam,
        &["broadcast_dimensions", "[1, 0] is not strictly increasing"],
    );
    // JAX: "broadcast_in_dim operand dimension sizes must either be 1, or be equal to
    // their corresponding dimensions in the target broadcast shape".
    t.err(
        "size mismatch",
        b,
        vec![a(F32, &[3])],
        bid(&[2, 3], &[0]),
        Variant::Operands,
        &[
            "operand dimension 0 of f32[3] (size 3)",
            "dimension 0 of [2,3] (size 2)",
        ],
    );
    t.err(
        "overflowing shape",
        b,
        vec![a(F32, &[])],
        bid(&[1 << 40, 1 << 40], &[]),
        Variant::Shape,
        &["output shape: the product of the nonzero dimensions overflows i64"],
    );
    t.err(
        "negative shape",
        b,
        vec![a(F32, &[])],
        bid(&[2, -3], &[]),
        Variant::Shape,
        &["dimension 1 is negative (-3)"],
    );
    t.err(
        "no broadcast_dimensions",
        b,
        vec![a(F32, &[])],
        ps([("shape", ints(&[2]))]),
        Variant::MissingParam,
        &["missing param 'broadcast_dimensions'"],
    );

    let r = Builtin::Reshape;
    let rs = |sizes: &[i64]| ps([("new_sizes", ints(sizes)), ("dimensions", Param::None)]);
    t.ok(
        "flatten",
        r,
        vec![w(a(F32, &[2, 3]))],
        rs(&[6]),
        vec![w(a(F32, &[6]))],
    );
    t.ok(
        "split",
        r,
        vec![a(I32, &[6])],
        rs(&[3, 1, 2]),
        vec![a(I32, &[3, 1, 2])],
    );
    t.ok(
        "to scalar",
        r,
        vec![a(I32, &[1, 1])],
        rs(&[]),
        vec![a(I32, &[])],
    );
    t.ok(
        "empty",
        r,
        vec![a(F32, &[0, 3])],
        rs(&[3, 0, 5]),
        vec![a(F32, &[3, 0, 5])],
    );
    t.ok(
        "no dimensions param",
        r,
        vec![a(F32, &[2, 3])],
        ps([("new_sizes", ints(&[3, 2]))]),
        vec![a(F32, &[3, 2])],
    );
    t.ok(
        "dimensions=(1, 0)",
        r,
        vec![a(F32, &[2, 3])],
        ps([("new_sizes", ints(&[6])), ("dimensions", ints(&[1, 0]))]),
        vec![a(F32, &[6])],
    );
    t.err(
        "size mismatch",
        r,
        vec![a(F32, &[2, 3])],
        rs(&[7]),
        Variant::BadParam,
        &[
            "param 'new_sizes'",
            "f32[2,3] (6 elements) to [7] (7 elements)",
        ],
    );
    // JAX: "reshape dimensions must be a permutation of operand dimensions".
    t.err(
        "dimensions not a permutation",
        r,
        vec![a(F32, &[2, 3])],
        ps([("new_sizes", ints(&[6])), ("dimensions", ints(&[0, 0]))]),
        Variant::BadParam,
        &["param 'dimensions'", "[0, 0] is not a permutation"],
    );
    t.err(
        "dimensions too short",
        r,
        vec![a(F32, &[2, 3])],
        ps([("new_sizes", ints(&[6])), ("dimensions", ints(&[0]))]),
        Variant::BadParam,
        &[
            "dimensions",
            "[0] is not a permutation of the axes of f32[2,3]",
        ],
    );
    t.err(
        "negative size",
        r,
        vec![a(F32, &[6])],
        rs(&[-2, -3]),
        Variant::Shape,
        &["dimension 0 is negative (-2)"],
    );
    t.err(
        "dimensions as bools",
        r,
        vec![a(F32, &[6])],
        ps([
            ("new_sizes", ints(&[6])),
            ("dimensions", Param::Bools(Arc::from(vec![true]))),
        ]),
        Variant::ParamKind,
        &["param 'dimensions' must be a tuple of ints or None, got a tuple of bools"],
    );

    let tr = Builtin::Transpose;
    let perm = |p: &[i64]| ps([("permutation", ints(p))]);
    t.ok(
        "2d",
        tr,
        vec![w(a(F32, &[2, 3]))],
        perm(&[1, 0]),
        vec![w(a(F32, &[3, 2]))],
    );
    t.ok(
        "3d",
        tr,
        vec![a(I32, &[2, 3, 4])],
        perm(&[2, 0, 1]),
        vec![a(I32, &[4, 2, 3])],
    );
    t.ok(
        "scalar",
        tr,
        vec![a(I32, &[])],
        perm(&[]),
        vec![a(I32, &[])],
    );
    for bad in [
        &[0, 0][..],
        &[0][..],
        &[0, 2][..],
        &[1, 0, 2][..],
        &[-1, 0][..],
    ] {
        t.err(
            "not a permutation",
            tr,
            vec![a(F32, &[2, 3])],
            perm(bad),
            Variant::BadParam,
            &[
                "param 'permutation'",
                "is not a permutation of the axes of f32[2,3]",
            ],
        );
    }

    let sq = Builtin::Squeeze;
    let dims = |d: &[i64]| ps([("dimensions", ints(d))]);
    t.ok(
        "last",
        sq,
        vec![w(a(F32, &[3, 1]))],
        dims(&[1]),
        vec![w(a(F32, &[3]))],
    );
    t.ok(
        "two",
        sq,
        vec![a(F32, &[1, 3, 1])],
        dims(&[0, 2]),
        vec![a(F32, &[3])],
    );
    t.ok(
        "none",
        sq,
        vec![a(F32, &[1, 3])],
        dims(&[]),
        vec![a(F32, &[1, 3])],
    );
    // JAX: "cannot select an axis to squeeze out which has size not equal to one".
    t.err(
        "size 3",
        sq,
        vec![a(F32, &[3, 1])],
        dims(&[0]),
        Variant::BadParam,
        &[
            "param 'dimensions'",
            "cannot squeeze axis 0 of f32[3,1]",
            "not 1",
        ],
    );
    t.err(
        "out of range",
        sq,
        vec![a(F32, &[3, 1])],
        dims(&[2]),
        Variant::BadParam,
        &["axis 2 is out of range for rank 2"],
    );
    t.err(
        "negative",
        sq,
        vec![a(F32, &[3, 1])],
        dims(&[-1]),
        Variant::BadParam,
        &["axis -1 is out of range"],
    );
    t.err(
        "twice",
        sq,
        vec![a(F32, &[1, 3])],
        dims(&[0, 0]),
        Variant::BadParam,
        &["axis 0 appears twice"],
    );

    let ed = Builtin::ExpandDims;
    // JAX: lax.expand_dims(f32[3,4], (0, 2)) is f32[1,3,1,4].
    t.ok(
        "0 and 2",
        ed,
        vec![a(F32, &[3, 4])],
        dims(&[0, 2]),
        vec![a(F32, &[1, 3, 1, 4])],
    );
    t.ok(
        "last",
        ed,
        vec![w(a(F32, &[3]))],
        dims(&[1]),
        vec![w(a(F32, &[3, 1]))],
    );
    t.ok(
        "unsorted",
        ed,
        vec![a(F32, &[3])],
        dims(&[2, 0]),
        vec![a(F32, &[1, 3, 1])],
    );
    t.ok(
        "scalar",
        ed,
        vec![a(U8, &[])],
        dims(&[0, 1]),
        vec![a(U8, &[1, 1])],
    );
    t.ok(
        "none",
        ed,
        vec![a(F32, &[3])],
        dims(&[]),
        vec![a(F32, &[3])],
    );
    t.err(
        "out of range",
        ed,
        vec![a(F32, &[3, 4])],
        dims(&[3]),
        Variant::BadParam,
        &["param 'dimensions'", "axis 3 is out of range for rank 3"],
    );
    // JAX: "repeated axis in lax.expand_dims".
    t.err(
        "twice",
        ed,
        vec![a(F32, &[3])],
        dims(&[0, 0]),
        Variant::BadParam,
        &["axis 0 appears twice"],
    );

    // stack (JAX: `lax.stack`, `jnp.stack`): operands of one type along a new axis.
    let st = Builtin::Stack;
    let along = |axis: i64| ps([("axis", Param::Int(axis))]);
    for (axis, dims) in [(0, [3, 2, 4]), (1, [2, 3, 4]), (2, [2, 4, 3])] {
        t.ok(
            "three at each axis",
            st,
            vec![a(F32, &[2, 4]); 3],
            along(axis),
            vec![a(F32, &dims)],
        );
    }
    t.ok(
        "scalars",
        st,
        vec![a(I32, &[]); 2],
        along(0),
        vec![a(I32, &[2])],
    );
    t.ok(
        "weak only if all are",
        st,
        vec![w(a(F32, &[2])), a(F32, &[2])],
        along(0),
        vec![a(F32, &[2, 2])],
    );
    t.ok(
        "all weak",
        st,
        vec![w(a(F32, &[2])), w(a(F32, &[2]))],
        along(1),
        vec![w(a(F32, &[2, 2]))],
    );
    t.err(
        "shapes differ",
        st,
        vec![a(F32, &[2]), a(F32, &[3])],
        along(0),
        Variant::Operands,
        &["operand 1 has type f32[3] but operand 0 has type f32[2]"],
    );
    t.err(
        "dtypes differ",
        st,
        vec![a(F32, &[2]), a(I32, &[2])],
        along(0),
        Variant::Operands,
        &["one shape and dtype"],
    );
    t.err(
        "axis past rank",
        st,
        vec![a(F32, &[2])],
        along(2),
        Variant::BadParam,
        &["axis"],
    );
    t.err(
        "negative axis",
        st,
        vec![a(F32, &[2])],
        along(-1),
        Variant::BadParam,
        &["-1"],
    );
    t.err(
        "no operands",
        st,
        vec![],
        along(0),
        Variant::Arity,
        &["at least 1"],
    );

    // unstack (JAX: `lax.unstack`): one result per index of the axis, the axis dropped.
    let us = Builtin::Unstack;
    t.ok(
        "rows",
        us,
        vec![a(F32, &[2, 3])],
        along(0),
        vec![a(F32, &[3]); 2],
    );
    t.ok(
        "columns",
        us,
        vec![w(a(I32, &[2, 3]))],
        along(1),
        vec![w(a(I32, &[2])); 3],
    );
    t.ok("empty axis", us, vec![a(F32, &[0, 3])], along(0), vec![]);
    t.err(
        "scalar",
        us,
        vec![a(F32, &[])],
        along(0),
        Variant::Operands,
        &["unstack requires arrays with rank > 0"],
    );
    t.err(
        "axis",
        us,
        vec![a(F32, &[2])],
        along(1),
        Variant::BadParam,
        &["axis"],
    );
    t.err(
        "too many results",
        us,
        vec![a(F32, &[1 << 40])],
        along(0),
        Variant::BadParam,
        &["would have 1099511627776 results"],
    );

    // tile (JAX: `lax.tile`, `jnp.tile`): each axis repeated `reps` times.
    let ti = Builtin::Tile;
    let reps = |r: &[i64]| ps([("reps", Param::ints(r))]);
    t.ok(
        "2x1",
        ti,
        vec![a(F32, &[2, 3])],
        reps(&[2, 1]),
        vec![a(F32, &[4, 3])],
    );
    t.ok(
        "zero reps",
        ti,
        vec![w(a(U8, &[2, 3]))],
        reps(&[0, 3]),
        vec![w(a(U8, &[0, 9]))],
    );
    t.ok(
        "scalar",
        ti,
        vec![a(F32, &[])],
        reps(&[]),
        vec![a(F32, &[])],
    );
    t.err(
        "reps length",
        ti,
        vec![a(F32, &[2, 3])],
        reps(&[2]),
        Variant::BadParam,
        &["reps length must be equal to the ndim of x, got len(reps)=1 and x.ndim=2"],
    );
    t.err(
        "negative",
        ti,
        vec![a(F32, &[2])],
        reps(&[-1]),
        Variant::BadParam,
        &["-1"],
    );
    t.err(
        "overflow",
        ti,
        vec![a(F32, &[1 << 40])],
        reps(&[1 << 40]),
        Variant::Shape,
        &[],
    );

    // optimization_barrier: the identity on any operands.
    let ob = Builtin::OptimizationBarrier;
    t.ok(
        "mixed",
        ob,
        vec![a(F32, &[2]), w(a(I32, &[])), a(BOOL, &[0, 3])],
        no_params(),
        vec![a(F32, &[2]), w(a(I32, &[])), a(BOOL, &[0, 3])],
    );
    t.ok("none", ob, vec![], no_params(), vec![]);
    t.err(
        "params",
        ob,
        vec![a(F32, &[2])],
        along(0),
        Variant::UnknownParam,
        &["axis"],
    );

    // split (JAX: `lax.split`): pieces along an axis, the sizes adding up to it.
    let sp = Builtin::Split;
    let cut =
        |sizes: &[i64], axis: i64| ps([("sizes", Param::ints(sizes)), ("axis", Param::Int(axis))]);
    t.ok(
        "pieces",
        sp,
        vec![a(F32, &[2, 5])],
        cut(&[2, 0, 3], 1),
        vec![a(F32, &[2, 2]), a(F32, &[2, 0]), a(F32, &[2, 3])],
    );
    t.ok(
        "weak kept",
        sp,
        vec![w(a(I32, &[4]))],
        cut(&[1, 3], 0),
        vec![w(a(I32, &[1])), w(a(I32, &[3]))],
    );
    t.ok(
        "no pieces of nothing",
        sp,
        vec![a(F32, &[0, 2])],
        cut(&[], 0),
        vec![],
    );
    t.err(
        "sizes short",
        sp,
        vec![a(F32, &[2, 5])],
        cut(&[2, 2], 1),
        Variant::BadParam,
        &["the sizes add up to 4, not to the size 5 of axis 1"],
    );
    t.err(
        "negative size",
        sp,
        vec![a(F32, &[5])],
        cut(&[6, -1], 0),
        Variant::BadParam,
        &["-1 is a negative size"],
    );
    t.err(
        "axis",
        sp,
        vec![a(F32, &[5])],
        cut(&[5], 1),
        Variant::BadParam,
        &["axis"],
    );

    let cc = Builtin::Concatenate;
    let dim = |d: i64| ps([("dimension", Param::Int(d))]);
    t.ok(
        "axis 0",
        cc,
        vec![a(F32, &[2, 3]), a(F32, &[1, 3])],
        dim(0),
        vec![a(F32, &[3, 3])],
    );
    t.ok(
        "axis 1, three",
        cc,
        vec![a(I32, &[2, 1]), a(I32, &[2, 0]), a(I32, &[2, 4])],
        dim(1),
        vec![a(I32, &[2, 5])],
    );
    t.ok(
        "one operand",
        cc,
        vec![a(F32, &[2])],
        dim(0),
        vec![a(F32, &[2])],
    );
    t.ok(
        "all weak",
        cc,
        vec![w(a(F32, &[2])), w(a(F32, &[1]))],
        dim(0),
        vec![w(a(F32, &[3]))],
    );
    t.ok(
        "one weak",
        cc,
        vec![w(a(F32, &[2])), a(F32, &[1])],
        dim(0),
        vec![a(F32, &[3])],
    );
    // JAX: "lax.concatenate requires arguments to have the same dtypes".
    t.err(
        "dtypes",
        cc,
        vec![a(F32, &[2, 3]), a(I32, &[1, 3])],
        dim(0),
        Variant::Operands,
        &["operand 1 has type i32[1,3] but operand 0 has type f32[2,3]"],
    );
    t.err(
        "ranks",
        cc,
        vec![a(F32, &[2, 3]), a(F32, &[3])],
        dim(0),
        Variant::Operands,
        &["operand 1 has type f32[3]"],
    );
    t.err(
        "other axis differs",
        cc,
        vec![a(F32, &[2, 3]), a(F32, &[1, 4])],
        dim(0),
        Variant::Operands,
        &["operand 1 (f32[1,4]) and operand 0 (f32[2,3]) differ outside dimension 0"],
    );
    t.err(
        "dimension out of range",
        cc,
        vec![a(F32, &[2]), a(F32, &[2])],
        dim(1),
        Variant::BadParam,
        &["param 'dimension'", "1 is out of range for rank 1"],
    );
    t.err(
        "negative dimension",
        cc,
        vec![a(F32, &[2])],
        dim(-1),
        Variant::BadParam,
        &["-1 is out of range"],
    );
    t.err(
        "scalars",
        cc,
        vec![a(F32, &[]), a(F32, &[])],
        dim(0),
        Variant::BadParam,
        &["0 is out of range for rank 0"],
    );
    t.err(
        "no operand",
        cc,
        vec![],
        dim(0),
        Variant::Arity,
        &["at least 1", "given 0"],
    );
    t.err(
        "overflowing length",
        cc,
        vec![a(U8, &[i64::MAX]), a(U8, &[1])],
        dim(0),
        Variant::Shape,
        &["overflows i64"],
    );

    let sl = Builtin::Slice;
    let slice = |s: &[i64], l: &[i64], st: Option<&[i64]>| {
        ps([
            ("start_indices", ints(s)),
            ("limit_indices", ints(l)),
            ("strides", st.map_or(Param::None, ints)),
        ])
    };
    // JAX: slice[start=(1,) limit=(7,) strides=(2,)] of ~f32[8] is ~f32[3].
    t.ok(
        "strided",
        sl,
        vec![w(a(F32, &[8]))],
        slice(&[1], &[7], Some(&[2])),
        vec![w(a(F32, &[3]))],
    );
    t.ok(
        "stride 3, uneven",
        sl,
        vec![a(F32, &[10])],
        slice(&[0], &[10], Some(&[3])),
        vec![a(F32, &[4])],
    );
    t.ok(
        "no strides",
        sl,
        vec![a(I32, &[4, 5])],
        slice(&[1, 0], &[3, 5], None),
        vec![a(I32, &[2, 5])],
    );
    t.ok(
        "strides absent",
        sl,
        vec![a(I32, &[4])],
        ps([("start_indices", ints(&[1])), ("limit_indices", ints(&[4]))]),
        vec![a(I32, &[3])],
    );
    t.ok(
        "empty",
        sl,
        vec![a(F32, &[8])],
        slice(&[3], &[3], Some(&[2])),
        vec![a(F32, &[0])],
    );
    t.ok(
        "scalar",
        sl,
        vec![a(F32, &[])],
        slice(&[], &[], None),
        vec![a(F32, &[])],
    );
    // JAX: "slice limit_indices must be less than or equal to operand shape".
    t.err(
        "limit beyond size",
        sl,
        vec![a(F32, &[8])],
        slice(&[1], &[9], None),
        Variant::BadParam,
        &["param 'limit_indices'", "limit 9 of axis 0", "f32[8]"],
    );
    // JAX: "slice limit_indices must be greater than or equal to start_indices".
    t.err(
        "start after limit",
        sl,
        vec![a(F32, &[8])],
        slice(&[5], &[3], None),
        Variant::BadParam,
        &[
            "param 'start_indices'",
            "slice 5:3 of axis 0 of f32[8] is out of bounds",
        ],
    );
    t.err(
        "negative start",
        sl,
        vec![a(F32, &[4, 8])],
        slice(&[0, -1], &[4, 3], None),
        Variant::BadParam,
        &["start_indices", "slice -1:3 of axis 1"],
    );
    t.err(
        "stride 0",
        sl,
        vec![a(F32, &[8])],
        slice(&[1], &[3], Some(&[0])),
        Variant::BadParam,
        &["param 'strides'", "stride 0 must be positive"],
    );
    t.err(
        "negative stride",
        sl,
        vec![a(F32, &[8])],
        slice(&[1], &[3], Some(&[-1])),
        Variant::BadParam,
        &["stride -1"],
    );
    t.err(
        "start count",
        sl,
        vec![a(F32, &[8])],
        slice(&[1, 1], &[3], None),
        Variant::BadParam,
        &[
            "param 'start_indices'",
            "has 2 entries but the operand f32[8] has rank 1",
        ],
    );
    t.err(
        "limit count",
        sl,
        vec![a(F32, &[8])],
        slice(&[1], &[], None),
        Variant::BadParam,
        &["param 'limit_indices'", "has 0 entries"],
    );
    t.err(
        "strides count",
        sl,
        vec![a(F32, &[8])],
        slice(&[1], &[3], Some(&[1, 1])),
        Variant::BadParam,
        &["param 'strides'", "has 2 entries"],
    );
}

// ---------------------------------------------------------------------------------------
// dynamic_slice, dynamic_update_slice.

fn dynamic_cases(t: &mut Table) {
    let ds = Builtin::DynamicSlice;
    let sizes = |s: &[i64]| ps([("slice_sizes", ints(s))]);
    t.ok(
        "2d",
        ds,
        vec![a(F32, &[4, 4]), a(I32, &[]), a(I32, &[])],
        sizes(&[2, 2]),
        vec![a(F32, &[2, 2])],
    );
    // JAX: u8 indices are fine; the operand's weak type is kept.
    t.ok(
        "u8 indices, weak operand",
        ds,
        vec![w(a(F32, &[4, 4])), a(U8, &[]), a(U8, &[])],
        sizes(&[4, 0]),
        vec![w(a(F32, &[4, 0]))],
    );
    t.ok(
        "weak indices only",
        ds,
        vec![a(F32, &[4]), w(a(I32, &[]))],
        sizes(&[1]),
        vec![a(F32, &[1])],
    );
    t.ok(
        "scalar",
        ds,
        vec![a(F32, &[])],
        sizes(&[]),
        vec![a(F32, &[])],
    );
    t.err(
        "one index for rank 2",
        ds,
        vec![a(F32, &[4, 4]), a(I32, &[])],
        sizes(&[2, 2]),
        Variant::Arity,
        &["takes 3 (operands and one index per axis)", "given 2"],
    );
    t.err(
        "three indices for rank 2",
        ds,
        vec![a(F32, &[4, 4]), a(I32, &[]), a(I32, &[]), a(I32, &[])],
        sizes(&[2, 2]),
        Variant::Arity,
        &["given 4"],
    );
    t.err(
        "no operand",
        ds,
        vec![],
        sizes(&[]),
        Variant::Arity,
        &["at least 1"],
    );
    t.err(
        "float index",
        ds,
        vec![a(F32, &[4]), a(F32, &[])],
        sizes(&[2]),
        Variant::Operands,
        &["index operand 1 must be an integer scalar, got f32[]"],
    );
    // JAX: "start_indices arguments to dynamic_slice must be scalars".
    t.err(
        "vector index",
        ds,
        vec![a(F32, &[4]), a(I32, &[1])],
        sizes(&[2]),
        Variant::Operands,
        &["index operand 1 must be an integer scalar, got i32[1]"],
    );
    // JAX: "index arguments to dynamic_slice must be integers of the same type, got:
    // int32, int64".
    t.err(
        "i32 and i64 indices",
        ds,
        vec![a(F32, &[4, 4]), a(I32, &[]), a(I64, &[])],
        sizes(&[2, 2]),
        Variant::Operands,
        &["one dtype", "operand 1 is i32[]", "operand 2 is i64[]"],
    );
    // JAX: "slice slice_sizes must be less than or equal to operand shape".
    t.err(
        "size too big",
        ds,
        vec![a(F32, &[4, 4]), a(I32, &[]), a(I32, &[])],
        sizes(&[5, 2]),
        Variant::BadParam,
        &[
            "param 'slice_sizes'",
            "size 5 of axis 0 does not fit in f32[4,4]",
        ],
    );
    t.err(
        "negative size",
        ds,
        vec![a(F32, &[4]), a(I32, &[])],
        sizes(&[-1]),
        Variant::BadParam,
        &["size -1 of axis 0"],
    );
    t.err(
        "sizes count",
        ds,
        vec![a(F32, &[4]), a(I32, &[])],
        sizes(&[1, 1]),
        Variant::BadParam,
        &[
            "param 'slice_sizes'",
            "has 2 entries but the operand f32[4] has rank 1",
        ],
    );

    let dus = Builtin::DynamicUpdateSlice;
    t.ok(
        "2d",
        dus,
        vec![a(F32, &[4, 4]), a(F32, &[2, 2]), a(I32, &[]), a(I32, &[])],
        no_params(),
        vec![a(F32, &[4, 4])],
    );
    t.ok(
        "full update",
        dus,
        vec![a(I8, &[3]), a(I8, &[3]), a(U16, &[])],
        no_params(),
        vec![a(I8, &[3])],
    );
    t.ok(
        "scalar",
        dus,
        vec![a(F32, &[]), a(F32, &[])],
        no_params(),
        vec![a(F32, &[])],
    );
    // JAX: weakly typed only when every operand is (here the indices are not).
    t.ok(
        "weak operand only",
        dus,
        vec![w(a(F32, &[4])), w(a(F32, &[2])), a(I32, &[])],
        no_params(),
        vec![a(F32, &[4])],
    );
    t.ok(
        "all weak",
        dus,
        vec![w(a(F32, &[4])), w(a(F32, &[2])), w(a(I32, &[]))],
        no_params(),
        vec![w(a(F32, &[4]))],
    );
    // JAX: "lax.dynamic_update_slice requires arguments to have the same dtypes".
    t.err(
        "update dtype",
        dus,
        vec![a(F32, &[4]), a(F64, &[2]), a(I32, &[])],
        no_params(),
        Variant::Operands,
        &["update f64[2] does not match operand f32[4]"],
    );
    t.err(
        "update rank",
        dus,
        vec![a(F32, &[4, 4]), a(F32, &[2]), a(I32, &[]), a(I32, &[])],
        no_params(),
        Variant::Operands,
        &["update f32[2] does not match operand f32[4,4]", "rank"],
    );
    // JAX: "dynamic_update_slice update shape must be smaller than operand shape".
    t.err(
        "update too big",
        dus,
        vec![a(F32, &[4, 4]), a(F32, &[5, 2]), a(I32, &[]), a(I32, &[])],
        no_params(),
        Variant::Operands,
        &["update f32[5,2] is larger than operand f32[4,4]"],
    );
    t.err(
        "index count",
        dus,
        vec![a(F32, &[4, 4]), a(F32, &[2, 2]), a(I32, &[])],
        no_params(),
        Variant::Arity,
        &["takes 4 (operands and one index per axis)", "given 3"],
    );
    t.err(
        "mixed index dtypes",
        dus,
        vec![a(F32, &[4, 4]), a(F32, &[2, 2]), a(I32, &[]), a(I64, &[])],
        no_params(),
        Variant::Operands,
        &["one dtype", "operand 3 is i64[]"],
    );
    t.err(
        "bool index",
        dus,
        vec![a(F32, &[4]), a(F32, &[2]), a(BOOL, &[])],
        no_params(),
        Variant::Operands,
        &["index operand 2 must be an integer scalar, got bool[]"],
    );
    t.err(
        "one operand",
        dus,
        vec![a(F32, &[4])],
        no_params(),
        Variant::Arity,
        &["at least 2"],
    );
    t.err(
        "params",
        dus,
        vec![a(F32, &[]), a(F32, &[])],
        sizes(&[]),
        Variant::UnknownParam,
        &["unknown param 'slice_sizes'"],
    );
}

// ---------------------------------------------------------------------------------------
// dot_general.

fn dot_cases(t: &mut Table) {
    let d = Builtin::DotGeneral;
    let mm = || ps([("dimension_numbers", dn(&[1], &[0], &[], &[]))]);
    let with_pref = |p: DType| {
        ps([
            ("dimension_numbers", dn(&[1], &[0], &[], &[])),
            ("preferred_element_type", Param::DType(p)),
        ])
    };
    t.ok(
        "matmul",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        mm(),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "all params",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([
            ("dimension_numbers", dn(&[1], &[0], &[], &[])),
            ("precision", Param::None),
            ("preferred_element_type", Param::None),
            ("out_sharding", Param::None),
        ]),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "precision str",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([
            ("dimension_numbers", dn(&[1], &[0], &[], &[])),
            ("precision", Param::Str("HIGHEST".into())),
        ]),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "vector dot",
        d,
        vec![a(I32, &[5]), a(I32, &[5])],
        ps([("dimension_numbers", dn(&[0], &[0], &[], &[]))]),
        vec![a(I32, &[])],
    );
    t.ok(
        "outer product",
        d,
        vec![a(F32, &[2]), a(F32, &[3])],
        ps([("dimension_numbers", dn(&[], &[], &[], &[]))]),
        vec![a(F32, &[2, 3])],
    );
    t.ok(
        "batched",
        d,
        vec![a(F32, &[5, 2, 3]), a(F32, &[5, 3, 4])],
        ps([("dimension_numbers", dn(&[2], &[1], &[0], &[0]))]),
        vec![a(F32, &[5, 2, 4])],
    );
    // JAX: dimension_numbers=(([0], [1]), ([2], [0])) on f32[3,2,5] and f32[5,3,4] gives
    // f32[5,2,4] (batch dims first, then the free ones in order).
    t.ok(
        "batch not leading",
        d,
        vec![a(F32, &[3, 2, 5]), a(F32, &[5, 3, 4])],
        ps([("dimension_numbers", dn(&[0], &[1], &[2], &[0]))]),
        vec![a(F32, &[5, 2, 4])],
    );
    t.ok(
        "two contracting",
        d,
        vec![a(F32, &[2, 3, 4]), a(F32, &[4, 3])],
        ps([("dimension_numbers", dn(&[1, 2], &[1, 0], &[], &[]))]),
        vec![a(F32, &[2])],
    );
    // JAX (XLA's HigherPrecisionType): mixed operands give the more precise dtype.
    t.ok(
        "f32 . i32",
        d,
        vec![a(F32, &[2, 3]), a(I32, &[3, 4])],
        mm(),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "i8 . u8",
        d,
        vec![a(I8, &[2, 3]), a(U8, &[3, 4])],
        mm(),
        vec![a(I8, &[2, 4])],
    );
    t.ok(
        "f16 . bf16",
        d,
        vec![a(F16, &[2, 3]), a(BF16, &[3, 4])],
        mm(),
        vec![a(BF16, &[2, 4])],
    );
    t.ok(
        "u8 . i16",
        d,
        vec![a(U8, &[2, 3]), a(I16, &[3, 4])],
        mm(),
        vec![a(I16, &[2, 4])],
    );
    t.ok(
        "bool",
        d,
        vec![a(BOOL, &[2, 3]), a(BOOL, &[3, 4])],
        mm(),
        vec![a(BOOL, &[2, 4])],
    );
    t.ok(
        "i8 preferring f32",
        d,
        vec![a(I8, &[2, 3]), a(I8, &[3, 4])],
        with_pref(F32),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "i8 preferring i32",
        d,
        vec![a(I8, &[2, 3]), a(I8, &[3, 4])],
        with_pref(I32),
        vec![a(I32, &[2, 4])],
    );
    // JAX's rule lets a float result be narrowed (`f16[2,4]`).
    t.ok(
        "f32 preferring f16",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        with_pref(F16),
        vec![a(F16, &[2, 4])],
    );
    t.ok(
        "f32 preferring f32",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        with_pref(F32),
        vec![a(F32, &[2, 4])],
    );
    t.ok(
        "weak",
        d,
        vec![w(a(F32, &[])), w(a(F32, &[]))],
        ps([("dimension_numbers", dn(&[], &[], &[], &[]))]),
        vec![w(a(F32, &[]))],
    );
    t.ok(
        "one weak",
        d,
        vec![w(a(F32, &[2, 3])), a(F32, &[3, 4])],
        mm(),
        vec![a(F32, &[2, 4])],
    );
    // JAX: "`preferred_element_type` must not be narrower than the original type".
    t.err(
        "i32 preferring i8",
        d,
        vec![a(I32, &[2, 3]), a(I32, &[3, 4])],
        with_pref(I8),
        Variant::BadParam,
        &[
            "param 'preferred_element_type'",
            "i8 is narrower than the result dtype i32",
        ],
    );
    t.err(
        "contracting sizes",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[4, 5])],
        mm(),
        Variant::Operands,
        &[
            "lhs axis 1 of f32[2,3] (size 3)",
            "rhs axis 0 of f32[4,5] (size 4)",
        ],
    );
    t.err(
        "batch sizes",
        d,
        vec![a(F32, &[5, 2, 3]), a(F32, &[6, 3, 4])],
        ps([("dimension_numbers", dn(&[2], &[1], &[0], &[0]))]),
        Variant::Operands,
        &["lhs axis 0 of f32[5,2,3] (size 5)", "(size 6) differ"],
    );
    // JAX: "dot_general requires lhs batch dimensions to be disjoint from contracting
    // dimensions".
    t.err(
        "batch is contracting",
        d,
        vec![a(F32, &[3, 3]), a(F32, &[3, 3])],
        ps([("dimension_numbers", dn(&[0], &[0], &[0], &[1]))]),
        Variant::BadParam,
        &["param 'dimension_numbers'", "axis 0 appears twice"],
    );
    t.err(
        "contracting twice",
        d,
        vec![a(F32, &[3, 3]), a(F32, &[3, 3])],
        ps([("dimension_numbers", dn(&[0, 0], &[0, 1], &[], &[]))]),
        Variant::BadParam,
        &["axis 0 appears twice"],
    );
    t.err(
        "lhs axis out of range",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([("dimension_numbers", dn(&[2], &[0], &[], &[]))]),
        Variant::BadParam,
        &["dimension_numbers", "axis 2 is out of range for rank 2"],
    );
    t.err(
        "rhs axis out of range",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3])],
        ps([("dimension_numbers", dn(&[1], &[1], &[], &[]))]),
        Variant::BadParam,
        &["axis 1 is out of range for rank 1"],
    );
    t.err(
        "contracting counts",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([("dimension_numbers", dn(&[1], &[], &[], &[]))]),
        Variant::BadParam,
        &[
            "dimension_numbers",
            "(([1], []), ([], []))",
            "differ in length",
        ],
    );
    t.err(
        "batch counts",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[2, 3])],
        ps([("dimension_numbers", dn(&[], &[], &[0], &[]))]),
        Variant::BadParam,
        &["differ in length"],
    );
    t.err(
        "no dimension_numbers",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        no_params(),
        Variant::MissingParam,
        &["missing param 'dimension_numbers'"],
    );
    t.err(
        "dimension_numbers as ints",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([("dimension_numbers", ints(&[1, 0]))]),
        Variant::ParamKind,
        &["param 'dimension_numbers' must be a dimension numbers, got a tuple of ints"],
    );
    t.err(
        "preferred as str",
        d,
        vec![a(F32, &[2, 3]), a(F32, &[3, 4])],
        ps([
            ("dimension_numbers", dn(&[1], &[0], &[], &[])),
            ("preferred_element_type", Param::Str("float32".into())),
        ]),
        Variant::ParamKind,
        &["preferred_element_type", "dtype or None"],
    );
    t.err(
        "one operand",
        d,
        vec![a(F32, &[2])],
        mm(),
        Variant::Arity,
        &["takes 2"],
    );
}

// ---------------------------------------------------------------------------------------
// iota.

fn iota_cases(t: &mut Table) {
    let io = |d: DType, shape: &[i64], dim: i64| {
        ps([
            ("dtype", Param::DType(d)),
            ("shape", ints(shape)),
            ("dimension", Param::Int(dim)),
            ("sharding", Param::None),
        ])
    };
    let i = Builtin::Iota;
    t.ok(
        "i32 [3,4] dim 1",
        i,
        vec![],
        io(I32, &[3, 4], 1),
        vec![a(I32, &[3, 4])],
    );
    t.ok("f32 [5]", i, vec![], io(F32, &[5], 0), vec![a(F32, &[5])]);
    t.ok(
        "u8 empty",
        i,
        vec![],
        io(U8, &[0, 2], 0),
        vec![a(U8, &[0, 2])],
    );
    // JAX: "iota does not accept dtype bool".
    t.err(
        "bool",
        i,
        vec![],
        io(BOOL, &[3], 0),
        Variant::BadParam,
        &["param 'dtype'", "numeric dtype, got bool"],
    );
    // JAX: "iota dimension must be between 0 and len(shape)".
    t.err(
        "dimension 2 of rank 2",
        i,
        vec![],
        io(I32, &[3, 4], 2),
        Variant::BadParam,
        &["param 'dimension'", "2 is out of range for shape [3,4]"],
    );
    t.err(
        "negative dimension",
        i,
        vec![],
        io(I32, &[3], -1),
        Variant::BadParam,
        &["-1 is out of range"],
    );
    t.err(
        "rank 0",
        i,
        vec![],
        io(I32, &[], 0),
        Variant::BadParam,
        &["0 is out of range for shape []"],
    );
    t.err(
        "overflowing shape",
        i,
        vec![],
        io(I32, &[1 << 40, 1 << 40], 0),
        Variant::Shape,
        &["output shape: the product of the nonzero dimensions overflows i64"],
    );
    t.err(
        "negative shape",
        i,
        vec![],
        io(I32, &[-4], 0),
        Variant::Shape,
        &["dimension 0 is negative (-4)"],
    );
    t.err(
        "an operand",
        i,
        vec![a(I32, &[])],
        io(I32, &[3], 0),
        Variant::Arity,
        &["takes 0 operands but was given 1"],
    );
    t.err(
        "no shape",
        i,
        vec![],
        ps([("dtype", Param::DType(I32)), ("dimension", Param::Int(0))]),
        Variant::MissingParam,
        &["missing param 'shape'"],
    );
}

// ---------------------------------------------------------------------------------------
// Higher-order primitives.

fn f32_lit(b: &mut JaxprBuilder, x: f64) -> Atom {
    lit(b, LitValue::Float(x), F32)
}

fn jit_cases(t: &mut Table) {
    let j = Builtin::Jit;
    let sin3 = closed(&[a(F32, &[3])], |b, x| vec![app1(b, Builtin::Sin, &[x[0]])]);
    let jp = |cj: &ClosedJaxpr| ps([("jaxpr", Param::Jaxpr(cj.clone()))]);
    t.ok("sin", j, vec![a(F32, &[3])], jp(&sin3), vec![a(F32, &[3])]);
    t.ok(
        "named",
        j,
        vec![a(F32, &[3])],
        ps([
            ("jaxpr", Param::Jaxpr(sin3.clone())),
            ("name", Param::Str("f".into())),
        ]),
        vec![a(F32, &[3])],
    );
    // The outputs are the jaxpr's, weak types included (JAX: `~float64[]` out of a
    // `jit` of `y + 1`).
    let ident_weak = closed(&[w(a(F32, &[]))], |_, x| vec![x[0], x[0]]);
    t.ok(
        "weak outputs",
        j,
        vec![a(F32, &[])],
        jp(&ident_weak),
        vec![w(a(F32, &[])), w(a(F32, &[]))],
    );
    let konst = closed(&[], |b, _| vec![f32_lit(b, 1.0)]);
    t.ok("no operands", j, vec![], jp(&konst), vec![a(F32, &[])]);
    let nothing = closed(&[a(I32, &[2])], |_, _| vec![]);
    t.ok("no outputs", j, vec![a(I32, &[2])], jp(&nothing), vec![]);
    t.err(
        "operand type",
        j,
        vec![a(I32, &[3])],
        jp(&sin3),
        Variant::SubJaxpr,
        &["operand types (i32[3]) differ from the jaxpr's input types (f32[3])"],
    );
    t.err(
        "operand count",
        j,
        vec![a(F32, &[3]), a(F32, &[3])],
        jp(&sin3),
        Variant::SubJaxpr,
        &["(f32[3], f32[3])", "(f32[3])"],
    );
    t.err(
        "operand shape",
        j,
        vec![a(F32, &[4])],
        jp(&sin3),
        Variant::SubJaxpr,
        &["(f32[4])"],
    );
    t.err(
        "no jaxpr",
        j,
        vec![a(F32, &[3])],
        ps([("name", Param::Str("f".into()))]),
        Variant::MissingParam,
        &["missing param 'jaxpr'"],
    );
    t.err(
        "jaxpr as a tuple",
        j,
        vec![a(F32, &[3])],
        ps([("jaxpr", Param::Jaxprs(Arc::new(vec![sin3.clone()])))]),
        Variant::ParamKind,
        &["param 'jaxpr' must be a jaxpr, got a tuple of jaxprs"],
    );
    t.err(
        "name as int",
        j,
        vec![a(F32, &[3])],
        ps([("jaxpr", Param::Jaxpr(sin3)), ("name", Param::Int(1))]),
        Variant::ParamKind,
        &["param 'name' must be a str"],
    );
}

fn cond_cases(t: &mut Table) {
    let c = Builtin::Cond;
    let add1 = closed(&[a(F32, &[3])], |b, x| {
        let one = f32_lit(b, 1.0);
        vec![app1(b, Builtin::Add, &[x[0], one])]
    });
    let mul2 = closed(&[a(F32, &[3])], |b, x| {
        let two = f32_lit(b, 2.0);
        vec![app1(b, Builtin::Mul, &[x[0], two])]
    });
    let summed = closed(&[a(F32, &[3])], |b, x| {
        app(b, Builtin::ReduceSum, &[x[0]], ps([("axes", ints(&[0]))]))
    });
    let two_ins = closed(&[a(F32, &[3]), a(F32, &[3])], |_, x| vec![x[0]]);
    let brs = |bs: &[&ClosedJaxpr]| {
        ps([(
            "branches",
            Param::Jaxprs(Arc::new(bs.iter().map(|b| (*b).clone()).collect())),
        )])
    };
    t.ok(
        "two branches",
        c,
        vec![a(I32, &[]), a(F32, &[3])],
        brs(&[&add1, &mul2]),
        vec![a(F32, &[3])],
    );
    t.ok(
        "one branch",
        c,
        vec![a(I32, &[]), a(F32, &[3])],
        brs(&[&mul2]),
        vec![a(F32, &[3])],
    );
    let k1 = closed(&[], |b, _| vec![f32_lit(b, 1.0)]);
    let k2 = closed(&[], |b, _| vec![f32_lit(b, 2.0)]);
    t.ok(
        "no operands",
        c,
        vec![a(I32, &[])],
        brs(&[&k1, &k2, &k1]),
        vec![a(F32, &[])],
    );
    // JAX's cond typecheck: "cond called with index of type bool instead of int32"
    // (`lax.cond` converts a bool predicate to i32 first).
    t.err(
        "bool index",
        c,
        vec![a(BOOL, &[]), a(F32, &[3])],
        brs(&[&add1, &mul2]),
        Variant::Operands,
        &["branch index must be an i32 scalar, got bool[]"],
    );
    t.err(
        "i64 index",
        c,
        vec![a(I64, &[]), a(F32, &[3])],
        brs(&[&add1, &mul2]),
        Variant::Operands,
        &["got i64[]"],
    );
    t.err(
        "index array",
        c,
        vec![a(I32, &[2]), a(F32, &[3])],
        brs(&[&add1, &mul2]),
        Variant::Operands,
        &["got i32[2]"],
    );
    // JAX: "cond requires at least one branch function".
    t.err(
        "no branches",
        c,
        vec![a(I32, &[]), a(F32, &[3])],
        brs(&[]),
        Variant::BadParam,
        &["param 'branches'", "at least one branch"],
    );
    t.err(
        "operand type",
        c,
        vec![a(I32, &[]), a(F32, &[4])],
        brs(&[&add1, &mul2]),
        Variant::SubJaxpr,
        &["branches: branch 0 takes (f32[3]) differ from (f32[4])"],
    );
    t.err(
        "branch input counts",
        c,
        vec![a(I32, &[]), a(F32, &[3])],
        brs(&[&add1, &two_ins]),
        Variant::SubJaxpr,
        &["branch 1 takes (f32[3], f32[3])"],
    );
    t.err(
        "branch outputs",
        c,
        vec![a(I32, &[]), a(F32, &[3])],
        brs(&[&add1, &summed]),
        Variant::SubJaxpr,
        &["branch 1 returns (f32[]) differ from (f32[3])"],
    );
    t.err(
        "no index",
        c,
        vec![],
        brs(&[&k1]),
        Variant::Arity,
        &["at least 1", "given 0"],
    );
    t.err(
        "branches as one jaxpr",
        c,
        vec![a(I32, &[])],
        ps([("branches", Param::Jaxpr(k1))]),
        Variant::ParamKind,
        &["param 'branches' must be a tuple of jaxprs, got a jaxpr"],
    );
}

fn while_params(cond: &ClosedJaxpr, body: &ClosedJaxpr, cn: i64, bn: i64) -> Params {
    ps([
        ("cond_jaxpr", Param::Jaxpr(cond.clone())),
        ("body_jaxpr", Param::Jaxpr(body.clone())),
        ("cond_nconsts", Param::Int(cn)),
        ("body_nconsts", Param::Int(bn)),
    ])
}

fn while_cases(t: &mut Table) {
    let wl = Builtin::While;
    let carry = || vec![a(I32, &[]), a(F32, &[3])];
    let cond = closed(&carry(), |b, x| {
        let ten = lit(b, LitValue::Int(10), I32);
        vec![app1(b, Builtin::Lt, &[x[0], ten])]
    });
    let body = closed(&carry(), |b, x| {
        let one = lit(b, LitValue::Int(1), I32);
        vec![
            app1(b, Builtin::Add, &[x[0], one]),
            app1(b, Builtin::Sin, &[x[1]]),
        ]
    });
    t.ok(
        "counter",
        wl,
        carry(),
        while_params(&cond, &body, 0, 0),
        carry(),
    );

    // With constants: cond takes (n, i, x), body takes (k, i, x).
    let cond_c = closed(&[a(I32, &[]), a(I32, &[]), a(F32, &[3])], |b, x| {
        vec![app1(b, Builtin::Lt, &[x[1], x[0]])]
    });
    let body_c = closed(&[a(F32, &[3]), a(I32, &[]), a(F32, &[3])], |b, x| {
        let one = lit(b, LitValue::Int(1), I32);
        vec![
            app1(b, Builtin::Add, &[x[1], one]),
            app1(b, Builtin::Mul, &[x[2], x[0]]),
        ]
    });
    t.ok(
        "with consts",
        wl,
        vec![a(I32, &[]), a(F32, &[3]), a(I32, &[]), a(F32, &[3])],
        while_params(&cond_c, &body_c, 1, 1),
        carry(),
    );
    // JAX returns the body's output types: a weakly typed body output gives a weakly
    // typed result (JAX: `[True]` for `while_loop(c < 10.0, c + 1.0, 1.0)`).
    let cond_s = closed(&[a(F32, &[])], |b, x| {
        let one = f32_lit(b, 1.0);
        vec![app1(b, Builtin::Lt, &[x[0], one])]
    });
    let body_w = closed(&[w(a(F32, &[]))], |_, x| vec![x[0]]);
    t.ok(
        "weak body output",
        wl,
        vec![a(F32, &[])],
        while_params(&cond_s, &body_w, 0, 0),
        vec![w(a(F32, &[]))],
    );

    let cond_i32 = closed(&carry(), |_, x| vec![x[0]]);
    t.err(
        "cond returns i32",
        wl,
        carry(),
        while_params(&cond_i32, &body, 0, 0),
        Variant::SubJaxpr,
        &["cond_jaxpr must return one bool[] (or a batched bool[s...]) but returns (i32[])"],
    );
    let cond_vec = closed(&carry(), |b, x| vec![app1(b, Builtin::Gt, &[x[1], x[1]])]);
    t.err(
        "cond returns bool[3]",
        wl,
        carry(),
        while_params(&cond_vec, &body, 0, 0),
        Variant::SubJaxpr,
        &["returns (bool[3])"],
    );
    let cond_two = closed(&carry(), |b, x| {
        let ten = lit(b, LitValue::Int(10), I32);
        let l = app1(b, Builtin::Lt, &[x[0], ten]);
        vec![l, l]
    });
    t.err(
        "cond returns two",
        wl,
        carry(),
        while_params(&cond_two, &body, 0, 0),
        Variant::SubJaxpr,
        &["returns (bool[], bool[])"],
    );
    let body_bad = closed(&carry(), |b, x| {
        vec![
            x[0],
            app(b, Builtin::ReduceSum, &[x[1]], ps([("axes", ints(&[0]))]))[0],
        ]
    });
    t.err(
        "body output differs from carry",
        wl,
        carry(),
        while_params(&cond, &body_bad, 0, 0),
        Variant::SubJaxpr,
        &["body_jaxpr: outputs (i32[], f32[]) differ from (i32[], f32[3])"],
    );
    t.err(
        "operands differ from cond inputs",
        wl,
        vec![a(I32, &[]), a(F32, &[4])],
        while_params(&cond, &body, 0, 0),
        Variant::SubJaxpr,
        &["cond_jaxpr: inputs (i32[], f32[3]) differ from (i32[], f32[4])"],
    );
    t.err(
        "body consts differ",
        wl,
        vec![a(I32, &[]), a(I32, &[]), a(I32, &[]), a(F32, &[3])],
        while_params(&cond_c, &body_c, 1, 1),
        Variant::SubJaxpr,
        &["body_jaxpr: inputs (f32[3], i32[], f32[3]) differ from (i32[], i32[], f32[3])"],
    );
    t.err(
        "cond_nconsts too big",
        wl,
        carry(),
        while_params(&cond, &body, 3, 0),
        Variant::BadParam,
        &["param 'cond_nconsts'", "3 is out of range (0..=2)"],
    );
    t.err(
        "body_nconsts too big",
        wl,
        carry(),
        while_params(&cond, &body, 1, 2),
        Variant::BadParam,
        &["param 'body_nconsts'", "2 is out of range (0..=1)"],
    );
    t.err(
        "negative body_nconsts",
        wl,
        carry(),
        while_params(&cond, &body, 0, -1),
        Variant::BadParam,
        &["param 'body_nconsts'", "-1 is out of range"],
    );
    t.err(
        "no cond_nconsts",
        wl,
        carry(),
        ps([
            ("cond_jaxpr", Param::Jaxpr(cond.clone())),
            ("body_jaxpr", Param::Jaxpr(body.clone())),
            ("body_nconsts", Param::Int(0)),
        ]),
        Variant::MissingParam,
        &["missing param 'cond_nconsts'"],
    );
    t.err(
        "cond_jaxpr as bool",
        wl,
        carry(),
        ps([
            ("cond_jaxpr", Param::Bool(true)),
            ("body_jaxpr", Param::Jaxpr(body)),
            ("cond_nconsts", Param::Int(0)),
            ("body_nconsts", Param::Int(0)),
        ]),
        Variant::ParamKind,
        &["param 'cond_jaxpr' must be a jaxpr, got a bool"],
    );
}

fn scan_params(body: &ClosedJaxpr, length: i64, consts: i64, carry: i64) -> Params {
    ps([
        ("jaxpr", Param::Jaxpr(body.clone())),
        ("length", Param::Int(length)),
        ("reverse", Param::Bool(false)),
        ("num_consts", Param::Int(consts)),
        ("num_carry", Param::Int(carry)),
    ])
}

fn scan_cases(t: &mut Table) {
    let sc = Builtin::Scan;
    // (c, x) -> (c + x, c * x)
    let body = closed(&[a(F32, &[]), a(F32, &[])], |b, x| {
        vec![
            app1(b, Builtin::Add, &[x[0], x[1]]),
            app1(b, Builtin::Mul, &[x[0], x[1]]),
        ]
    });
    // JAX: `d:f32[] e:f32[4] = scan[... length=4 num_carry=1 num_consts=0 ...] c b`.
    t.ok(
        "cumulative",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1),
        vec![a(F32, &[]), a(F32, &[4])],
    );
    t.ok(
        "optional params",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1)
            .with("linear", Param::Bools(Arc::from(vec![false, false])))
            .with("unroll", Param::Int(1))
            .with("_split_transpose", Param::Bool(false)),
        vec![a(F32, &[]), a(F32, &[4])],
    );
    t.ok(
        "unroll as bool",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1).with("unroll", Param::Bool(true)),
        vec![a(F32, &[]), a(F32, &[4])],
    );
    t.ok(
        "length 0",
        sc,
        vec![a(F32, &[]), a(F32, &[0])],
        scan_params(&body, 0, 0, 1),
        vec![a(F32, &[]), a(F32, &[0])],
    );
    // (k, c, x: f32[2]) -> (c + sum(x * k), x * k)
    let body_k = closed(&[a(F32, &[]), a(F32, &[]), a(F32, &[2])], |b, x| {
        let xk = app1(b, Builtin::Mul, &[x[2], x[0]]);
        let s = app(b, Builtin::ReduceSum, &[xk], ps([("axes", ints(&[0]))]))[0];
        vec![app1(b, Builtin::Add, &[x[1], s]), xk]
    });
    t.ok(
        "consts and 2d xs",
        sc,
        vec![a(F32, &[]), a(F32, &[]), a(F32, &[5, 2])],
        scan_params(&body_k, 5, 1, 1),
        vec![a(F32, &[]), a(F32, &[5, 2])],
    );
    let only_carry = closed(&[a(F32, &[3])], |b, x| vec![app1(b, Builtin::Sin, &[x[0]])]);
    t.ok(
        "carry only",
        sc,
        vec![a(F32, &[3])],
        scan_params(&only_carry, 7, 0, 1),
        vec![a(F32, &[3])],
    );
    let only_xs = closed(&[a(I32, &[])], |_, x| vec![x[0]]);
    t.ok(
        "xs only",
        sc,
        vec![a(I32, &[6])],
        scan_params(&only_xs, 6, 0, 0),
        vec![a(I32, &[6])],
    );
    // JAX: the body's carry output types and stacked ys keep their weak types
    // (`~float32[]`, `~float32[4]`).
    let body_w = closed(&[w(a(F32, &[])), w(a(F32, &[]))], |_, x| vec![x[0], x[1]]);
    t.ok(
        "weak",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body_w, 4, 0, 1),
        vec![w(a(F32, &[])), w(a(F32, &[4]))],
    );
    t.err(
        "xs length",
        sc,
        vec![a(F32, &[]), a(F32, &[3])],
        scan_params(&body, 4, 0, 1),
        Variant::Operands,
        &["scanned operand 1 (f32[3]) must have leading dimension 4"],
    );
    t.err(
        "scalar xs",
        sc,
        vec![a(F32, &[]), a(F32, &[])],
        scan_params(&body, 4, 0, 1),
        Variant::Operands,
        &["scanned operand 1 (f32[])"],
    );
    t.err(
        "carry type",
        sc,
        vec![a(I32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1),
        Variant::SubJaxpr,
        &["jaxpr: inputs (f32[], f32[]) differ from (i32[], f32[])"],
    );
    t.err(
        "xs element type",
        sc,
        vec![a(F32, &[]), a(F32, &[4, 2])],
        scan_params(&body, 4, 0, 1),
        Variant::SubJaxpr,
        &["differ from (f32[], f32[2])"],
    );
    let body_bad_carry = closed(&[a(F32, &[]), a(F32, &[])], |b, x| {
        let c = app(
            b,
            Builtin::ConvertElementType,
            &[x[0]],
            ps([("new_dtype", Param::DType(I32))]),
        )[0];
        vec![c, x[1]]
    });
    t.err(
        "carry output type",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body_bad_carry, 4, 0, 1),
        Variant::SubJaxpr,
        &["jaxpr: carry outputs (i32[]) differ from (f32[])"],
    );
    t.err(
        "too few outputs",
        sc,
        vec![a(F32, &[]), a(I32, &[]), a(F32, &[4])],
        scan_params(&only_xs, 4, 0, 2),
        Variant::SubJaxpr,
        &["jaxpr: inputs (i32[]) differ from (f32[], i32[], f32[])"],
    );
    t.err(
        "linear length",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1).with("linear", Param::Bools(Arc::from(vec![false]))),
        Variant::BadParam,
        &["param 'linear'", "has 1 entries for 2 operands"],
    );
    t.err(
        "linear empty",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1).with("linear", Param::ints(&[])),
        Variant::BadParam,
        &["param 'linear'", "has 0 entries for 2 operands"],
    );
    t.err(
        "negative length",
        sc,
        vec![a(F32, &[])],
        scan_params(&only_carry, -1, 0, 1),
        Variant::BadParam,
        &["param 'length'", "-1 is negative"],
    );
    t.err(
        "num_carry too big",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 3),
        Variant::BadParam,
        &["param 'num_carry'", "3 is out of range (0..=2)"],
    );
    t.err(
        "num_consts too big",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 5, 0),
        Variant::BadParam,
        &["param 'num_consts'", "5 is out of range"],
    );
    t.err(
        "no reverse",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        ps([
            ("jaxpr", Param::Jaxpr(body.clone())),
            ("length", Param::Int(4)),
            ("num_consts", Param::Int(0)),
            ("num_carry", Param::Int(1)),
        ]),
        Variant::MissingParam,
        &["missing param 'reverse'"],
    );
    t.err(
        "unroll as str",
        sc,
        vec![a(F32, &[]), a(F32, &[4])],
        scan_params(&body, 4, 0, 1).with("unroll", Param::Str("1".into())),
        Variant::ParamKind,
        &["param 'unroll' must be a int or bool, got a str"],
    );
    // ys stacked `length` times can overflow: a body returning a const of 2^40 elements.
    let big = closed(&[a(U8, &[1 << 40]), a(F32, &[])], |_, x| vec![x[1], x[0]]);
    t.err(
        "overflowing ys",
        sc,
        vec![a(U8, &[1 << 40]), a(F32, &[])],
        scan_params(&big, 1 << 40, 1, 1),
        Variant::Shape,
        &["overflows i64"],
    );
}

fn higher_order_cases(t: &mut Table) {
    jit_cases(t);
    cond_cases(t);
    while_cases(t);
    scan_cases(t);
    custom_cases(t);
}

/// `custom_jvp_call`, `custom_vjp_call` and `remat2` (calls of their jaxpr, typed as
/// `jit` is), and `stop_gradient` (any operand, its type out; JAX 0.10.2 binds it on
/// integers too).
fn custom_cases(t: &mut Table) {
    use ferrax_ir::generate::{custom_jvp_params, custom_vjp_params, remat_params};
    let sin3 = closed(&[a(F32, &[3])], |b, x| vec![app1(b, Builtin::Sin, &[x[0]])]);
    let ident_weak = closed(&[w(a(F32, &[]))], |_, x| vec![x[0], x[0]]);
    type MakeParams = fn(Param) -> Params;
    let calls: [(Builtin, MakeParams); 3] = [
        (Builtin::CustomJvpCall, |j| custom_jvp_params(j, "f")),
        (Builtin::CustomVjpCall, |j| custom_vjp_params(j, "f")),
        (Builtin::Remat, |j| remat_params(j, false)),
    ];
    for (p, make) in calls {
        let jp = |cj: &ClosedJaxpr| make(Param::Jaxpr(cj.clone()));
        t.ok("sin", p, vec![a(F32, &[3])], jp(&sin3), vec![a(F32, &[3])]);
        t.ok(
            "weak outputs",
            p,
            vec![a(F32, &[])],
            jp(&ident_weak),
            vec![w(a(F32, &[])), w(a(F32, &[]))],
        );
        t.err(
            "operand type",
            p,
            vec![a(I32, &[3])],
            jp(&sin3),
            Variant::SubJaxpr,
            &["operand types (i32[3]) differ from the jaxpr's input types (f32[3])"],
        );
        let jaxpr_name = p.call_jaxpr_param().unwrap_or("jaxpr");
        let sin3_params = jp(&sin3);
        let without: Vec<(&str, Param)> = sin3_params
            .iter()
            .filter(|(n, _)| *n != jaxpr_name)
            .map(|(n, v)| (n, v.clone()))
            .collect();
        t.err(
            "no jaxpr",
            p,
            vec![a(F32, &[3])],
            Params::new(without),
            Variant::MissingParam,
            &["missing param", jaxpr_name],
        );
        t.err(
            "a jaxpr where a rule goes",
            p,
            vec![a(F32, &[3])],
            jp(&sin3).with(
                if p == Builtin::Remat {
                    "policy"
                } else {
                    "symbolic_zeros"
                },
                Param::Jaxpr(sin3.clone()),
            ),
            Variant::ParamKind,
            &["must be a"],
        );
    }
    let jvp = custom_jvp_params(Param::Jaxpr(sin3.clone()), "f");
    t.ok(
        "num_consts",
        Builtin::CustomJvpCall,
        vec![a(F32, &[3])],
        jvp.with("num_consts", Param::Int(1)),
        vec![a(F32, &[3])],
    );
    t.err(
        "num_consts past the operands",
        Builtin::CustomJvpCall,
        vec![a(F32, &[3])],
        jvp.with("num_consts", Param::Int(2)),
        Variant::BadParam,
        &["num_consts", "2 is not in 0..=1"],
    );
    t.err(
        "rule is None",
        Builtin::CustomJvpCall,
        vec![a(F32, &[3])],
        jvp.with("jvp", Param::None),
        Variant::ParamKind,
        &["param 'jvp' must be a host object (opaque), got a None"],
    );
    let remat = remat_params(Param::Jaxpr(sin3.clone()), true);
    t.ok(
        "opaque policy",
        Builtin::Remat,
        vec![a(F32, &[3])],
        remat.with("policy", Param::Opaque(Opaque::named("dots_saveable"))),
        vec![a(F32, &[3])],
    );
    let sg = Builtin::StopGradient;
    for x in [
        a(F32, &[2, 3]),
        w(a(F32, &[])),
        a(I32, &[4]),
        a(BOOL, &[]),
        a(BF16, &[1]),
    ] {
        t.ok("identity type", sg, vec![x.clone()], ps([]), vec![x]);
    }
    t.err(
        "two operands",
        sg,
        vec![a(F32, &[]), a(F32, &[])],
        ps([]),
        Variant::Arity,
        &["takes 1 operands but was given 2"],
    );
    t.err(
        "a param",
        sg,
        vec![a(F32, &[])],
        ps([("axes", ints(&[0]))]),
        Variant::UnknownParam,
        &["unknown param 'axes'"],
    );
}

// ---------------------------------------------------------------------------------------
// The tests.

fn gdn(offset: &[i64], collapsed: &[i64], map: &[i64], ob: &[i64], ib: &[i64]) -> Param {
    Param::GatherDims(Arc::new(GatherDimensionNumbers {
        offset_dims: offset.to_vec(),
        collapsed_slice_dims: collapsed.to_vec(),
        start_index_map: map.to_vec(),
        operand_batching_dims: ob.to_vec(),
        start_indices_batching_dims: ib.to_vec(),
    }))
}

fn sdn(window: &[i64], inserted: &[i64], map: &[i64], ob: &[i64], ib: &[i64]) -> Param {
    Param::ScatterDims(Arc::new(ScatterDimensionNumbers {
        update_window_dims: window.to_vec(),
        inserted_window_dims: inserted.to_vec(),
        scatter_dims_to_operand_dims: map.to_vec(),
        operand_batching_dims: ob.to_vec(),
        scatter_indices_batching_dims: ib.to_vec(),
    }))
}

/// `gather`, the scatter family and `rev` (cases checked against JAX 0.10.2's
/// `lax.gather`/`lax.scatter*` shape rules).
fn indexing_cases(t: &mut Table) {
    let g = Builtin::Gather;
    let gp = |dn: Param, sizes: &[i64]| {
        ps([
            ("dimension_numbers", dn),
            ("slice_sizes", ints(sizes)),
            ("mode", Param::Mode(GatherScatterMode::FillOrDrop)),
            ("fill_value", Param::None),
            ("indices_are_sorted", Param::Bool(false)),
            ("unique_indices", Param::Bool(false)),
        ])
    };
    let rows = || gdn(&[1], &[0], &[0], &[], &[]);
    t.ok(
        "x[i] (weak operand kept)",
        g,
        vec![w(a(F32, &[3, 4])), a(I32, &[2, 1])],
        gp(rows(), &[1, 4]),
        vec![w(a(F32, &[2, 4]))],
    );
    t.ok(
        "x[:, i]",
        g,
        vec![a(F32, &[3, 4]), a(U8, &[5, 1])],
        gp(gdn(&[0], &[1], &[1], &[], &[]), &[3, 1]),
        vec![a(F32, &[3, 5])],
    );
    t.ok(
        "points, index map reversed",
        g,
        vec![a(BOOL, &[3, 4]), a(I64, &[2, 7, 2])],
        gp(gdn(&[], &[0, 1], &[1, 0], &[], &[]), &[1, 1]),
        vec![a(BOOL, &[2, 7])],
    );
    t.ok(
        "windows in the middle of the output",
        g,
        vec![a(I32, &[5, 6]), a(I32, &[2, 3, 1])],
        gp(gdn(&[1, 2], &[], &[0], &[], &[]), &[2, 6]),
        vec![a(I32, &[2, 2, 6, 3])],
    );
    t.ok(
        "batching dims (take_along_axis)",
        g,
        vec![a(F32, &[3, 4]), a(I32, &[3, 2, 1])],
        gp(gdn(&[], &[1], &[1], &[0], &[0]), &[1, 1]),
        vec![a(F32, &[3, 2])],
    );
    t.ok(
        "empty index vector: the whole operand per batch element",
        g,
        vec![a(F32, &[3]), a(I32, &[2, 0])],
        gp(gdn(&[1], &[], &[], &[], &[]), &[3]),
        vec![a(F32, &[2, 3])],
    );
    t.ok(
        "slice larger than the operand, no indices",
        g,
        vec![a(F32, &[3]), a(I32, &[0, 1])],
        gp(gdn(&[1], &[], &[0], &[], &[]), &[5]),
        vec![a(F32, &[0, 5])],
    );
    let rej =
        |t: &mut Table, label: &str, ins: Vec<AbstractValue>, p: Params, v, n: &[&'static str]| {
            t.err(label, g, ins, p, v, n)
        };
    let x34 = || a(F32, &[3, 4]);
    rej(
        t,
        "float indices",
        vec![x34(), a(F32, &[2, 1])],
        gp(rows(), &[1, 4]),
        Variant::DType,
        &["operand 1", "integer"],
    );
    rej(
        t,
        "scalar indices",
        vec![x34(), a(I32, &[])],
        gp(rows(), &[1, 4]),
        Variant::Operands,
        &["rank at least 1"],
    );
    rej(
        t,
        "one operand",
        vec![x34()],
        gp(rows(), &[1, 4]),
        Variant::Arity,
        &["takes 2"],
    );
    rej(
        t,
        "offset_dims unsorted",
        vec![a(F32, &[3, 4, 5]), a(I32, &[2, 1])],
        gp(gdn(&[2, 1], &[0], &[0], &[], &[]), &[1, 4, 5]),
        Variant::BadParam,
        &["offset_dims must be sorted"],
    );
    rej(
        t,
        "offset_dims repeated",
        vec![a(F32, &[3, 4, 5]), a(I32, &[2, 1])],
        gp(gdn(&[1, 1], &[0], &[0], &[], &[]), &[1, 4, 5]),
        Variant::BadParam,
        &["offset_dims must not repeat"],
    );
    rej(
        t,
        "offset_dims beyond the output",
        vec![x34(), a(I32, &[2, 1])],
        gp(gdn(&[2], &[0], &[0], &[], &[]), &[1, 4]),
        Variant::BadParam,
        &["offset_dims entry 2", "[0, 2)"],
    );
    rej(
        t,
        "index vector too long",
        vec![x34(), a(I32, &[2, 2])],
        gp(rows(), &[1, 4]),
        Variant::Operands,
        &["start_index_map (0,) has 1 entries", "have 2"],
    );
    rej(
        t,
        "start_index_map out of range",
        vec![x34(), a(I32, &[2, 1])],
        gp(gdn(&[1], &[0], &[2], &[], &[]), &[1, 4]),
        Variant::BadParam,
        &["start_index_map entry 2"],
    );
    rej(
        t,
        "start_index_map repeated",
        vec![x34(), a(I32, &[2, 2])],
        gp(gdn(&[], &[0, 1], &[0, 0], &[], &[]), &[1, 1]),
        Variant::BadParam,
        &["start_index_map must not repeat"],
    );
    rej(
        t,
        "collapsed out of range",
        vec![x34(), a(I32, &[2, 1])],
        gp(gdn(&[1], &[5], &[0], &[], &[]), &[1, 4]),
        Variant::BadParam,
        &["collapsed_slice_dims entry 5"],
    );
    rej(
        t,
        "collapsed dim of size 2",
        vec![x34(), a(I32, &[2, 1])],
        gp(rows(), &[2, 4]),
        Variant::BadParam,
        &[
            "slice_sizes",
            "collapsed dimension 0 must have slice size 1, got 2",
        ],
    );
    rej(
        t,
        "slice larger than the operand",
        vec![x34(), a(I32, &[2, 1])],
        gp(rows(), &[1, 5]),
        Variant::BadParam,
        &["slice size 5 of dimension 1"],
    );
    rej(
        t,
        "negative slice size",
        vec![x34(), a(I32, &[2, 1])],
        gp(rows(), &[1, -1]),
        Variant::BadParam,
        &["slice size -1"],
    );
    rej(
        t,
        "slice_sizes of the wrong length",
        vec![x34(), a(I32, &[2, 1])],
        gp(rows(), &[1]),
        Variant::BadParam,
        &["slice_sizes", "rank 2"],
    );
    rej(
        t,
        "a dimension neither offset nor collapsed",
        vec![x34(), a(I32, &[2, 1])],
        gp(gdn(&[], &[0], &[0], &[], &[]), &[1, 4]),
        Variant::BadParam,
        &["offset, collapsed or batching"],
    );
    rej(
        t,
        "batching and collapsed overlap",
        vec![x34(), a(I32, &[3, 1])],
        gp(gdn(&[], &[0, 1], &[1], &[0], &[0]), &[1, 1]),
        Variant::BadParam,
        &["collapsed_slice_dims and operand_batching_dims must be disjoint"],
    );
    rej(
        t,
        "batching dims of unequal sizes",
        vec![x34(), a(I32, &[2, 2, 1])],
        gp(gdn(&[], &[1], &[1], &[0], &[0]), &[1, 1]),
        Variant::Operands,
        &["size 3", "size 2"],
    );
    rej(
        t,
        "batching on the index vector",
        vec![x34(), a(I32, &[3, 1])],
        gp(gdn(&[], &[1], &[1], &[0], &[1]), &[1, 1]),
        Variant::BadParam,
        &["index vector dimension 1"],
    );
    rej(
        t,
        "batching counts differ",
        vec![x34(), a(I32, &[3, 2, 1])],
        gp(gdn(&[1], &[1], &[1], &[0], &[]), &[1, 1]),
        Variant::BadParam,
        &["start_indices_batching_dims", "equal lengths"],
    );
    rej(
        t,
        "batching dim of slice size 2",
        vec![a(F32, &[3, 4]), a(I32, &[3, 1])],
        gp(gdn(&[], &[1], &[1], &[0], &[0]), &[2, 1]),
        Variant::BadParam,
        &["operand batching dimension 0 must have slice size 0 or 1"],
    );
    rej(
        t,
        "mode missing",
        vec![x34(), a(I32, &[2, 1])],
        ps([
            ("dimension_numbers", rows()),
            ("slice_sizes", ints(&[1, 4])),
        ]),
        Variant::MissingParam,
        &["mode"],
    );
    rej(
        t,
        "scatter dimension numbers",
        vec![x34(), a(I32, &[2, 1])],
        gp(sdn(&[1], &[0], &[0], &[], &[]), &[1, 4]),
        Variant::ParamKind,
        &["dimension_numbers", "GatherDimensionNumbers"],
    );

    let sp = |dn: Param| {
        ps([
            ("dimension_numbers", dn),
            ("mode", Param::Mode(GatherScatterMode::Clip)),
            ("indices_are_sorted", Param::Bool(false)),
            ("unique_indices", Param::Bool(false)),
            ("update_jaxpr", Param::None),
            ("update_consts", ints(&[])),
        ])
    };
    let srows = || sdn(&[1], &[0], &[0], &[], &[]);
    for prim in [
        Builtin::Scatter,
        Builtin::ScatterAdd,
        Builtin::ScatterSub,
        Builtin::ScatterMul,
        Builtin::ScatterMin,
        Builtin::ScatterMax,
    ] {
        t.ok(
            "x.at[i].set(rows) (the operand's weak type)",
            prim,
            vec![w(a(F32, &[3, 4])), a(I32, &[2, 1]), a(F32, &[2, 4])],
            sp(srows()),
            vec![w(a(F32, &[3, 4]))],
        );
        t.ok(
            "points, narrower window",
            prim,
            vec![a(I32, &[3, 4]), a(U8, &[5, 2]), a(I32, &[5])],
            sp(sdn(&[], &[0, 1], &[1, 0], &[], &[])),
            vec![a(I32, &[3, 4])],
        );
        t.ok(
            "window narrower than the operand, batching dims",
            prim,
            vec![a(F32, &[3, 4, 5]), a(I64, &[3, 2, 1]), a(F32, &[3, 2, 2])],
            sp(sdn(&[2], &[1], &[1], &[0], &[0])),
            vec![a(F32, &[3, 4, 5])],
        );
        t.err(
            "updates of another dtype",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F64, &[2, 4])],
            sp(srows()),
            Variant::Operands,
            &["same dtype"],
        );
        t.err(
            "updates of the wrong rank",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2])],
            sp(srows()),
            Variant::Operands,
            &["must have rank 2"],
        );
        t.err(
            "window wider than the operand",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2, 5])],
            sp(srows()),
            Variant::Operands,
            &["update window dimension 1", "size 5", "size 4"],
        );
        t.err(
            "scatter dims differ from the indices'",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[3, 4])],
            sp(srows()),
            Variant::Operands,
            &["scatter dimension 0", "size 3", "size 2"],
        );
        t.err(
            "inserted_window_dims unsorted",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 2]), a(F32, &[2])],
            sp(sdn(&[], &[1, 0], &[0, 1], &[], &[])),
            Variant::BadParam,
            &["inserted_window_dims must be sorted"],
        );
        t.err(
            "window size short of the rank",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2])],
            sp(sdn(&[], &[0], &[0], &[], &[])),
            Variant::BadParam,
            &["window, inserted or batching"],
        );
        t.err(
            "index map of the wrong length",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2])],
            sp(sdn(&[], &[0, 1], &[0, 1], &[], &[])),
            Variant::Operands,
            &["scatter_dims_to_operand_dims (0, 1) has 2 entries"],
        );
        t.err(
            "bool indices",
            prim,
            vec![a(F32, &[3, 4]), a(BOOL, &[2, 1]), a(F32, &[2, 4])],
            sp(srows()),
            Variant::DType,
            &["operand 1"],
        );
        t.err(
            "nonempty update_consts",
            prim,
            vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2, 4])],
            sp(srows()).with("update_consts", ints(&[1])),
            Variant::BadParam,
            &["update_consts"],
        );
    }
    // Combining scatters need numbers; `scatter`, min and max take bool.
    for prim in [
        Builtin::ScatterAdd,
        Builtin::ScatterSub,
        Builtin::ScatterMul,
    ] {
        t.err(
            "bool operand",
            prim,
            vec![a(BOOL, &[3]), a(I32, &[1, 1]), a(BOOL, &[1])],
            sp(sdn(&[], &[0], &[0], &[], &[])),
            Variant::DType,
            &["numeric"],
        );
    }
    for prim in [Builtin::Scatter, Builtin::ScatterMin, Builtin::ScatterMax] {
        t.ok(
            "bool operand",
            prim,
            vec![a(BOOL, &[3]), a(I32, &[1, 1]), a(BOOL, &[1])],
            sp(sdn(&[], &[0], &[0], &[], &[])),
            vec![a(BOOL, &[3])],
        );
    }
    // update_jaxpr: two scalars of the operand's dtype to one.
    let add_f32 = closed(&[a(F32, &[]), a(F32, &[])], |b, x| {
        vec![app1(b, Builtin::Add, &[x[0], x[1]])]
    });
    let ins = || vec![a(F32, &[3, 4]), a(I32, &[2, 1]), a(F32, &[2, 4])];
    t.ok(
        "update_jaxpr of f32",
        Builtin::ScatterAdd,
        ins(),
        sp(srows()).with("update_jaxpr", Param::Jaxpr(add_f32)),
        vec![a(F32, &[3, 4])],
    );
    let add_i32 = closed(&[a(I32, &[]), a(I32, &[])], |b, x| {
        vec![app1(b, Builtin::Add, &[x[0], x[1]])]
    });
    t.err(
        "update_jaxpr of another dtype",
        Builtin::ScatterAdd,
        ins(),
        sp(srows()).with("update_jaxpr", Param::Jaxpr(add_i32)),
        Variant::SubJaxpr,
        &[
            "update_jaxpr must map two f32[] to one f32[]",
            "(i32[], i32[])",
        ],
    );

    let r = Builtin::Rev;
    let rp = |d: &[i64]| ps([("dimensions", ints(d))]);
    t.ok(
        "both axes",
        r,
        vec![w(a(I8, &[2, 3]))],
        rp(&[1, 0]),
        vec![w(a(I8, &[2, 3]))],
    );
    t.ok(
        "no axes, scalar",
        r,
        vec![a(BOOL, &[])],
        rp(&[]),
        vec![a(BOOL, &[])],
    );
    t.err(
        "axis out of range",
        r,
        vec![a(F32, &[2, 3])],
        rp(&[2]),
        Variant::BadParam,
        &["axis 2 is out of range for rank 2"],
    );
    t.err(
        "repeated axis",
        r,
        vec![a(F32, &[2, 3])],
        rp(&[0, 0]),
        Variant::BadParam,
        &["axis 0 appears twice"],
    );
    t.err(
        "two operands",
        r,
        vec![a(F32, &[2]), a(F32, &[2])],
        rp(&[0]),
        Variant::Arity,
        &["takes 1"],
    );
}

#[test]
fn indexing_rules() {
    run(&table(indexing_cases));
}

fn sharding_cases(t: &mut Table) {
    let sc = Builtin::ShardingConstraint;
    let mesh = Param::Mesh(Arc::new(
        ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap(),
    ));
    let spec = |entries: &[&[&str]]| {
        Param::Spec(Arc::new(ferrax_ir::PartitionSpec::new(
            entries
                .iter()
                .map(|e| e.iter().map(|n| Arc::from(*n)).collect())
                .collect(),
        )))
    };
    for (x, sp) in [
        (a(F32, &[4, 2]), spec(&[&["x"], &["y"]])),
        (w(a(F32, &[])), spec(&[])),
        (a(I32, &[3]), spec(&[&["x", "y"]])),
        (a(BOOL, &[3, 1]), spec(&[&[], &[]])),
    ] {
        t.ok(
            "identity type",
            sc,
            vec![x.clone()],
            ps([("mesh", mesh.clone()), ("spec", sp)]),
            vec![x],
        );
    }
    t.err(
        "unknown axis",
        sc,
        vec![a(F32, &[4])],
        ps([("mesh", mesh.clone()), ("spec", spec(&[&["z"]]))]),
        Variant::BadParam,
        &["param 'spec'", "'z'", "not found in the mesh"],
    );
    t.err(
        "axis twice",
        sc,
        vec![a(F32, &[4, 4])],
        ps([("mesh", mesh.clone()), ("spec", spec(&[&["x"], &["x"]]))]),
        Variant::BadParam,
        &["mesh axis 'x' more than once"],
    );
    t.err(
        "past the rank",
        sc,
        vec![a(F32, &[4])],
        ps([("mesh", mesh.clone()), ("spec", spec(&[&[], &["x"]]))]),
        Variant::BadParam,
        &["2 entries", "rank-1"],
    );
    t.err(
        "spec of the wrong kind",
        sc,
        vec![a(F32, &[4])],
        ps([("mesh", mesh.clone()), ("spec", ints(&[0]))]),
        Variant::ParamKind,
        &["param 'spec' must be a partition spec"],
    );
    t.err(
        "no mesh",
        sc,
        vec![a(F32, &[4])],
        ps([("spec", spec(&[]))]),
        Variant::MissingParam,
        &["missing param 'mesh'"],
    );
    t.err(
        "two operands",
        sc,
        vec![a(F32, &[]), a(F32, &[])],
        ps([("mesh", mesh), ("spec", spec(&[]))]),
        Variant::Arity,
        &["takes 1 operands but was given 2"],
    );
}

fn collective_cases(t: &mut Table) {
    use Builtin::*;
    let names = |ns: &[&str]| Param::Names(ns.iter().map(|n| Arc::from(*n)).collect());
    let mesh22 = ferrax_ir::Mesh::new([("x", 2), ("y", 2)]).unwrap();
    t.1 = Some(AxisEnv::of([("x", 2), ("y", 2)]));
    for p in [Psum, Pmax, Pmin, Pvary] {
        for x in [a(F32, &[2, 3]), w(a(F32, &[])), a(I32, &[4])] {
            t.ok(
                "same type",
                p,
                vec![x.clone()],
                ps([("axes", names(&["x"]))]),
                vec![x],
            );
        }
        t.ok(
            "two axes, groups None",
            p,
            vec![a(F32, &[2])],
            if p == Pvary {
                ps([("axes", names(&["y", "x"]))])
            } else {
                ps([
                    ("axes", names(&["y", "x"])),
                    ("axis_index_groups", Param::None),
                ])
            },
            vec![a(F32, &[2])],
        );
        t.err(
            "unbound axis",
            p,
            vec![a(F32, &[2])],
            ps([("axes", names(&["z"]))]),
            Variant::UnboundAxis,
            &["Found an unbound axis name: z"],
        );
        t.err(
            "axis twice",
            p,
            vec![a(F32, &[2])],
            ps([("axes", names(&["x", "x"]))]),
            Variant::BadParam,
            &["axis name 'x' appears twice"],
        );
        if p != Pvary {
            t.err(
                "groups given",
                p,
                vec![a(F32, &[2])],
                ps([
                    ("axes", names(&["x"])),
                    ("axis_index_groups", ints(&[0, 1])),
                ]),
                Variant::ParamKind,
                &["param 'axis_index_groups' must be a None"],
            );
            t.err(
                "bool",
                p,
                vec![a(BOOL, &[2])],
                ps([("axes", names(&["x"]))]),
                Variant::DType,
                &["expected a numeric dtype"],
            );
        }
    }
    t.ok(
        "one axis",
        AxisIndex,
        vec![],
        ps([("axis_name", Param::Str("y".into()))]),
        vec![a(I32, &[])],
    );
    t.ok(
        "two axes",
        AxisIndex,
        vec![],
        ps([("axis_name", names(&["x", "y"]))]),
        vec![a(I32, &[])],
    );
    t.err(
        "unbound",
        AxisIndex,
        vec![],
        ps([("axis_name", Param::Str("i".into()))]),
        Variant::UnboundAxis,
        &["unbound axis name: i"],
    );
    let ag = |d: i64, n: i64, tiled: bool| {
        ps([
            ("all_gather_dimension", Param::Int(d)),
            ("axis_name", names(&["y"])),
            ("axis_size", Param::Int(n)),
            ("tiled", Param::Bool(tiled)),
            ("axis_index_groups", Param::None),
        ])
    };
    t.ok(
        "tiled",
        AllGather,
        vec![a(F32, &[4, 3])],
        ag(0, 2, true),
        vec![a(F32, &[8, 3])],
    );
    t.ok(
        "untiled",
        AllGather,
        vec![a(F32, &[4, 3])],
        ag(2, 2, false),
        vec![a(F32, &[4, 3, 2])],
    );
    t.ok(
        "weak kept",
        AllGather,
        vec![w(a(F32, &[4]))],
        ag(0, 2, false),
        vec![w(a(F32, &[2, 4]))],
    );
    t.err(
        "axis_size disagrees",
        AllGather,
        vec![a(F32, &[4, 3])],
        ag(0, 4, true),
        Variant::BadParam,
        &["param 'axis_size': 4 differs from the size of the named axes, 2"],
    );
    t.err(
        "dim out of range",
        AllGather,
        vec![a(F32, &[4, 3])],
        ag(2, 2, true),
        Variant::BadParam,
        &["all_gather_dimension"],
    );
    let rs = |d: i64, n: i64, tiled: bool| {
        ps([
            ("scatter_dimension", Param::Int(d)),
            ("axis_name", names(&["x"])),
            ("axis_size", Param::Int(n)),
            ("tiled", Param::Bool(tiled)),
        ])
    };
    t.ok(
        "tiled",
        ReduceScatter,
        vec![a(F32, &[4, 3])],
        rs(0, 2, true),
        vec![a(F32, &[2, 3])],
    );
    t.ok(
        "untiled",
        ReduceScatter,
        vec![a(F32, &[4, 2])],
        rs(1, 2, false),
        vec![a(F32, &[4])],
    );
    t.err(
        "tiled, not divisible",
        ReduceScatter,
        vec![a(F32, &[3])],
        rs(0, 2, true),
        Variant::Operands,
        &["tiled reduce_scatter operand scatter dimension size 3 must be divisible by shard_count 2"],
    );
    t.err(
        "untiled, wrong size",
        ReduceScatter,
        vec![a(F32, &[3])],
        rs(0, 2, false),
        Variant::Operands,
        &["reduce_scatter operand scatter dimension size 3 must match shard count 2"],
    );
    let pp = |perm: &[(i64, i64)]| {
        ps([
            ("axis_name", names(&["x"])),
            ("perm", Param::Pairs(perm.iter().copied().collect())),
        ])
    };
    t.ok(
        "swap",
        Ppermute,
        vec![a(F32, &[3])],
        pp(&[(0, 1), (1, 0)]),
        vec![a(F32, &[3])],
    );
    t.ok(
        "partial",
        Ppermute,
        vec![a(I32, &[])],
        pp(&[(0, 1)]),
        vec![a(I32, &[])],
    );
    t.err(
        "out of range",
        Ppermute,
        vec![a(F32, &[3])],
        pp(&[(0, 2)]),
        Variant::BadParam,
        &["index 2 is out of range for the axis size 2"],
    );
    t.err(
        "two sources",
        Ppermute,
        vec![a(F32, &[3])],
        pp(&[(0, 1), (0, 0)]),
        Variant::BadParam,
        &["source 0 appears twice"],
    );
    let a2a = |axis: Param, split: i64, concat: i64| {
        ps([
            ("axis_name", axis),
            ("split_axis", Param::Int(split)),
            ("concat_axis", Param::Int(concat)),
            ("tiled", Param::Bool(true)),
        ])
    };
    t.ok(
        "tiled",
        AllToAll,
        vec![a(F32, &[4, 4])],
        a2a(Param::Str("y".into()), 0, 1),
        vec![a(F32, &[2, 8])],
    );
    t.ok(
        "two axes",
        AllToAll,
        vec![w(a(F32, &[2, 4]))],
        a2a(names(&["x", "y"]), 1, 0),
        vec![a(F32, &[8, 1])],
    );
    t.err(
        "not divisible",
        AllToAll,
        vec![a(F32, &[3, 4])],
        a2a(Param::Str("y".into()), 0, 1),
        Variant::Operands,
        &["split_axis (3) has to be divisible by the size of the named axis (2)"],
    );
    // shard_map: the body takes each operand divided by its spec's axes.
    let body = |ins: &[AbstractValue], outs_idx: &[usize]| {
        let mut b = JaxprBuilder::new();
        let vs: Vec<_> = ins.iter().map(|x| b.add_invar(x.clone())).collect();
        let outs = outs_idx.iter().map(|&i| Atom::Var(vs[i])).collect();
        Param::Jaxpr(ClosedJaxpr::new(Arc::new(b.build(outs).unwrap()), vec![]).unwrap())
    };
    let spec = |entries: &[&[&str]]| {
        ferrax_ir::PartitionSpec::new(
            entries
                .iter()
                .map(|e| e.iter().map(|n| Arc::from(*n)).collect())
                .collect(),
        )
    };
    let sm = |j: Param, ins: Vec<ferrax_ir::PartitionSpec>, outs: Vec<ferrax_ir::PartitionSpec>| {
        ps([
            ("jaxpr", j),
            ("mesh", Param::Mesh(Arc::new(mesh22.clone()))),
            ("in_specs", Param::Specs(ins.into())),
            ("out_specs", Param::Specs(outs.into())),
            ("check_vma", Param::Bool(true)),
        ])
    };
    t.1 = Some(AxisEnv::closed());
    t.ok(
        "split and gathered back",
        ShardMap,
        vec![a(F32, &[8, 6]), a(F32, &[])],
        sm(
            body(&[a(F32, &[4, 3]), a(F32, &[])], &[0, 0, 1]),
            vec![spec(&[&["x"], &["y"]]), spec(&[])],
            vec![
                spec(&[&["x"], &["y"]]),
                spec(&[&[], &["x", "y"]]),
                spec(&[]),
            ],
        ),
        vec![a(F32, &[8, 6]), a(F32, &[4, 12]), a(F32, &[])],
    );
    t.err(
        "not divisible",
        ShardMap,
        vec![a(F32, &[3, 4])],
        sm(body(&[a(F32, &[1, 4])], &[0]), vec![spec(&[&["x"]])], vec![spec(&[&["x"]])]),
        Variant::BadParam,
        &["argument 0 of type f32[3,4]", "P('x',) maps array axis 0 (of size 3) to mesh axis 'x' (of size 2), but 2 does not evenly divide 3"],
    );
    t.err(
        "body type",
        ShardMap,
        vec![a(F32, &[4, 4])],
        sm(body(&[a(F32, &[4, 4])], &[0]), vec![spec(&[&["x"]])], vec![spec(&[])]),
        Variant::SubJaxpr,
        &["argument 0 of type f32[4,4] split by P('x',) is f32[2,4] on each device, but the jaxpr takes f32[4,4]"],
    );
    t.err(
        "out spec too long",
        ShardMap,
        vec![a(F32, &[])],
        sm(
            body(&[a(F32, &[])], &[0]),
            vec![spec(&[])],
            vec![spec(&[&["x"]])],
        ),
        Variant::BadParam,
        &["output 0 of type f32[]", "1 entries"],
    );
    t.1 = None;
}

/// The bit primitives: `population_count`, `clz`, `bitcast_convert_type`,
/// `threefry2x32` (checked against JAX 0.10.2's `make_jaxpr` and `Primitive.bind`).
fn bit_cases(t: &mut Table) {
    use Builtin::{BitcastConvertType, Clz, PopulationCount, Threefry2x32};
    // population_count, clz: integers only, same type out (weak types kept).
    for p in [PopulationCount, Clz] {
        for d in [I8, I16, I32, I64, U8, U16, U32, U64] {
            t.ok(
                "int",
                p,
                vec![a(d, &[2, 3])],
                no_params(),
                vec![a(d, &[2, 3])],
            );
        }
        t.ok(
            "weak",
            p,
            vec![w(a(I32, &[]))],
            no_params(),
            vec![w(a(I32, &[]))],
        );
        for d in [BOOL, F16, BF16, F32, F64] {
            t.err(
                "not int",
                p,
                vec![a(d, &[2])],
                no_params(),
                Variant::DType,
                &["operand 0 has dtype", "an integer dtype"],
            );
        }
        t.err(
            "arity",
            p,
            vec![],
            no_params(),
            Variant::Arity,
            &["takes 1"],
        );
    }

    // bitcast_convert_type: same width keeps the shape, narrowing adds a trailing
    // dimension, widening removes a last dimension of the ratio; bool only to itself;
    // never weakly typed.
    let nd = |d: DType| ps([("new_dtype", Param::DType(d))]);
    let bc = BitcastConvertType;
    t.ok(
        "same width",
        bc,
        vec![a(F32, &[3])],
        nd(I32),
        vec![a(I32, &[3])],
    );
    t.ok(
        "same dtype",
        bc,
        vec![a(F32, &[3])],
        nd(F32),
        vec![a(F32, &[3])],
    );
    t.ok(
        "f16 to bf16",
        bc,
        vec![a(F16, &[2])],
        nd(BF16),
        vec![a(BF16, &[2])],
    );
    t.ok(
        "bool to bool",
        bc,
        vec![a(BOOL, &[2])],
        nd(BOOL),
        vec![a(BOOL, &[2])],
    );
    t.ok(
        "narrow",
        bc,
        vec![a(U32, &[3])],
        nd(U8),
        vec![a(U8, &[3, 4])],
    );
    t.ok(
        "narrow scalar",
        bc,
        vec![a(U32, &[])],
        nd(U16),
        vec![a(U16, &[2])],
    );
    t.ok(
        "narrow f64",
        bc,
        vec![a(F64, &[2, 0])],
        nd(F16),
        vec![a(F16, &[2, 0, 4])],
    );
    t.ok(
        "widen",
        bc,
        vec![a(U8, &[3, 4])],
        nd(U32),
        vec![a(U32, &[3])],
    );
    t.ok(
        "widen to scalar",
        bc,
        vec![a(I16, &[4])],
        nd(F64),
        vec![a(F64, &[])],
    );
    t.ok(
        "strips weak",
        bc,
        vec![w(a(F32, &[]))],
        nd(I32),
        vec![a(I32, &[])],
    );
    t.ok(
        "strips weak, same",
        bc,
        vec![w(a(F32, &[]))],
        nd(F32),
        vec![a(F32, &[])],
    );
    t.err(
        "widen, last dim does not fit",
        bc,
        vec![a(U8, &[3, 3])],
        nd(U32),
        Variant::BadParam,
        &["u8[3,3]", "needs a last dimension of 4, got 3"],
    );
    t.err(
        "widen a scalar",
        bc,
        vec![a(U16, &[])],
        nd(U32),
        Variant::BadParam,
        &["needs a last dimension of 2, got 1"],
    );
    t.err(
        "bool to u8",
        bc,
        vec![a(BOOL, &[3])],
        nd(U8),
        Variant::BadParam,
        &["bool", "only to itself"],
    );
    t.err(
        "u8 to bool",
        bc,
        vec![a(U8, &[3])],
        nd(BOOL),
        Variant::BadParam,
        &["bool", "only to itself"],
    );
    t.err(
        "no dtype",
        bc,
        vec![a(U8, &[3])],
        no_params(),
        Variant::MissingParam,
        &["new_dtype"],
    );
    t.err(
        "dtype kind",
        bc,
        vec![a(U8, &[3])],
        ps([("new_dtype", Param::Int(1))]),
        Variant::ParamKind,
        &["new_dtype"],
    );

    // threefry2x32: four u32 operands broadcasting together (scalars; size-1 dimensions
    // of equal ranks); two u32 outputs.
    let u = |dims: &[i64]| a(U32, dims);
    let tf = |t: &mut Table, label: &str, ins: [&[i64]; 4], out: &[i64]| {
        let ins = ins.iter().map(|d| u(d)).collect();
        t.ok(label, Threefry2x32, ins, no_params(), vec![u(out), u(out)]);
    };
    tf(t, "scalar keys", [&[], &[], &[3], &[3]], &[3]);
    tf(t, "all scalars", [&[], &[], &[], &[]], &[]);
    tf(t, "size-1 keys", [&[1], &[1], &[3], &[3]], &[3]);
    tf(t, "stretched", [&[2, 1], &[], &[1, 3], &[2, 3]], &[2, 3]);
    tf(t, "scalar counts", [&[3], &[3], &[], &[]], &[3]);
    tf(t, "empty", [&[], &[], &[0], &[0]], &[0]);
    t.ok(
        "weak in, strong out",
        Threefry2x32,
        vec![w(u(&[])), u(&[]), u(&[2]), u(&[2])],
        no_params(),
        vec![u(&[2]), u(&[2])],
    );
    t.err(
        "i32 count",
        Threefry2x32,
        vec![u(&[]), u(&[]), a(I32, &[3]), u(&[3])],
        no_params(),
        Variant::DType,
        &["operand 2 has dtype i32", "u32"],
    );
    t.err(
        "disagreeing dims",
        Threefry2x32,
        vec![u(&[2]), u(&[]), u(&[3]), u(&[3])],
        no_params(),
        Variant::Operands,
        &["differ in dimension 0"],
    );
    t.err(
        "ranks",
        Threefry2x32,
        vec![u(&[]), u(&[]), u(&[3]), u(&[2, 3])],
        no_params(),
        Variant::Operands,
        &["different ranks"],
    );
    t.err(
        "arity",
        Threefry2x32,
        vec![u(&[]), u(&[]), u(&[3])],
        no_params(),
        Variant::Arity,
        &["takes 4"],
    );
}

#[test]
fn bit_rules() {
    run(&table(bit_cases));
}

/// `sort` and the cumulative primitives (checked against JAX 0.10.2's `Primitive.bind`
/// and `jax.eval_shape`).
fn sorting_cases(t: &mut Table) {
    use Builtin::{Cumlogsumexp, Cummax, Cummin, Cumprod, Cumsum, Sort};
    let sp = |dim: i64, keys: i64| {
        ps([
            ("dimension", Param::Int(dim)),
            ("is_stable", Param::Bool(true)),
            ("num_keys", Param::Int(keys)),
        ])
    };
    // Any dtypes, weak types kept: the outputs are the operands' types.
    let three = vec![w(a(F32, &[2, 3])), a(I32, &[2, 3]), a(BOOL, &[2, 3])];
    t.ok("three operands", Sort, three.clone(), sp(1, 2), three);
    t.ok(
        "empty axis",
        Sort,
        vec![a(U64, &[0, 3])],
        sp(0, 1),
        vec![a(U64, &[0, 3])],
    );
    t.err(
        "shapes differ",
        Sort,
        vec![a(F32, &[3]), a(F32, &[4])],
        sp(0, 1),
        Variant::Operands,
        &["Arguments to sort must have equal shapes"],
    );
    t.err(
        "num_keys beyond the operands",
        Sort,
        vec![a(F32, &[3]), a(F32, &[3])],
        sp(0, 3),
        Variant::BadParam,
        &["num_keys", "between 1 and 2"],
    );
    t.err(
        "no keys",
        Sort,
        vec![a(F32, &[3])],
        sp(0, 0),
        Variant::BadParam,
        &["num_keys"],
    );
    t.err(
        "dimension out of range",
        Sort,
        vec![a(F32, &[3])],
        sp(1, 1),
        Variant::BadParam,
        &["dimension", "1 is out of range"],
    );
    t.err(
        "scalar",
        Sort,
        vec![a(F32, &[])],
        sp(0, 1),
        Variant::BadParam,
        &["dimension"],
    );
    t.err(
        "no operands",
        Sort,
        vec![],
        sp(0, 1),
        Variant::Arity,
        &["at least 1"],
    );
    let cp = |axis: i64| ps([("axis", Param::Int(axis)), ("reverse", Param::Bool(false))]);
    for prim in [Cumsum, Cumprod, Cummax, Cummin, Cumlogsumexp] {
        let x = w(a(F16, &[2, 0]));
        t.ok("float, weak", prim, vec![x.clone()], cp(1), vec![x]);
        t.err(
            "bool",
            prim,
            vec![a(BOOL, &[3])],
            cp(0),
            Variant::DType,
            &["bool"],
        );
        t.err(
            "axis out of range",
            prim,
            vec![a(F32, &[3])],
            cp(1),
            Variant::BadParam,
            &["axis", "1 is out of range"],
        );
        t.err(
            "scalar",
            prim,
            vec![a(F32, &[])],
            cp(0),
            Variant::BadParam,
            &["axis"],
        );
    }
    for prim in [Cumsum, Cumprod, Cummax, Cummin] {
        t.ok("integer", prim, vec![a(U8, &[4])], cp(0), vec![a(U8, &[4])]);
    }
    let kp = |axis: i64, k: i64| ps([("axis", Param::Int(axis)), ("k", Param::Int(k))]);
    t.ok(
        "top_k",
        Builtin::TopK,
        vec![w(a(U8, &[2, 5]))],
        kp(1, 3),
        vec![w(a(U8, &[2, 3])), a(I32, &[2, 3])],
    );
    t.ok(
        "top_k of none",
        Builtin::TopK,
        vec![a(BOOL, &[0, 2])],
        kp(0, 0),
        vec![a(BOOL, &[0, 2]), a(I32, &[0, 2])],
    );
    t.err(
        "top_k k too large",
        Builtin::TopK,
        vec![a(F32, &[2, 5])],
        kp(0, 3),
        Variant::BadParam,
        &["k argument to top_k", "got 3"],
    );
    t.err(
        "top_k negative k",
        Builtin::TopK,
        vec![a(F32, &[5])],
        kp(0, -1),
        Variant::BadParam,
        &["got -1"],
    );
    t.err(
        "top_k scalar",
        Builtin::TopK,
        vec![a(F32, &[])],
        kp(0, 0),
        Variant::BadParam,
        &["axis"],
    );
    t.err(
        "integer logsumexp",
        Cumlogsumexp,
        vec![a(I32, &[4])],
        cp(0),
        Variant::DType,
        &["float"],
    );
}

/// A convolution's params: strides, padding, dilations, specs, (feature, batch) groups.
type ConvSpec<'a> = (
    &'a [i64],
    &'a [(i64, i64)],
    &'a [i64],
    &'a [i64],
    [&'a [i64]; 3],
    (i64, i64),
);

fn conv_ps(c: ConvSpec<'_>, preferred: Param) -> Params {
    let (strides, padding, ld, rd, specs, (fgc, bgc)) = c;
    ps([
        ("window_strides", ints(strides)),
        ("padding", Param::Pairs(padding.into())),
        ("lhs_dilation", ints(ld)),
        ("rhs_dilation", ints(rd)),
        (
            "dimension_numbers",
            Param::ConvDims(Arc::new(ConvDimensionNumbers {
                lhs_spec: specs[0].to_vec(),
                rhs_spec: specs[1].to_vec(),
                out_spec: specs[2].to_vec(),
            })),
        ),
        ("feature_group_count", Param::Int(fgc)),
        ("batch_group_count", Param::Int(bgc)),
        ("precision", Param::None),
        ("preferred_element_type", preferred),
        ("out_sharding", Param::None),
    ])
}

/// Output shapes computed by JAX 0.10.2 (`jax.eval_shape` of `lax.conv_general_dilated`
/// with these params; specs from `lax.conv_dimension_numbers`).
#[allow(clippy::type_complexity)]
const CONV_SHAPES: &[(
    DType,
    &[i64],
    &[i64],
    &[i64],
    &[(i64, i64)],
    &[i64],
    &[i64],
    [&[i64]; 3],
    (i64, i64),
    &[i64],
)] = &[
    (
        F32,
        &[2, 3, 8, 8],
        &[4, 3, 3, 3],
        &[1, 1],
        &[(1, 1), (1, 1)],
        &[1, 1],
        &[1, 1],
        [&[0, 1, 2, 3], &[0, 1, 2, 3], &[0, 1, 2, 3]],
        (1, 1),
        &[2, 4, 8, 8],
    ),
    (
        F32,
        &[2, 8, 8, 3],
        &[3, 3, 3, 4],
        &[2, 1],
        &[(1, 0), (2, 2)],
        &[1, 2],
        &[2, 1],
        [&[0, 3, 1, 2], &[3, 2, 0, 1], &[0, 3, 1, 2]],
        (1, 1),
        &[2, 3, 17, 4],
    ),
    (
        F16,
        &[2, 4, 7],
        &[6, 2, 3],
        &[2],
        &[(2, 1)],
        &[2],
        &[2],
        [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        (2, 1),
        &[2, 6, 6],
    ),
    (
        I32,
        &[4, 2, 6],
        &[6, 2, 2],
        &[1],
        &[(-1, 1)],
        &[1],
        &[1],
        [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        (1, 2),
        &[2, 6, 5],
    ),
    (
        BF16,
        &[1, 2, 3, 4, 3],
        &[2, 2, 2, 2, 1],
        &[2, 1, 2],
        &[(0, 1), (1, 1), (0, 0)],
        &[1, 2, 1],
        &[1, 1, 1],
        [&[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4], &[0, 1, 2, 3, 4]],
        (1, 1),
        &[1, 2, 2, 8, 2],
    ),
    (
        F32,
        &[2, 3],
        &[4, 3],
        &[],
        &[],
        &[],
        &[],
        [&[0, 1], &[0, 1], &[0, 1]],
        (1, 1),
        &[2, 4],
    ),
    (
        F32,
        &[3, 2, 5],
        &[4, 2, 9],
        &[1],
        &[(0, 0)],
        &[1],
        &[1],
        [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        (1, 1),
        &[3, 4, 0],
    ),
    (
        F32,
        &[0, 3, 5],
        &[4, 3, 2],
        &[1],
        &[(0, 0)],
        &[1],
        &[1],
        [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        (1, 1),
        &[0, 4, 4],
    ),
    (
        F32,
        &[2, 0, 5],
        &[4, 0, 2],
        &[1],
        &[(0, 0)],
        &[1],
        &[1],
        [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]],
        (1, 1),
        &[2, 4, 4],
    ),
    (
        F32,
        &[2, 6, 5, 5],
        &[6, 1, 3, 3],
        &[1, 1],
        &[(1, 1), (1, 1)],
        &[1, 1],
        &[1, 1],
        [&[0, 1, 2, 3], &[0, 1, 2, 3], &[0, 3, 1, 2]],
        (6, 1),
        &[2, 5, 5, 6],
    ),
];

fn conv_cases(t: &mut Table) {
    let c = Builtin::ConvGeneralDilated;
    for &(dt, l, r, st, pad, ld, rd, specs, groups, out) in CONV_SHAPES {
        let p = conv_ps((st, pad, ld, rd, specs, groups), Param::None);
        t.ok(
            &format!("conv {l:?} x {r:?}"),
            c,
            vec![a(dt, l), a(dt, r)],
            p.clone(),
            vec![a(dt, out)],
        );
        // Weakly typed only when both operands are.
        t.ok(
            &format!("weak conv {l:?} x {r:?}"),
            c,
            vec![w(a(dt, l)), w(a(dt, r))],
            p.clone(),
            vec![w(a(dt, out))],
        );
        t.ok(
            &format!("half-weak conv {l:?} x {r:?}"),
            c,
            vec![w(a(dt, l)), a(dt, r)],
            p,
            vec![a(dt, out)],
        );
    }
    let id3: [&[i64]; 3] = [&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]];
    let base = (
        &[1i64][..],
        &[(0i64, 0i64)][..],
        &[1i64][..],
        &[1i64][..],
        id3,
        (1, 1),
    );
    let x = || a(F32, &[2, 4, 5]);
    let k = || a(F32, &[6, 4, 3]);
    t.ok(
        "conv preferred f32 from f16",
        c,
        vec![a(F16, &[2, 4, 5]), a(F16, &[6, 4, 3])],
        conv_ps(base, Param::DType(F32)),
        vec![a(F32, &[2, 6, 3])],
    );
    t.ok(
        "conv preferred f32 from i8",
        c,
        vec![a(I8, &[2, 4, 5]), a(I8, &[6, 4, 3])],
        conv_ps(base, Param::DType(F32)),
        vec![a(F32, &[2, 6, 3])],
    );
    let mut reject =
        |label: &str, ins: Vec<AbstractValue>, p: Params, v: Variant, needles: &[&'static str]| {
            t.err(label, c, ins, p, v, needles)
        };
    // JAX's messages, JAX's checks.
    reject(
        "conv dtypes differ",
        vec![x(), a(F16, &[6, 4, 3])],
        conv_ps(base, Param::None),
        Variant::Operands,
        &["requires arguments to have the same dtypes, got float32, float16"],
    );
    reject(
        "conv ranks differ",
        vec![x(), a(F32, &[6, 4, 3, 1])],
        conv_ps(base, Param::None),
        Variant::Operands,
        &["must have the same number of dimensions"],
    );
    reject(
        "conv feature groups do not divide",
        vec![x(), k()],
        conv_ps((base.0, base.1, base.2, base.3, id3, (3, 1)), Param::None),
        Variant::Operands,
        &["3 does not divide 4"],
    );
    reject(
        "conv kernel input features",
        vec![x(), k()],
        conv_ps((base.0, base.1, base.2, base.3, id3, (2, 1)), Param::None),
        Variant::Operands,
        &["4 // 2 != 4"],
    );
    reject(
        "conv output features not a multiple of the groups",
        vec![x(), a(F32, &[5, 2, 3])],
        conv_ps((base.0, base.1, base.2, base.3, id3, (2, 1)), Param::None),
        Variant::Operands,
        &["5 is not a multiple of 2"],
    );
    reject(
        "conv batch groups do not divide the batch",
        vec![a(F32, &[3, 4, 5]), k()],
        conv_ps((base.0, base.1, base.2, base.3, id3, (1, 2)), Param::None),
        Variant::Operands,
        &["2 does not divide 3"],
    );
    reject(
        "conv both groups",
        vec![a(F32, &[4, 4, 5]), a(F32, &[4, 2, 3])],
        conv_ps((base.0, base.1, base.2, base.3, id3, (2, 2)), Param::None),
        Variant::BadParam,
        &["At most one of batch_group_count and feature_group_count"],
    );
    reject(
        "conv zero groups",
        vec![x(), k()],
        conv_ps((base.0, base.1, base.2, base.3, id3, (0, 1)), Param::None),
        Variant::BadParam,
        &["must be a positive integer, got 0"],
    );
    reject(
        "conv strides count",
        vec![x(), k()],
        conv_ps((&[1, 1], base.1, base.2, base.3, id3, (1, 1)), Param::None),
        Variant::BadParam,
        &["same number of dimensions, but got 1 and 2"],
    );
    reject(
        "conv zero stride",
        vec![x(), k()],
        conv_ps((&[0], base.1, base.2, base.3, id3, (1, 1)), Param::None),
        Variant::BadParam,
        &["strides must be positive"],
    );
    reject(
        "conv zero dilation",
        vec![x(), k()],
        conv_ps((base.0, base.1, base.2, &[0], id3, (1, 1)), Param::None),
        Variant::BadParam,
        &["All dilations must be positive, got (0,)."],
    );
    reject(
        "conv padding count",
        vec![x(), k()],
        conv_ps((base.0, &[], base.2, base.3, id3, (1, 1)), Param::None),
        Variant::BadParam,
        &["Wrong number of explicit pads for convolution: expected 1, got 0."],
    );
    reject(
        "conv negative padding larger than the input",
        vec![x(), k()],
        conv_ps(
            (base.0, &[(-4, -2)], base.2, base.3, id3, (1, 1)),
            Param::None,
        ),
        Variant::Operands,
        &["Negative padding is larger than the size"],
    );
    reject(
        "conv spec not a permutation",
        vec![x(), k()],
        conv_ps(
            (
                base.0,
                base.1,
                base.2,
                base.3,
                [&[0, 1, 1], &[0, 1, 2], &[0, 1, 2]],
                (1, 1),
            ),
            Param::None,
        ),
        Variant::BadParam,
        &["not a permutation"],
    );
    reject(
        "conv specs of different lengths",
        vec![x(), k()],
        conv_ps(
            (
                base.0,
                base.1,
                base.2,
                base.3,
                [&[0, 1, 2], &[0, 1], &[0, 1, 2]],
                (1, 1),
            ),
            Param::None,
        ),
        Variant::BadParam,
        &["one length"],
    );
    reject(
        "conv preferred narrower",
        vec![x(), k()],
        conv_ps(base, Param::DType(F16)),
        Variant::BadParam,
        &["must not be narrower"],
    );
    reject(
        "conv preferred int from float",
        vec![x(), k()],
        conv_ps(base, Param::DType(I32)),
        Variant::BadParam,
        &["Input type is incompatible"],
    );
    reject(
        "conv preferred unsigned from signed",
        vec![a(I8, &[2, 4, 5]), a(I8, &[6, 4, 3])],
        conv_ps(base, Param::DType(U32)),
        Variant::BadParam,
        &["same signedness"],
    );
    reject(
        "conv dilated size overflows",
        vec![a(F32, &[1, 1, i64::MAX / 2]), a(F32, &[1, 1, 1])],
        conv_ps((base.0, base.1, &[4], base.3, id3, (1, 1)), Param::None),
        Variant::Operands,
        &["overflows"],
    );
    reject(
        "conv one operand",
        vec![x()],
        conv_ps(base, Param::None),
        Variant::Arity,
        &["2"],
    );
    reject(
        "conv missing padding",
        vec![x(), k()],
        ps([("window_strides", ints(&[1]))]),
        Variant::MissingParam,
        &["padding"],
    );
}

#[test]
fn conv_rules() {
    run(&table(conv_cases));
}

#[test]
fn sorting_rules() {
    run(&table(sorting_cases));
}

/// Window params: dimensions, strides, padding and, unless `None`, the dilations.
fn window_ps(
    dims: &[i64],
    strides: &[i64],
    padding: &[(i64, i64)],
    dilations: Option<(&[i64], &[i64])>,
    extra: Vec<(&str, Param)>,
) -> Params {
    let mut p = vec![
        ("window_dimensions", Param::ints(dims)),
        ("window_strides", Param::ints(strides)),
        ("padding", Param::Pairs(padding.to_vec().into())),
    ];
    if let Some((base, window)) = dilations {
        p.push(("base_dilation", Param::ints(base)));
        p.push(("window_dilation", Param::ints(window)));
    }
    p.extend(extra);
    Params::new(p)
}

/// A reducer of scalars: `(a, b, c, d) -> (a * c, b + d)` over f32 and i32.
fn pair_reducer() -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let ins: Vec<Atom> = [F32, I32, F32, I32]
        .iter()
        .map(|&d| Atom::Var(b.add_invar(a(d, &[]))))
        .collect();
    let p = b
        .add_eqn(Builtin::Mul.into(), vec![ins[0], ins[2]], Params::empty())
        .unwrap();
    let q = b
        .add_eqn(Builtin::Add.into(), vec![ins[1], ins[3]], Params::empty())
        .unwrap();
    let j = b.build(vec![Atom::Var(p[0]), Atom::Var(q[0])]).unwrap();
    ClosedJaxpr::new(Arc::new(j), vec![]).unwrap()
}

fn windowed_cases(t: &mut Table) {
    use Builtin::{
        ReduceWindow, ReduceWindowMax, ReduceWindowMin, ReduceWindowSum, SelectAndGatherAdd,
        SelectAndScatterAdd,
    };
    let ones: &[i64] = &[1, 1];
    // JAX 0.10.2: f32[4,5] with windows (2, 3), strides (1, 2), padding ((1, 0), (0, 1)),
    // base dilation (2, 1), window dilation (1, 2) gives f32[7,1]; weak types kept.
    let dilated = |extra| {
        window_ps(
            &[2, 3],
            &[1, 2],
            &[(1, 0), (0, 1)],
            Some((&[2, 1], &[1, 2])),
            extra,
        )
    };
    t.ok(
        "reduce_window_sum dilated",
        ReduceWindowSum,
        vec![w(a(F32, &[4, 5]))],
        dilated(vec![]),
        vec![w(a(F32, &[7, 1]))],
    );
    t.ok(
        "reduce_window_max of bool",
        ReduceWindowMax,
        vec![a(BOOL, &[3])],
        window_ps(&[2], &[1], &[(0, 0)], Some((&[1], &[1])), vec![]),
        vec![a(BOOL, &[2])],
    );
    t.ok(
        "reduce_window_min window past the end",
        ReduceWindowMin,
        vec![a(I8, &[2, 2])],
        window_ps(
            &[3, 1],
            &[1, 1],
            &[(0, 0), (-1, 0)],
            Some((ones, ones)),
            vec![],
        ),
        vec![a(I8, &[0, 1])],
    );
    t.err(
        "reduce_window_sum of bool",
        ReduceWindowSum,
        vec![a(BOOL, &[3])],
        window_ps(&[2], &[1], &[(0, 0)], Some((&[1], &[1])), vec![]),
        Variant::DType,
        &["number"],
    );
    t.err(
        "reduce_window_max rank",
        ReduceWindowMax,
        vec![a(F32, &[3, 3])],
        window_ps(&[2], &[1], &[(0, 0)], Some((&[1], &[1])), vec![]),
        Variant::BadParam,
        &["wrong number of window_dimensions"],
    );
    t.err(
        "reduce_window_min zero stride",
        ReduceWindowMin,
        vec![a(F32, &[3, 3])],
        window_ps(
            &[2, 2],
            &[1, 0],
            &[(0, 0), (0, 0)],
            Some((ones, ones)),
            vec![],
        ),
        Variant::BadParam,
        &["window_strides", "strictly positive"],
    );
    t.err(
        "reduce_window_min padding count",
        ReduceWindowMin,
        vec![a(F32, &[3, 3])],
        window_ps(&[2, 2], &[1, 1], &[(0, 0)], Some((ones, ones)), vec![]),
        Variant::BadParam,
        &["padding"],
    );
    t.err(
        "reduce_window_max no dilations",
        ReduceWindowMax,
        vec![a(F32, &[3])],
        window_ps(&[2], &[1], &[(0, 0)], None, vec![]),
        Variant::MissingParam,
        &["base_dilation"],
    );
    t.err(
        "reduce_window_sum overflow",
        ReduceWindowSum,
        vec![a(F32, &[i64::MAX / 2])],
        window_ps(&[1], &[1], &[(0, 0)], Some((&[4], &[1])), vec![]),
        Variant::Shape,
        &[],
    );
    let generic = |extra: Vec<(&'static str, Param)>| {
        let mut e = vec![
            ("jaxpr", Param::Jaxpr(pair_reducer())),
            ("consts", Param::ints(&[])),
        ];
        e.extend(extra);
        window_ps(&[2, 2], &[1, 2], &[(0, 1), (1, 0)], Some((ones, ones)), e)
    };
    t.ok(
        "reduce_window of a pair",
        ReduceWindow,
        vec![
            a(F32, &[4, 5]),
            a(I32, &[4, 5]),
            w(a(F32, &[])),
            a(I32, &[]),
        ],
        generic(vec![]),
        vec![a(F32, &[4, 3]), a(I32, &[4, 3])],
    );
    t.err(
        "reduce_window init dtype",
        ReduceWindow,
        vec![a(F32, &[4, 5]), a(I32, &[4, 5]), a(F32, &[]), a(F32, &[])],
        generic(vec![]),
        Variant::Operands,
        &["inconsistent dtypes"],
    );
    t.err(
        "reduce_window init not scalar",
        ReduceWindow,
        vec![a(F32, &[4, 5]), a(I32, &[4, 5]), a(F32, &[1]), a(I32, &[])],
        generic(vec![]),
        Variant::Operands,
        &["scalars"],
    );
    t.err(
        "reduce_window reducer types",
        ReduceWindow,
        vec![a(F32, &[4, 5]), a(F32, &[4, 5]), a(F32, &[]), a(F32, &[])],
        generic(vec![]),
        Variant::SubJaxpr,
        &["jaxpr must map"],
    );
    t.err(
        "reduce_window odd operands",
        ReduceWindow,
        vec![a(F32, &[4, 5]), a(I32, &[4, 5]), a(F32, &[])],
        generic(vec![]),
        Variant::Arity,
        &["3"],
    );
    let ge = || vec![("select_prim", Param::Str("ge".into()))];
    t.ok(
        "select_and_gather_add dilated",
        SelectAndGatherAdd,
        vec![a(F16, &[4, 5]), a(F16, &[4, 5])],
        dilated(ge()),
        vec![a(F16, &[7, 1])],
    );
    t.err(
        "select_and_gather_add of ints",
        SelectAndGatherAdd,
        vec![a(I32, &[4, 5]), a(I32, &[4, 5])],
        dilated(ge()),
        Variant::DType,
        &["float"],
    );
    t.err(
        "select_and_gather_add shapes",
        SelectAndGatherAdd,
        vec![a(F32, &[4, 4]), a(F32, &[4, 5])],
        dilated(ge()),
        Variant::Operands,
        &["shapes must match"],
    );
    t.err(
        "select_and_gather_add select_prim",
        SelectAndGatherAdd,
        vec![a(F32, &[4, 5]), a(F32, &[4, 5])],
        dilated(vec![("select_prim", Param::Str("gt".into()))]),
        Variant::BadParam,
        &["ge or le", "gt"],
    );
    let sas = |padding: &[(i64, i64)]| window_ps(&[2, 2], &[2, 2], padding, None, ge());
    t.ok(
        "select_and_scatter_add",
        SelectAndScatterAdd,
        vec![a(F32, &[2, 3]), a(F32, &[4, 5])],
        sas(&[(1, 0), (0, 1)]),
        vec![a(F32, &[4, 5])],
    );
    t.err(
        "select_and_scatter_add source shape",
        SelectAndScatterAdd,
        vec![a(F32, &[3, 3]), a(F32, &[4, 5])],
        sas(&[(1, 0), (0, 1)]),
        Variant::Operands,
        &["windowed type", "f32[2,3]"],
    );
    t.err(
        "select_and_scatter_add negative padding",
        SelectAndScatterAdd,
        vec![a(F32, &[1, 2]), a(F32, &[4, 5])],
        sas(&[(-1, 0), (0, 0)]),
        Variant::BadParam,
        &["nonnegative"],
    );
    t.err(
        "select_and_scatter_add dilation",
        SelectAndScatterAdd,
        vec![a(F32, &[2, 3]), a(F32, &[4, 5])],
        window_ps(
            &[2, 2],
            &[2, 2],
            &[(1, 0), (0, 1)],
            Some((ones, ones)),
            ge(),
        ),
        Variant::UnknownParam,
        &["base_dilation"],
    );
}

/// The logical reductions, `nextafter` and `reduce_precision` (checked against JAX
/// 0.10.2's `make_jaxpr`).
fn logical_and_precision_cases(t: &mut Table) {
    use Builtin::{Nextafter, ReduceAnd, ReduceOr, ReducePrecision, ReduceXor};
    let axes = |v: &[i64]| ps([("axes", ints(v))]);
    for p in [ReduceAnd, ReduceOr, ReduceXor] {
        t.ok(
            "bool",
            p,
            vec![a(BOOL, &[3, 2])],
            axes(&[0]),
            vec![a(BOOL, &[2])],
        );
        for d in [I8, I16, I32, I64, U8, U16, U32, U64] {
            t.ok("int", p, vec![a(d, &[3, 2])], axes(&[1]), vec![a(d, &[3])]);
        }
        t.ok(
            "all axes",
            p,
            vec![a(U8, &[2, 0, 4])],
            axes(&[2, 0, 1]),
            vec![a(U8, &[])],
        );
        t.ok(
            "no axes",
            p,
            vec![a(I32, &[3, 2])],
            axes(&[]),
            vec![a(I32, &[3, 2])],
        );
        // JAX strips the weak type (`reduce_and` of a weak int is a strong int).
        t.ok(
            "weak stripped",
            p,
            vec![w(a(I32, &[3]))],
            axes(&[0]),
            vec![a(I32, &[])],
        );
        t.ok(
            "weak scalar",
            p,
            vec![w(a(I32, &[]))],
            axes(&[]),
            vec![a(I32, &[])],
        );
        // JAX: "logical reduction requires operand dtype bool or int, got float32".
        for d in [F16, BF16, F32, F64] {
            t.err(
                "float",
                p,
                vec![a(d, &[3])],
                axes(&[0]),
                Variant::DType,
                &["operand 0 has dtype", "bool or an integer dtype"],
            );
        }
        // JAX traces these and fails to lower them (or, out of range, raises IndexError).
        t.err(
            "duplicate axis",
            p,
            vec![a(I32, &[3, 2])],
            axes(&[0, 0]),
            Variant::BadParam,
            &["param 'axes'", "axis 0 appears twice"],
        );
        t.err(
            "negative axis",
            p,
            vec![a(I32, &[3, 2])],
            axes(&[-1]),
            Variant::BadParam,
            &["axis -1 is out of range for rank 2"],
        );
        t.err(
            "axis 1 of rank 1",
            p,
            vec![a(BOOL, &[3])],
            axes(&[1]),
            Variant::BadParam,
            &["axis 1 is out of range for rank 1"],
        );
        t.err(
            "no axes",
            p,
            vec![a(BOOL, &[3])],
            no_params(),
            Variant::MissingParam,
            &["'axes'"],
        );
        // JAX 0.10's logical reductions carry no out_sharding (reduce_sum's do).
        t.err(
            "out_sharding",
            p,
            vec![a(BOOL, &[3])],
            ps([("axes", ints(&[0])), ("out_sharding", Param::None)]),
            Variant::UnknownParam,
            &["unknown param 'out_sharding'"],
        );
        t.err(
            "arity",
            p,
            vec![a(BOOL, &[3]); 2],
            axes(&[0]),
            Variant::Arity,
            &["takes 1"],
        );
    }

    // nextafter: two floats of one dtype (JAX: "nextafter does not accept dtype int32 at
    // position 0"; lax.nextafter does not promote).
    binary_common(t, Nextafter, F32, F32);
    for d in [F16, BF16, F64] {
        t.ok(
            "float",
            Nextafter,
            vec![a(d, &[2]), a(d, &[2])],
            no_params(),
            vec![a(d, &[2])],
        );
    }
    for d in [I32, U8, BOOL] {
        t.err(
            "not float",
            Nextafter,
            vec![a(d, &[2]), a(d, &[2])],
            no_params(),
            Variant::DType,
            &["operand 0 has dtype", "float"],
        );
    }
    t.err(
        "dtypes differ",
        Nextafter,
        vec![a(F32, &[3]), a(F16, &[3])],
        no_params(),
        Variant::Operands,
        &["f32 and f16 differ"],
    );

    // reduce_precision: a float, its type out (weak type kept); exponent_bits >= 1 and
    // mantissa_bits >= 0 (JAX's ValueErrors), any larger count (a no-op).
    let bits = |e: i64, m: i64| {
        ps([
            ("exponent_bits", Param::Int(e)),
            ("mantissa_bits", Param::Int(m)),
        ])
    };
    let rp = ReducePrecision;
    for d in [F16, BF16, F32, F64] {
        t.ok(
            "float",
            rp,
            vec![a(d, &[2, 3])],
            bits(5, 10),
            vec![a(d, &[2, 3])],
        );
    }
    t.ok(
        "weak kept",
        rp,
        vec![w(a(F32, &[]))],
        bits(8, 7),
        vec![w(a(F32, &[]))],
    );
    t.ok(
        "narrowest",
        rp,
        vec![a(F32, &[3])],
        bits(1, 0),
        vec![a(F32, &[3])],
    );
    t.ok(
        "wider",
        rp,
        vec![a(F16, &[3])],
        bits(20, 60),
        vec![a(F16, &[3])],
    );
    for d in [I32, U8, BOOL] {
        t.err(
            "not float",
            rp,
            vec![a(d, &[3])],
            bits(5, 10),
            Variant::DType,
            &["operand 0 has dtype", "a float dtype"],
        );
    }
    t.err(
        "no exponent bits",
        rp,
        vec![a(F32, &[3])],
        bits(0, 10),
        Variant::BadParam,
        &["param 'exponent_bits'", "must be positive; got 0"],
    );
    t.err(
        "negative mantissa bits",
        rp,
        vec![a(F32, &[3])],
        bits(5, -1),
        Variant::BadParam,
        &["param 'mantissa_bits'", "must be non-negative; got -1"],
    );
    t.err(
        "beyond i32",
        rp,
        vec![a(F32, &[3])],
        bits(1 << 31, 3),
        Variant::BadParam,
        &[
            "param 'exponent_bits'",
            "2147483648 does not fit a 32-bit integer",
        ],
    );
    t.err(
        "missing mantissa_bits",
        rp,
        vec![a(F32, &[3])],
        ps([("exponent_bits", Param::Int(5))]),
        Variant::MissingParam,
        &["'mantissa_bits'"],
    );
    t.err(
        "arity",
        rp,
        vec![],
        bits(5, 10),
        Variant::Arity,
        &["takes 1"],
    );
}

fn callback_cases(t: &mut Table) {
    use Builtin::{DebugCallback, DebugPrint, IoCallback, PureCallback};
    let f = || Param::Opaque(ferrax_ir::params::Opaque::named("f"));
    let debug = |effect: &str| ps([("callback", f()), ("effect", Param::Str(effect.into()))]);
    // Any operands, no outputs.
    let ins = vec![w(a(F32, &[])), a(I32, &[2, 3]), a(BOOL, &[0])];
    t.ok(
        "any operands",
        DebugCallback,
        ins.clone(),
        debug("Debug"),
        vec![],
    );
    t.ok(
        "no operands, ordered",
        DebugCallback,
        vec![],
        debug("OrderedDebug"),
        vec![],
    );
    t.err(
        "unknown effect",
        DebugCallback,
        vec![a(F32, &[])],
        debug("IO"),
        Variant::BadParam,
        &["effect", "Debug or OrderedDebug"],
    );
    let print = |ordered: bool| {
        let named = |s: &str| Param::Opaque(ferrax_ir::params::Opaque::named(s));
        ps([
            ("fmt", Param::Str("{} {}".into())),
            ("has_placeholders", Param::Bool(true)),
            ("in_tree", named("PyTreeDef(((*, *), {}))")),
            ("np_printoptions", named("(('precision', 8),)")),
            ("ordered", Param::Bool(ordered)),
            ("static_args", named("()")),
        ])
    };
    t.ok(
        "print: any operands",
        DebugPrint,
        vec![w(a(F32, &[])), a(I32, &[2, 3])],
        print(false),
        vec![],
    );
    t.ok(
        "print: no operands, ordered",
        DebugPrint,
        vec![],
        print(true),
        vec![],
    );
    t.err(
        "print without fmt",
        DebugPrint,
        vec![a(F32, &[])],
        ps([("ordered", Param::Bool(false))]),
        Variant::MissingParam,
        &["fmt"],
    );
    t.err(
        "no callback",
        DebugCallback,
        vec![a(F32, &[])],
        ps([("effect", Param::Str("Debug".into()))]),
        Variant::MissingParam,
        &["callback"],
    );
    // The declared results, whatever the operands.
    let results = vec![a(F32, &[3]), w(a(I32, &[]))];
    let pure = |avals: Vec<AbstractValue>| {
        ps([
            ("callback", f()),
            ("result_avals", Param::Avals(avals.into())),
        ])
    };
    t.ok(
        "declared results",
        PureCallback,
        ins,
        pure(results.clone()),
        results.clone(),
    );
    t.ok(
        "no operands, no results",
        PureCallback,
        vec![],
        pure(vec![]),
        vec![],
    );
    t.err(
        "no result_avals",
        PureCallback,
        vec![a(F32, &[])],
        ps([("callback", f())]),
        Variant::MissingParam,
        &["result_avals"],
    );
    let io = |ordered: bool, avals: Vec<AbstractValue>| {
        ps([
            ("callback", f()),
            ("ordered", Param::Bool(ordered)),
            ("result_avals", Param::Avals(avals.into())),
        ])
    };
    t.ok(
        "io results",
        IoCallback,
        vec![a(F32, &[2])],
        io(true, results.clone()),
        results.clone(),
    );
    t.ok(
        "io, no results",
        IoCallback,
        vec![a(F32, &[2])],
        io(false, vec![]),
        vec![],
    );
    t.err(
        "io without ordered",
        IoCallback,
        vec![a(F32, &[])],
        ps([
            ("callback", f()),
            ("result_avals", Param::Avals(vec![].into())),
        ]),
        Variant::MissingParam,
        &["ordered"],
    );
    t.err(
        "result_avals not avals",
        PureCallback,
        vec![a(F32, &[])],
        ps([("callback", f()), ("result_avals", Param::ints(&[3]))]),
        Variant::ParamKind,
        &["result_avals"],
    );
}

#[test]
fn callback_rules() {
    run(&table(callback_cases));
}

#[test]
fn windowed_rules() {
    run(&table(windowed_cases));
}

#[test]
fn logical_and_precision_rules() {
    run(&table(logical_and_precision_cases));
}

/// The linear-algebra primitives: float matrices (rank at least 2, leading batch
/// dimensions), JAX 0.10.2's messages.
fn linalg_cases(t: &mut Table) {
    use Builtin::{Cholesky, Lu, TriangularSolve};
    for d in [F32, F64, F16] {
        t.ok(
            "cholesky",
            Cholesky,
            vec![a(d, &[3, 3])],
            no_params(),
            vec![a(d, &[3, 3])],
        );
    }
    t.ok(
        "cholesky batched weak",
        Cholesky,
        vec![w(a(F32, &[2, 0, 0]))],
        no_params(),
        vec![w(a(F32, &[2, 0, 0]))],
    );
    t.err(
        "cholesky int",
        Cholesky,
        vec![a(I32, &[3, 3])],
        no_params(),
        Variant::DType,
        &["float"],
    );
    t.err(
        "cholesky vector",
        Cholesky,
        vec![a(F32, &[3])],
        no_params(),
        Variant::Operands,
        &["Input 0 to cholesky must have rank at least 2, but got shape=(3,)"],
    );
    t.err(
        "cholesky not square",
        Cholesky,
        vec![a(F32, &[2, 3])],
        no_params(),
        Variant::Operands,
        &["The input to cholesky must be a square matrix. Got shape (2, 3)."],
    );
    t.err(
        "cholesky two operands",
        Cholesky,
        vec![a(F32, &[2, 2]); 2],
        no_params(),
        Variant::Arity,
        &[],
    );
    let ts = |left: bool| {
        ps([
            ("left_side", Param::Bool(left)),
            ("lower", Param::Bool(true)),
            ("transpose_a", Param::Bool(false)),
            ("conjugate_a", Param::Bool(false)),
            ("unit_diagonal", Param::Bool(false)),
        ])
    };
    t.ok(
        "solve left",
        TriangularSolve,
        vec![a(F32, &[3, 3]), a(F32, &[3, 5])],
        ts(true),
        vec![a(F32, &[3, 5])],
    );
    t.ok(
        "solve right",
        TriangularSolve,
        vec![a(F64, &[2, 3, 3]), a(F64, &[2, 5, 3])],
        ts(false),
        vec![a(F64, &[2, 5, 3])],
    );
    t.ok(
        "solve weak",
        TriangularSolve,
        vec![w(a(F32, &[1, 1])), w(a(F32, &[1, 1]))],
        ts(false),
        vec![w(a(F32, &[1, 1]))],
    );
    t.ok(
        "solve half weak",
        TriangularSolve,
        vec![w(a(F32, &[1, 1])), a(F32, &[1, 1])],
        ts(false),
        vec![a(F32, &[1, 1])],
    );
    t.err(
        "solve shapes",
        TriangularSolve,
        vec![a(F32, &[3, 3]), a(F32, &[2, 3])],
        ts(true),
        Variant::Operands,
        &["Incompatible shapes for arguments to triangular_solve: (3, 3) and (2, 3)."],
    );
    t.err(
        "solve batch dims",
        TriangularSolve,
        vec![a(F32, &[3, 3]), a(F32, &[2, 3, 3])],
        ts(true),
        Variant::Operands,
        &["same number of batch dimensions, but got [0, 1]"],
    );
    t.err(
        "solve batch sizes",
        TriangularSolve,
        vec![a(F32, &[2, 3, 3]), a(F32, &[4, 3, 3])],
        ts(true),
        Variant::Operands,
        &["Incompatible shapes"],
    );
    t.err(
        "solve not square",
        TriangularSolve,
        vec![a(F32, &[3, 4]), a(F32, &[3, 3])],
        ts(false),
        Variant::Operands,
        &["The first input to triangular_solve must be a square matrix. Got shape (3, 4)."],
    );
    t.err(
        "solve dtypes",
        TriangularSolve,
        vec![a(F32, &[3, 3]), a(F16, &[3, 3])],
        ts(true),
        Variant::Operands,
        &["same dtypes, got float32, float16"],
    );
    t.err(
        "solve int",
        TriangularSolve,
        vec![a(I32, &[3, 3]); 2],
        ts(true),
        Variant::DType,
        &["float"],
    );
    t.err(
        "solve missing flag",
        TriangularSolve,
        vec![a(F32, &[3, 3]); 2],
        ps([("left_side", Param::Bool(true))]),
        Variant::MissingParam,
        &["lower"],
    );
    t.ok(
        "lu wide",
        Lu,
        vec![a(F32, &[2, 3, 5])],
        no_params(),
        vec![a(F32, &[2, 3, 5]), a(I32, &[2, 3]), a(I32, &[2, 3])],
    );
    t.ok(
        "lu tall weak",
        Lu,
        vec![w(a(F64, &[4, 2]))],
        no_params(),
        vec![w(a(F64, &[4, 2])), w(a(I32, &[2])), w(a(I32, &[4]))],
    );
    t.err(
        "lu int",
        Lu,
        vec![a(I32, &[3, 3])],
        no_params(),
        Variant::DType,
        &["float"],
    );
    let eh = || {
        ps([
            ("lower", Param::Bool(true)),
            ("sort_eigenvalues", Param::Bool(true)),
            ("subset_by_index", Param::None),
            ("algorithm", Param::None),
        ])
    };
    t.ok(
        "eigh",
        Builtin::Eigh,
        vec![a(F64, &[2, 3, 3])],
        eh(),
        vec![a(F64, &[2, 3, 3]), a(F64, &[2, 3])],
    );
    t.ok(
        "eigh weak",
        Builtin::Eigh,
        vec![w(a(F32, &[1, 1]))],
        eh(),
        vec![w(a(F32, &[1, 1])), w(a(F32, &[1]))],
    );
    t.err(
        "eigh not square",
        Builtin::Eigh,
        vec![a(F32, &[2, 3])],
        eh(),
        Variant::Operands,
        &["must have shape [..., n, n], got shape (2, 3)"],
    );
    t.err(
        "eigh int",
        Builtin::Eigh,
        vec![a(I8, &[2, 2])],
        eh(),
        Variant::DType,
        &["float"],
    );
    t.err(
        "eigh subset",
        Builtin::Eigh,
        vec![a(F32, &[2, 2])],
        ps([
            ("lower", Param::Bool(true)),
            ("sort_eigenvalues", Param::Bool(true)),
            ("subset_by_index", Param::ints(&[0, 1])),
        ]),
        Variant::ParamKind,
        &["subset_by_index"],
    );
    let qp = |full: bool| {
        ps([
            ("full_matrices", Param::Bool(full)),
            ("pivoting", Param::Bool(false)),
            ("use_magma", Param::None),
        ])
    };
    t.ok(
        "qr tall reduced",
        Builtin::Qr,
        vec![a(F32, &[2, 4, 3])],
        qp(false),
        vec![a(F32, &[2, 4, 3]), a(F32, &[2, 3, 3])],
    );
    t.ok(
        "qr tall full",
        Builtin::Qr,
        vec![a(F32, &[2, 4, 3])],
        qp(true),
        vec![a(F32, &[2, 4, 4]), a(F32, &[2, 4, 3])],
    );
    t.ok(
        "qr wide weak",
        Builtin::Qr,
        vec![w(a(F64, &[2, 5]))],
        qp(false),
        vec![w(a(F64, &[2, 2])), w(a(F64, &[2, 5]))],
    );
    t.ok(
        "qr empty",
        Builtin::Qr,
        vec![a(F32, &[3, 0])],
        qp(true),
        vec![a(F32, &[3, 3]), a(F32, &[3, 0])],
    );
    t.err(
        "qr vector",
        Builtin::Qr,
        vec![a(F32, &[3])],
        qp(false),
        Variant::Operands,
        &["Input 0 to qr must have rank at least 2, but got shape=(3,)"],
    );
    t.err(
        "qr int",
        Builtin::Qr,
        vec![a(I32, &[2, 2])],
        qp(false),
        Variant::DType,
        &["float"],
    );
    t.ok(
        "qr pivoting",
        Builtin::Qr,
        vec![a(F32, &[2, 4, 3])],
        ps([
            ("full_matrices", Param::Bool(false)),
            ("pivoting", Param::Bool(true)),
            ("use_magma", Param::None),
        ]),
        vec![a(F32, &[2, 4, 3]), a(F32, &[2, 3, 3]), a(I32, &[2, 3])],
    );
    let magma = || ps([("use_magma", Param::None)]);
    t.ok(
        "geqp3 batched",
        Builtin::Geqp3,
        vec![a(F32, &[2, 4, 3]), a(I32, &[2, 3])],
        magma(),
        vec![a(F32, &[2, 4, 3]), a(I32, &[2, 3]), a(F32, &[2, 3])],
    );
    t.ok(
        "geqp3 wide",
        Builtin::Geqp3,
        vec![a(F64, &[2, 5]), a(I32, &[5])],
        magma(),
        vec![a(F64, &[2, 5]), a(I32, &[5]), a(F64, &[2])],
    );
    t.err(
        "geqp3 float pivots",
        Builtin::Geqp3,
        vec![a(F32, &[3, 2]), a(F32, &[2])],
        magma(),
        Variant::DType,
        &["integer"],
    );
    t.err(
        "geqp3 pivots of the rows",
        Builtin::Geqp3,
        vec![a(F32, &[3, 2]), a(I32, &[3])],
        magma(),
        Variant::Operands,
        &["[..., n]", "(3, 2) and (3,)"],
    );
    t.err(
        "geqp3 scalar pivots",
        Builtin::Geqp3,
        vec![a(F32, &[3, 2]), a(I32, &[])],
        magma(),
        Variant::Operands,
        &["Input 1 to geqp3 must have rank at least 1"],
    );
    t.err(
        "geqp3 batch count",
        Builtin::Geqp3,
        vec![a(F32, &[2, 3, 2]), a(I32, &[2])],
        magma(),
        Variant::Operands,
        &["but got [1, 0] batch dimensions"],
    );
    t.ok(
        "geqrf tall batched",
        Builtin::Geqrf,
        vec![a(F32, &[2, 4, 3])],
        ps([]),
        vec![a(F32, &[2, 4, 3]), a(F32, &[2, 3])],
    );
    t.ok(
        "geqrf wide weak",
        Builtin::Geqrf,
        vec![w(a(F64, &[2, 5]))],
        ps([]),
        vec![w(a(F64, &[2, 5])), w(a(F64, &[2]))],
    );
    t.ok(
        "geqrf empty",
        Builtin::Geqrf,
        vec![a(F32, &[0, 3])],
        ps([]),
        vec![a(F32, &[0, 3]), a(F32, &[0])],
    );
    t.err(
        "geqrf vector",
        Builtin::Geqrf,
        vec![a(F32, &[3])],
        ps([]),
        Variant::Operands,
        &["Input 0 to geqrf must have rank at least 2, but got shape=(3,)"],
    );
    t.err(
        "geqrf int",
        Builtin::Geqrf,
        vec![a(I32, &[2, 2])],
        ps([]),
        Variant::DType,
        &["float"],
    );
    t.ok(
        "householder_product batched",
        Builtin::HouseholderProduct,
        vec![a(F32, &[2, 4, 3]), a(F32, &[2, 2])],
        ps([]),
        vec![a(F32, &[2, 4, 3])],
    );
    t.ok(
        "householder_product weak only if both are",
        Builtin::HouseholderProduct,
        vec![w(a(F64, &[3, 3])), a(F64, &[3])],
        ps([]),
        vec![a(F64, &[3, 3])],
    );
    t.err(
        "householder_product wide",
        Builtin::HouseholderProduct,
        vec![a(F32, &[2, 3]), a(F32, &[2])],
        ps([]),
        Variant::Operands,
        &["at least as many rows as columns, got shape (2, 3)"],
    );
    t.err(
        "householder_product too many taus",
        Builtin::HouseholderProduct,
        vec![a(F32, &[3, 2]), a(F32, &[3])],
        ps([]),
        Variant::Operands,
        &["must not have more rows than the minimum"],
    );
    t.err(
        "householder_product batch count",
        Builtin::HouseholderProduct,
        vec![a(F32, &[2, 3, 2]), a(F32, &[2])],
        ps([]),
        Variant::Operands,
        &["but got [1, 0] batch dimensions"],
    );
    t.err(
        "householder_product batch dims",
        Builtin::HouseholderProduct,
        vec![a(F32, &[2, 3, 2]), a(F32, &[3, 2])],
        ps([]),
        Variant::Operands,
        &["same batch dimensions, got shapes (2, 3, 2) and (3, 2)"],
    );
    t.err(
        "householder_product scalar taus",
        Builtin::HouseholderProduct,
        vec![a(F32, &[3, 2]), a(F32, &[])],
        ps([]),
        Variant::Operands,
        &["Input 1 to householder_product must have rank at least 1, but got shape=()"],
    );
    t.err(
        "householder_product mixed dtypes",
        Builtin::HouseholderProduct,
        vec![a(F32, &[3, 2]), a(F64, &[2])],
        ps([]),
        Variant::Operands,
        &["same dtypes, got float32, float64"],
    );
    t.err(
        "householder_product int taus",
        Builtin::HouseholderProduct,
        vec![a(F32, &[3, 2]), a(I32, &[2])],
        ps([]),
        Variant::DType,
        &["float"],
    );
    let sp = |full: bool, uv: bool| {
        ps([
            ("full_matrices", Param::Bool(full)),
            ("compute_uv", Param::Bool(uv)),
            ("subset_by_index", Param::None),
            ("algorithm", Param::None),
        ])
    };
    t.ok(
        "svd tall full",
        Builtin::Svd,
        vec![a(F32, &[2, 4, 3])],
        sp(true, true),
        vec![a(F32, &[2, 3]), a(F32, &[2, 4, 4]), a(F32, &[2, 3, 3])],
    );
    t.ok(
        "svd wide reduced weak",
        Builtin::Svd,
        vec![w(a(F64, &[2, 5]))],
        sp(false, true),
        vec![w(a(F64, &[2])), w(a(F64, &[2, 2])), w(a(F64, &[2, 5]))],
    );
    t.ok(
        "svd values only",
        Builtin::Svd,
        vec![a(F32, &[3, 0])],
        sp(true, false),
        vec![a(F32, &[0])],
    );
    t.err(
        "svd vector",
        Builtin::Svd,
        vec![a(F32, &[3])],
        sp(false, true),
        Variant::Operands,
        &["Input 0 to svd must have rank at least 2, but got shape=(3,)"],
    );
    t.err(
        "svd int",
        Builtin::Svd,
        vec![a(I32, &[2, 2])],
        sp(false, true),
        Variant::DType,
        &["float"],
    );
    t.err(
        "lu scalar",
        Lu,
        vec![a(F32, &[])],
        no_params(),
        Variant::Operands,
        &["Input 0 to lu must have rank at least 2, but got shape=()"],
    );
}

#[test]
fn linalg_rules() {
    run(&table(linalg_cases));
}

const FAMILIES: [fn(&mut Table); 22] = [
    linalg_cases,
    callback_cases,
    conv_cases,
    windowed_cases,
    logical_and_precision_cases,
    bit_cases,
    special_function_cases,
    sorting_cases,
    collective_cases,
    sharding_cases,
    unary_cases,
    binary_cases,
    select_clamp_convert_cases,
    reduction_cases,
    shape_cases,
    dynamic_cases,
    dot_cases,
    iota_cases,
    higher_order_cases,
    indexing_cases,
    random_cases,
    igamma_cases,
];

// ---------------------------------------------------------------------------------------
// Typed PRNG keys: the random primitives, checked with jax._src.random.prng's primitives
// bound on key<fry> arrays in JAX 0.10.2, and keys through the primitives JAX refuses or
// allows on them.

const KEY: DType = DType::KeyFry;

fn random_cases(t: &mut Table) {
    let fry = || ps([("impl", Param::Str("fry".into()))]);
    t.ok(
        "random_seed i32",
        Builtin::RandomSeed,
        vec![a(I32, &[])],
        fry(),
        vec![a(KEY, &[])],
    );
    t.ok(
        "random_seed u64 batch, weak dropped",
        Builtin::RandomSeed,
        vec![w(a(U64, &[2, 3]))],
        fry(),
        vec![a(KEY, &[2, 3])],
    );
    t.err(
        "random_seed float",
        Builtin::RandomSeed,
        vec![a(F32, &[])],
        fry(),
        Variant::DType,
        &["PRNG key seed must be an integer"],
    );
    t.err(
        "random_seed rbg",
        Builtin::RandomSeed,
        vec![a(I32, &[])],
        ps([("impl", Param::Str("rbg".into()))]),
        Variant::BadParam,
        &["PRNG implementation 'rbg'"],
    );
    t.ok(
        "random_wrap",
        Builtin::RandomWrap,
        vec![a(U32, &[3, 2])],
        fry(),
        vec![a(KEY, &[3])],
    );
    t.ok(
        "random_wrap one",
        Builtin::RandomWrap,
        vec![a(U32, &[2])],
        fry(),
        vec![a(KEY, &[])],
    );
    t.err(
        "random_wrap scalar",
        Builtin::RandomWrap,
        vec![a(U32, &[])],
        fry(),
        Variant::Operands,
        &["expected key_data.ndim >= 1; got ndim=0"],
    );
    t.err(
        "random_wrap last dim",
        Builtin::RandomWrap,
        vec![a(U32, &[2, 3])],
        fry(),
        Variant::Operands,
        &["expected key_data.shape to end with (2,); got shape=(2, 3)"],
    );
    t.err(
        "random_wrap int32 data",
        Builtin::RandomWrap,
        vec![a(I32, &[2])],
        fry(),
        Variant::DType,
        &["expected key_data.dtype = uint32"],
    );
    t.ok(
        "random_unwrap",
        Builtin::RandomUnwrap,
        vec![a(KEY, &[4, 1])],
        no_params(),
        vec![a(U32, &[4, 1, 2])],
    );
    t.err(
        "random_unwrap of data",
        Builtin::RandomUnwrap,
        vec![a(U32, &[2])],
        no_params(),
        Variant::DType,
        &["key array"],
    );
    let bits =
        |width: i64, shape: &[i64]| ps([("bit_width", Param::Int(width)), ("shape", ints(shape))]);
    t.ok(
        "random_bits u8",
        Builtin::RandomBits,
        vec![a(KEY, &[3])],
        bits(8, &[4]),
        vec![a(U8, &[3, 4])],
    );
    t.ok(
        "random_bits u16",
        Builtin::RandomBits,
        vec![a(KEY, &[])],
        bits(16, &[2, 0]),
        vec![a(U16, &[2, 0])],
    );
    t.ok(
        "random_bits u64",
        Builtin::RandomBits,
        vec![a(KEY, &[2])],
        bits(64, &[]),
        vec![a(U64, &[2])],
    );
    t.err(
        "random_bits width",
        Builtin::RandomBits,
        vec![a(KEY, &[])],
        bits(12, &[2]),
        Variant::BadParam,
        &["requires 8-, 16-, 32- or 64-bit field width"],
    );
    t.err(
        "random_bits of data",
        Builtin::RandomBits,
        vec![a(U32, &[2])],
        bits(32, &[2]),
        Variant::DType,
        &["key array"],
    );
    t.err(
        "random_bits negative shape",
        Builtin::RandomBits,
        vec![a(KEY, &[])],
        bits(32, &[-1]),
        Variant::BadParam,
        &["negative"],
    );
    let shape = |s: &[i64]| ps([("shape", ints(s))]);
    t.ok(
        "random_split",
        Builtin::RandomSplit,
        vec![a(KEY, &[])],
        shape(&[2]),
        vec![a(KEY, &[2])],
    );
    t.ok(
        "random_split batch",
        Builtin::RandomSplit,
        vec![a(KEY, &[3])],
        shape(&[2, 3]),
        vec![a(KEY, &[3, 2, 3])],
    );
    t.err(
        "random_split of data",
        Builtin::RandomSplit,
        vec![a(U32, &[2])],
        shape(&[2]),
        Variant::DType,
        &["key array"],
    );
    t.ok(
        "random_fold_in",
        Builtin::RandomFoldIn,
        vec![a(KEY, &[3]), a(U32, &[])],
        no_params(),
        vec![a(KEY, &[3])],
    );
    t.ok(
        "random_fold_in int32 broadcast",
        Builtin::RandomFoldIn,
        vec![a(KEY, &[3, 1]), a(I32, &[1, 4])],
        no_params(),
        vec![a(KEY, &[3, 4])],
    );
    t.err(
        "random_fold_in shapes",
        Builtin::RandomFoldIn,
        vec![a(KEY, &[3]), a(U32, &[2])],
        no_params(),
        Variant::Operands,
        &["random_fold_in got incompatible shapes for broadcasting: (3,), (2,)"],
    );
    t.err(
        "random_fold_in float message",
        Builtin::RandomFoldIn,
        vec![a(KEY, &[]), a(F32, &[])],
        no_params(),
        Variant::DType,
        &["integer"],
    );
    t.ok(
        "random_clone",
        Builtin::RandomClone,
        vec![a(KEY, &[2])],
        no_params(),
        vec![a(KEY, &[2])],
    );
    t.err(
        "random_clone arity",
        Builtin::RandomClone,
        vec![],
        no_params(),
        Variant::Arity,
        &["1"],
    );
    // Keys through other primitives: JAX refuses arithmetic, comparisons' siblings and
    // conversions ("add does not accept dtype key<fry>"), allows the structural ones.
    for prim in [
        Builtin::Add,
        Builtin::Max,
        Builtin::Neg,
        Builtin::ReduceMax,
        Builtin::Sort,
    ] {
        let ins = match prim {
            Builtin::Add | Builtin::Max => vec![a(KEY, &[2]), a(KEY, &[2])],
            _ => vec![a(KEY, &[2])],
        };
        let params = match prim {
            Builtin::ReduceMax => ps([("axes", ints(&[0]))]),
            Builtin::Sort => ps([
                ("dimension", Param::Int(0)),
                ("is_stable", Param::Bool(true)),
                ("num_keys", Param::Int(1)),
            ]),
            _ => no_params(),
        };
        t.err(
            &format!("{} of keys", prim.name()),
            prim,
            ins,
            params,
            Variant::DType,
            &["dtype key<fry>", "does not accept key arrays"],
        );
    }
    t.err(
        "convert_element_type of keys",
        Builtin::ConvertElementType,
        vec![a(KEY, &[])],
        ps([
            ("new_dtype", Param::DType(U32)),
            ("weak_type", Param::Bool(false)),
        ]),
        Variant::DType,
        &["key<fry>"],
    );
    t.err(
        "convert_element_type to keys",
        Builtin::ConvertElementType,
        vec![a(U32, &[])],
        ps([
            ("new_dtype", Param::DType(KEY)),
            ("weak_type", Param::Bool(false)),
        ]),
        Variant::BadParam,
        &["not a numeric dtype"],
    );
    t.err(
        "iota of keys",
        Builtin::Iota,
        vec![],
        ps([
            ("dtype", Param::DType(KEY)),
            ("shape", ints(&[2])),
            ("dimension", Param::Int(0)),
        ]),
        Variant::BadParam,
        &["not a numeric dtype"],
    );
    t.ok(
        "eq of keys (JAX binds eq on key arrays)",
        Builtin::Eq,
        vec![a(KEY, &[2, 3]), a(KEY, &[])],
        no_params(),
        vec![a(BOOL, &[2, 3])],
    );
    t.err(
        "lt of keys",
        Builtin::Lt,
        vec![a(KEY, &[2]), a(KEY, &[2])],
        no_params(),
        Variant::DType,
        &["does not accept key arrays"],
    );
    t.ok(
        "transpose of keys",
        Builtin::Transpose,
        vec![a(KEY, &[2, 3])],
        ps([("permutation", ints(&[1, 0]))]),
        vec![a(KEY, &[3, 2])],
    );
    t.ok(
        "select_n of keys",
        Builtin::SelectN,
        vec![a(BOOL, &[2]), a(KEY, &[2]), a(KEY, &[2])],
        no_params(),
        vec![a(KEY, &[2])],
    );
    t.err(
        "select_n keyed predicate",
        Builtin::SelectN,
        vec![a(KEY, &[2]), a(KEY, &[2]), a(KEY, &[2])],
        no_params(),
        Variant::DType,
        &["bool or an integer dtype"],
    );
}

#[test]
fn random_rules() {
    run(&table(random_cases));
}

#[test]
fn every_builtin_has_accepting_and_rejecting_cases() {
    let mut counts: HashMap<Builtin, (usize, usize)> = HashMap::new();
    for fill in FAMILIES {
        for c in table(fill) {
            let e = counts.entry(c.prim).or_default();
            match c.expect {
                Expect::Accept(_) => e.0 += 1,
                Expect::Reject(..) => e.1 += 1,
            }
        }
    }
    let mut missing = Vec::new();
    for &p in Builtin::ALL {
        let (ok, err) = counts.get(&p).copied().unwrap_or_default();
        if ok == 0 || err == 0 {
            missing.push(format!("{} ({ok} accepting, {err} rejecting)", p.name()));
        }
    }
    assert!(missing.is_empty(), "uncovered: {}", missing.join(", "));
    assert_eq!(counts.len(), Builtin::ALL.len());
}

#[test]
fn unary_rules() {
    run(&table(unary_cases));
}

#[test]
fn binary_rules() {
    run(&table(binary_cases));
}

#[test]
fn select_clamp_convert_rules() {
    run(&table(select_clamp_convert_cases));
}

#[test]
fn reduction_rules() {
    run(&table(reduction_cases));
}

#[test]
fn shape_rules() {
    run(&table(shape_cases));
}

#[test]
fn dynamic_slice_rules() {
    run(&table(dynamic_cases));
}

#[test]
fn dot_general_rules() {
    run(&table(dot_cases));
}

#[test]
fn iota_rules() {
    run(&table(iota_cases));
}

#[test]
fn collective_rules() {
    run(&table(collective_cases));
}

#[test]
fn sharding_rules() {
    run(&table(sharding_cases));
}

#[test]
fn higher_order_rules() {
    run(&table(higher_order_cases));
}

// ---------------------------------------------------------------------------------------
// Error fields, matched directly.

#[test]
fn dtype_errors_name_the_operand_and_its_dtype() {
    let e = Builtin::Sin
        .abstract_eval(&[a(I32, &[3])], &no_params())
        .unwrap_err();
    match &e {
        RuleError::DType {
            operand,
            got,
            expected,
        } => {
            assert_eq!((*operand, *got), (0, I32));
            assert_eq!(expected, "a float dtype");
        }
        other => panic!("not a dtype error: {other:?}"),
    }
    assert_eq!(
        e.to_string(),
        "operand 0 has dtype i32; expected a float dtype"
    );

    let e = Builtin::Pow
        .abstract_eval(&[a(F32, &[]), a(BOOL, &[])], &no_params())
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuleError::DType {
                operand: 1,
                got: DType::Bool,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn arity_errors_say_what_the_primitive_takes() {
    let e = Builtin::Add
        .abstract_eval(&[a(F32, &[])], &no_params())
        .unwrap_err();
    assert_eq!(
        e,
        RuleError::Arity {
            expected: "2".into(),
            got: 1
        }
    );
    assert_eq!(e.to_string(), "takes 2 operands but was given 1");
    let e = Builtin::SelectN
        .abstract_eval(&[], &no_params())
        .unwrap_err();
    assert_eq!(
        e,
        RuleError::Arity {
            expected: "at least 2".into(),
            got: 0
        }
    );
}

#[test]
fn shape_overflow_is_a_shape_error() {
    let e = Builtin::BroadcastInDim
        .abstract_eval(
            &[a(F32, &[])],
            &ps([
                ("shape", ints(&[1 << 40, 1 << 40])),
                ("broadcast_dimensions", ints(&[])),
            ]),
        )
        .unwrap_err();
    assert_eq!(e, RuleError::Shape(ShapeError::Overflow));
    assert_eq!(
        e.to_string(),
        "output shape: the product of the nonzero dimensions overflows i64"
    );

    let e = Builtin::Iota
        .abstract_eval(
            &[],
            &ps([
                ("dtype", Param::DType(I32)),
                ("shape", ints(&[1 << 32, 1 << 32])),
                ("dimension", Param::Int(0)),
            ]),
        )
        .unwrap_err();
    assert_eq!(e, RuleError::Shape(ShapeError::Overflow));

    let e = Builtin::Reshape
        .abstract_eval(&[a(F32, &[6])], &ps([("new_sizes", ints(&[3, -2]))]))
        .unwrap_err();
    assert_eq!(
        e,
        RuleError::Shape(ShapeError::NegativeDim { axis: 1, size: -2 })
    );

    // A zero dimension does not excuse the others overflowing, in any order (XLA aborts
    // the process on `[2^40, 2^40, 0]`).
    for dims in [[0, 1 << 40, 1 << 40], [1 << 40, 1 << 40, 0]] {
        let e = Builtin::BroadcastInDim
            .abstract_eval(
                &[a(F32, &[])],
                &ps([("shape", ints(&dims)), ("broadcast_dimensions", ints(&[]))]),
            )
            .unwrap_err();
        assert_eq!(e, RuleError::Shape(ShapeError::Overflow));
    }
    for dims in [[0, 1 << 40, 1 << 20], [1 << 40, 1 << 20, 0]] {
        let outs = Builtin::BroadcastInDim
            .abstract_eval(
                &[a(F32, &[])],
                &ps([("shape", ints(&dims)), ("broadcast_dimensions", ints(&[]))]),
            )
            .unwrap();
        assert_eq!(outs, vec![a(F32, &dims)]);
    }
}

// ---------------------------------------------------------------------------------------
// The params schema, over the whole catalogue.

/// A value of a kind other than `kind`.
fn wrong_value(kind: ParamKind) -> Param {
    match kind {
        ParamKind::Int | ParamKind::IntOrBool | ParamKind::OptScalar => Param::Str("x".into()),
        _ => Param::Int(7),
    }
}

#[test]
fn missing_required_params_are_reported_by_name() {
    for &p in Builtin::ALL {
        let Some(first) = p.param_specs().iter().find(|s| s.required) else {
            continue;
        };
        let e = p.abstract_eval(&[], &no_params()).unwrap_err();
        match &e {
            RuleError::MissingParam { name } => assert_eq!(*name, first.name, "{}", p.name()),
            other => panic!("{}: {other:?} is not MissingParam", p.name()),
        }
        assert_eq!(e.to_string(), format!("missing param '{}'", first.name));
    }
}

#[test]
fn unknown_params_are_rejected_everywhere() {
    for &p in Builtin::ALL {
        let e = p
            .abstract_eval(&[], &ps([("bogus_param", Param::None)]))
            .unwrap_err();
        match &e {
            RuleError::UnknownParam { name } => assert_eq!(name, "bogus_param"),
            other => panic!("{}: {other:?} is not UnknownParam", p.name()),
        }
        assert_eq!(e.to_string(), "unknown param 'bogus_param'");
    }
}

#[test]
fn params_of_the_wrong_kind_are_rejected_everywhere() {
    let mut checked = 0;
    for &p in Builtin::ALL {
        for spec in p.param_specs() {
            let value = wrong_value(spec.kind);
            let got = value.kind_name();
            let e = p.abstract_eval(&[], &ps([(spec.name, value)])).unwrap_err();
            match &e {
                RuleError::ParamKind {
                    name,
                    expected,
                    got: g,
                } => {
                    assert_eq!(name, spec.name);
                    assert_eq!(*expected, spec.kind);
                    assert_eq!(*g, got);
                }
                other => panic!("{} {}: {other:?} is not ParamKind", p.name(), spec.name),
            }
            assert_eq!(
                e.to_string(),
                format!("param '{}' must be a {}, got a {got}", spec.name, spec.kind)
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} params in the catalogue?");
}

#[test]
fn axes_given_as_an_int_is_a_param_kind_error() {
    let e = Builtin::ReduceSum
        .abstract_eval(&[a(F32, &[3])], &ps([("axes", Param::Int(0))]))
        .unwrap_err();
    assert_eq!(
        e,
        RuleError::ParamKind {
            name: "axes".into(),
            expected: ParamKind::Ints,
            got: "int"
        }
    );
}

#[test]
fn empty_tuples_fit_either_tuple_kind() {
    // `()` reads the same whether the schema wants ints or bools.
    let outs = Builtin::ReduceSum
        .abstract_eval(
            &[a(F32, &[3])],
            &ps([("axes", Param::Bools(Arc::from(vec![])))]),
        )
        .unwrap();
    assert_eq!(outs, vec![a(F32, &[3])]);
    let body = closed(&[a(F32, &[])], |_, x| vec![x[0]]);
    let outs = Builtin::Scan
        .abstract_eval(
            &[],
            &scan_params(&body, 3, 0, 0).with("linear", Param::ints(&[])),
        )
        .unwrap_err();
    // No operands but a body taking one: the schema accepted `linear=()`.
    assert!(matches!(outs, RuleError::SubJaxpr { .. }), "{outs:?}");
}

/// igamma, igammac, igamma_grad_a: two floats of one dtype, as atan2 (JAX's
/// `standard_naryop([_float, _float])`: "igamma does not accept dtype int32 at position
/// 0", "lax.igamma requires arguments to have the same dtypes, got float16, float32").
fn igamma_cases(t: &mut Table) {
    use Builtin::{Igamma, IgammaGradA, Igammac};
    for p in [Igamma, Igammac, IgammaGradA] {
        binary_common(t, p, F32, F32);
        for d in [F16, BF16, F64] {
            t.ok(
                "float",
                p,
                vec![a(d, &[2]), a(d, &[2])],
                no_params(),
                vec![a(d, &[2])],
            );
        }
        t.ok(
            "weak operands, weak result",
            p,
            vec![w(a(F32, &[])), w(a(F32, &[]))],
            no_params(),
            vec![w(a(F32, &[]))],
        );
        for d in [I32, U8, BOOL] {
            t.err(
                "not float",
                p,
                vec![a(d, &[2]), a(d, &[2])],
                no_params(),
                Variant::DType,
                &["operand 0 has dtype", "float"],
            );
        }
        t.err(
            "dtypes differ",
            p,
            vec![a(F16, &[2]), a(F32, &[2])],
            no_params(),
            Variant::Operands,
            &["f16 and f32 differ"],
        );
    }
}

#[test]
fn igamma_rules() {
    run(&table(igamma_cases));
}

#[test]
fn every_family_is_unary_binary_a_comparison_or_special() {
    use ferrax_ir::primitive::Family;
    for &b in Builtin::ALL {
        let f = b.family();
        let kinds = [
            f.is_unary(),
            f.is_binary(),
            f == Family::Comparison,
            f == Family::Special,
        ];
        assert_eq!(
            kinds.iter().filter(|&&k| k).count(),
            1,
            "{}: {f:?}",
            b.name()
        );
        // The element-wise families are what their names say.
        let name = format!("{f:?}");
        assert_eq!(f.is_unary(), name.starts_with("Unary"), "{name}");
        assert_eq!(f.is_binary(), name.starts_with("Binary"), "{name}");
    }
}
