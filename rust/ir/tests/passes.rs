//! DCE and toposort on built jaxprs.

mod common_build;

use common_build::*;
use ferrax_ir::passes::{dce, toposort, PassError};
use ferrax_ir::{
    typecheck, AbstractValue, Atom, Builtin, DType, JaxprBuilder, Param, Params, Primitive, Shape,
};
use std::sync::Arc;

fn prim_names(j: &ferrax_ir::Jaxpr) -> Vec<&str> {
    j.eqns().iter().map(|e| e.primitive().name()).collect()
}

#[test]
fn dce_drops_dead_equations_and_inputs() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.add_invar(f32s(&[3]));
    let s = op(&mut b, Builtin::Sin, &[v(x)]);
    let _dead = op(&mut b, Builtin::Cos, &[v(y)]);
    let e = op(&mut b, Builtin::Exp, &[v(s)]);
    let j = b.build(vec![v(e), v(y)]).unwrap();

    let (d, used) = dce(&j, &[true, false]).unwrap();
    assert_eq!(used, vec![true, false]);
    assert_eq!(prim_names(&d), vec!["sin", "exp"]);
    assert_eq!(d.invars().len(), 1);
    assert_eq!(d.outvars().len(), 1);
    typecheck(&d).unwrap();

    let (d, used) = dce(&j, &[false, true]).unwrap();
    assert_eq!(used, vec![false, true]);
    assert!(d.eqns().is_empty());

    let (d, used) = dce(&j, &[true, true]).unwrap();
    assert_eq!(used, vec![true, true]);
    assert_eq!(prim_names(&d), vec!["sin", "exp"]);
}

#[test]
fn dce_rejects_wrong_flag_count() {
    let j = chain(2, 4);
    assert_eq!(
        dce(&j, &[true, true]).unwrap_err(),
        PassError::FlagCount {
            what: "used_outputs",
            expected: 1,
            got: 2
        }
    );
}

#[test]
fn dce_keeps_literal_outputs_and_constvars() {
    let mut b = JaxprBuilder::new();
    let c = b.add_constvar(f32s(&[2]));
    let x = b.add_invar(f32s(&[2]));
    let m = op(&mut b, Builtin::Mul, &[v(x), v(c)]);
    let one = lit_f32(&mut b, 1.0);
    let j = b.build(vec![one, v(m)]).unwrap();
    let (d, used) = dce(&j, &[true, false]).unwrap();
    assert_eq!(used, vec![false]);
    assert_eq!(d.constvars().len(), 1);
    assert!(d.eqns().is_empty());
    assert!(matches!(d.outvars()[0], Atom::Lit(_)));
}

fn jit_params(j: ferrax_ir::ClosedJaxpr) -> Params {
    Params::new([("jaxpr", Param::Jaxpr(j)), ("name", Param::Str("g".into()))])
}

#[test]
fn dce_prunes_inside_jit() {
    // inner(a, b) = (sin a, cos b); outer uses only the first output.
    let mut ib = JaxprBuilder::new();
    let a = ib.add_invar(f32s(&[3]));
    let bb = ib.add_invar(f32s(&[3]));
    let s = op(&mut ib, Builtin::Sin, &[v(a)]);
    let c = op(&mut ib, Builtin::Cos, &[v(bb)]);
    let inner = close(ib.build(vec![v(s), v(c)]).unwrap());

    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = b.add_invar(f32s(&[3]));
    let outs = op_p(&mut b, Builtin::Jit, &[v(x), v(y)], jit_params(inner));
    let j = b.build(vec![v(outs[0])]).unwrap();

    let (d, used) = dce(&j, &[true]).unwrap();
    assert_eq!(used, vec![true, false]);
    let e = &d.eqns()[0];
    assert_eq!(e.inputs().len(), 1);
    assert_eq!(e.outvars().len(), 1);
    let Some(Param::Jaxpr(pruned)) = e.params().get("jaxpr") else {
        panic!("jit lost its jaxpr")
    };
    assert_eq!(prim_names(pruned.jaxpr()), vec!["sin"]);
    assert_eq!(e.params().get("name"), Some(&Param::Str("g".into())));
    typecheck(&d).unwrap();
}

