//! `custom_jvp_call`, `custom_vjp_call`, `remat2` and `stop_gradient` through every pass:
//! JAX's printouts evaluate, DCE keeps the custom calls whole and prunes `remat2` like a
//! `jit`, transposition refuses a linear value reaching the custom calls or
//! `stop_gradient`, lowering makes calls, cost counts the called jaxprs; and the opaque
//! params' equality.

use ferrax_ir::eval::{eval_jaxpr, HostArray};
use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::{cost, dce, transpose, PassError};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, Atom, DType, Opaque, Param, Shape};
use std::sync::Arc;

fn scalar(x: f64) -> HostArray {
    HostArray::from_f64(Shape::scalar(), DType::F32, vec![x]).unwrap()
}

fn value(a: &HostArray) -> Vec<f64> {
    match &a.data {
        ferrax_ir::eval::HostData::Float(v) => v.clone(),
        other => panic!("not float data: {other:?}"),
    }
}

/// JAX 0.10.2's `make_jaxpr(k)(1.0, 2.0)` for
/// `k(x, y) = f(x) + g(y) + checkpoint(sin . sin)(x) + stop_gradient(x)` with `f` a
/// `custom_jvp` and `g` a `custom_vjp` of `sin`.
const JAX_CUSTOM_CALLS: &str = "{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = custom_jvp_call[
      name=f
      call_jaxpr={ lambda ; d:f32[]. let e:f32[] = sin d in (e,) }
      jvp=f_jvp
      symbolic_zeros=False
    ] a
    f:f32[] = custom_vjp_call[
      name=g
      bwd=<lambda>
      call_jaxpr={ lambda ; g:f32[]. let h:f32[] = sin g in (h,) }
      fwd=<lambda>
      symbolic_zeros=False
    ] b
    i:f32[] = add c f
    j:f32[] = remat2[
      differentiated=False
      jaxpr={ lambda ; k:f32[]. let l:f32[] = sin k; m:f32[] = sin l in (m,) }
      policy=None
      prevent_cse=True
    ] a
    n:f32[] = add i j
    o:f32[] = stop_gradient a
    p:f32[] = add n o
  in (p,) }";

#[test]
fn jax_printout_round_trips_and_evaluates() {
    let j = parse_jaxpr(JAX_CUSTOM_CALLS).unwrap();
    typecheck(&j).unwrap();
    assert_eq!(print_jaxpr(&j), JAX_CUSTOM_CALLS);
    let e = &j.eqns()[0];
    assert_eq!(
        e.params().get("jvp"),
        Some(&Param::Opaque(Opaque::named("f_jvp")))
    );
    let got = eval_jaxpr(&j, &[], &[scalar(1.0), scalar(2.0)]).unwrap();
    let (x, y) = (1.0f64, 2.0f64);
    let want = x.sin() + y.sin() + x.sin().sin() + x;
    let v = value(&got[0]);
    assert!((v[0] - want).abs() < 1e-5, "{v:?} vs {want}");
}

#[test]
fn dce_keeps_custom_calls_whole_and_prunes_remat_inside() {
    for (prim, extra) in [
        (
            "custom_jvp_call",
            "name=f jvp=f_jvp symbolic_zeros=False call_jaxpr=",
        ),
        (
            "custom_vjp_call",
            "name=f fwd=fwd bwd=bwd symbolic_zeros=False call_jaxpr=",
        ),
        (
            "remat2",
            "differentiated=False policy=None prevent_cse=True jaxpr=",
        ),
    ] {
        let text = format!(
            "{{ lambda ; a:f32[3]. let
    b:f32[3] c:f32[3] = {prim}[{extra}{{ lambda ; x:f32[3]. let y:f32[3] = sin x; z:f32[3] = cos x in (y, z) }}] a
    d:f32[3] = neg a
  in (b,) }}"
        );
        let j = parse_jaxpr(&text).unwrap();
        let (pruned, used_inputs) = dce(&j, &[true]).unwrap();
        typecheck(&pruned).unwrap();
        assert_eq!(used_inputs, vec![true]);
        assert_eq!(pruned.eqns().len(), 1, "{prim}: the dead neg goes");
        let e = &pruned.eqns()[0];
        let inner = e.sub_jaxprs().next().unwrap().jaxpr().clone();
        if prim == "remat2" {
            // Like jit: the unused output and what computes it are gone.
            assert_eq!(e.outvars().len(), 1, "{}", print_jaxpr(&pruned));
            assert_eq!(inner.eqns().len(), 1);
            assert_eq!(inner.outvars().len(), 1);
        } else {
            // The custom rules see the whole function: nothing inside is pruned.
            assert_eq!(e.outvars().len(), 2, "{}", print_jaxpr(&pruned));
            assert_eq!(inner.eqns().len(), 2);
        }
        // Nobody uses the call: it goes.
        let (none_used, _) = dce(&j, &[false]).unwrap();
        assert!(none_used.eqns().is_empty(), "{prim}");
    }
}

