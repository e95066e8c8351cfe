//! Partial evaluation: on hand-written jaxprs exercising each rule and on random generated
//! ones, running the known jaxpr on the known inputs and then the unknown jaxpr on the
//! residuals and the unknown inputs gives what the original gives (reference evaluator);
//! both halves typecheck and hold no dead code; the unknown outputs are exactly those that
//! depend on an unknown input (or are instantiated).

mod common_build;

use common_build::random_value;
use ferrax_ir::eval::{check_close, eval_jaxpr, HostArray};
use ferrax_ir::generate::{nested_jits, random_jaxpr, RandomOptions, Rng};
use ferrax_ir::passes::{partial_eval, PartialEval, PassError};
use ferrax_ir::text::parse_jaxpr;
use ferrax_ir::{typecheck, Atom, DType, Eqn, Jaxpr, Param};
use std::collections::HashSet;

fn sub<'a>(e: &'a Eqn, name: &str) -> &'a Jaxpr {
    match e.params().get(name) {
        Some(Param::Jaxpr(cj)) => cj.jaxpr(),
        other => panic!("{name}: {other:?}"),
    }
}

fn int(e: &Eqn, name: &str) -> usize {
    match e.params().get(name) {
        Some(Param::Int(n)) => *n as usize,
        other => panic!("{name}: {other:?}"),
    }
}

/// Which outputs depend on an unknown input, by the rules the pass documents (an
/// independent, recursive model: test inputs are shallow).
fn deps(j: &Jaxpr, uk_in: &[bool]) -> Vec<bool> {
    let mut uk = vec![false; j.num_vars()];
    for (v, &u) in j.invars().iter().zip(uk_in) {
        uk[v.index()] = u;
    }
    let a_uk = |uk: &[bool], a: &Atom| matches!(a, Atom::Var(v) if uk[v.index()]);
    for e in j.eqns() {
        let ins: Vec<bool> = e.inputs().iter().map(|a| a_uk(&uk, a)).collect();
        let n = e.outvars().len();
        let outs: Vec<bool> = if !ins.iter().any(|&u| u) {
            vec![false; n]
        } else {
            match e.primitive().name() {
                "jit" | "remat2" => deps(sub(e, "jaxpr"), &ins),
                "cond" if !ins[0] => {
                    let Some(Param::Jaxprs(bs)) = e.params().get("branches") else {
                        panic!("branches")
                    };
                    bs.iter().fold(vec![false; n], |acc, b| {
                        let d = deps(b.jaxpr(), &ins[1..]);
                        acc.iter().zip(&d).map(|(&x, &y)| x || y).collect()
                    })
                }
                "scan" => {
                    let nc = int(e, "num_consts");
                    let ncarry = int(e, "num_carry");
                    let mut carry = ins[nc..nc + ncarry].to_vec();
                    loop {
                        let mut flags = ins[..nc].to_vec();
                        flags.extend_from_slice(&carry);
                        flags.extend_from_slice(&ins[nc + ncarry..]);
                        let o = deps(sub(e, "jaxpr"), &flags);
                        let grown: Vec<bool> =
                            carry.iter().zip(&o).map(|(&x, &y)| x || y).collect();
                        if grown == carry {
                            let mut out = carry.clone();
                            out.extend_from_slice(&o[ncarry..]);
                            break out;
                        }
                        carry = grown;
                    }
                }
                "while" => {
                    let cn = int(e, "cond_nconsts");
                    let bn = int(e, "body_nconsts");
                    let mut carry = ins[cn + bn..].to_vec();
                    loop {
                        let mut bf = ins[cn..cn + bn].to_vec();
                        bf.extend_from_slice(&carry);
                        let o = deps(sub(e, "body_jaxpr"), &bf);
                        let grown: Vec<bool> =
                            carry.iter().zip(&o).map(|(&x, &y)| x || y).collect();
                        if grown == carry {
                            break;
                        }
                        carry = grown;
                    }
                    let mut cf = ins[..cn].to_vec();
                    cf.extend_from_slice(&carry);
                    if deps(sub(e, "cond_jaxpr"), &cf)[0] {
                        vec![true; n]
                    } else {
                        carry
                    }
                }
                _ => vec![true; n],
            }
        };
        for (v, u) in e.outvars().iter().zip(outs) {
            uk[v.index()] = u;
        }
    }
    j.outvars().iter().map(|a| a_uk(&uk, a)).collect()
}

/// Every top-level equation has a used output, and every input of the unknown jaxpr
/// that is a residual is used.
fn assert_no_dead(j: &Jaxpr, what: &str) {
    let mut used: HashSet<usize> = HashSet::new();
    for a in j.outvars() {
        if let Atom::Var(v) = a {
            used.insert(v.index());
        }
    }
    for (i, e) in j.eqns().iter().enumerate().rev() {
        assert!(
            e.outvars().iter().any(|v| used.contains(&v.index())),
            "{what}: equation {i} ({}) is dead in\n{j}",
            e.primitive().name()
        );
        for a in e.inputs() {
            if let Atom::Var(v) = a {
                used.insert(v.index());
            }
        }
    }
}

fn used_vars(j: &Jaxpr) -> HashSet<usize> {
    let mut used = HashSet::new();
    for e in j.eqns() {
        for a in e.inputs() {
            if let Atom::Var(v) = a {
                used.insert(v.index());
            }
        }
    }
    for a in j.outvars() {
        if let Atom::Var(v) = a {
            used.insert(v.index());
        }
    }
    used
}