#[test]
fn dce_prunes_cond_branches_to_the_union_of_their_inputs() {
    // branch 0: (p, q) -> (p*2, q); branch 1: (p, q) -> (q, q); only output 0 used.
    let mut b0 = JaxprBuilder::new();
    let p0 = b0.add_invar(f32s(&[]));
    let q0 = b0.add_invar(f32s(&[]));
    let two = lit_f32(&mut b0, 2.0);
    let m = op(&mut b0, Builtin::Mul, &[v(p0), two]);
    let br0 = close(b0.build(vec![v(m), v(q0)]).unwrap());
    let mut b1 = JaxprBuilder::new();
    let _p1 = b1.add_invar(f32s(&[]));
    let q1 = b1.add_invar(f32s(&[]));
    let n = op(&mut b1, Builtin::Neg, &[v(q1)]);
    let br1 = close(b1.build(vec![v(n), v(q1)]).unwrap());

    let mut b = JaxprBuilder::new();
    let i = b.add_invar(i32s(&[]));
    let x = b.add_invar(f32s(&[]));
    let y = b.add_invar(f32s(&[]));
    let z = b.add_invar(f32s(&[]));
    let outs = op_p(
        &mut b,
        Builtin::Cond,
        &[v(i), v(x), v(y)],
        Params::new([("branches", Param::Jaxprs(Arc::new(vec![br0, br1])))]),
    );
    let j = b.build(vec![v(outs[0]), v(z)]).unwrap();
    let (d, used) = dce(&j, &[true, false]).unwrap();
    assert_eq!(used, vec![true, true, true, false]);
    let e = &d.eqns()[0];
    assert_eq!(e.inputs().len(), 3);
    assert_eq!(e.outvars().len(), 1);
    let Some(Param::Jaxprs(brs)) = e.params().get("branches") else {
        panic!()
    };
    for br in brs.iter() {
        assert_eq!(br.in_avals().len(), 2);
        assert_eq!(br.out_avals().len(), 1);
    }
    assert_eq!(prim_names(brs[0].jaxpr()), vec!["mul"]);
    assert_eq!(prim_names(brs[1].jaxpr()), vec!["neg"]);
    typecheck(&d).unwrap();
}

/// while with carry (i, a, b): cond reads i; body: (i+1, a*2, b+a). Using only `a` needs i
/// (read by cond) and a; `b` is dead. Using `b` needs a too.
fn while_jaxpr() -> ferrax_ir::Jaxpr {
    let mut cb = JaxprBuilder::new();
    let ci = cb.add_invar(i32s(&[]));
    cb.add_invar(f32s(&[]));
    cb.add_invar(f32s(&[]));
    let ten = lit_i32(&mut cb, 10);
    let lt = op(&mut cb, Builtin::Lt, &[v(ci), ten]);
    let cond = close(cb.build(vec![v(lt)]).unwrap());

    let mut bb = JaxprBuilder::new();
    let k = bb.add_invar(f32s(&[]));
    let i = bb.add_invar(i32s(&[]));
    let a = bb.add_invar(f32s(&[]));
    let bv = bb.add_invar(f32s(&[]));
    let one = lit_i32(&mut bb, 1);
    let i2 = op(&mut bb, Builtin::Add, &[v(i), one]);
    let a2 = op(&mut bb, Builtin::Mul, &[v(a), v(k)]);
    let b2 = op(&mut bb, Builtin::Add, &[v(bv), v(a)]);
    let body = close(bb.build(vec![v(i2), v(a2), v(b2)]).unwrap());

    let mut b = JaxprBuilder::new();
    let k = b.add_invar(f32s(&[]));
    let i0 = b.add_invar(i32s(&[]));
    let a0 = b.add_invar(f32s(&[]));
    let b0 = b.add_invar(f32s(&[]));
    let outs = op_p(
        &mut b,
        Builtin::While,
        &[v(k), v(i0), v(a0), v(b0)],
        Params::new([
            ("cond_jaxpr", Param::Jaxpr(cond)),
            ("body_jaxpr", Param::Jaxpr(body)),
            ("cond_nconsts", Param::Int(0)),
            ("body_nconsts", Param::Int(1)),
        ]),
    );
    b.build(outs.iter().map(|&o| v(o)).collect()).unwrap()
}

