//! Every `TypeError` variant, produced through the public API, with its message; the
//! typechecker on deep nests; `Shape::new`'s errors.
//!
//! Messages are checked through `TypeError`'s `Display`, which prints equation sites
//! itself, naming variables as the printed jaxpr text does (`a`, `b`, ... as the printer
//! gives them, `_` for an output nothing uses; see `tests/typecheck_names.rs`).

use ferrax_ir::{
    typecheck, AbstractValue, Atom, Builtin, ClosedJaxpr, DType, ExtensionPrimitive, Jaxpr,
    JaxprBuilder, LitId, LitValue, Literal, Param, Params, Primitive, RuleError, Shape, ShapeError,
    Site, TypeError, VarId,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn a(dtype: DType, dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap(), dtype)
}

fn f32s(dims: &[i64]) -> AbstractValue {
    a(DType::F32, dims)
}

fn v(x: VarId) -> Atom {
    Atom::Var(x)
}

fn prim(p: Builtin) -> Primitive {
    p.into()
}

fn op(b: &mut JaxprBuilder, p: Builtin, ins: &[Atom]) -> VarId {
    b.add_eqn(prim(p), ins.to_vec(), Params::empty()).unwrap()[0]
}

fn jit_params(j: ClosedJaxpr) -> Params {
    Params::new([("jaxpr", Param::Jaxpr(j))])
}

fn close(j: Jaxpr) -> ClosedJaxpr {
    ClosedJaxpr::new(Arc::new(j), vec![]).unwrap()
}

fn lit(b: &mut JaxprBuilder, value: LitValue, dtype: DType) -> Atom {
    b.literal(Literal {
        value,
        dtype,
        weak_type: false,
    })
}