/// Runs the pass and checks it against the original on these arguments.
fn check(
    j: &Jaxpr,
    consts: &[HostArray],
    args: &[HostArray],
    unknowns: &[bool],
    instantiate: &[bool],
    what: &str,
) -> PartialEval {
    let pe = partial_eval(j, unknowns, instantiate).unwrap_or_else(|e| panic!("{what}: {e}\n{j}"));
    let ctx = || {
        format!("{what} unknowns {unknowns:?} instantiate {instantiate:?}\n{j}\nknown:\n{}\nunknown:\n{}", pe.known, pe.unknown)
    };
    typecheck(&pe.known).unwrap_or_else(|e| panic!("{}: known: {e}", ctx()));
    typecheck(&pe.unknown).unwrap_or_else(|e| panic!("{}: unknown: {e}", ctx()));
    assert_no_dead(&pe.known, &ctx());
    assert_no_dead(&pe.unknown, &ctx());
    let nres = pe.num_residuals;
    let nk_in = unknowns.iter().filter(|&&u| !u).count();
    assert_eq!(pe.known.invars().len(), nk_in, "{}", ctx());
    assert_eq!(pe.known.constvars().len(), j.constvars().len());
    assert!(pe.unknown.constvars().is_empty(), "{}", ctx());
    assert_eq!(
        pe.unknown.invars().len(),
        nres + unknowns.len() - nk_in,
        "{}",
        ctx()
    );
    // Exact unknown outputs.
    let mut want_uk = deps(j, unknowns);
    for (w, &i) in want_uk.iter_mut().zip(instantiate) {
        *w |= i;
    }
    assert_eq!(pe.out_unknowns, want_uk, "{}", ctx());
    let nk_out = pe.out_unknowns.iter().filter(|&&u| !u).count();
    assert_eq!(pe.known.outvars().len(), nk_out + nres, "{}", ctx());
    assert_eq!(
        pe.unknown.outvars().len(),
        pe.out_unknowns.len() - nk_out,
        "{}",
        ctx()
    );
    // Residuals: distinct variables, each used by the unknown jaxpr.
    let res: HashSet<Atom> = pe.known.outvars()[nk_out..].iter().copied().collect();
    assert_eq!(res.len(), nres, "{}: duplicate residuals", ctx());
    assert!(res.iter().all(|a| matches!(a, Atom::Var(_))), "{}", ctx());
    let used = used_vars(&pe.unknown);
    for v in &pe.unknown.invars()[..nres] {
        assert!(used.contains(&v.index()), "{}: unused residual", ctx());
    }

    let expected = eval_jaxpr(j, consts, args).unwrap_or_else(|e| panic!("{}: {e}", ctx()));
    let known_args: Vec<HostArray> = args
        .iter()
        .zip(unknowns)
        .filter(|(_, &u)| !u)
        .map(|(a, _)| a.clone())
        .collect();
    let kout = eval_jaxpr(&pe.known, consts, &known_args)
        .unwrap_or_else(|e| panic!("{}: known: {e}", ctx()));
    let mut uargs: Vec<HostArray> = kout[nk_out..].to_vec();
    uargs.extend(
        args.iter()
            .zip(unknowns)
            .filter(|(_, &u)| u)
            .map(|(a, _)| a.clone()),
    );
    let uout =
        eval_jaxpr(&pe.unknown, &[], &uargs).unwrap_or_else(|e| panic!("{}: unknown: {e}", ctx()));
    let (mut k, mut u) = (kout.iter(), uout.iter());
    for (i, (exp, &is_uk)) in expected.iter().zip(&pe.out_unknowns).enumerate() {
        let got = if is_uk { u.next() } else { k.next() }.unwrap();
        check_close(got, exp, 0.0, 0.0).unwrap_or_else(|m| panic!("{}: output {i}: {m}", ctx()));
    }
    pe
}

fn args_of(j: &Jaxpr, rng: &mut Rng) -> Vec<HostArray> {
    j.in_avals().iter().map(|a| random_value(a, rng)).collect()
}

/// Checks every unknown mask with a few instantiate masks.
fn check_all_masks(j: &Jaxpr, consts: &[HostArray], seed: u64, what: &str) {
    let mut rng = Rng::new(seed);
    let args = args_of(j, &mut rng);
    let n = j.invars().len();
    let m = j.outvars().len();
    for mask in 0..(1u32 << n) {
        let unknowns: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
        for inst in [0u32, (1 << m) - 1, rng.below(1 << m) as u32] {
            let instantiate: Vec<bool> = (0..m).map(|i| inst & (1 << i) != 0).collect();
            check(j, consts, &args, &unknowns, &instantiate, what);
        }
    }
}

fn names(j: &Jaxpr) -> Vec<&str> {
    j.eqns().iter().map(|e| e.primitive().name()).collect()
}

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn random_jaxprs_split_exactly() {
    // How many jaxprs split a top-level while loop into a known and an unknown one, for
    // some mask (the generator's loops carry a known counter next to a value).
    let mut split_whiles = 0;
    for seed in 0..150 {
        let j = random_jaxpr(seed, RandomOptions::default()).unwrap();
        check_all_masks(&j, &[], seed ^ 0x5EED, &format!("seed {seed}"));
        let n = j.invars().len();
        let splits = (0..1u32 << n).any(|mask| {
            let uk: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
            let pe = partial_eval(&j, &uk, &vec![false; j.outvars().len()]).unwrap();
            names(&pe.known).contains(&"while") && names(&pe.unknown).contains(&"while")
        });
        split_whiles += usize::from(splits);
    }
    assert!(split_whiles >= 3, "{split_whiles}");
}