#[test]
fn dce_prunes_while_carry_to_a_fixpoint() {
    let j = while_jaxpr();
    let (d, used) = dce(&j, &[false, true, false]).unwrap();
    assert_eq!(used, vec![true, true, true, false]);
    let e = &d.eqns()[0];
    assert_eq!(e.outvars().len(), 2);
    assert_eq!(e.params().get("body_nconsts"), Some(&Param::Int(1)));
    typecheck(&d).unwrap();

    let (d, used) = dce(&j, &[false, false, true]).unwrap();
    assert_eq!(used, vec![true, true, true, true]);
    typecheck(&d).unwrap();

    // Only the counter: the body constant and a, b go.
    let (d, used) = dce(&j, &[true, false, false]).unwrap();
    assert_eq!(used, vec![false, true, false, false]);
    assert_eq!(
        d.eqns()[0].params().get("body_nconsts"),
        Some(&Param::Int(0))
    );
    typecheck(&d).unwrap();
}

#[test]
fn dce_prunes_scan_carry_and_outputs() {
    // scan body (c, x) -> (c + x, sin x, c * 2): carry c, ys (sin x, c*2).
    let mut bb = JaxprBuilder::new();
    let c = bb.add_invar(f32s(&[2]));
    let x = bb.add_invar(f32s(&[2]));
    let c2 = op(&mut bb, Builtin::Add, &[v(c), v(x)]);
    let s = op(&mut bb, Builtin::Sin, &[v(x)]);
    let two = lit_f32(&mut bb, 2.0);
    let d2 = op(&mut bb, Builtin::Mul, &[v(c), two]);
    let body = close(bb.build(vec![v(c2), v(s), v(d2)]).unwrap());

    let mut b = JaxprBuilder::new();
    let c0 = b.add_invar(f32s(&[2]));
    let xs = b.add_invar(f32s(&[5, 2]));
    let outs = op_p(
        &mut b,
        Builtin::Scan,
        &[v(c0), v(xs)],
        Params::new([
            ("jaxpr", Param::Jaxpr(body)),
            ("length", Param::Int(5)),
            ("reverse", Param::Bool(false)),
            ("num_consts", Param::Int(0)),
            ("num_carry", Param::Int(1)),
            ("linear", Param::Bools(Arc::from([false, false]))),
        ]),
    );
    let j = b.build(outs.iter().map(|&o| v(o)).collect()).unwrap();

    // Only sin-ys: the carry is dead, xs needed.
    let (d, used) = dce(&j, &[false, true, false]).unwrap();
    assert_eq!(used, vec![false, true]);
    let e = &d.eqns()[0];
    assert_eq!(e.params().get("num_carry"), Some(&Param::Int(0)));
    assert_eq!(
        e.params().get("linear"),
        Some(&Param::Bools(Arc::from([false])))
    );
    assert_eq!(e.outvars().len(), 1);
    typecheck(&d).unwrap();

    // c*2 ys need the carry, which needs xs.
    let (d, used) = dce(&j, &[false, false, true]).unwrap();
    assert_eq!(used, vec![true, true]);
    assert_eq!(d.eqns()[0].params().get("num_carry"), Some(&Param::Int(1)));
    typecheck(&d).unwrap();
}

#[test]
fn dce_of_a_deep_nest_does_not_overflow_the_stack() {
    let depth = 100_000;
    let j = nested_jits(depth);
    let (d, used) = dce(j.jaxpr(), &[true]).unwrap();
    assert_eq!(used, vec![true]);
    assert_eq!(d.eqns().len(), 2);
    // And unused: everything goes.
    let (d, used) = dce(j.jaxpr(), &[false]).unwrap();
    assert_eq!(used, vec![false]);
    assert!(d.eqns().is_empty());
}

#[test]
fn dce_of_a_long_chain_is_linear_and_complete() {
    let n = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    let j = chain(n, 8);
    let (d, used) = dce(&j, &[true]).unwrap();
    assert_eq!(used, vec![true]);
    assert_eq!(d.eqns().len(), j.eqns().len());
    let (d, _) = dce(&j, &[false]).unwrap();
    assert!(d.eqns().is_empty());
}

