//! Pattern matching and term rewriting (`passes::rewrite`): rule reading and its errors,
//! matching (holes, literals, params, types, conditions), application to a fixpoint
//! inside nested jaxprs, the loop bound, and values kept (the reference evaluator on
//! the program before and after).

mod common_build;

use common_build::random_value;
use ferrax_ir::eval::{check_close, eval_jaxpr, HostArray};
use ferrax_ir::generate::{chain, random_jaxpr, RandomOptions, Rng};
use ferrax_ir::passes::rewrite::{rewrite, RewriteError, Rule, RuleSet, ALGEBRAIC_RULES};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, Jaxpr};

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn rules(text: &str) -> RuleSet {
    RuleSet::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The program rewritten to a fixpoint, printed.
fn rewritten(text: &str, set: &RuleSet) -> String {
    let j = parse(text);
    let r = rewrite(&j, set, 100).unwrap_or_else(|e| panic!("{e}"));
    typecheck(&r.jaxpr).unwrap();
    print_jaxpr(&r.jaxpr)
}

/// The same program written directly, printed (so tests compare with canonical text).
fn canonical(text: &str) -> String {
    print_jaxpr(&parse(text))
}

/// Both programs compute the same outputs on random inputs.
fn same_values(a: &Jaxpr, b: &Jaxpr, seed: u64) {
    let mut rng = Rng::new(seed);
    let args: Vec<HostArray> = a
        .in_avals()
        .iter()
        .map(|v| random_value(v, &mut rng))
        .collect();
    let want = eval_jaxpr(a, &[], &args).unwrap();
    let got = eval_jaxpr(b, &[], &args).unwrap();
    for (g, w) in got.iter().zip(&want) {
        check_close(g, w, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{e}\n{a}\n{b}"));
    }
}

#[test]
fn algebraic_identities_simplify() {
    let set = rules(ALGEBRAIC_RULES);
    let got = rewritten(
        "{ lambda ; a:f32[3] b:f32[3]. let
            c:f32[3] = mul a 1.0:f32[]
            d:f32[3] = neg c
            e:f32[3] = neg d
            f:f32[3] = exp e
            g:f32[3] = log f
            h:f32[3] = add g 0.0:f32[]
            i:f32[3] = neg b
            j:f32[3] = sub h i
          in (j,) }",
        &set,
    );
    assert_eq!(
        got,
        canonical("{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }")
    );
}

#[test]
fn oryx_exp_to_log_on_a_function_and_on_a_literal() {
    // The oryx seed's example: every exp becomes a log; exp(5.) becomes log(5.).
    let set = rules("exp_to_log: exp ?x => log ?x");
    let got = rewritten(
        "{ lambda ; a:f32[]. let b:f32[] = exp a; c:f32[] = add b 1.0:f32[] in (c,) }",
        &set,
    );
    assert_eq!(
        got,
        canonical("{ lambda ; a:f32[]. let b:f32[] = log a; c:f32[] = add b 1.0:f32[] in (c,) }")
    );
    let got = rewritten("{ lambda ; . let b:f32[] = exp 5.0:f32[] in (b,) }", &set);
    assert_eq!(
        got,
        canonical("{ lambda ; . let b:f32[] = log 5.0:f32[] in (b,) }")
    );
    // And the add-to-sub rule, over both operands.
    let set = rules("add_to_sub: add ?a ?b => sub ?a ?b");
    let got = rewritten(
        "{ lambda ; a:f32[] b:f32[]. let c:f32[] = add a b in (c,) }",
        &set,
    );
    assert_eq!(
        got,
        canonical("{ lambda ; a:f32[] b:f32[]. let c:f32[] = sub a b in (c,) }")
    );
}

#[test]
fn a_hole_twice_matches_the_same_operand_only() {
    let set = rules("sub_self: sub ?x ?x => mul ?x 0.0 if float(?x)");
    let j = "{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = sub a a; d:f32[2] = sub a b in (c, d) }";
    assert_eq!(
        rewritten(j, &set),
        canonical(
            "{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = mul a 0.0:f32[]; d:f32[2] = sub a b in (c, d) }"
        )
    );
    // The condition: not on integers.
    let ints = "{ lambda ; a:i32[2]. let c:i32[2] = sub a a in (c,) }";
    assert_eq!(rewritten(ints, &set), canonical(ints));
}

#[test]
fn literals_match_by_value_and_optionally_by_type() {
    let any = rules("r: mul ?x 2 => add ?x ?x");
    let typed = rules("r: mul ?x 2.0:f64[] => add ?x ?x");
    let j = "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }";
    let doubled = canonical("{ lambda ; a:f32[]. let b:f32[] = add a a in (b,) }");
    assert_eq!(rewritten(j, &any), doubled);
    assert_eq!(rewritten(j, &typed), canonical(j));
    let other = "{ lambda ; a:f32[]. let b:f32[] = mul a 3.0:f32[] in (b,) }";
    assert_eq!(rewritten(other, &any), canonical(other));
}

#[test]
fn params_match_by_value_and_bind_holes() {
    let set = rules(
        "pow2: integer_pow[y=2] ?x => mul ?x ?x
         sum_keep: reduce_sum[axes=?a] (neg ?x) => neg (reduce_sum[axes=?a] ?x)",
    );
    let got = rewritten(
        "{ lambda ; a:f32[2,3]. let
            b:f32[2,3] = integer_pow[y=2] a
            c:f32[2,3] = integer_pow[y=3] a
            d:f32[2,3] = neg b
            e:f32[3] = reduce_sum[axes=(0,)] d
          in (e, c) }",
        &set,
    );
    assert_eq!(
        got,
        canonical(
            "{ lambda ; a:f32[2,3]. let
                b:f32[2,3] = mul a a
                c:f32[2,3] = integer_pow[y=3] a
                d:f32[3] = reduce_sum[axes=(0,)] b
                e:f32[3] = neg d
              in (e, c) }"
        )
    );
}

