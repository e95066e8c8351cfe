//! Shared sub-jaxprs (the same `Arc<Jaxpr>` held by several equations): printed once as
//! JAX's `let name = { ... } in`, parsed back shared, and pruned once by DCE, so that a
//! DAG of k levels each calling the level below twice costs O(k), not O(2^k).
//! (JAX's own texts with shared jaxprs are in `tests/jaxprs/jax_shared_*.jaxpr`.)

mod common_build;

use common_build::*;
use ferrax_ir::passes::dce;
use ferrax_ir::text::{parse_jaxpr, print_jaxpr, ReadError};
use ferrax_ir::{typecheck, Builtin, ClosedJaxpr, Jaxpr, JaxprBuilder, Param, Params};
use std::collections::HashSet;
use std::sync::Arc;

fn s(x: &str) -> Param {
    Param::Str(Arc::from(x))
}

fn jit(b: &mut JaxprBuilder, f: &ClosedJaxpr, name: &str, x: ferrax_ir::Atom) -> ferrax_ir::VarId {
    let params = Params::new([("jaxpr", Param::Jaxpr(f.clone())), ("name", s(name))]);
    op_p(b, Builtin::Jit, &[x], params)[0]
}

/// Level 0 is `sin x`; level i is `f(f(x))` for f the level below (and, with `dead`, a
/// `cos x` nobody uses). Returns level k >= 1 (the top, printed inline).
fn doubling(k: usize, dead: bool) -> Jaxpr {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[]));
    let y = op(&mut b, Builtin::Sin, &[v(x)]);
    let mut below = close(b.build(vec![v(y)]).unwrap());
    for i in 1..=k.max(1) {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(f32s(&[]));
        if dead {
            op(&mut b, Builtin::Cos, &[v(x)]);
        }
        let y = jit(&mut b, &below, "f", v(x));
        let z = jit(&mut b, &below, "f", v(y));
        let j = b.build(vec![v(z)]).unwrap();
        if i >= k {
            return j;
        }
        below = close(j);
    }
    unreachable!("the loop returns at its last level")
}

/// The distinct sub-jaxprs under `j` (by address), walking each once.
fn distinct_subs(j: &Jaxpr) -> usize {
    let mut seen: HashSet<*const Jaxpr> = HashSet::new();
    let mut todo: Vec<&Jaxpr> = vec![j];
    while let Some(j) = todo.pop() {
        for e in j.eqns() {
            for cj in e.sub_jaxprs() {
                if seen.insert(Arc::as_ptr(cj.jaxpr())) {
                    todo.push(cj.jaxpr());
                }
            }
        }
    }
    seen.len()
}

/// Each level of a doubling DAG: its two `jit`s hold the same jaxpr, with `eqns` equations.
fn assert_doubling_shared(top: &Jaxpr, k: usize, eqns: usize) {
    let mut j: &Jaxpr = top;
    for level in (1..=k).rev() {
        assert_eq!(j.eqns().len(), eqns, "level {level}");
        let a = j.eqns()[eqns - 2].sub_jaxprs().next().expect("a jit");
        let b = j.eqns()[eqns - 1].sub_jaxprs().next().expect("a jit");
        assert!(
            Arc::ptr_eq(a.jaxpr(), b.jaxpr()),
            "level {level}: the two calls hold copies, not one shared jaxpr"
        );
        j = a.jaxpr();
    }
    assert_eq!(j.eqns().len(), 1);
    assert_eq!(distinct_subs(top), k);
}