#[test]
fn toposort_orders_by_demand_and_keeps_dead_code_last() {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let dead = op(&mut b, Builtin::Cos, &[v(x)]);
    let s = op(&mut b, Builtin::Sin, &[v(x)]);
    let t = op(&mut b, Builtin::Tanh, &[v(dead)]);
    let e = op(&mut b, Builtin::Exp, &[v(s)]);
    let _ = t;
    let j = b.build(vec![v(e)]).unwrap();
    let sorted = toposort(&j);
    assert_eq!(prim_names(&sorted), vec!["sin", "exp", "cos", "tanh"]);
    typecheck(&sorted).unwrap();
    // Idempotent.
    assert_eq!(prim_names(&toposort(&sorted)), prim_names(&sorted));
}

#[test]
fn builder_toposorts_a_recipe_graph() {
    // Declare the outputs first and add the equations in reverse order.
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let s = b.new_var(f32s(&[3]));
    let e = b.new_var(f32s(&[3]));
    let t = b.new_var(f32s(&[3]));
    let sin: Primitive = Builtin::Sin.into();
    b.add_eqn_with_outvars(Builtin::Tanh.into(), vec![v(e)], Params::empty(), vec![t]);
    b.add_eqn_with_outvars(Builtin::Exp.into(), vec![v(s)], Params::empty(), vec![e]);
    b.add_eqn_with_outvars(sin, vec![v(x)], Params::empty(), vec![s]);
    let j = b.build_toposorted(vec![v(t)]).unwrap();
    assert_eq!(prim_names(&j), vec!["sin", "exp", "tanh"]);

    // A cycle is an error naming an equation on it.
    let mut b = JaxprBuilder::new();
    let p = b.new_var(f32s(&[3]));
    let q = b.new_var(f32s(&[3]));
    b.add_eqn_with_outvars(Builtin::Sin.into(), vec![v(q)], Params::empty(), vec![p]);
    b.add_eqn_with_outvars(Builtin::Cos.into(), vec![v(p)], Params::empty(), vec![q]);
    let err = b.build_toposorted(vec![v(p)]).unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
}

#[test]
fn toposort_of_a_long_chain_does_not_recurse() {
    let n = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    let j = chain(n, 8);
    let sorted = toposort(&j);
    assert_eq!(sorted.eqns().len(), j.eqns().len());
}

#[test]
fn consts_to_invars_moves_constvars_in_front() {
    let mut b = JaxprBuilder::new();
    let c = b.add_constvar(f32s(&[2]));
    let x = b.add_invar(f32s(&[2]));
    let m = op(&mut b, Builtin::Mul, &[v(x), v(c)]);
    let j = b.build(vec![v(m)]).unwrap();
    let h = ferrax_ir::passes::consts_to_invars(&j);
    assert!(h.constvars().is_empty());
    assert_eq!(h.invars().len(), 2);
    typecheck(&h).unwrap();
    // The product now reads the first input where it read the constvar.
    let e = &h.eqns()[0];
    assert_eq!(e.inputs()[1], Atom::Var(h.invars()[0]));
    assert_eq!(e.inputs()[0], Atom::Var(h.invars()[1]));
}

#[test]
fn cost_counts_the_chain_and_handles_deep_nests() {
    // Per step: sin (a transcendental per element, 512 bytes in and out), mul by a
    // scalar (read at f32[128]: 3 x 512 bytes) and add (3 x 512); the sum combines 128
    // values (127 adds) reading 512 bytes and an initial value, writing 4.
    let c = ferrax_ir::passes::cost(&chain(10, 128));
    assert_eq!(c.flops, (10 * 2 * 128 + 127) as f64);
    assert_eq!(c.transcendentals, (10 * 128) as f64);
    assert_eq!(c.bytes_accessed, (10 * (1024 + 1536 + 1536) + 520) as f64);
    assert_eq!(c.while_loops, 0);
    let r = ferrax_ir::passes::cost_report(&chain(10, 128));
    assert_eq!(r.total, c);
    let names: Vec<&str> = r.by_primitive.keys().map(String::as_str).collect();
    assert_eq!(names, ["add", "mul", "reduce_sum", "sin"]);
    assert_eq!(r.by_primitive["sin"].transcendentals, 1280.0);
    assert_eq!(r.by_primitive["reduce_sum"].bytes_accessed, 520.0);
    // 100,000 nested jits: one sin of f32[3] per level, costed without recursion.
    let nest = ferrax_ir::generate::nested_jits(100_000).unwrap();
    let c = ferrax_ir::passes::cost(nest.jaxpr());
    assert_eq!((c.flops, c.transcendentals), (0.0, 300_000.0));
    let r = ferrax_ir::passes::cost_report(nest.jaxpr());
    assert_eq!(r.by_primitive.len(), 1);
    assert_eq!(r.by_primitive["sin"].transcendentals, 300_000.0);
}