fn eqn_site(index: usize, line: &str) -> Site {
    Site::Eqn {
        index,
        line: line.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------
// VarOutOfRange.

#[test]
fn var_out_of_range_in_add_eqn() {
    let mut b = JaxprBuilder::new();
    b.add_invar(f32s(&[3]));
    let e = b
        .add_eqn(
            prim(Builtin::Sin),
            vec![v(VarId::from_index(999))],
            Params::empty(),
        )
        .unwrap_err();
    assert_eq!(
        e,
        TypeError::VarOutOfRange {
            site: eqn_site(0, "sin ..."),
            var: 999,
            num_vars: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'sin ...': variable id 999 is not one of this jaxpr's 1 variables"
    );
}

#[test]
fn var_out_of_range_as_an_operand_at_build() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    op(&mut b, Builtin::Cos, &[v(x)]);
    let y = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(
        prim(Builtin::Sin),
        vec![v(VarId::from_index(999))],
        Params::empty(),
        vec![y],
    );
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::VarOutOfRange {
            site: eqn_site(1, "b:f32[3] = sin v999"),
            var: 999,
            num_vars: 3
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 1 'b:f32[3] = sin v999': variable id 999 is not one of this jaxpr's 3 variables"
    );
}

#[test]
fn var_out_of_range_as_an_equation_output() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    b.add_eqn_with_outvars(
        prim(Builtin::Sin),
        vec![v(x)],
        Params::empty(),
        vec![VarId::from_index(999)],
    );
    let e = b.build(vec![v(x)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::VarOutOfRange {
            site: eqn_site(0, "v999 = sin a"),
            var: 999,
            num_vars: 1
        }
    );
    assert!(e
        .to_string()
        .starts_with("eqn 0 'v999 = sin a': variable id 999"));
}

#[test]
fn var_out_of_range_as_an_output() {
    let mut b = JaxprBuilder::new();
    b.add_invar(f32s(&[3]));
    let e = b.build(vec![v(VarId::from_index(999))]).unwrap_err();
    assert_eq!(
        e,
        TypeError::VarOutOfRange {
            site: Site::Outputs,
            var: 999,
            num_vars: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "outputs: variable id 999 is not one of this jaxpr's 1 variables"
    );
}

// ---------------------------------------------------------------------------------------
// LiteralOutOfRange.

#[test]
fn literal_out_of_range_in_add_eqn() {
    let mut b = JaxprBuilder::new();
    let e = b
        .add_eqn(
            prim(Builtin::Sin),
            vec![Atom::Lit(LitId::from_index(5))],
            Params::empty(),
        )
        .unwrap_err();
    assert_eq!(
        e,
        TypeError::LiteralOutOfRange {
            site: eqn_site(0, "sin ..."),
            lit: 5
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'sin ...': literal id 5 is not one of this jaxpr's"
    );
}

#[test]
fn literal_out_of_range_at_build() {
    let mut b = JaxprBuilder::new();
    let y = b.new_var(f32s(&[]));
    b.add_eqn_with_outvars(
        prim(Builtin::Sin),
        vec![Atom::Lit(LitId::from_index(7))],
        Params::empty(),
        vec![y],
    );
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::LiteralOutOfRange {
            site: eqn_site(0, "a:f32[] = sin l7"),
            lit: 7
        }
    );

    let mut b = JaxprBuilder::new();
    lit(&mut b, LitValue::Float(1.0), DType::F32);
    let e = b.build(vec![Atom::Lit(LitId::from_index(1))]).unwrap_err();
    assert_eq!(
        e,
        TypeError::LiteralOutOfRange {
            site: Site::Outputs,
            lit: 1
        }
    );
    assert_eq!(
        e.to_string(),
        "outputs: literal id 1 is not one of this jaxpr's"
    );
}

// ---------------------------------------------------------------------------------------
// Unbound.

#[test]
fn a_variable_used_before_it_is_bound() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let t = b.new_var(f32s(&[3]));
    let u = b.new_var(f32s(&[3]));
    // u = sin t, then t = cos x: t is used before its binding.
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(t)], Params::empty(), vec![u]);
    b.add_eqn_with_outvars(prim(Builtin::Cos), vec![v(x)], Params::empty(), vec![t]);
    let e = b.build(vec![v(u)]).unwrap_err();
    // Names follow binding order: x is a, u (eqn 0's output) b, t (eqn 1's) c.
    assert_eq!(
        e,
        TypeError::Unbound {
            site: eqn_site(0, "b:f32[3] = sin c"),
            var: "c".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:f32[3] = sin c': variable 'c' is used before it is bound"
    );
}

#[test]
fn an_output_never_bound() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = op(&mut b, Builtin::Sin, &[v(x)]);
    let never = b.new_var(f32s(&[3]));
    let e = b.build(vec![v(y), v(never)]).unwrap_err();
    // A variable bound nowhere takes its name where the printed text first shows it
    // (here in the outputs, after `a` and `b`).
    assert_eq!(
        e,
        TypeError::Unbound {
            site: Site::Outputs,
            var: "c".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "outputs: variable 'c' is used before it is bound"
    );
}

#[test]
fn an_operand_never_bound() {
    let mut b = JaxprBuilder::new();
    let ghost = b.new_var(f32s(&[3]));
    let y = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(prim(Builtin::Exp), vec![v(ghost)], Params::empty(), vec![y]);
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::Unbound {
            site: eqn_site(0, "a:f32[3] = exp b"),
            var: "b".into()
        }
    );
}

// ---------------------------------------------------------------------------------------
// DoubleBinding.

#[test]
fn rebinding_an_input() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(x)], Params::empty(), vec![x]);
    let e = b.build(vec![v(x)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::DoubleBinding {
            site: eqn_site(0, "a:f32[3] = sin a"),
            var: "a".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'a:f32[3] = sin a': variable 'a' is bound twice"
    );
}

#[test]
fn two_equations_binding_one_variable() {
    let mut b = JaxprBuilder::new();
    let c = b.add_constvar(f32s(&[2]));
    let x = b.add_invar(f32s(&[2]));
    let y = b.new_var(f32s(&[2]));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(x)], Params::empty(), vec![y]);
    b.add_eqn_with_outvars(
        prim(Builtin::Mul),
        vec![v(c), v(y)],
        Params::empty(),
        vec![y],
    );
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::DoubleBinding {
            site: eqn_site(1, "c:f32[2] = mul a c"),
            var: "c".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 1 'c:f32[2] = mul a c': variable 'c' is bound twice"
    );
}

// ---------------------------------------------------------------------------------------
// BadLiteral.

#[test]
fn a_literal_out_of_its_dtype_range() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(a(DType::U8, &[3]));
    let big = lit(&mut b, LitValue::Int(300), DType::U8);
    // The builder's rule sees only the literal's type; the value is checked at build.
    let y = b
        .add_eqn(prim(Builtin::Add), vec![v(x), big], Params::empty())
        .unwrap()[0];
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::BadLiteral {
            site: eqn_site(0, "b:u8[3] = add a 300:u8[]"),
            literal: "300:u8[]".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:u8[3] = add a 300:u8[]': literal 300:u8[] does not fit its dtype"
    );
}