#[test]
fn deeper_random_jaxprs_split_exactly() {
    let opts = RandomOptions {
        eqns: 8,
        max_depth: 3,
        inputs: 4,
    };
    for seed in 1000..1040 {
        let j = random_jaxpr(seed, opts).unwrap();
        let mut rng = Rng::new(seed);
        let args = args_of(&j, &mut rng);
        for _ in 0..6 {
            let unknowns: Vec<bool> = (0..j.invars().len()).map(|_| rng.chance(0.5)).collect();
            let inst: Vec<bool> = (0..j.outvars().len()).map(|_| rng.chance(0.3)).collect();
            check(&j, &[], &args, &unknowns, &inst, &format!("seed {seed}"));
        }
    }
}

#[test]
fn all_known_gives_an_empty_unknown_jaxpr() {
    for seed in 0..40 {
        let j = random_jaxpr(seed, RandomOptions::default()).unwrap();
        let pe = partial_eval(
            &j,
            &vec![false; j.invars().len()],
            &vec![false; j.outvars().len()],
        )
        .unwrap();
        assert!(pe.unknown.eqns().is_empty());
        assert!(pe.unknown.invars().is_empty());
        assert!(pe.unknown.outvars().is_empty());
        assert_eq!(pe.num_residuals, 0);
        assert!(pe.out_unknowns.iter().all(|&u| !u));
        assert_eq!(pe.known.outvars().len(), j.outvars().len());
    }
}

#[test]
fn all_unknown_gives_an_empty_known_jaxpr_for_chains() {
    let j = ferrax_ir::generate::chain(50, 3).unwrap();
    let pe = partial_eval(&j, &[true], &[false]).unwrap();
    assert!(pe.known.eqns().is_empty());
    assert_eq!(pe.num_residuals, 0);
    assert_eq!(pe.unknown.eqns().len(), j.eqns().len());
}

#[test]
fn flag_counts_are_checked() {
    let j = parse("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }");
    assert_eq!(
        partial_eval(&j, &[true], &[false]).unwrap_err(),
        PassError::FlagCount {
            what: "unknowns",
            expected: 2,
            got: 1
        }
    );
    assert_eq!(
        partial_eval(&j, &[true, false], &[]).unwrap_err(),
        PassError::FlagCount {
            what: "instantiate",
            expected: 1,
            got: 0
        }
    );
    let msg = partial_eval(&j, &[true, false], &[false, true])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("instantiate has 2 flags"), "{msg}");
}

#[test]
fn residuals_are_known_values_unknown_equations_use() {
    // s = sin(a) is used twice by unknown equations (one residual); the known input a is
    // used by one (a residual too); literals stay literals; c is known and not needed.
    let j = parse(
        "{ lambda ; a:f32[3] b:f32[3]. let
            s:f32[3] = sin a
            c:f32[3] = cos a
            t:f32[3] = mul s b
            u:f32[3] = add t s
            w:f32[3] = mul u a
            x:f32[3] = mul w 2.0:f32[]
          in (x, c) }",
    );
    let mut rng = Rng::new(1);
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &[], &args, &[false, true], &[false, false], "residuals");
    assert_eq!(pe.num_residuals, 2);
    assert_eq!(names(&pe.known), vec!["sin", "cos"]);
    assert_eq!(names(&pe.unknown), vec!["mul", "add", "mul", "mul"]);
    assert_eq!(pe.out_unknowns, vec![true, false]);
    assert!(matches!(pe.unknown.eqns()[3].inputs()[1], Atom::Lit(_)));
}

#[test]
fn instantiate_makes_known_outputs_unknown() {
    let j = parse(
        "{ lambda ; a:f32[3] b:f32[3]. let
            s:f32[3] = sin a
            t:f32[3] = mul s b
          in (t, s, a, 1.0:f32[]) }",
    );
    let mut rng = Rng::new(2);
    let args = args_of(&j, &mut rng);
    let pe = check(
        &j,
        &[],
        &args,
        &[false, true],
        &[false, true, true, true],
        "instantiate",
    );
    assert_eq!(pe.out_unknowns, vec![true; 4]);
    // s is a residual once, although both the mul and an output need it; a is one too.
    assert_eq!(pe.num_residuals, 2);
    assert!(matches!(pe.unknown.outvars()[3], Atom::Lit(_)));
    // Not instantiated: s and a are known outputs, and a is no residual.
    let pe = check(
        &j,
        &[],
        &args,
        &[false, true],
        &[false; 4],
        "no instantiate",
    );
    assert_eq!(pe.out_unknowns, vec![true, false, false, false]);
    assert_eq!(pe.num_residuals, 1);
}

#[test]
fn constants_used_by_unknown_equations_are_residuals() {
    let j = parse(
        "{ lambda k:f32[3]; a:f32[3]. let
            b:f32[3] = mul a k
            c:f32[3] = sin k
          in (b, c) }",
    );
    let mut rng = Rng::new(3);
    let consts = vec![random_value(&j.const_avals()[0], &mut rng)];
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &consts, &args, &[true], &[false, false], "consts");
    assert_eq!(pe.num_residuals, 1);
    assert_eq!(pe.out_unknowns, vec![true, false]);
    check_all_masks(&j, &consts, 3, "consts");
}

const JIT: &str = "{ lambda ; x:f32[3] y:f32[3]. let
    z:f32[3] w:f32[3] v:f32[] = jit[
      jaxpr={ lambda ; a:f32[3] b:f32[3]. let
          c:f32[3] = sin a
          d:f32[3] = mul c b
          e:f32[] = reduce_sum[axes=(0,)] a
          f:f32[3] = cos a
        in (d, c, e) }
      name=f
    ] x y
    u:f32[3] = add z w
  in (u, v) }";