#[test]
fn custom_calls_and_stop_gradient_are_not_linear() {
    let cases = [
        "c:f32[] = custom_jvp_call[name=f call_jaxpr={ lambda ; x:f32[]. let y:f32[] = neg x in (y,) } jvp=r symbolic_zeros=False] b",
        "c:f32[] = custom_vjp_call[name=f bwd=r call_jaxpr={ lambda ; x:f32[]. let y:f32[] = neg x in (y,) } fwd=r symbolic_zeros=False] b",
        "c:f32[] = stop_gradient b",
    ];
    for eqn in cases {
        let text = format!("{{ lambda ; a:f32[] b:f32[]. let {eqn}; d:f32[] = mul c a in (d,) }}");
        let j = parse_jaxpr(&text).unwrap();
        match transpose(&j, &[false, true]) {
            Err(PassError::NonLinearUse {
                primitive, eqn: 0, ..
            }) => assert!(eqn.contains(primitive.as_str()), "{primitive}"),
            other => panic!("{eqn}: {other:?}"),
        }
        // On a non-linear value they are evaluated forward, as any equation is.
        let t = transpose(&j, &[true, false]).unwrap();
        typecheck(&t).unwrap();
    }
}

#[test]
fn lowering_calls_the_jaxprs_and_stop_gradient_is_the_identity() {
    let j = parse_jaxpr(JAX_CUSTOM_CALLS).unwrap();
    let text = lower_jaxpr(&j, "m").unwrap();
    // Three calls (f, g and remat2's jaxpr), no op for stop_gradient.
    assert_eq!(text.matches("func.func private").count(), 3, "{text}");
    assert_eq!(text.matches("func.call").count(), 3, "{text}");
    assert!(text.contains("@f_"), "{text}");
    assert!(text.contains("@g_"), "{text}");
    assert!(text.contains("@remat2_"), "{text}");
    assert_eq!(text.matches("stablehlo.sine").count(), 4, "{text}");
    assert_eq!(text.matches("stablehlo.add").count(), 3, "{text}");
}

#[test]
fn cost_counts_the_called_jaxprs_and_nothing_for_stop_gradient() {
    let j = parse_jaxpr(JAX_CUSTOM_CALLS).unwrap();
    // sin (f) + sin (g) + 2 sin (remat2): 4 transcendentals; 3 adds; stop_gradient is
    // free.
    let c = cost(&j);
    assert_eq!((c.flops, c.transcendentals), (3.0, 4.0));
}

#[test]
fn opaque_values_are_equal_by_object_identity_else_by_name() {
    let obj: Arc<dyn std::any::Any + Send + Sync> = Arc::new(5u8);
    let a = Opaque::with_object("f", 1, obj.clone());
    let same_object = Opaque::with_object("renamed", 1, Arc::new(6u8));
    let other_object = Opaque::with_object("f", 2, obj);
    assert_eq!(a, same_object);
    assert_ne!(a, other_object);
    assert_ne!(a, Opaque::named("f"));
    assert_eq!(Opaque::named("f"), Opaque::named("f"));
    assert_ne!(Opaque::named("f"), Opaque::named("g"));
    assert_eq!(a.name(), "f");
    assert_eq!(a.identity(), Some(1));
    assert_eq!(
        a.object().and_then(|o| o.downcast_ref::<u8>()).copied(),
        Some(5)
    );
    assert!(Opaque::named("f").object().is_none());
}