#[test]
fn a_float_literal_of_an_int_dtype() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(a(DType::I32, &[]));
    let half = lit(&mut b, LitValue::Float(1.5), DType::I32);
    let y = b
        .add_eqn(prim(Builtin::Mul), vec![half, v(x)], Params::empty())
        .unwrap()[0];
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::BadLiteral {
            site: eqn_site(0, "b:i32[] = mul 1.5:i32[] a"),
            literal: "1.5:i32[]".into()
        }
    );
    assert!(e
        .to_string()
        .ends_with("literal 1.5:i32[] does not fit its dtype"));
}

#[test]
fn bad_literals_of_other_kinds() {
    for (value, dtype, printed) in [
        (LitValue::Int(-1), DType::U32, "-1:u32[]"),
        (LitValue::Int(128), DType::I8, "128:i8[]"),
        (LitValue::Int(1 << 31), DType::I32, "2147483648:i32[]"),
        (LitValue::Bool(true), DType::F32, "True:f32[]"),
        (LitValue::Float(0.0), DType::Bool, "0.0:bool[]"),
        (LitValue::Int(1), DType::Bool, "1:bool[]"),
    ] {
        // As a jaxpr output.
        let mut b = JaxprBuilder::new();
        let l = lit(&mut b, value, dtype);
        let e = b.build(vec![l]).unwrap_err();
        assert_eq!(
            e,
            TypeError::BadLiteral {
                site: Site::Outputs,
                literal: printed.into()
            }
        );
        assert_eq!(
            e.to_string(),
            format!("outputs: literal {printed} does not fit its dtype")
        );
    }
    // Edge values that do fit.
    for (value, dtype) in [
        (LitValue::Int(255), DType::U8),
        (LitValue::Int(-128), DType::I8),
        (LitValue::Int(i64::MAX), DType::U64),
        (LitValue::Int(i64::MIN), DType::I64),
        (LitValue::Float(f64::NAN), DType::BF16),
        (LitValue::Bool(false), DType::Bool),
    ] {
        let mut b = JaxprBuilder::new();
        let l = lit(&mut b, value, dtype);
        b.build(vec![l]).unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// Rule.

#[test]
fn a_rule_failure_prints_the_equation_with_names_in_binding_order() {
    let mut b = JaxprBuilder::new();
    // Made first (lowest id), bound last: its name comes from its binding position.
    let f = b.new_var(f32s(&[3]));
    let x = b.add_invar(f32s(&[3]));
    let i = b.add_invar(a(DType::I32, &[3]));
    let c = op(&mut b, Builtin::Sin, &[v(x)]);
    let d = op(&mut b, Builtin::Neg, &[v(i)]);
    let e_ = op(&mut b, Builtin::Cos, &[v(c)]);
    b.add_eqn_with_outvars(
        prim(Builtin::Add),
        vec![v(e_), v(d)],
        Params::empty(),
        vec![f],
    );
    let e = b.build(vec![v(f)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::Rule {
            site: eqn_site(3, "f:f32[3] = add e d"),
            primitive: "add".into(),
            error: RuleError::Operands {
                reason: "operand dtypes f32 and i32 differ".into()
            }
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 3 'f:f32[3] = add e d': add operand dtypes f32 and i32 differ"
    );
}

#[test]
fn a_rule_failure_in_add_eqn() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    op(&mut b, Builtin::Sin, &[v(x)]);
    let e = b
        .add_eqn(prim(Builtin::Sin), vec![v(x), v(x)], Params::empty())
        .unwrap_err();
    assert_eq!(
        e,
        TypeError::Rule {
            site: eqn_site(1, "sin ..."),
            primitive: "sin".into(),
            error: RuleError::Arity {
                expected: "1".into(),
                got: 2
            }
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 1 'sin ...': sin takes 1 operands but was given 2"
    );

    let e = b
        .add_eqn(
            prim(Builtin::ReduceSum),
            vec![v(x)],
            Params::new([("axes", Param::Int(0))]),
        )
        .unwrap_err();
    assert!(matches!(
        &e,
        TypeError::Rule {
            error: RuleError::ParamKind { .. },
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "eqn 1 'reduce_sum ...': reduce_sum param 'axes' must be a tuple of ints, got a int"
    );
}

#[test]
fn a_rule_failure_of_a_literal_operand() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let two = lit(&mut b, LitValue::Float(2.0), DType::F64);
    let y = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(
        prim(Builtin::Mul),
        vec![v(x), two],
        Params::empty(),
        vec![y],
    );
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:f32[3] = mul a 2.0:f64[]': mul operand dtypes f32 and f64 differ"
    );
}

// ---------------------------------------------------------------------------------------
// OutTypes.

#[test]
fn declared_output_types_differ_from_the_rule() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.new_var(f32s(&[4]));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(x)], Params::empty(), vec![y]);
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::OutTypes {
            site: eqn_site(0, "b:f32[4] = sin a"),
            declared: vec![f32s(&[4])],
            inferred: vec![f32s(&[3])]
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:f32[4] = sin a': declared output types (f32[4]) differ from the rule's (f32[3])"
    );
}

#[test]
fn declared_output_count_differs_from_the_rule() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.new_var(f32s(&[3]));
    let z = b.new_var(a(DType::I32, &[]));
    b.add_eqn_with_outvars(prim(Builtin::Cos), vec![v(x)], Params::empty(), vec![y, z]);
    let e = b.build(vec![v(y)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:f32[3] _:i32[] = cos a': declared output types (f32[3], i32[]) differ from the rule's (f32[3])"
    );

    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    b.add_eqn_with_outvars(prim(Builtin::Cos), vec![v(x)], Params::empty(), vec![]);
    let e = b.build(vec![v(x)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::OutTypes {
            site: eqn_site(0, " = cos a"),
            declared: vec![],
            inferred: vec![f32s(&[3])]
        }
    );
}

#[test]
fn weak_types_do_not_count_as_a_type_difference() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.new_var(f32s(&[3]).with_weak_type(true));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(x)], Params::empty(), vec![y]);
    let j = b.build(vec![v(y)]).unwrap();
    assert!(j.out_avals()[0].weak_type);
}