#[test]
fn type_holes_and_dtype_params_unify() {
    // A conversion to the operand's own dtype is the identity; to another it stays.
    let set = rules("same: convert_element_type[new_dtype=?t] ?x:?t[*] => ?x");
    let got = rewritten(
        "{ lambda ; a:f32[3]. let
            b:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] a
            c:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] b
          in (c,) }",
        &set,
    );
    assert_eq!(
        got,
        canonical(
            "{ lambda ; a:f32[3]. let
                c:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] a
              in (c,) }"
        )
    );
    // Exact types and shape holes.
    let set = rules("r: neg ?x:f32[?s] => ?x if rank(?x) = 1");
    let j = "{ lambda ; a:f32[3] b:f32[2,2] c:i32[3]. let
        d:f32[3] = neg a; e:f32[2,2] = neg b; f:i32[3] = neg c in (d, e, f) }";
    assert_eq!(
        rewritten(j, &set),
        canonical(
            "{ lambda ; a:f32[3] b:f32[2,2] c:i32[3]. let
                e:f32[2,2] = neg b; f:i32[3] = neg c in (a, e, f) }"
        )
    );
}

#[test]
fn a_right_side_of_another_type_does_not_apply() {
    // Dropping a conversion to another dtype would change the output's type.
    let set = rules("r: convert_element_type ?x => ?x");
    let j = "{ lambda ; a:f32[3]. let
        b:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] a in (b,) }";
    assert_eq!(rewritten(j, &set), canonical(j));
    // Broadcasting a scalar to a vector changes the shape: no rewrite either.
    let set = rules("r: add ?x ?y => ?y");
    let j = "{ lambda ; a:f32[3] b:f32[]. let c:f32[3] = add a b in (c,) }";
    assert_eq!(rewritten(j, &set), canonical(j));
}