#[test]
fn cost_of_sorting_and_running_reductions() {
    // jax_sorting.jaxpr: sorts move data; cumsum, cumprod, cummax (of integers, counted
    // as floats are), cummin and cumlogsumexp of [2,3] combine 4 (axis 1: 2 lines of 3)
    // or 3 (axis 0: 3 lines of 2) times.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/jax_sorting.jaxpr"
    ))
    .unwrap();
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let j = ferrax_ir::text::parse_jaxpr(&body).unwrap();
    assert_eq!(
        ferrax_ir::passes::cost(&j).flops,
        4.0 + 3.0 + 4.0 + 3.0 + 4.0
    );
}

#[test]
fn cost_of_logical_reductions_nextafter_and_reduce_precision() {
    // jax_logical_precision.jaxpr: every operation counts, of any dtype: reduce_and of
    // i32[2,3] to [3] (3), gt of i32[2,3] (6), reduce_or of bool[2,3] to [] (5), the u8
    // conversion (6), reduce_xor over no axes (0); two nextafters, a reduce_precision
    // and a bf16 conversion of [3] and a reduce_precision of bf16[3] (3 each).
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/jax_logical_precision.jaxpr"
    ))
    .unwrap();
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let j = ferrax_ir::text::parse_jaxpr(&body).unwrap();
    assert_eq!(
        ferrax_ir::passes::cost(&j).flops,
        3.0 + 6.0 + 5.0 + 6.0 + 0.0 + 5.0 * 3.0
    );
}

#[test]
fn cost_of_the_key_primitives() {
    // jax_random_keys.jaxpr: seeding, wrapping, splitting, folding in and drawing bits
    // are threefry's rounds (left out, see the module docs) or moves of key words: no
    // flops; the same jaxpr with a conversion of the u8[3,4] bits and an addition costs
    // those two (12 each).
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/jax_random_keys.jaxpr"
    ))
    .unwrap();
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let j = ferrax_ir::text::parse_jaxpr(&body).unwrap();
    assert_eq!(ferrax_ir::passes::cost(&j).flops, 0.0);
    let with_add = body.replace(
        "  in (e, l, k, h, i, j) }",
        "    m:f32[3,4] = convert_element_type[new_dtype=float32 weak_type=False] i\n    \
         n:f32[3,4] = add m m\n  in (e, l, k, h, n, j) }",
    );
    let j = ferrax_ir::text::parse_jaxpr(&with_add).unwrap();
    assert_eq!(ferrax_ir::passes::cost(&j).flops, 24.0);
}

#[test]
fn cost_of_igamma_family() {
    // jax_igamma.jaxpr: five element-wise applications, four of f32[3] and one of f16[2],
    // each counted as one transcendental per element (as lgamma is) and no flops.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/jax_igamma.jaxpr"
    ))
    .unwrap();
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let j = ferrax_ir::text::parse_jaxpr(&body).unwrap();
    let c = ferrax_ir::passes::cost(&j);
    assert_eq!((c.flops, c.transcendentals), (0.0, 4.0 * 3.0 + 2.0));
}

#[test]
fn cost_of_gather_scatter_and_rev() {
    // Gathers, plain scatters and rev move data (no flops); a combining scatter does one
    // operation per update element, of any dtype.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/jax_scatter.jaxpr"
    ))
    .unwrap();
    let text: String = text
        .split("; expect:")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let j = ferrax_ir::text::parse_jaxpr(&text).unwrap();
    // scatter (0), add/sub of f32[2,4] updates (8 each), mul/min/max of f32[2] (2 each).
    assert_eq!(
        ferrax_ir::passes::cost(&j).flops,
        8.0 + 8.0 + 2.0 + 2.0 + 2.0
    );
    for (name, want) in [
        ("jax_gather.jaxpr", 0.0),
        ("jax_rev.jaxpr", 0.0),
        // scatter-add and scatter-max of i32[2] updates.
        ("jax_scatter_int.jaxpr", 2.0 + 2.0),
    ] {
        let path = format!("{}/tests/jaxprs/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).unwrap();
        let body: String = text
            .split("; expect:")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with(";;"))
            .collect::<Vec<_>>()
            .join("\n");
        let j = ferrax_ir::text::parse_jaxpr(&body).unwrap();
        assert_eq!(ferrax_ir::passes::cost(&j).flops, want, "{name}");
    }
}