// ---------------------------------------------------------------------------------------
// Cycle.

#[test]
fn a_dependency_cycle() {
    let mut b = JaxprBuilder::new();
    let t = b.new_var(f32s(&[3]));
    let u = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(u)], Params::empty(), vec![t]);
    b.add_eqn_with_outvars(prim(Builtin::Cos), vec![v(t)], Params::empty(), vec![u]);
    let e = b.build_toposorted(vec![v(t)]).unwrap_err();
    assert_eq!(
        e,
        TypeError::Cycle {
            site: eqn_site(0, "sin ...")
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'sin ...': the equations' dependencies form a cycle"
    );
}

#[test]
fn a_cycle_behind_a_valid_prefix() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let s = op(&mut b, Builtin::Sin, &[v(x)]);
    let p = b.new_var(f32s(&[3]));
    let q = b.new_var(f32s(&[3]));
    let r = b.new_var(f32s(&[3]));
    // p = add s r; q = exp p; r = neg q: a three-equation cycle.
    b.add_eqn_with_outvars(
        prim(Builtin::Add),
        vec![v(s), v(r)],
        Params::empty(),
        vec![p],
    );
    b.add_eqn_with_outvars(prim(Builtin::Exp), vec![v(p)], Params::empty(), vec![q]);
    b.add_eqn_with_outvars(prim(Builtin::Neg), vec![v(q)], Params::empty(), vec![r]);
    let e = b.build_toposorted(vec![v(r)]).unwrap_err();
    match &e {
        TypeError::Cycle {
            site: Site::Eqn { index, line },
        } => {
            assert!((1..=3).contains(index), "{e}");
            assert!(line.ends_with(" ..."), "{line}");
        }
        other => panic!("not a cycle: {other:?}"),
    }
    assert!(e
        .to_string()
        .contains("the equations' dependencies form a cycle"));
}

#[test]
fn toposorting_an_acyclic_graph_builds() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let t = b.new_var(f32s(&[3]));
    let u = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(prim(Builtin::Sin), vec![v(t)], Params::empty(), vec![u]);
    b.add_eqn_with_outvars(prim(Builtin::Cos), vec![v(x)], Params::empty(), vec![t]);
    let j = b.build_toposorted(vec![v(u)]).unwrap();
    let names: Vec<&str> = j.eqns().iter().map(|e| e.primitive().name()).collect();
    assert_eq!(names, vec!["cos", "sin"]);
}