#[test]
fn jit_splits_into_a_known_and_an_unknown_call() {
    let j = parse(JIT);
    let mut rng = Rng::new(4);
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &[], &args, &[false, true], &[false, false], "jit");
    assert_eq!(pe.out_unknowns, vec![true, false]);
    assert_eq!(names(&pe.known), vec!["jit"]);
    assert_eq!(names(&pe.unknown), vec!["jit", "add"]);
    let inner_k = sub(&pe.known.eqns()[0], "jaxpr");
    let inner_u = sub(&pe.unknown.eqns()[0], "jaxpr");
    // The known call computes sin and the sum (cos is dead); the unknown one multiplies.
    assert_eq!(names(inner_k), vec!["sin", "reduce_sum"]);
    assert_eq!(names(inner_u), vec!["mul"]);
    assert_eq!(
        pe.known.eqns()[0].params().get("name"),
        j.eqns()[0].params().get("name")
    );
    check_all_masks(&j, &[], 4, "jit");
}

#[test]
fn shared_sub_jaxprs_are_split_once() {
    let j = parse(JIT);
    let inner = j.eqns()[0].params().get("jaxpr").unwrap().clone();
    // Two calls of the same closed jaxpr.
    let mut b = ferrax_ir::JaxprBuilder::new();
    let x = b.add_invar(j.in_avals()[0].clone());
    let y = b.add_invar(j.in_avals()[1].clone());
    let params = ferrax_ir::Params::new([("jaxpr", inner), ("name", Param::Str("g".into()))]);
    let o1 = b
        .add_eqn(
            ferrax_ir::Builtin::Jit.into(),
            vec![Atom::Var(x), Atom::Var(y)],
            params.clone(),
        )
        .unwrap();
    let o2 = b
        .add_eqn(
            ferrax_ir::Builtin::Jit.into(),
            vec![Atom::Var(o1[1]), Atom::Var(y)],
            params,
        )
        .unwrap();
    let outs = [o1[0], o1[2], o2[0], o2[1], o2[2]];
    let j2 = b
        .build(outs.iter().map(|&o| Atom::Var(o)).collect())
        .unwrap();
    let mut rng = Rng::new(5);
    let args = args_of(&j2, &mut rng);
    let pe = check(&j2, &[], &args, &[false, true], &[false; 5], "shared");
    let Some(Param::Jaxpr(k1)) = pe.known.eqns()[0].params().get("jaxpr") else {
        panic!()
    };
    let Some(Param::Jaxpr(k2)) = pe.known.eqns()[1].params().get("jaxpr") else {
        panic!()
    };
    assert!(std::sync::Arc::ptr_eq(k1.jaxpr(), k2.jaxpr()));
}

const COND: &str = "{ lambda ; i:i32[] x:f32[3] y:f32[3]. let
    z:f32[3] w:f32[] = cond[
      branches=(
        { lambda ; a:f32[3] b:f32[3]. let
            c:f32[3] = sin a
            d:f32[3] = mul c b
            e:f32[] = reduce_sum[axes=(0,)] a
          in (d, e) }
        { lambda ; a:f32[3] b:f32[3]. let
            c:f32[] = reduce_max[axes=(0,)] a
            d:f32[3] = mul b c
            g:f32[3] = cos a
            h:f32[3] = mul d g
            e:f32[] = reduce_sum[axes=(0,)] b
          in (h, e) }
        { lambda ; a:f32[3] b:f32[3]. let
          in (a, 2.0:f32[]) }
      )
    ] i x y
  in (z, w) }";

#[test]
fn cond_branches_return_joined_residuals() {
    let j = parse(COND);
    let mut rng = Rng::new(6);
    for index in -1..4 {
        let mut args = args_of(&j, &mut rng);
        args[0] = HostArray::scalar_i64(DType::I32, index).unwrap();
        let pe = check(
            &j,
            &[],
            &args,
            &[false, false, true],
            &[false, false],
            "cond",
        );
        // z is unknown in the first two branches, w in the second: both are unknown.
        assert_eq!(pe.out_unknowns, vec![true, true]);
        assert_eq!(names(&pe.known), vec!["cond"]);
        assert_eq!(names(&pe.unknown), vec!["cond"]);
        // Slots: f32[3] (sin a / cos a share one, third branch's a forwarded), f32[]
        // (reduce_max); and the index.
        let Some(Param::Jaxprs(kb)) = pe.known.eqns()[0].params().get("branches") else {
            panic!()
        };
        for b in kb.iter() {
            assert_eq!(
                b.out_avals()
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>(),
                vec!["f32[3]", "f32[]"]
            );
        }
        // The unknown cond takes the index and the slots as residuals, then y.
        assert_eq!(pe.num_residuals, 3);
        check_all_masks(&j, &[], index as u64, "cond");
    }
}

#[test]
fn cond_with_an_unknown_index_is_unknown() {
    let j = parse(COND);
    let mut rng = Rng::new(7);
    let args = args_of(&j, &mut rng);
    let pe = check(
        &j,
        &[],
        &args,
        &[true, false, false],
        &[false, false],
        "cond",
    );
    assert!(pe.known.eqns().is_empty());
    assert_eq!(names(&pe.unknown), vec!["cond"]);
    assert_eq!(pe.num_residuals, 2);
}

const SCAN: &str = "{ lambda ; k:f32[3] c:f32[3] u:f32[3] xs:f32[4,3] us:f32[4,3]. let
    c2:f32[3] u2:f32[3] ys:f32[4,3] zs:f32[4,3] = scan[
      jaxpr={ lambda ; k:f32[3] c:f32[3] u:f32[3] x:f32[3] v:f32[3]. let
          c1:f32[3] = mul c 0.5:f32[]
          s:f32[3] = sin c
          w:f32[3] = mul s v
          w2:f32[3] = mul w k
          w3:f32[3] = mul w2 x
          u1:f32[3] = add u w3
          z:f32[3] = cos x
        in (c1, u1, w3, z) }
      length=4
      linear=(False, False, False, False, False)
      num_carry=2
      num_consts=1
      reverse=REV
      unroll=1
    ] k c u xs us
  in (c2, u2, ys, zs) }";