#[test]
fn rewrites_inside_nested_jaxprs_once_per_shared_body() {
    let set = rules(ALGEBRAIC_RULES);
    let got = rewritten(
        "{ lambda ; p:i32[] a:f32[3] xs:f32[4,3]. let
            b:f32[3] = cond[
              branches=(
                { lambda ; x:f32[3]. let y:f32[3] = neg x; z:f32[3] = neg y in (z,) }
                { lambda ; x:f32[3]. let y:f32[3] = mul x 1.0:f32[] in (y,) }
              )
            ] p a
            c:f32[3] d:f32[4,3] = scan[
              jaxpr={ lambda ; c:f32[3] x:f32[3]. let
                  e:f32[3] = exp x; f:f32[3] = log e; g:f32[3] = add c f
                in (g, f) }
              length=4 num_carry=1 num_consts=0 reverse=False unroll=1
            ] b xs
            h:f32[3] = jit[name=inner jaxpr={ lambda ; x:f32[3]. let y:f32[3] = div x 1.0:f32[] in (y,) }] c
          in (h, d) }",
        &set,
    );
    assert!(!got.contains("neg"), "{got}");
    assert!(!got.contains("exp"), "{got}");
    assert!(!got.contains("div"), "{got}");
    assert!(!got.contains("mul"), "{got}");
    assert!(got.contains("cond") && got.contains("scan") && got.contains("jit"));
}

#[test]
fn deep_nesting_does_not_overflow() {
    // 20,000 nested jits, each body `neg (neg x)`.
    let mut text =
        String::from("{ lambda ; a:f32[]. let b:f32[] = neg a; c:f32[] = neg b in (c,) }");
    for _ in 0..20_000 {
        text = format!("{{ lambda ; a:f32[]. let b:f32[] = jit[name=f jaxpr={text}] a in (b,) }}");
    }
    let j = parse(&text);
    let r = rewrite(&j, &rules(ALGEBRAIC_RULES), 10).unwrap();
    assert_eq!(r.fired.iter().sum::<u64>(), 1);
    let printed = print_jaxpr(&r.jaxpr);
    assert!(!printed.contains("neg"));
    drop(j);
}