// ---------------------------------------------------------------------------------------
// SubJaxpr.
//
// Built jaxprs are checked level by level as they are built, and a built jaxpr never
// changes, so with deterministic rules a nested jaxpr can never fail `typecheck()`:
// `SubJaxpr` is unreachable by construction. It is reachable only through an extension
// primitive whose rule changes its mind after the sub-jaxpr was built, which is how the
// tests below produce it.

/// An extension primitive (identity types) whose rule can be switched off.
struct Flaky {
    accept: AtomicBool,
}

impl ExtensionPrimitive for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn abstract_eval(
        &self,
        inputs: &[AbstractValue],
        _params: &Params,
    ) -> Result<Vec<AbstractValue>, String> {
        if self.accept.load(Ordering::SeqCst) {
            Ok(inputs.to_vec())
        } else {
            Err("changed its mind".to_owned())
        }
    }
}

fn flaky() -> (Arc<Flaky>, Primitive) {
    let f = Arc::new(Flaky {
        accept: AtomicBool::new(true),
    });
    let p = Primitive::Extension(f.clone());
    (f, p)
}

/// `x:f32[3] -> jit[jaxpr=inner](x)`.
fn wrap_in_jit(inner: ClosedJaxpr) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b
        .add_eqn(prim(Builtin::Jit), vec![v(x)], jit_params(inner))
        .unwrap()[0];
    b.build(vec![v(y)]).unwrap()
}

#[test]
fn an_ill_typed_nested_jaxpr() {
    let (switch, flaky) = flaky();
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.add_eqn(flaky, vec![v(x)], Params::empty()).unwrap()[0];
    let inner = close(b.build(vec![v(y)]).unwrap());
    let middle = close(wrap_in_jit(inner));
    let outer = wrap_in_jit(middle);
    typecheck(&outer).unwrap();

    switch.accept.store(false, Ordering::SeqCst);
    let e = typecheck(&outer).unwrap_err();
    let jit_line = "b:f32[3] = jit[jaxpr={...}] a";
    assert_eq!(
        e,
        TypeError::SubJaxpr {
            site: eqn_site(0, jit_line),
            param: "jaxpr".into(),
            error: Box::new(TypeError::SubJaxpr {
                site: eqn_site(0, jit_line),
                param: "jaxpr".into(),
                error: Box::new(TypeError::Rule {
                    site: eqn_site(0, "b:f32[3] = flaky a"),
                    primitive: "flaky".into(),
                    error: RuleError::Extension {
                        message: "changed its mind".into()
                    }
                })
            })
        }
    );
    assert_eq!(
        e.to_string(),
        "eqn 0 'b:f32[3] = jit[jaxpr={...}] a': in param 'jaxpr': \
         eqn 0 'b:f32[3] = jit[jaxpr={...}] a': in param 'jaxpr': \
         eqn 0 'b:f32[3] = flaky a': flaky changed its mind"
    );
}

#[test]
fn an_ill_typed_branch_names_its_param_and_equation() {
    let (switch, flaky) = flaky();
    let good = {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        close(b.build(vec![v(x)]).unwrap())
    };
    let bad = {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        let s = op(&mut b, Builtin::Sin, &[v(x)]);
        let y = b.add_eqn(flaky, vec![v(s)], Params::empty()).unwrap()[0];
        close(b.build(vec![v(y)]).unwrap())
    };
    let mut b = JaxprBuilder::new();
    let i = b.add_invar(a(DType::I32, &[]));
    let x = b.add_invar(f32s(&[3]));
    let s = op(&mut b, Builtin::Cos, &[v(x)]);
    let y = b
        .add_eqn(
            prim(Builtin::Cond),
            vec![v(i), v(s)],
            Params::new([("branches", Param::Jaxprs(Arc::new(vec![good, bad])))]),
        )
        .unwrap()[0];
    let j = b.build(vec![v(y)]).unwrap();
    switch.accept.store(false, Ordering::SeqCst);
    let e = typecheck(&j).unwrap_err();
    let TypeError::SubJaxpr { site, param, error } = &e else {
        panic!("not a SubJaxpr error: {e:?}");
    };
    assert_eq!(
        *site,
        eqn_site(1, "d:f32[3] = cond[branches=({...} {...})] a c")
    );
    assert_eq!(param, "branches");
    assert!(
        matches!(
            &**error,
            TypeError::Rule { site: Site::Eqn { index: 1, .. }, primitive, .. } if primitive == "flaky"
        ),
        "{error:?}"
    );
    assert_eq!(
        e.to_string(),
        "eqn 1 'd:f32[3] = cond[branches=({...} {...})] a c': in param 'branches': \
         eqn 1 'c:f32[3] = flaky b': flaky changed its mind"
    );
}