#[test]
fn scan_stacks_residuals_and_forwards_consts_and_xs() {
    for rev in ["False", "True"] {
        let j = parse(&SCAN.replace("REV", rev));
        let mut rng = Rng::new(8);
        let args = args_of(&j, &mut rng);
        let pe = check(
            &j,
            &[],
            &args,
            &[false, false, true, false, true],
            &[false; 4],
            "scan",
        );
        assert_eq!(pe.out_unknowns, vec![false, true, true, false]);
        assert_eq!(names(&pe.known), vec!["scan"]);
        assert_eq!(names(&pe.unknown), vec!["scan"]);
        let ks = &pe.known.eqns()[0];
        let us = &pe.unknown.eqns()[0];
        // Known scan: carry c, ys = zs and the stacked sin(c).
        assert_eq!(int(ks, "num_carry"), 1);
        let stacked: Vec<String> = ks.outvars()[1..]
            .iter()
            .map(|&v| pe.known.var_aval(v).to_string())
            .collect();
        assert_eq!(stacked, vec!["f32[4,3]", "f32[4,3]"]);
        // Unknown scan: k forwarded as a const, xs forwarded and sin(c) stacked as xs.
        assert_eq!(int(us, "num_consts"), 1);
        assert_eq!(int(us, "num_carry"), 1);
        assert_eq!(us.inputs().len(), 5);
        assert_eq!(us.params().get("reverse"), ks.params().get("reverse"));
        assert_eq!(us.params().get("length"), Some(&Param::Int(4)));
        let Some(Param::Bools(lin)) = us.params().get("linear") else {
            panic!()
        };
        assert_eq!(lin.len(), 5);
        check_all_masks(&j, &[], 8, "scan");
    }
}

#[test]
fn scan_carry_unknowns_reach_a_fixpoint() {
    // The unknown reaches c through three iterations of the fixpoint: u -> b -> a -> c.
    let j = parse(
        "{ lambda ; a:f32[] b:f32[] c:f32[] u:f32[] xs:f32[5]. let
            a2:f32[] b2:f32[] c2:f32[] u2:f32[] ys:f32[5] = scan[
              jaxpr={ lambda ; a:f32[] b:f32[] c:f32[] u:f32[] x:f32[]. let
                  c1:f32[] = add c a
                  a1:f32[] = mul a b
                  b1:f32[] = sin u
                  y:f32[] = mul c x
                in (a1, b1, c1, u, y) }
              length=5
              num_carry=4
              num_consts=0
              reverse=False
            ] a b c u xs
          in (a2, b2, c2, u2, ys) }",
    );
    let mut rng = Rng::new(9);
    let args = args_of(&j, &mut rng);
    let pe = check(
        &j,
        &[],
        &args,
        &[false, false, false, true, false],
        &[false; 5],
        "fixpoint",
    );
    assert_eq!(pe.out_unknowns, vec![true; 5]);
    check_all_masks(&j, &[], 9, "fixpoint");
}

const WHILE: &str = "{ lambda ; k:f32[3] m:i32[] n:f32[3] x:f32[3]. let
    i:i32[] y:f32[3] = while[
      body_jaxpr={ lambda ; n:f32[3] k:f32[3] i:i32[] x:f32[3]. let
          i1:i32[] = add i 1:i32[]
          x1:f32[3] = mul x k
          d:f32[3] = sin n
        in (i1, x1) }
      body_nconsts=2
      cond_jaxpr={ lambda ; m:i32[] i:i32[] x:f32[3]. let
          b:bool[] = lt i m
        in (b,) }
      cond_nconsts=1
    ] m n k 0:i32[] x
  in (i, y) }";

/// The known `while` of a split loop (the first equation of `known`) and the unknown one.
fn split_whiles<'a>(pe: &'a PartialEval, orig: &'a Eqn) -> (&'a Eqn, &'a Eqn) {
    assert_eq!(names(&pe.known), vec!["while"]);
    assert_eq!(names(&pe.unknown), vec!["while"]);
    let (k, u) = (&pe.known.eqns()[0], &pe.unknown.eqns()[0]);
    // The unknown loop is the original one, sharing its sub-jaxprs.
    for name in ["cond_jaxpr", "body_jaxpr"] {
        assert!(std::ptr::eq(sub(u, name), sub(orig, name)), "{name}");
    }
    assert_eq!(u.inputs().len(), orig.inputs().len());
    (k, u)
}

