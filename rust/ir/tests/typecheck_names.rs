//! A typecheck error names variables as the printed text does: an output nothing uses
//! is `_` and takes no name, and the names run on through nested jaxprs, so a name in a
//! message is the one `print_jaxpr` shows.

use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{
    AbstractValue, Atom, Builtin, DType, Jaxpr, JaxprBuilder, Param, Params, Site, TypeError,
};

fn f32s(dims: &[i64]) -> AbstractValue {
    AbstractValue::array(DType::F32, dims).unwrap()
}

/// `a:f32[3]`; an unused `sin a`; `cos a`; then `add` of the two, its output declared
/// `declared`: one jaxpr that fails to build (`declared` is not `f32[3]`), or one that
/// builds to compare the text with.
fn unused_then_add(declared: AbstractValue) -> Result<Jaxpr, TypeError> {
    let mut b = JaxprBuilder::new();
    let a = b.add_invar(f32s(&[3]));
    let _unused = b.apply(Builtin::Sin, [a], Params::empty()).unwrap();
    let c = b.apply(Builtin::Cos, [a], Params::empty()).unwrap();
    let d = b.new_var(declared);
    b.add_eqn_with_outvars(
        Builtin::Add.into(),
        vec![c.into(), a.into()],
        Params::empty(),
        vec![d],
    );
    b.build(vec![d.into()])
}

fn eqn_line(e: &TypeError) -> (usize, &str) {
    match e {
        TypeError::OutTypes {
            site: Site::Eqn { index, line },
            ..
        } => (*index, line),
        other => panic!("expected an OutTypes error at an equation, got {other:?}"),
    }
}

#[test]
fn unused_output_is_underscore_and_takes_no_name() {
    let good = unused_then_add(f32s(&[3])).unwrap();
    let printed = print_jaxpr(&good);
    assert_eq!(
        printed,
        "{ lambda ; a:f32[3]. let\n    _:f32[3] = sin a\n    b:f32[3] = cos a\n    \
         c:f32[3] = add b a\n  in (c,) }"
    );
    let e = unused_then_add(AbstractValue::array(DType::I32, &[3]).unwrap()).unwrap_err();
    let (index, line) = eqn_line(&e);
    assert_eq!(index, 2);
    // The printed line, but for the declared type.
    assert_eq!(line, "c:i32[3] = add b a");
    assert!(printed.contains(&line.replace("i32", "f32")), "{printed}");
    assert!(e.to_string().contains("'c:i32[3] = add b a'"), "{e}");
    // Jaxpr::eqn_text gives the lines of the text too, `_` included.
    assert_eq!(good.eqn_text(0).as_deref(), Some("_:f32[3] = sin a"));
    assert_eq!(good.eqn_text(2).as_deref(), Some("c:f32[3] = add b a"));
}

#[test]
fn an_error_at_an_unused_output_names_it_underscore() {
    // `b = sin a` (unused) declared with the wrong type: its line is the text's `_` line.
    let mut b = JaxprBuilder::new();
    let a = b.add_invar(f32s(&[3]));
    let bad = b.new_var(f32s(&[4]));
    b.add_eqn_with_outvars(
        Builtin::Sin.into(),
        vec![a.into()],
        Params::empty(),
        vec![bad],
    );
    let c = b.apply(Builtin::Cos, [a], Params::empty()).unwrap();
    let e = b.build(vec![c.into()]).unwrap_err();
    assert_eq!(eqn_line(&e), (0, "_:f32[4] = sin a"));
}

#[test]
fn names_run_on_through_a_nested_jaxpr() {
    // The `jit` body's `c` takes a name from the one counter, so the `add` after it
    // binds `d` in the text, not `c`.
    let inner =
        parse_jaxpr("{ lambda ; a:f32[3]. let c:f32[3] = sin a; b:f32[3] = cos c in (b,) }")
            .unwrap();
    let inner = ferrax_ir::ClosedJaxpr::with_unknown_consts(std::sync::Arc::new(inner));
    let build = |declared: AbstractValue| {
        let mut b = JaxprBuilder::new();
        let a = b.add_invar(f32s(&[3]));
        let params = Params::new([
            ("jaxpr", Param::Jaxpr(inner.clone())),
            ("name", Param::str("f")),
        ]);
        let j = b.apply(Builtin::Jit, [a], params).unwrap();
        let d = b.new_var(declared);
        b.add_eqn_with_outvars(
            Builtin::Add.into(),
            vec![Atom::from(j), a.into()],
            Params::empty(),
            vec![d],
        );
        b.build(vec![d.into()])
    };
    let good = build(f32s(&[3])).unwrap();
    let printed = print_jaxpr(&good);
    assert!(printed.contains("d:f32[3] = add b a"), "{printed}");
    let e = build(AbstractValue::array(DType::I32, &[3]).unwrap()).unwrap_err();
    assert_eq!(eqn_line(&e), (1, "d:i32[3] = add b a"));
}