#[test]
fn any_opaque_name_round_trips_through_text() {
    use ferrax_ir::{AbstractValue, Atom, Builtin, JaxprBuilder, Params};
    let sin = {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(AbstractValue::scalar(DType::F32));
        let y = b
            .add_eqn(Builtin::Sin.into(), vec![Atom::Var(x)], Params::empty())
            .unwrap()[0];
        ferrax_ir::ClosedJaxpr::with_unknown_consts(Arc::new(b.build(vec![Atom::Var(y)]).unwrap()))
    };
    for (name, printed) in [
        ("f_jvp", "jvp=f_jvp"),
        ("<lambda>", "jvp=<lambda>"),
        ("True", "jvp=True"),
        ("1.5", "jvp=1.5"),
        ("float32", "jvp=float32"),
        ("None", "jvp='None'"),
        ("", "jvp=''"),
        ("a b", "jvp='a b'"),
        ("x\ny", "jvp='x\\ny'"),
        ("(a, b)", "jvp=(a, b)"),
        ("Saveable(names=(a, b))", "jvp='Saveable(names=(a, b))'"),
        ("Policy()", "jvp=Policy()"),
        ("P(a=1, b=x)", "jvp=P(a=1, b=x)"),
        ("it's", "jvp='it\\'s'"),
        (
            "<function f at 0xXXXXXXXXXXXX>",
            "jvp=<function f at 0xXXXXXXXXXXXX>",
        ),
        (
            "<function g.<locals>.<lambda> at 0xXXXX>",
            "jvp=<function g.<locals>.<lambda> at 0xXXXX>",
        ),
        ("<a b", "jvp='<a b'"),
        ("<a> b", "jvp='<a> b'"),
        ("<a  b>", "jvp='<a  b>'"),
    ] {
        let mut b = JaxprBuilder::new();
        let x = b.add_invar(AbstractValue::scalar(DType::F32));
        let params = ferrax_ir::generate::custom_jvp_params(Param::Jaxpr(sin.clone()), "f")
            .with("jvp", Param::Opaque(Opaque::named(name)));
        let outs = b
            .add_eqn(Builtin::CustomJvpCall.into(), vec![Atom::Var(x)], params)
            .unwrap();
        let j = b.build(outs.into_iter().map(Atom::Var).collect()).unwrap();
        let text = print_jaxpr(&j);
        assert!(text.contains(printed), "{name:?}: {text}");
        let back = parse_jaxpr(&text).unwrap_or_else(|e| panic!("{name:?}: {e}\n{text}"));
        assert_eq!(print_jaxpr(&back), text);
        assert_eq!(
            back.eqns()[0].params().get("jvp"),
            Some(&Param::Opaque(Opaque::named(name))),
            "{text}"
        );
    }
}

/// `f(a, t)`: a `remat2` linear in `t` (sin of the non-linear `a` recomputed inside),
/// with a second output nobody uses and the linear value also used outside.
const REMAT_LINEAR: &str = "{ lambda ; a:f32[3] t:f32[3]. let
    b:f32[3] c:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; x:f32[3] y:f32[3]. let
          s:f32[3] = sin x
          z:f32[3] = mul y s
          w:f32[3] = neg z
          k:f32[3] = cos x
        in (w, k) }
      policy=None
      prevent_cse=True
    ] a t
    d:f32[3] = mul a t
    e:f32[3] = add_any b d
  in (e,) }";