#[test]
fn while_splits_into_a_known_loop_and_the_whole_loop() {
    let j = parse(WHILE);
    let orig = &j.eqns()[0];
    let mut rng = Rng::new(10);
    let mut args = args_of(&j, &mut rng);
    args[1] = HostArray::scalar_i64(DType::I32, 3).unwrap();
    // x unknown: the counter is known, y unknown. The known loop runs the counter alone
    // (no body const: k only fed y, n only dead code); the unknown loop is the original,
    // taking m, n and k as residuals (the literal initial counter stays a literal).
    let pe = check(
        &j,
        &[],
        &args,
        &[false, false, false, true],
        &[false; 2],
        "while x",
    );
    assert_eq!(pe.out_unknowns, vec![false, true]);
    let (k, _) = split_whiles(&pe, orig);
    assert_eq!(int(k, "cond_nconsts"), 1);
    assert_eq!(int(k, "body_nconsts"), 0);
    assert_eq!(k.outvars().len(), 1);
    assert_eq!(names(sub(k, "body_jaxpr")), vec!["add"]);
    assert_eq!(pe.num_residuals, 3);
    // k unknown: y becomes unknown through the body; the counter stays known.
    let pe = check(
        &j,
        &[],
        &args,
        &[true, false, false, false],
        &[false; 2],
        "while k",
    );
    assert_eq!(pe.out_unknowns, vec![false, true]);
    split_whiles(&pe, orig);
    // m, n and x.
    assert_eq!(pe.num_residuals, 3);
    // m unknown: the condition is unknown, so is the whole loop.
    let pe = check(
        &j,
        &[],
        &args,
        &[false, true, false, false],
        &[false; 2],
        "while m",
    );
    assert_eq!(pe.out_unknowns, vec![true, true]);
    assert!(pe.known.eqns().is_empty());
    assert_eq!(names(&pe.unknown), vec!["while"]);
    // n unknown: only dead code uses it, the loop is known and no longer takes n.
    let pe = check(
        &j,
        &[],
        &args,
        &[false, false, true, false],
        &[false; 2],
        "while n",
    );
    assert_eq!(pe.out_unknowns, vec![false, false]);
    assert_eq!(names(&pe.known), vec!["while"]);
    assert_eq!(int(&pe.known.eqns()[0], "body_nconsts"), 1);
    assert!(pe.unknown.eqns().is_empty());
    // Instantiated, the known counter is returned by the unknown jaxpr too.
    let pe = check(
        &j,
        &[],
        &args,
        &[false, false, false, true],
        &[true, false],
        "while x instantiated",
    );
    assert_eq!(pe.out_unknowns, vec![true, true]);
    check_all_masks(&j, &[], 10, "while");
}

/// The loop a JVP makes of `fori_loop(0, n, lambda i, x: sin(x), x)`: primal x and
/// tangent t carried together.
const WHILE_JVP: &str = "{ lambda ; n:i32[] x:f32[3] t:f32[3]. let
    i:i32[] y:f32[3] dy:f32[3] = while[
      body_jaxpr={ lambda ; i:i32[] x:f32[3] t:f32[3]. let
          i1:i32[] = add i 1:i32[]
          x1:f32[3] = sin x
          c:f32[3] = cos x
          t1:f32[3] = mul c t
        in (i1, x1, t1) }
      body_nconsts=0
      cond_jaxpr={ lambda ; n:i32[] i:i32[] x:f32[3] t:f32[3]. let
          b:bool[] = lt i n
        in (b,) }
      cond_nconsts=1
    ] n 0:i32[] x t
  in (i, y, dy) }";

#[test]
fn while_of_a_jvp_keeps_the_primal_known() {
    let j = parse(WHILE_JVP);
    let mut rng = Rng::new(14);
    let mut args = args_of(&j, &mut rng);
    for n in [-1, 0, 1, 4] {
        args[0] = HostArray::scalar_i64(DType::I32, n).unwrap();
        let pe = check(&j, &[], &args, &[false, false, true], &[false; 3], "jvp");
        assert_eq!(pe.out_unknowns, vec![false, false, true]);
        let (k, _) = split_whiles(&pe, &j.eqns()[0]);
        // The known loop carries the counter and the primal, and computes no cosine.
        assert_eq!(k.outvars().len(), 2);
        assert_eq!(names(sub(k, "body_jaxpr")), vec!["add", "sin"]);
        assert_eq!(sub(k, "cond_jaxpr").invars().len(), 3);
        // Residuals: n and x (the counter's initial value is a literal).
        assert_eq!(pe.num_residuals, 2);
        check_all_masks(&j, &[], n as u64, "jvp");
    }
}

#[test]
fn while_with_a_condition_made_unknown_through_the_body_is_unknown() {
    // u reaches b, then a, which the condition reads: the whole loop is unknown; c is
    // never unknown but the loop's outputs all are.
    let j = parse(
        "{ lambda ; a:f32[] b:f32[] c:f32[] u:f32[]. let
            i:i32[] a2:f32[] b2:f32[] c2:f32[] u2:f32[] = while[
              body_jaxpr={ lambda ; i:i32[] a:f32[] b:f32[] c:f32[] u:f32[]. let
                  i1:i32[] = add i 1:i32[]
                  a1:f32[] = mul a b
                  b1:f32[] = sin u
                  c1:f32[] = cos c
                in (i1, a1, b1, c1, u) }
              body_nconsts=0
              cond_jaxpr={ lambda ; i:i32[] a:f32[] b:f32[] c:f32[] u:f32[]. let
                  p:bool[] = lt i 3:i32[]
                  q:bool[] = lt a 1e9:f32[]
                  r:bool[] = and p q
                in (r,) }
              cond_nconsts=0
            ] 0:i32[] a b c u
          in (i, a2, b2, c2, u2) }",
    );
    let mut rng = Rng::new(15);
    let args = args_of(&j, &mut rng);
    for uk in [
        [false, false, false, true],
        [false, true, false, false],
        [true, false, false, false],
    ] {
        let pe = check(&j, &[], &args, &uk, &[false; 5], "cond unknown");
        assert_eq!(pe.out_unknowns, vec![true; 5]);
        assert!(pe.known.eqns().is_empty());
    }
    // c unknown: it feeds only itself; the rest is known.
    let pe = check(
        &j,
        &[],
        &args,
        &[false, false, true, false],
        &[false; 5],
        "c unknown",
    );
    assert_eq!(pe.out_unknowns, vec![false, false, false, true, false]);
    check_all_masks(&j, &[], 15, "cond unknown");
}

#[test]
fn nested_control_flow_splits() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jaxprs/nested_all.jaxpr"
    ))
    .unwrap();
    let first: String = text
        .split("; expect:")
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(';'))
        .collect::<Vec<_>>()
        .join("\n");
    let j = parse(&first);
    let mut rng = Rng::new(11);
    let consts = vec![random_value(&j.const_avals()[0], &mut rng)];
    check_all_masks(&j, &consts, 11, "nested_all");
}