// ---------------------------------------------------------------------------------------
// typecheck() on valid jaxprs and deep nests.

#[test]
fn typecheck_returns_the_input_and_output_types() {
    let mut b = JaxprBuilder::new();
    let c = b.add_constvar(a(DType::I32, &[]));
    let x = b.add_invar(f32s(&[2, 3]));
    let y = b.add_invar(a(DType::I32, &[]));
    let s = op(&mut b, Builtin::Add, &[v(c), v(y)]);
    let j = b.build(vec![v(s), v(x)]).unwrap();
    let ty = typecheck(&j).unwrap();
    let (ins, outs) = (ty.in_avals, ty.out_avals);
    assert_eq!(ins, vec![f32s(&[2, 3]), a(DType::I32, &[])]);
    assert_eq!(outs, vec![a(DType::I32, &[]), f32s(&[2, 3])]);
}

/// `depth` nested `jit`s: the innermost applies `sin`, each other level calls the next.
fn jit_nest(depth: usize) -> Jaxpr {
    let mut j: Option<Jaxpr> = None;
    for _ in 0..depth {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        let y = match j.take() {
            None => op(&mut b, Builtin::Sin, &[v(x)]),
            Some(inner) => b
                .add_eqn(prim(Builtin::Jit), vec![v(x)], jit_params(close(inner)))
                .unwrap()[0],
        };
        j = Some(b.build(vec![v(y)]).unwrap());
    }
    j.expect("depth >= 1")
}

/// Runs `f` on a thread with the default 2 MiB test stack.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn typecheck_and_drop_a_100000_deep_nest_on_a_2mib_stack() {
    on_small_stack(|| {
        let j = jit_nest(100_000);
        let ty = typecheck(&j).unwrap();
        let (ins, outs) = (ty.in_avals, ty.out_avals);
        assert_eq!((ins, outs), (vec![f32s(&[3])], vec![f32s(&[3])]));
        // Walk down to the bottom to see the nest is as deep as built.
        let mut depth = 1;
        let mut cur: &Jaxpr = &j;
        while let Some(Param::Jaxpr(inner)) = cur.eqns()[0].params().get("jaxpr") {
            cur = inner.jaxpr();
            depth += 1;
        }
        assert_eq!(depth, 100_000);
        assert_eq!(cur.eqns()[0].primitive().name(), "sin");
        drop(j);
    });
}

#[test]
fn typecheck_visits_a_shared_sub_jaxpr_once() {
    // Each level calls the one below twice; 2^200 paths, 200 distinct jaxprs.
    on_small_stack(|| {
        let mut j = jit_nest(1);
        for _ in 0..200 {
            let inner = close(j);
            let mut b = JaxprBuilder::new();
            let x = b.add_invar(f32s(&[3]));
            let y = b
                .add_eqn(prim(Builtin::Jit), vec![v(x)], jit_params(inner.clone()))
                .unwrap()[0];
            let z = b
                .add_eqn(prim(Builtin::Jit), vec![v(y)], jit_params(inner))
                .unwrap()[0];
            j = b.build(vec![v(z)]).unwrap();
        }
        typecheck(&j).unwrap();
    });
}

#[test]
fn a_long_chain_typechecks_on_a_2mib_stack() {
    on_small_stack(|| {
        let mut b = JaxprBuilder::new();
        let mut x = b.add_invar(f32s(&[2]));
        for _ in 0..200_000 {
            x = op(&mut b, Builtin::Sin, &[v(x)]);
        }
        let j = b.build(vec![v(x)]).unwrap();
        typecheck(&j).unwrap();
        assert_eq!(j.eqns().len(), 200_000);
    });
}

// ---------------------------------------------------------------------------------------
// Shape::new.

