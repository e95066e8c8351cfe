//! Issue 10: ids from another jaxpr or builder never panic the crate's public API where a
//! lookup can say "no": the builder returns `TypeError`s, `Jaxpr::get_*` return `None`,
//! and the indexing accessors (`Jaxpr::var_aval`, `literal`, `atom_aval`) panic only as
//! their `# Panics` sections say.

use ferrax_ir::DType::F32;
use ferrax_ir::{
    AbstractValue, Atom, Builtin, JaxprBuilder, LitId, LitValue, Literal, Params, Shape, TypeError,
    VarId,
};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn f32s(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(Shape::new(dims).unwrap(), F32)
}

fn one() -> Literal {
    Literal {
        value: LitValue::Float(1.0),
        dtype: F32,
        weak_type: false,
    }
}

/// A jaxpr with `n` chained `sin`s (so `n + 1` variables) and one literal.
fn chain(n: usize) -> ferrax_ir::Jaxpr {
    let mut b = JaxprBuilder::new();
    let mut x = Atom::Var(b.add_invar(f32s(&[3])));
    for _ in 0..n {
        x = Atom::Var(
            b.add_eqn(Builtin::Sin.into(), vec![x], Params::empty())
                .unwrap()[0],
        );
    }
    let l = b.literal(one());
    let y = b
        .add_eqn(Builtin::Mul.into(), vec![x, l], Params::empty())
        .unwrap()[0];
    b.build(vec![Atom::Var(y)]).unwrap()
}

#[test]
fn jaxpr_lookups_of_foreign_ids_return_none() {
    let small = chain(1);
    let big = chain(10);
    let foreign = *big.eqns().last().unwrap().outvars().first().unwrap();
    assert!(!small.has_var(foreign));
    assert_eq!(small.get_var_aval(foreign), None);
    assert_eq!(small.get_atom_aval(Atom::Var(foreign)), None);
    assert_eq!(small.get_literal(LitId::from_index(5)), None);
    assert_eq!(small.get_atom_aval(Atom::Lit(LitId::from_index(5))), None);
    // Its own ids are found, with the right types.
    for &v in small.invars() {
        assert!(small.has_var(v));
        assert_eq!(small.get_var_aval(v), Some(&f32s(&[3])));
    }
    for &o in small.outvars() {
        assert_eq!(small.get_atom_aval(o), Some(small.atom_aval(o)));
    }
    assert_eq!(small.get_literal(LitId::from_index(0)), Some(&one()));
    // The indexing accessors panic, as documented.
    for r in [
        catch_unwind(AssertUnwindSafe(|| {
            small.var_aval(foreign);
        })),
        catch_unwind(AssertUnwindSafe(|| {
            small.literal(LitId::from_index(5));
        })),
        catch_unwind(AssertUnwindSafe(|| {
            small.atom_aval(Atom::Var(foreign));
        })),
    ] {
        assert!(r.is_err());
    }
}

#[test]
fn ids_from_indices_beyond_u32_are_none() {
    assert_eq!(VarId::try_from_index(7), Some(VarId::from_index(7)));
    assert_eq!(
        VarId::try_from_index(u32::MAX as usize).map(VarId::index),
        Some(u32::MAX as usize)
    );
    if usize::BITS > 32 {
        assert_eq!(VarId::try_from_index(u32::MAX as usize + 1), None);
        assert_eq!(LitId::try_from_index(usize::MAX), None);
    }
}

#[test]
fn builder_refuses_foreign_ids_with_type_errors() {
    let big = chain(10);
    let foreign = *big.eqns().last().unwrap().outvars().first().unwrap();
    let foreign_lit = Atom::Lit(LitId::from_index(3));

    // As an operand.
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    assert_eq!(b.var_aval(foreign), None);
    assert_eq!(b.atom_aval(foreign_lit), None);
    let e = b
        .add_eqn(
            Builtin::Sin.into(),
            vec![Atom::Var(foreign)],
            Params::empty(),
        )
        .unwrap_err();
    assert!(matches!(e, TypeError::VarOutOfRange { .. }), "{e:?}");
    let e = b
        .add_eqn(
            Builtin::Mul.into(),
            vec![Atom::Var(x), foreign_lit],
            Params::empty(),
        )
        .unwrap_err();
    assert!(matches!(e, TypeError::LiteralOutOfRange { .. }), "{e:?}");
    // The builder is still usable after the refusals.
    let y = b
        .add_eqn(Builtin::Sin.into(), vec![Atom::Var(x)], Params::empty())
        .unwrap()[0];
    assert_eq!(b.var_aval(y), Some(&f32s(&[3])));

    // As an output, of `build` and of `build_toposorted`.
    for toposorted in [false, true] {
        let mut b = JaxprBuilder::new();
        b.add_invar(f32s(&[3]));
        let outs = vec![Atom::Var(foreign)];
        let r = if toposorted {
            b.build_toposorted(outs)
        } else {
            b.build(outs)
        };
        assert!(r.is_err());
        let mut b = JaxprBuilder::new();
        b.add_invar(f32s(&[3]));
        let r = if toposorted {
            b.build_toposorted(vec![foreign_lit])
        } else {
            b.build(vec![foreign_lit])
        };
        assert!(r.is_err());
    }

    // As a declared equation output or input (checked at build).
    for toposorted in [false, true] {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        b.add_eqn_with_outvars(
            Builtin::Sin.into(),
            vec![Atom::Var(x)],
            Params::empty(),
            vec![foreign],
        );
        let r = if toposorted {
            b.build_toposorted(vec![Atom::Var(x)])
        } else {
            b.build(vec![Atom::Var(x)])
        };
        assert!(r.is_err());
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[3]));
        let y = b.new_var(f32s(&[3]));
        b.add_eqn_with_outvars(
            Builtin::Sin.into(),
            vec![Atom::Var(foreign)],
            Params::empty(),
            vec![y],
        );
        let r = if toposorted {
            b.build_toposorted(vec![Atom::Var(x)])
        } else {
            b.build(vec![Atom::Var(x)])
        };
        assert!(r.is_err());
    }
}