#[test]
fn cost_of_convolutions_is_xlas() {
    // XLA's cost analysis (jax.jit(f).lower(x, w).compile().cost_analysis() in JAX
    // 0.10.2) of f32 convolutions: a multiply and an add per window tap that lands on the
    // lhs (padding and the holes of the lhs dilation are free). Integer ones count
    // nothing here, as integer arithmetic everywhere in the model.
    #[allow(clippy::type_complexity)]
    let cases: &[(
        &[i64],
        &[i64],
        &[i64],
        &[(i64, i64)],
        &[i64],
        &[i64],
        (i64, i64),
        f64,
    )] = &[
        (
            &[2, 3, 8, 8],
            &[4, 3, 3, 3],
            &[1, 1],
            &[(1, 1), (1, 1)],
            &[1, 1],
            &[1, 1],
            (1, 1),
            23232.0,
        ),
        (
            &[2, 3, 8, 8],
            &[4, 3, 3, 3],
            &[2, 2],
            &[(1, 1), (1, 1)],
            &[1, 1],
            &[1, 1],
            (1, 1),
            5808.0,
        ),
        (
            &[2, 3, 8, 8],
            &[4, 3, 3, 3],
            &[1, 1],
            &[(0, 0), (0, 0)],
            &[2, 2],
            &[1, 1],
            (1, 1),
            19200.0,
        ),
        (
            &[2, 3, 8, 8],
            &[4, 3, 3, 3],
            &[3, 2],
            &[(2, -1), (1, 4)],
            &[2, 3],
            &[2, 1],
            (1, 1),
            2880.0,
        ),
        (
            &[2, 6, 8, 8],
            &[4, 3, 3, 3],
            &[1, 1],
            &[(0, 0), (0, 0)],
            &[1, 1],
            &[1, 1],
            (2, 1),
            15552.0,
        ),
        (
            &[4, 3, 8, 8],
            &[4, 3, 3, 3],
            &[1, 1],
            &[(0, 0), (0, 0)],
            &[1, 1],
            &[1, 1],
            (1, 2),
            15552.0,
        ),
        (
            &[1, 2, 9],
            &[2, 2, 3],
            &[2],
            &[(1, 1)],
            &[3],
            &[3],
            (1, 1),
            72.0,
        ),
        (&[2, 3], &[4, 3], &[], &[], &[], &[], (1, 1), 48.0),
    ];
    for &(l, r, strides, padding, ld, rd, (fgc, bgc), flops) in cases {
        for dtype in [DType::F32, DType::I32] {
            let mut b = JaxprBuilder::new();
            let x = Atom::Var(b.add_invar(AbstractValue::new(Shape::new(l).unwrap(), dtype)));
            let w = Atom::Var(b.add_invar(AbstractValue::new(Shape::new(r).unwrap(), dtype)));
            let iota: Vec<i64> = (0..l.len() as i64).collect();
            let params = Params::new([
                ("window_strides", Param::ints(strides)),
                ("padding", Param::Pairs(padding.into())),
                ("lhs_dilation", Param::ints(ld)),
                ("rhs_dilation", Param::ints(rd)),
                (
                    "dimension_numbers",
                    Param::ConvDims(Arc::new(ferrax_ir::ConvDimensionNumbers {
                        lhs_spec: iota.clone(),
                        rhs_spec: iota.clone(),
                        out_spec: iota,
                    })),
                ),
                ("feature_group_count", Param::Int(fgc)),
                ("batch_group_count", Param::Int(bgc)),
            ]);
            let out = b
                .add_eqn(Builtin::ConvGeneralDilated.into(), vec![x, w], params)
                .unwrap();
            let j = b.build(out.into_iter().map(Atom::Var).collect()).unwrap();
            // Every dtype counts (XLA counts integer multiply-adds as float ones).
            assert_eq!(
                ferrax_ir::passes::cost(&j).flops,
                flops,
                "{l:?} {r:?} {dtype}"
            );
        }
    }
}