#[test]
fn remat_transposes_like_jit_into_a_differentiated_remat() {
    let j = parse_jaxpr(REMAT_LINEAR).unwrap();
    let tj = transpose(&j, &[false, true]).unwrap();
    typecheck(&tj).unwrap();
    let remats: Vec<_> = tj
        .eqns()
        .iter()
        .filter(|e| e.primitive().name() == "remat2")
        .collect();
    // The forward remat2 computes the non-linear output; the transposed one is marked.
    let flags: Vec<Option<&Param>> = remats
        .iter()
        .map(|e| e.params().get("differentiated"))
        .collect();
    assert!(
        flags.contains(&Some(&Param::Bool(true))),
        "{}",
        print_jaxpr(&tj)
    );
    // The dot-product test: <ct, f(a, t)> = <f^T(a, ct), t>.
    let a =
        HostArray::from_f64(Shape::new(&[3]).unwrap(), DType::F32, vec![0.5, 1.0, 1.5]).unwrap();
    let t =
        HostArray::from_f64(Shape::new(&[3]).unwrap(), DType::F32, vec![-1.0, 0.25, 2.0]).unwrap();
    let ct =
        HostArray::from_f64(Shape::new(&[3]).unwrap(), DType::F32, vec![0.75, -0.5, 1.0]).unwrap();
    let dot = |x: &HostArray, y: &HostArray| -> f64 {
        x.to_f64_vec()
            .iter()
            .zip(y.to_f64_vec())
            .map(|(p, q)| p * q)
            .sum()
    };
    let ys = eval_jaxpr(&j, &[], &[a.clone(), t.clone()]).unwrap();
    let cts = eval_jaxpr(&tj, &[], &[a, ct.clone()]).unwrap();
    let (lhs, rhs) = (dot(&ct, &ys[0]), dot(&cts[0], &t));
    assert!(
        (lhs - rhs).abs() < 1e-5 * (1.0 + lhs.abs()),
        "{lhs} vs {rhs}"
    );
}

/// A checkpointed function's JVP: `y = sin(sin(x))` and its tangent
/// `ty = t * cos(x) * cos(sin(x))`, all inside one `remat2`.
const REMAT_JVP: &str = "{ lambda ; x:f32[3] t:f32[3]. let
    y:f32[3] ty:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; a:f32[3] b:f32[3]. let
          s:f32[3] = sin a
          c:f32[3] = sin s
          d:f32[3] = cos a
          e:f32[3] = cos s
          f:f32[3] = mul b d
          g:f32[3] = mul f e
        in (c, g) }
      policy=None
      prevent_cse=True
    ] x t
  in (y, ty) }";

fn vec3(xs: [f64; 3]) -> HostArray {
    HostArray::from_f64(Shape::new(&[3]).unwrap(), DType::F32, xs.to_vec()).unwrap()
}

fn prims(j: &ferrax_ir::Jaxpr) -> Vec<String> {
    j.eqns()
        .iter()
        .map(|e| e.primitive().name().to_owned())
        .collect()
}