#[test]
fn rules_that_loop_stop_at_the_bound_naming_them() {
    let set = rules(
        "grow: neg ?x => neg (neg (neg ?x))
         quiet: sin ?x => cos ?x if int(?x)",
    );
    let j = parse("{ lambda ; a:f32[]. let b:f32[] = neg a in (b,) }");
    match rewrite(&j, &set, 5) {
        Err(RewriteError::NoFixpoint { iterations, rules }) => {
            assert_eq!(iterations, 5);
            assert_eq!(rules, vec!["grow".to_owned()]);
        }
        other => panic!("{other:?}"),
    }
    let e = rewrite(&j, &set, 5).unwrap_err().to_string();
    assert!(e.contains("5 iterations") && e.contains("grow"), "{e}");
    // Two rules undoing each other are both named.
    let set = rules("a: sin ?x => cos ?x\nb: cos ?x => sin ?x");
    let j = parse("{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }");
    match rewrite(&j, &set, 4) {
        Err(RewriteError::NoFixpoint { rules, .. }) => {
            assert_eq!(rules, vec!["a".to_owned(), "b".to_owned()]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_ill_typed_right_side_is_an_error_naming_the_rule() {
    let set = rules("bad: neg ?x => reduce_sum[axes=(3,)] ?x");
    let j = parse("{ lambda ; a:f32[2]. let b:f32[2] = neg a in (b,) }");
    match rewrite(&j, &set, 10) {
        Err(RewriteError::IllTypedRhs { rule, .. }) => assert_eq!(rule, "bad"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn effects_are_never_rewritten_and_inputs_stay() {
    let set = rules("drop: debug_callback ?x => ?x\nr: neg ?x => ?x");
    let j = parse(
        "{ lambda ; a:f32[] b:f32[]. let
            debug_callback[callback=f effect=Debug partitioned=False] a
            c:f32[] = neg a
          in (c,) }",
    );
    let r = rewrite(&j, &set, 10).unwrap();
    let printed = print_jaxpr(&r.jaxpr);
    assert!(printed.contains("debug_callback"), "{printed}");
    assert_eq!(r.jaxpr.invars().len(), 2, "unused inputs are kept");
    assert_eq!(r.fired, vec![0, 1]);
}

#[test]
fn bad_rules_are_refused_with_their_line() {
    let cases: &[(&str, &str)] = &[
        ("mul ?x 1.0 => ?x", "starts with its name"),
        ("r: mul ?x 1.0 => ?y", "?y, which the left side never binds"),
        ("r: mul ?x 1.0 => ?x if float(?z)", "?z"),
        ("r: ?x => ?x", "must be an application"),
        ("r: 1.0 => 2.0", "must be an application"),
        ("r: mul ?x 1.0", "expected '=>'"),
        ("r: neg ?x:q99[] => ?x", "unknown dtype"),
        ("r: neg ?x => frobnicate ?x", "not a built-in primitive"),
        ("r: reduce_sum[axes=(0,] ?x => ?x", "not closed"),
        (
            "r: neg ?x => reduce_sum[axes=zero] ?x",
            "param 'axes' of reduce_sum",
        ),
        ("r: neg ?x => reduce_sum[nope=1] ?x", "no such param"),
        ("r: neg ?x => neg 1.0", "untyped literal"),
        ("r: neg ?x => ?x if wobbly(?x)", "unknown condition"),
        ("r: neg log ?x => ?x", "not an operand"),
        ("r: neg ?x => ?x ?x", "unexpected"),
        ("r: reduce_sum[axes=?a axes=?b] ?x => ?x", "given twice"),
    ];
    for (text, want) in cases {
        let e = Rule::parse(text)
            .err()
            .unwrap_or_else(|| panic!("{text} was accepted"));
        let s = e.to_string();
        assert!(s.contains(want), "{text}: {s}");
        assert!(!s.contains('\n'), "one line: {s}");
    }
    // Nesting past the bound.
    let deep = format!("r: {}?x{} => ?x", "neg (".repeat(100), ")".repeat(100));
    assert!(Rule::parse(&deep).unwrap_err().to_string().contains("nest"));
    // In a file: the line of the rule, and duplicate names.
    let e = RuleSet::parse("# header\na: neg ?x => ?x\n\nb: neg ?x => ?y\n").unwrap_err();
    assert_eq!(e.line, 4);
    assert!(e.to_string().starts_with("line 4: rule 'b'"), "{e}");
    let e = RuleSet::parse("a: neg ?x => ?x\na: sin ?x => ?x\n").unwrap_err();
    assert!(e.to_string().contains("already"), "{e}");
    assert_eq!(e.line, 2);
    // Lines not starting with a name continue the rule above.
    let set = RuleSet::parse("a: neg (neg ?x)\n    => ?x  # twice\n  b: sin ?x\n=> ?x").unwrap();
    assert_eq!(set.len(), 2);
    assert!(RuleSet::parse("=> ?x\n").is_err());
    // An error on a continuation line is reported at that line and column.
    let e = RuleSet::parse("a: neg ?x\n  => ?x ?x\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 9), "{e}");
}

#[test]
fn rewritten_random_programs_compute_the_same_values() {
    let set = rules(ALGEBRAIC_RULES);
    let mut fired = 0;
    for seed in 0..200 {
        let j = match random_jaxpr(seed, RandomOptions::default()) {
            Ok(j) => j,
            Err(_) => continue,
        };
        let r = rewrite(&j, &set, 100).unwrap();
        typecheck(&r.jaxpr).unwrap();
        assert_eq!(r.jaxpr.in_avals(), j.in_avals());
        assert_eq!(r.jaxpr.out_avals(), j.out_avals());
        fired += r.fired.iter().sum::<u64>();
        same_values(&j, &r.jaxpr, seed);
    }
    assert!(
        fired > 0,
        "the random programs gave the rules nothing to do"
    );
}

#[test]
fn chain_rewrites_in_one_pass_per_change() {
    // chain: x = sin(x) * 1.5 + x. Rewriting `mul ?x 1.5` into `add ?x (mul ?x 0.5)`
    // once per step.
    let j = chain(1000, 4).unwrap();
    let set = rules("r: mul ?x 1.5 => add ?x (mul ?x 0.5)");
    let r = rewrite(&j, &set, 10).unwrap();
    assert_eq!(r.fired, vec![1000]);
    assert_eq!(r.iterations, 1);
    assert_eq!(r.jaxpr.eqns().len(), j.eqns().len() + 1000);
    same_values(&j, &r.jaxpr, 7);
}