#[test]
fn shape_new_rejects_negative_dimensions() {
    let e = Shape::new(&[3, -2, 4]).unwrap_err();
    assert_eq!(e, ShapeError::NegativeDim { axis: 1, size: -2 });
    assert_eq!(e.to_string(), "dimension 1 is negative (-2)");
    assert_eq!(
        Shape::new(&[-1]).unwrap_err(),
        ShapeError::NegativeDim { axis: 0, size: -1 }
    );
    // The first negative dimension is the one reported, even after a zero.
    assert_eq!(
        Shape::new(&[0, 5, -7, -8]).unwrap_err(),
        ShapeError::NegativeDim { axis: 2, size: -7 }
    );
}

#[test]
fn shape_new_rejects_overflowing_element_counts() {
    let e = Shape::new(&[1 << 32, 1 << 32]).unwrap_err();
    assert_eq!(e, ShapeError::Overflow);
    assert_eq!(
        e.to_string(),
        "the product of the nonzero dimensions overflows i64"
    );
    assert_eq!(
        Shape::new(&[i64::MAX, 2]).unwrap_err(),
        ShapeError::Overflow
    );
    assert_eq!(
        Shape::new(&[1 << 21, 1 << 21, 1 << 21]).unwrap_err(),
        ShapeError::Overflow
    );
    // At the limit it fits.
    assert_eq!(Shape::new(&[i64::MAX, 1]).unwrap().size(), i64::MAX);
    assert_eq!(Shape::new(&[1 << 31, 1 << 31]).unwrap().size(), 1 << 62);
    assert_eq!(Shape::new(&[]).unwrap(), Shape::scalar());
}

/// Issue 10: a shape's validity does not depend on the order of its dimensions. The rule
/// is that the product of the nonzero dimensions fits in i64 (so every partial product,
/// a stride included, fits), and a zero dimension does not excuse an overflow.
#[test]
fn shape_validity_does_not_depend_on_dimension_order() {
    const M: i64 = 1 << 40;
    let cases: &[(&[i64], bool)] = &[
        (&[0, M, M], false),
        (&[M, 0, M], false),
        (&[M, M, 0], false),
        (&[0, M, 1 << 22], true),
        (&[1 << 22, M, 0], true),
        (&[0, i64::MAX], true),
        (&[i64::MAX, 0], true),
        (&[0, i64::MAX, 2], false),
        (&[2, 0, i64::MAX], false),
        (&[0, 0, i64::MAX, 1], true),
        (&[1 << 21, 1 << 21, 1 << 21], false),
        (&[1 << 21, 1 << 21, 1 << 20], true),
    ];
    for &(dims, valid) in cases {
        // Every rotation and the reversal of `dims` agree.
        let mut orders: Vec<Vec<i64>> = (0..dims.len())
            .map(|k| {
                let mut d = dims.to_vec();
                d.rotate_left(k);
                d
            })
            .collect();
        orders.push(dims.iter().rev().copied().collect());
        for d in orders {
            let r = Shape::new(&d);
            assert_eq!(r.is_ok(), valid, "{d:?}: {r:?}");
            match r {
                Ok(s) => {
                    let zero = d.contains(&0);
                    let product: i128 = d.iter().map(|&x| x as i128).product();
                    assert_eq!(s.size() as i128, product, "{d:?}");
                    assert_eq!(s.size() == 0, zero);
                }
                Err(e) => assert_eq!(e, ShapeError::Overflow, "{d:?}"),
            }
        }
    }
}

/// Errors chain to their causes through `source()`: an ill-typed equation in a nested
/// jaxpr is a `SubJaxpr` error whose source is the inner error, whose source is the
/// primitive's `RuleError`; `ReadError` is transparent.
#[test]
fn errors_chain_to_their_causes() {
    use std::error::Error;
    let text = "{ lambda ; a:f32[] b:i32[]. let
    c:f32[] = jit[
      name=f
      jaxpr={ lambda ; d:f32[] e:i32[]. let f:f32[] = add d e in (f,) }
    ] a b
  in (c,) }";
    let e = ferrax_ir::text::parse_jaxpr(text).unwrap_err();
    let mut chain = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        chain.push(c.to_string());
        cause = c.source();
    }
    assert!(chain.len() >= 2, "{chain:?}");
    let last = chain.last().unwrap();
    assert!(last.contains("f32") && last.contains("i32"), "{chain:?}");
    assert!(
        !last.contains("add"),
        "the innermost cause is the rule's own message: {chain:?}"
    );
}