#[test]
fn remat_splits_into_known_outputs_and_a_recomputing_unknown_remat() {
    use ferrax_ir::passes::partial_eval;
    let j = parse_jaxpr(REMAT_JVP).unwrap();
    let pe = partial_eval(&j, &[false, true], &[false, false]).unwrap();
    typecheck(&pe.known).unwrap();
    typecheck(&pe.unknown).unwrap();
    assert_eq!(pe.out_unknowns, vec![false, true]);
    // The one residual is the known operand x itself, not sin(x) or the cosines.
    assert_eq!(pe.num_residuals, 1);
    assert_eq!(pe.known.outvars()[1], Atom::Var(pe.known.invars()[0]));
    // Known: y alone (two sines), inlined as JAX evaluates the known part.
    assert_eq!(prims(&pe.known), ["sin", "sin"]);
    // Unknown: a differentiated remat2 of x and t recomputing sin(x) for the tangent.
    assert_eq!(prims(&pe.unknown), ["remat2"]);
    let u = &pe.unknown.eqns()[0];
    assert_eq!(u.params().get("differentiated"), Some(&Param::Bool(true)));
    assert_eq!(u.inputs().len(), 2);
    assert_eq!(
        prims(u.sub_jaxprs().next().unwrap().jaxpr()),
        ["sin", "cos", "cos", "mul", "mul"]
    );
    // Together they compute what the original does.
    let (x, t) = (vec3([0.5, 1.0, -2.0]), vec3([1.0, -0.5, 0.25]));
    let want = eval_jaxpr(&j, &[], &[x.clone(), t.clone()]).unwrap();
    let known = eval_jaxpr(&pe.known, &[], &[x]).unwrap();
    let unknown = eval_jaxpr(&pe.unknown, &[], &[known[1].clone(), t]).unwrap();
    assert_eq!(known[0].to_f64_vec(), want[0].to_f64_vec());
    assert_eq!(unknown[0].to_f64_vec(), want[1].to_f64_vec());
    // Outputs the equations do not define (an operand passed through, twice) keep the
    // known part a remat2.
    let pass = parse_jaxpr(
        "{ lambda ; x:f32[3] t:f32[3]. let
    y:f32[3] z:f32[3] ty:f32[3] = remat2[
      differentiated=False
      jaxpr={ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b in (a, a, c) }
      policy=None
      prevent_cse=True
    ] x t
  in (y, z, ty) }",
    )
    .unwrap();
    let pe = partial_eval(&pass, &[false, true], &[false, false, false]).unwrap();
    assert_eq!(pe.out_unknowns, vec![false, false, true]);
    assert_eq!(prims(&pe.known), ["remat2"]);
    assert_eq!(prims(&pe.unknown), ["remat2"]);
    let (x, t) = (vec3([0.5, 1.0, -2.0]), vec3([1.0, -0.5, 0.25]));
    let want = eval_jaxpr(&pass, &[], &[x.clone(), t.clone()]).unwrap();
    let known = eval_jaxpr(&pe.known, &[], &[x]).unwrap();
    let unknown = eval_jaxpr(&pe.unknown, &[], &[known[2].clone(), t]).unwrap();
    assert_eq!(known[0].to_f64_vec(), want[0].to_f64_vec());
    assert_eq!(known[1].to_f64_vec(), want[1].to_f64_vec());
    assert_eq!(unknown[0].to_f64_vec(), want[2].to_f64_vec());
    // All known or all unknown: nothing to split.
    // (A known checkpoint is inlined as well, as JAX evaluates it.)
    let all_known = partial_eval(&j, &[false, false], &[false, false]).unwrap();
    assert_eq!(
        prims(&all_known.known),
        ["sin", "sin", "cos", "cos", "mul", "mul"]
    );
    assert!(all_known.unknown.eqns().is_empty());
    let all_unknown = partial_eval(&j, &[true, true], &[false, false]).unwrap();
    assert!(all_unknown.known.eqns().is_empty());
    assert_eq!(all_unknown.num_residuals, 0);
}

#[test]
fn custom_calls_and_stop_gradient_are_never_split() {
    use ferrax_ir::passes::partial_eval;
    for eqn in [
        "c:f32[] d:f32[] = custom_jvp_call[name=f call_jaxpr={ lambda ; x:f32[] y:f32[]. let z:f32[] = sin x in (z, y) } jvp=r symbolic_zeros=False] a b",
        "c:f32[] d:f32[] = custom_vjp_call[name=f bwd=r call_jaxpr={ lambda ; x:f32[] y:f32[]. let z:f32[] = sin x in (z, y) } fwd=r symbolic_zeros=False] a b",
    ] {
        let text = format!("{{ lambda ; a:f32[] b:f32[]. let {eqn} in (c, d) }}");
        let j = parse_jaxpr(&text).unwrap();
        // Output c depends on the known a only, yet the whole call is unknown.
        let pe = partial_eval(&j, &[false, true], &[false, false]).unwrap();
        assert_eq!(pe.out_unknowns, vec![true, true], "{eqn}");
        assert!(pe.known.eqns().is_empty());
        assert_eq!(pe.unknown.eqns().len(), 1);
        let e = &pe.unknown.eqns()[0];
        assert_eq!(e.params(), j.eqns()[0].params());
        assert_eq!(pe.num_residuals, 1);
        // Known operands only: the call is known.
        let pe = partial_eval(&j, &[false, false], &[false, false]).unwrap();
        assert_eq!(pe.out_unknowns, vec![false, false]);
        assert_eq!(pe.known.eqns().len(), 1);
    }
    let j = parse_jaxpr(
        "{ lambda ; a:f32[] b:f32[]. let c:f32[] = stop_gradient a; d:f32[] = stop_gradient b in (c, d) }",
    )
    .unwrap();
    let pe = partial_eval(&j, &[false, true], &[false, false]).unwrap();
    assert_eq!(pe.out_unknowns, vec![false, true]);
    assert_eq!(prims(&pe.known), ["stop_gradient"]);
    assert_eq!(prims(&pe.unknown), ["stop_gradient"]);
}