#[test]
fn doubling_dag_prints_in_linear_size_and_reads_back_shared() {
    let mut sizes = Vec::new();
    for k in [1usize, 2, 6, 12, 24] {
        let top = doubling(k, false);
        let text = print_jaxpr(&top);
        // Levels 0..k-1 are each printed once, as `let`s; the top level inline.
        assert_eq!(text.matches("\nlet ").count() + 1, k, "{text}");
        assert!(
            text.starts_with("let f = { lambda ; a:f32[]. let"),
            "{text}"
        );
        sizes.push((k, text.len()));
        let back = parse_jaxpr(&text).unwrap();
        assert_eq!(print_jaxpr(&back), text);
        typecheck(&back).unwrap();
        assert_doubling_shared(&back, k, 2);
    }
    // Linear: each level adds the same few lines (names grow by a digit past f9).
    for w in sizes.windows(2) {
        let ((k0, n0), (k1, n1)) = (w[0], w[1]);
        assert!(
            (n1 - n0) <= 160 * (k1 - k0),
            "{n0} bytes at k={k0}, {n1} at k={k1}"
        );
    }
    let (_, n24) = sizes[sizes.len() - 1];
    assert!(n24 < 5000, "{n24} bytes at k = 24");
}

#[test]
fn doubling_dag_text_matches_jax_naming() {
    // As JAX 0.10.2 prints nest(2) (see tests/jaxprs/jax_shared_doubling.jaxpr for k=4):
    // shared jaxprs in breadth-first order, numbered names, the top level inline.
    let top = doubling(2, false);
    let expected = "\
let f = { lambda ; a:f32[]. let
    b:f32[] = jit[name=f jaxpr=f1] a
    c:f32[] = jit[name=f jaxpr=f1] b
  in (c,) } in
let f1 = { lambda ; d:f32[]. let e:f32[] = sin d in (e,) } in
{ lambda ; g:f32[]. let
    h:f32[] = jit[name=f jaxpr=f] g
    i:f32[] = jit[name=f jaxpr=f] h
  in (i,) }";
    assert_eq!(print_jaxpr(&top), expected);
}

#[test]
fn dce_prunes_each_shared_jaxpr_once() {
    // With memoization the result keeps the DAG's sharing; without it the two calls of
    // each level would hold two pruned copies (and k = 24 would prune 2^24 jaxprs).
    for k in [1usize, 3, 24] {
        let top = doubling(k, true);
        assert_eq!(top.eqns().len(), 3);
        let (pruned, used_in) = dce(&top, &[true]).unwrap();
        assert_eq!(used_in, vec![true]);
        typecheck(&pruned).unwrap();
        // Every level lost its dead `cos`, and the two calls share one pruned jaxpr.
        assert_doubling_shared(&pruned, k, 2);
        let text = print_jaxpr(&pruned);
        assert!(!text.contains("cos"), "{text}");
        assert!(text.len() < 200 * (k + 1), "{} bytes", text.len());
    }
}

#[test]
fn dce_memo_is_per_used_outputs() {
    // One body of two outputs in two `jit`s that use different outputs: two prunings,
    // each shared by the calls that use the same outputs.
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[]));
    let s1 = op(&mut b, Builtin::Sin, &[v(x)]);
    let c1 = op(&mut b, Builtin::Cos, &[v(x)]);
    let body = close(b.build(vec![v(s1), v(c1)]).unwrap());
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[]));
    let params = Params::new([("jaxpr", Param::Jaxpr(body.clone())), ("name", s("g"))]);
    let mut outs = Vec::new();
    for _ in 0..4 {
        outs.push(op_p(&mut b, Builtin::Jit, &[v(x)], params.clone()));
    }
    let r = op(&mut b, Builtin::Add, &[v(outs[0][0]), v(outs[1][0])]);
    let r = op(&mut b, Builtin::Add, &[v(r), v(outs[2][1])]);
    let r = op(&mut b, Builtin::Add, &[v(r), v(outs[3][1])]);
    let top = b.build(vec![v(r)]).unwrap();
    let (pruned, _) = dce(&top, &[true]).unwrap();
    typecheck(&pruned).unwrap();
    let subs: Vec<&ClosedJaxpr> = pruned
        .eqns()
        .iter()
        .filter_map(|e| e.sub_jaxprs().next())
        .collect();
    assert_eq!(subs.len(), 4);
    assert!(Arc::ptr_eq(subs[0].jaxpr(), subs[1].jaxpr()));
    assert!(Arc::ptr_eq(subs[2].jaxpr(), subs[3].jaxpr()));
    assert!(!Arc::ptr_eq(subs[0].jaxpr(), subs[2].jaxpr()));
    assert_eq!(subs[0].jaxpr().eqns()[0].primitive().name(), "sin");
    assert_eq!(subs[2].jaxpr().eqns()[0].primitive().name(), "cos");
    let text = print_jaxpr(&pruned);
    assert_eq!(text.matches("let g").count(), 2, "{text}");
    assert_eq!(print_jaxpr(&parse_jaxpr(&text).unwrap()), text);
}