#[test]
fn deep_nesting_does_not_overflow() {
    let cj = nested_jits(100_000).unwrap();
    let j = cj.jaxpr();
    let pe = partial_eval(j, &[true], &[false]).unwrap();
    assert_eq!(pe.out_unknowns, vec![true]);
    assert_eq!(pe.num_residuals, 0);
    let pe = partial_eval(j, &[false], &[true]).unwrap();
    assert_eq!(pe.out_unknowns, vec![true]);
    assert_eq!(pe.num_residuals, 1);
}

/// Level k calls level k-1 twice (the second time on the first call's output): 2^depth
/// calls unshared, 2 * depth (sub-jaxpr, flags) pairs shared.
fn shared_tower(depth: usize) -> Jaxpr {
    let mut inner =
        parse("{ lambda ; x:f32[3] y:f32[3]. let s:f32[3] = sin x; z:f32[3] = mul s y in (z,) }");
    for _ in 0..depth {
        let cj = ferrax_ir::ClosedJaxpr::new(std::sync::Arc::new(inner), vec![]).unwrap();
        let mut b = ferrax_ir::JaxprBuilder::new();
        let x = b.add_invar(cj.in_avals()[0].clone());
        let y = b.add_invar(cj.in_avals()[1].clone());
        let params = ferrax_ir::Params::new([
            ("jaxpr", Param::Jaxpr(cj)),
            ("name", Param::Str("level".into())),
        ]);
        let jit = ferrax_ir::Builtin::Jit;
        let a = b
            .add_eqn(jit.into(), vec![Atom::Var(x), Atom::Var(y)], params.clone())
            .unwrap()[0];
        let c = b
            .add_eqn(jit.into(), vec![Atom::Var(a), Atom::Var(y)], params)
            .unwrap()[0];
        inner = b.build(vec![Atom::Var(c)]).unwrap();
    }
    inner
}

#[test]
fn shared_sub_jaxprs_keep_the_pass_linear() {
    let small = shared_tower(3);
    let mut rng = Rng::new(12);
    let args = args_of(&small, &mut rng);
    check_all_masks(&small, &[], 12, "tower");
    check(&small, &[], &args, &[true, false], &[false], "tower");
    // 2^60 calls if the sharing were lost.
    let j = shared_tower(60);
    let pe = partial_eval(&j, &[false, true], &[false]).unwrap();
    assert_eq!(pe.out_unknowns, vec![true]);
    assert_eq!(names(&pe.known), vec!["jit"]);
    assert_eq!(names(&pe.unknown), vec!["jit", "jit"]);
    typecheck(&pe.known).unwrap();
    typecheck(&pe.unknown).unwrap();
}

#[test]
fn scan_residuals_computed_from_consts_alone_are_computed_once() {
    let j = parse(
        "{ lambda ; k:f32[3] c:f32[3] xs:f32[4,3]. let
            c2:f32[3] ys:f32[4,3] = scan[
              jaxpr={ lambda ; k:f32[3] c:f32[3] x:f32[3]. let
                  s:f32[3] = sin k
                  t:f32[3] = cos c
                  u:f32[3] = mul s x
                  w:f32[3] = mul u t
                  c1:f32[3] = add c 1.0:f32[]
                in (c1, w) }
              length=4
              num_carry=1
              num_consts=1
              reverse=False
            ] k c xs
          in (c2, ys) }",
    );
    let mut rng = Rng::new(13);
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &[], &args, &[false, false, true], &[false; 2], "hoist");
    // sin(k) once, before the loop; cos(c) stacked.
    assert_eq!(names(&pe.known), vec!["jit", "scan"]);
    assert_eq!(names(sub(&pe.known.eqns()[0], "jaxpr")), vec!["sin"]);
    let ks = &pe.known.eqns()[1];
    assert_eq!(names(sub(ks, "jaxpr")), vec!["cos", "add"]);
    assert_eq!(ks.outvars().len(), 2);
    let us = &pe.unknown.eqns()[0];
    assert_eq!(int(us, "num_consts"), 1);
    assert_eq!(names(sub(us, "jaxpr")), vec!["mul", "mul"]);
    check_all_masks(&j, &[], 13, "hoist");
}

#[test]
fn scan_bodies_with_effects_hoist_nothing() {
    // Found by the partial_eval fuzz target: the hoisted copy of the body kept its
    // callback (DCE keeps effects), which read a per-iteration input, so the hoisted
    // jit was ill-typed; reading only consts, it would run the callback once more.
    let finding =
        include_str!("../../../fuzz/findings/partial_eval_scan_hoisting_an_effectful_body.jaxpr");
    let callback = "partitioned=False] x";
    assert!(finding.contains(callback));
    for read in ["x", "k"] {
        let j = parse(&finding.replace(callback, &format!("partitioned=False] {read}")));
        // The carry unknown: the callback and sin(k), a residual, are known.
        let pe = partial_eval(&j, &[false, true, false], &[false; 2]).unwrap();
        typecheck(&pe.known).unwrap();
        typecheck(&pe.unknown).unwrap();
        // One scan, no hoisted jit: sin(k) is stacked, the callback runs in the loop only.
        assert_eq!(names(&pe.known), vec!["scan"], "{read}");
        let body = sub(&pe.known.eqns()[0], "jaxpr");
        assert_eq!(names(body), vec!["sin", "debug_callback", "mul"], "{read}");
        assert_eq!(
            pe.known.eqns()[0].outvars().len(),
            2,
            "{read}: ys and stacked sin(k)"
        );
    }
}