/// Prints, parses and prints again; returns the text (which must have `lets` shared
/// jaxprs) and the parsed jaxpr.
fn roundtrip(j: &Jaxpr, lets: usize) -> (String, Jaxpr) {
    typecheck(j).unwrap();
    let text = print_jaxpr(j);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("let ")).count(),
        lets,
        "{text}"
    );
    let back = parse_jaxpr(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(print_jaxpr(&back), text);
    typecheck(&back).unwrap();
    (text, back)
}

fn unary_body(prim: Builtin) -> ClosedJaxpr {
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = op(&mut b, prim, &[v(x)]);
    close(b.build(vec![v(y)]).unwrap())
}

#[test]
fn shared_cond_branches_roundtrip() {
    let sin = unary_body(Builtin::Sin);
    let cos = unary_body(Builtin::Cos);
    let mut b = JaxprBuilder::new();
    let i = b.add_invar(i32s(&[]));
    let x = b.add_invar(f32s(&[3]));
    let branches = |js: Vec<ClosedJaxpr>| Params::new([("branches", Param::Jaxprs(Arc::new(js)))]);
    // (sin sin): one jaxpr twice; then (cos sin) in a second cond.
    let y = op_p(
        &mut b,
        Builtin::Cond,
        &[v(i), v(x)],
        branches(vec![sin.clone(), sin.clone()]),
    )[0];
    let z = op_p(
        &mut b,
        Builtin::Cond,
        &[v(i), v(y)],
        branches(vec![cos.clone(), sin]),
    )[0];
    let j = b.build(vec![v(z)]).unwrap();
    let (text, back) = roundtrip(&j, 1);
    assert!(text.contains("branches=(jaxpr jaxpr)"), "{text}");
    assert!(text.contains("cos"), "{text}");
    let b0: Vec<&ClosedJaxpr> = back.eqns()[0].sub_jaxprs().collect();
    let b1: Vec<&ClosedJaxpr> = back.eqns()[1].sub_jaxprs().collect();
    assert!(Arc::ptr_eq(b0[0].jaxpr(), b0[1].jaxpr()));
    assert!(Arc::ptr_eq(b0[0].jaxpr(), b1[1].jaxpr()));
    assert!(!Arc::ptr_eq(b0[0].jaxpr(), b1[0].jaxpr()));
}

#[test]
fn shared_scan_and_while_bodies_roundtrip() {
    // A scan body (carry f32[3], xs f32[2,3] -> ys) held by two scans.
    let mut b = JaxprBuilder::new();
    let c = b.add_invar(f32s(&[3]));
    let x = b.add_invar(f32s(&[3]));
    let s = op(&mut b, Builtin::Add, &[v(c), v(x)]);
    let y = op(&mut b, Builtin::Sin, &[v(s)]);
    let scan_body = close(b.build(vec![v(s), v(y)]).unwrap());
    let scan_params = Params::new([
        ("jaxpr", Param::Jaxpr(scan_body)),
        ("length", Param::Int(2)),
        ("reverse", Param::Bool(false)),
        ("num_consts", Param::Int(0)),
        ("num_carry", Param::Int(1)),
        ("linear", Param::Bools(Arc::from(vec![false, false]))),
        ("unroll", Param::Int(1)),
        ("_split_transpose", Param::Bool(false)),
    ]);
    // A while loop's cond and body, held by two loops.
    let mut b = JaxprBuilder::new();
    let c = b.add_invar(f32s(&[]));
    let ten = lit_f32(&mut b, 10.0);
    let p = op(&mut b, Builtin::Lt, &[v(c), ten]);
    let cond = close(b.build(vec![v(p)]).unwrap());
    let mut b = JaxprBuilder::new();
    let c = b.add_invar(f32s(&[]));
    let one = lit_f32(&mut b, 1.0);
    let n = op(&mut b, Builtin::Add, &[v(c), one]);
    let body = close(b.build(vec![v(n)]).unwrap());
    let while_params = Params::new([
        ("cond_jaxpr", Param::Jaxpr(cond)),
        ("body_jaxpr", Param::Jaxpr(body)),
        ("cond_nconsts", Param::Int(0)),
        ("body_nconsts", Param::Int(0)),
    ]);

    let mut b = JaxprBuilder::new();
    let init = b.add_invar(f32s(&[3]));
    let xs = b.add_invar(f32s(&[2, 3]));
    let w = b.add_invar(f32s(&[]));
    let r1 = op_p(
        &mut b,
        Builtin::Scan,
        &[v(init), v(xs)],
        scan_params.clone(),
    );
    let r2 = op_p(&mut b, Builtin::Scan, &[v(r1[0]), v(xs)], scan_params);
    let w1 = op_p(&mut b, Builtin::While, &[v(w)], while_params.clone())[0];
    let w2 = op_p(&mut b, Builtin::While, &[v(w1)], while_params)[0];
    let j = b.build(vec![v(r2[0]), v(r1[1]), v(r2[1]), v(w2)]).unwrap();
    let (text, back) = roundtrip(&j, 3);
    // JAX's order: breadth-first, `while`'s cond before its body (JAX binds them so),
    // though params print sorted (body_jaxpr first).
    let lets: Vec<&str> = text.lines().filter(|l| l.starts_with("let ")).collect();
    assert!(
        lets[0].starts_with("let jaxpr = { lambda ; a:f32[3] b:f32[3]."),
        "{text}"
    );
    assert!(lets[1].contains("lt "), "{text}");
    assert!(lets[2].contains("add "), "{text}");
    assert!(
        text.contains("body_jaxpr=jaxpr2\n      body_nconsts=0\n      cond_jaxpr=jaxpr1"),
        "{text}"
    );
    for (a, b) in [(0, 1), (2, 3)] {
        let sa: Vec<&ClosedJaxpr> = back.eqns()[a].sub_jaxprs().collect();
        let sb: Vec<&ClosedJaxpr> = back.eqns()[b].sub_jaxprs().collect();
        for (x, y) in sa.iter().zip(&sb) {
            assert!(Arc::ptr_eq(x.jaxpr(), y.jaxpr()));
        }
    }
    // DCE keeps the loops' sharing too (the same jaxprs with the same used outputs).
    let (pruned, _) = dce(&j, &[true, true, true, true]).unwrap();
    assert_eq!(print_jaxpr(&pruned).matches("\nlet ").count() + 1, 3);
}