/// The addresses of the sub-jaxprs an equation holds.
fn sub_addrs(e: &Eqn) -> Vec<usize> {
    let mut out = Vec::new();
    for (_, p) in e.params().iter() {
        match p {
            Param::Jaxpr(cj) => out.push(&**cj.jaxpr() as *const Jaxpr as usize),
            Param::Jaxprs(cjs) => {
                out.extend(cjs.iter().map(|cj| &**cj.jaxpr() as *const Jaxpr as usize))
            }
            _ => {}
        }
    }
    out
}

/// `j`'s only equation applied twice to the same inputs, sharing its parameters (and so
/// its sub-jaxprs); both results are returned.
fn applied_twice(j: &Jaxpr) -> Jaxpr {
    let e = &j.eqns()[0];
    let mut b = ferrax_ir::JaxprBuilder::new();
    let ins: Vec<Atom> = j
        .in_avals()
        .iter()
        .map(|a| Atom::Var(b.add_invar(a.clone())))
        .collect();
    let mut outs = Vec::new();
    for _ in 0..2 {
        let args: Vec<Atom> = e
            .inputs()
            .iter()
            .map(|a| match a {
                Atom::Var(v) => ins[j.invars().iter().position(|w| w == v).unwrap()],
                Atom::Lit(l) => b.literal(*j.literal(*l)),
            })
            .collect();
        let o = b
            .add_eqn(e.primitive().clone(), args, e.params().clone())
            .unwrap();
        outs.extend(o.into_iter().map(Atom::Var));
    }
    b.build(outs).unwrap()
}

#[test]
fn equations_sharing_a_body_share_its_split() {
    let scan = SCAN.replace("REV", "False");
    let hoist = "{ lambda ; k:f32[3] c:f32[3] xs:f32[4,3]. let
        c2:f32[3] ys:f32[4,3] = scan[
          jaxpr={ lambda ; k:f32[3] c:f32[3] x:f32[3]. let
              s:f32[3] = sin k
              t:f32[3] = cos c
              u:f32[3] = mul s x
              w:f32[3] = mul u t
              c1:f32[3] = add c 1.0:f32[]
            in (c1, w) }
          length=4
          num_carry=1
          num_consts=1
          reverse=False
        ] k c xs
      in (c2, ys) }";
    let cases: [(&str, &str, Vec<bool>); 5] = [
        ("cond", COND, vec![false, false, true]),
        ("scan", &scan, vec![false, false, true, false, true]),
        ("scan hoisting", hoist, vec![false, false, true]),
        ("while", WHILE, vec![false, false, false, true]),
        ("jvp while", WHILE_JVP, vec![false, false, true]),
    ];
    for (what, text, unknowns) in cases {
        let j = applied_twice(&parse(text));
        let mut rng = Rng::new(16);
        let mut args = args_of(&j, &mut rng);
        for (a, aval) in args.iter_mut().zip(j.in_avals()) {
            if aval.dtype == DType::I32 {
                *a = HostArray::scalar_i64(DType::I32, 2).unwrap();
            }
        }
        let inst = vec![false; j.outvars().len()];
        let pe = check(&j, &[], &args, &unknowns, &inst, what);
        for half in [&pe.known, &pe.unknown] {
            let eqns = half.eqns();
            assert_eq!(eqns.len() % 2, 0, "{what}:\n{half}");
            assert!(!eqns.is_empty(), "{what}");
            let n = eqns.len() / 2;
            for (a, b) in eqns[..n].iter().zip(&eqns[n..]) {
                assert_eq!(a.primitive().name(), b.primitive().name(), "{what}");
                let (sa, sb) = (sub_addrs(a), sub_addrs(b));
                assert!(!sa.is_empty(), "{what}");
                assert_eq!(sa, sb, "{what}: {} not shared", a.primitive().name());
            }
        }
    }
}

#[test]
fn jit_residuals_that_are_known_operands_are_forwarded() {
    // a is needed by the unknown side: the outer x goes to the unknown call directly; c
    // is computed inside, so the known call returns it.
    let j = parse(
        "{ lambda ; x:f32[3] y:f32[3]. let
            z:f32[3] w:f32[3] = jit[
              jaxpr={ lambda ; a:f32[3] b:f32[3]. let
                  c:f32[3] = sin a
                  d:f32[3] = mul a b
                  e:f32[3] = mul c d
                in (e, c) }
              name=f
            ] x y
          in (z, w) }",
    );
    let mut rng = Rng::new(17);
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &[], &args, &[false, true], &[false; 2], "forward");
    assert_eq!(pe.out_unknowns, vec![true, false]);
    let k = &pe.known.eqns()[0];
    let u = &pe.unknown.eqns()[0];
    // The known call returns w and the residual c (once each), not a.
    assert_eq!(k.outvars().len(), 2);
    assert_eq!(sub(k, "jaxpr").outvars().len(), 2);
    // The unknown call takes c, then x (forwarded), then y.
    assert_eq!(u.inputs().len(), 3);
    assert_eq!(pe.num_residuals, 2);
    assert!(pe.known.outvars()[1..].contains(&Atom::Var(pe.known.invars()[0])));
    check_all_masks(&j, &[], 17, "forward");
    // A call whose only residual is forwarded leaves no known call at all.
    let j = parse(
        "{ lambda ; x:f32[3] y:f32[3]. let
            z:f32[3] = jit[
              jaxpr={ lambda ; a:f32[3] b:f32[3]. let d:f32[3] = mul a b in (d,) }
              name=g
            ] x y
          in (z,) }",
    );
    let args = args_of(&j, &mut rng);
    let pe = check(&j, &[], &args, &[false, true], &[false], "forward only");
    assert!(pe.known.eqns().is_empty());
    assert_eq!(names(&pe.unknown), vec!["jit"]);
    assert_eq!(pe.num_residuals, 1);
}