#[test]
fn nested_jits_share_at_every_depth() {
    // g calls f twice; the top calls g twice and f once: f and g are both shared.
    let f = unary_body(Builtin::Exp);
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = jit(&mut b, &f, "f", v(x));
    let z = jit(&mut b, &f, "f", v(y));
    let g = close(b.build(vec![v(z)]).unwrap());
    let mut b = JaxprBuilder::new();
    let x = b.add_invar(f32s(&[3]));
    let y = jit(&mut b, &g, "<lambda>", v(x));
    let z = jit(&mut b, &g, "<lambda>", v(y));
    let w = jit(&mut b, &f, "f", v(z));
    let j = b.build(vec![v(w)]).unwrap();
    let (text, back) = roundtrip(&j, 2);
    assert!(text.starts_with("let lambda = "), "{text}");
    assert!(text.contains("\nlet f = "), "{text}");
    assert!(text.contains("jit[name=<lambda> jaxpr=lambda]"), "{text}");
    // Variables skip the names of shared jaxprs (`f` here), as JAX's do.
    assert!(!text.contains(" f:f32"), "{text}");
    assert_eq!(distinct_subs(&back), 2);
}

#[test]
fn let_names_that_would_not_read_back() {
    // Names that are not identifiers become `jaxpr`; where JAX's numbering repeats a
    // name (`g1`, then `g` twice gives `g1` again), the number goes on.
    let bodies: Vec<ClosedJaxpr> = [
        Builtin::Sin,
        Builtin::Cos,
        Builtin::Exp,
        Builtin::Tanh,
        Builtin::Abs,
    ]
    .into_iter()
    .map(unary_body)
    .collect();
    let names = ["g1", "g", "g", "two words", "float32"];
    let mut b = JaxprBuilder::new();
    let mut x = b.add_invar(f32s(&[3]));
    for (body, name) in bodies.iter().zip(names) {
        for _ in 0..2 {
            x = jit(&mut b, body, name, v(x));
        }
    }
    let j = b.build(vec![v(x)]).unwrap();
    let (text, _) = roundtrip(&j, 5);
    let lets: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("let "))
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(lets, ["g1", "g", "g2", "jaxpr", "jaxpr1"], "{text}");
}

#[test]
fn malformed_let_text_is_a_parse_error() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        (
            "let g = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in\n\
             let g = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in\n\
             { lambda ; a:f32[]. let b:f32[] = jit[name=g jaxpr=g] a in (b,) }",
            (2, 5),
            "defined twice",
        ),
        (
            "{ lambda ; a:f32[]. let b:f32[] = jit[name=g jaxpr=g] a in (b,) }",
            (1, 52),
            "undefined shared jaxpr 'g'",
        ),
        (
            "let g = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) } in\n\
             { lambda ; a:f32[3]. let b:f32[3] = transpose[permutation=g] a in (b,) }",
            (2, 59),
            "'g' names a shared jaxpr, but param 'permutation' of transpose",
        ),
        (
            "let g = { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=h] a in (b,) } in\n\
             let h = { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=g] a in (b,) } in\n\
             { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=g] a in (b,) }",
            (2, 53),
            "'g' is used inside its own definition",
        ),
        (
            "let g = { lambda ; a:f32[]. let b:f32[] = sin a in (b,) }\n\
             { lambda ; a:f32[]. let b:f32[] = jit[jaxpr=g] a in (b,) }",
            (2, 1),
            "'in' after a shared jaxpr",
        ),
    ];
    for (text, (line, col), msg) in cases {
        match parse_jaxpr(text) {
            Err(ReadError::Parse(e)) => {
                assert_eq!((e.line, e.column), (*line, *col), "{e}\n{text}");
                assert!(e.message.contains(msg), "{e}\n{text}");
            }
            other => panic!("expected a parse error, got {other:?}\n{text}"),
        }
    }
}

#[test]
fn deep_doubling_dag_needs_no_deep_stack() {
    // Each `let` names the one after it: reading sets 5000 jaxprs aside, on the heap.
    let k = 5000;
    let top = doubling(k, true);
    let text = print_jaxpr(&top);
    assert_eq!(text.matches("\nlet ").count() + 1, k);
    let back = parse_jaxpr(&text).unwrap();
    assert_eq!(distinct_subs(&back), k);
    let (pruned, _) = dce(&back, &[true]).unwrap();
    assert_doubling_shared(&pruned, k, 2);
}
