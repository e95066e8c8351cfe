//! Host callbacks (`debug_callback`, `pure_callback`): their text as JAX 0.10 prints it,
//! the effect that DCE, toposort and partial evaluation respect, and the lowering to
//! jaxlib's CPU callback custom call.

use ferrax_ir::lower::stablehlo::{lower_jaxpr, lower_jaxpr_full, LowerOptions};
use ferrax_ir::passes::{dce, partial_eval, toposort};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, Jaxpr, Param};

fn parse(text: &str) -> Jaxpr {
    parse_jaxpr(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn prims(j: &Jaxpr) -> Vec<&str> {
    j.eqns().iter().map(|e| e.primitive().name()).collect()
}

/// `jax.make_jaxpr` of `jax.debug.callback(cb, x)` then `jax.debug.callback(cb, x,
/// ordered=True)` (JAX 0.10.2).
const JAX_DEBUG: &str = "{ lambda ; a:f32[3]. let
    debug_callback[
      callback=<function debug_callback.<locals>._debug_callback.<locals>._flat_callback at 0xXXXXXXXXXXXX>
      effect=Debug
      partitioned=False
    ] a
    debug_callback[
      callback=<function debug_callback.<locals>._debug_callback.<locals>._flat_callback at 0xXXXXXXXXXXXX>
      effect=OrderedDebug
      partitioned=False
    ] a
  in (a,) }";

/// `jax.make_jaxpr` of a `jax.pure_callback` with two results (JAX 0.10.2).
const JAX_PURE: &str = "{ lambda ; a:f32[3]. let
    b:f32[3] c:i32[] = pure_callback[
      callback=_FlatCallback(callback_func=<function <lambda>.<locals>.<lambda> at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))
      result_avals=(ShapedArray(float32[3]), ShapedArray(int32[]))
      sharding=None
      vmap_method=sequential
    ] a
  in (b, c) }";

#[test]
fn jax_text_reads_and_prints_back_identically() {
    for text in [JAX_DEBUG, JAX_PURE] {
        let j = parse(text);
        assert_eq!(print_jaxpr(&j), text);
        typecheck(&j).unwrap();
    }
    let j = parse(JAX_PURE);
    let outs: Vec<String> = j.out_avals().iter().map(|a| a.to_string()).collect();
    assert_eq!(outs, ["f32[3]", "i32[]"]);
}

#[test]
fn bad_params_are_type_errors() {
    for text in [
        // An effect JAX does not have.
        "{ lambda ; a:f32[]. let debug_callback[callback=f effect=Loud] a in () }",
        // No callback.
        "{ lambda ; a:f32[]. let debug_callback[effect=Debug] a in () }",
        // Declared results that differ from the equation's.
        "{ lambda ; a:f32[]. let b:f32[2] = pure_callback[callback=f result_avals=(ShapedArray(float32[]),)] a in (b,) }",
    ] {
        assert!(parse_jaxpr(text).is_err(), "{text}");
    }
    // A malformed ShapedArray is a parse error, not a panic.
    for text in [
        "{ lambda ; a:f32[]. let b:f32[] = pure_callback[callback=f result_avals=(ShapedArray(float32[],)] a in (b,) }",
        "{ lambda ; a:f32[]. let b:f32[] = pure_callback[callback=f result_avals=(ShapedArray(float32[], weak_type=Maybe),)] a in (b,) }",
        "{ lambda ; a:f32[]. let b:f32[] = pure_callback[callback=f result_avals=(ShapedArray(,)] a in (b,) }",
    ] {
        assert!(parse_jaxpr(text).is_err(), "{text}");
    }
    let weak = "{ lambda ; a:f32[]. let\n    b:f32[] = pure_callback[callback=f result_avals=(ShapedArray(float32[], weak_type=True),)] a\n  in (b,) }";
    let j = parse(weak);
    assert!(print_jaxpr(&j).contains("ShapedArray(float32[], weak_type=True)"));
}

/// A debug callback on a value nothing else uses, in a jit, a cond branch, a scan body
/// and a while body: DCE keeps every one (and what they read), and drops an unused pure
/// callback.
const NESTED: &str = "{ lambda ; a:f32[] b:i32[]. let
    c:f32[] = sin a
    debug_callback[callback=f effect=Debug partitioned=False] c
    d:f32[] = cos a
    jit[
      name=g
      jaxpr={ lambda ; e:f32[]. let
          f:f32[] = exp e
          debug_callback[callback=f effect=Debug partitioned=False] f
        in () }
    ] d
    cond[
      branches=(
        { lambda ; g:f32[]. let  in () }
        { lambda ; h:f32[]. let
            debug_callback[callback=f effect=Debug partitioned=False] h
          in () }
      )
    ] b a
    i:f32[] = scan[
      _split_transpose=False
      jaxpr={ lambda ; j:f32[]. let
          debug_callback[callback=f effect=Debug partitioned=False] j
          k:f32[] = add j 1.0:f32[]
        in (k,) }
      length=3
      linear=(False,)
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] a
    l:f32[] = pure_callback[callback=f result_avals=(ShapedArray(float32[]),)] a
    m:f32[] = mul a 2.0:f32[]
  in (m,) }";

#[test]
fn dce_keeps_effects_at_every_depth() {
    let j = parse(NESTED);
    assert!(j.has_effects());
    let (pruned, used_in) = dce(&j, &[true]).unwrap();
    assert_eq!(used_in, vec![true, true]);
    assert_eq!(
        prims(&pruned),
        ["sin", "debug_callback", "cos", "jit", "cond", "scan", "mul"]
    );
    // Inside, the effects are kept too (the scan keeps the carry its callback reads).
    let text = print_jaxpr(&pruned);
    assert_eq!(text.matches("debug_callback").count(), 4, "{text}");
    assert!(text.contains(" = exp "), "{text}");
    assert!(!text.contains("pure_callback"), "{text}");
    typecheck(&pruned).unwrap();
    // Without effects nothing but the output's equation stays.
    let plain = parse(
        "{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = pure_callback[callback=f result_avals=(ShapedArray(float32[]),)] a in (b,) }",
    );
    assert!(!plain.has_effects());
    assert_eq!(prims(&dce(&plain, &[true]).unwrap().0), ["sin"]);
}

#[test]
fn toposort_keeps_effects_in_order() {
    let j = parse(
        "{ lambda ; a:f32[]. let
    b:f32[] = sin a
    debug_callback[callback=first effect=Debug partitioned=False] b
    c:f32[] = cos a
    debug_callback[callback=second effect=OrderedDebug partitioned=False] c
    d:f32[] = exp a
    debug_callback[callback=third effect=Debug partitioned=False] a
  in (d,) }",
    );
    let sorted = toposort(&j);
    let callbacks: Vec<String> = sorted
        .eqns()
        .iter()
        .filter(|e| e.primitive().name() == "debug_callback")
        .map(|e| match e.params().get("callback") {
            Some(Param::Opaque(o)) => o.name().to_owned(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(callbacks, ["first", "second", "third"]);
    assert_eq!(sorted.eqns().len(), 6);
    typecheck(&sorted).unwrap();
}

#[test]
fn partial_eval_puts_effects_with_their_inputs() {
    // x known, y unknown: the callback of x is known, the one of y unknown; neither is
    // dropped although they have no outputs.
    let j = parse(
        "{ lambda ; a:f32[] b:f32[]. let
    debug_callback[callback=known effect=Debug partitioned=False] a
    c:f32[] = mul a b
    debug_callback[callback=unknown effect=Debug partitioned=False] c
  in (c,) }",
    );
    let pe = partial_eval(&j, &[false, true], &[false]).unwrap();
    assert_eq!(prims(&pe.known), ["debug_callback"]);
    assert_eq!(prims(&pe.unknown), ["mul", "debug_callback"]);
    assert_eq!(pe.out_unknowns, vec![true]);
    // Through a jit: the known half of the call keeps the known callback.
    let j = parse(
        "{ lambda ; a:f32[] b:f32[]. let
    c:f32[] = jit[
      name=f
      jaxpr={ lambda ; d:f32[] e:f32[]. let
          debug_callback[callback=known effect=Debug partitioned=False] d
          f:f32[] = mul d e
        in (f,) }
    ] a b
  in (c,) }",
    );
    let pe = partial_eval(&j, &[false, true], &[false]).unwrap();
    assert!(print_jaxpr(&pe.known).contains("debug_callback"));
    assert!(!print_jaxpr(&pe.unknown).contains("debug_callback"));
}

#[test]
fn lowering_is_a_cpu_callback_custom_call_indexed_in_order() {
    let j = parse(
        "{ lambda ; a:f32[3]. let
    debug_callback[callback=first effect=Debug partitioned=False] a
    b:f32[3] c:i32[] = pure_callback[callback=second result_avals=(ShapedArray(float32[3]), ShapedArray(int32[]))] a
    jit[
      name=g
      jaxpr={ lambda ; d:i32[]. let
          debug_callback[callback=third effect=Debug partitioned=False] d
        in () }
    ] c
  in (b,) }",
    );
    let (text, callbacks) = lower_jaxpr_full(&j, "f", &LowerOptions::default()).unwrap();
    let names: Vec<&str> = callbacks.iter().map(|c| c.callback.name()).collect();
    assert_eq!(names, ["first", "second", "third"]);
    assert!(callbacks.iter().all(|c| !c.token));
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("custom_call")).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("call_target_name = \"xla_ffi_python_cpu_callback\""));
    assert!(lines[0].contains("has_side_effect = true"));
    assert!(lines[0].contains("mhlo.backend_config = {index = 0 : ui64}"));
    assert!(lines[0]
        .trim_start()
        .starts_with("\"stablehlo.custom_call\"(%arg0)"));
    assert!(lines[0].ends_with(": (tensor<3xf32>) -> ()"));
    // The pure callback has results and no side effect.
    assert!(!lines[1].contains("has_side_effect"));
    assert!(lines[1].contains("{index = 1 : ui64}"));
    assert!(
        lines[1].ends_with("-> (tensor<3xf32>, tensor<i32>)"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains("{index = 2 : ui64}"));
    assert_eq!(lower_jaxpr(&j, "f").unwrap(), text);
}

#[test]
fn ordered_callbacks_thread_mains_token() {
    // As JAX: `@main` takes the token first and returns it first (marked `jax.token`);
    // each ordered callback takes the token the previous one returned; unordered ones
    // take none.
    let j = parse(
        "{ lambda ; a:f32[3]. let
    debug_callback[callback=one effect=OrderedDebug partitioned=False] a
    debug_callback[callback=free effect=Debug partitioned=False] a
    debug_callback[callback=two effect=OrderedDebug partitioned=False] a
  in (a,) }",
    );
    let (text, callbacks) = lower_jaxpr_full(&j, "f", &LowerOptions::default()).unwrap();
    let tokens: Vec<bool> = callbacks.iter().map(|c| c.token).collect();
    assert_eq!(tokens, [true, false, true]);
    assert!(
        text.contains(
            "@main(%token: !stablehlo.token {jax.token = true}, %arg0: tensor<3xf32>) -> \
             (!stablehlo.token {jax.token = true}, tensor<3xf32>)"
        ),
        "{text}"
    );
    assert!(!text.contains("after_all"), "{text}");
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("custom_call") || l.contains("func.return"))
        .map(str::trim)
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("%0 = \"stablehlo.custom_call\"(%token, %arg0)"),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(": (!stablehlo.token, tensor<3xf32>) -> !stablehlo.token"));
    assert!(
        lines[1].starts_with("\"stablehlo.custom_call\"(%arg0)"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("%1 = \"stablehlo.custom_call\"(%0, %arg0)"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with("\"func.return\"(%1, %arg0)"),
        "{}",
        lines[3]
    );
    // Without an ordered effect, no token anywhere.
    let j = parse(
        "{ lambda ; a:f32[3]. let
    debug_callback[callback=free effect=Debug partitioned=False] a
  in (a,) }",
    );
    let text = lower_jaxpr(&j, "f").unwrap();
    assert!(!text.contains("token"), "{text}");
}

#[test]
fn the_token_passes_through_loops_branches_and_calls() {
    // An ordered print in a while body, a cond branch, a scan body and a nested jit:
    // each of their functions takes and returns the token, the loops carry it, the
    // case passes it to both branches (the one without a print gives it back as it
    // came), and main's token goes through them all in program order.
    let print = |v: &str| {
        format!(
            "debug_print[
      fmt={{}}
      has_placeholders=True
      in_tree=PyTreeDef(((*,), {{}}))
      logging_record=None
      np_printoptions=(('precision', 8),)
      ordered=True
      partitioned=False
      static_args=()
    ] {v}"
        )
    };
    let text = format!(
        "{{ lambda ; a:f32[] b:i32[]. let
    {p_a}
    c:f32[] = while[
      body_jaxpr={{ lambda ; d:f32[]. let {p_d} e:f32[] = add d 1.0:f32[] in (e,) }}
      body_nconsts=0
      cond_jaxpr={{ lambda ; f:f32[]. let g:bool[] = lt f 3.0:f32[] in (g,) }}
      cond_nconsts=0
    ] a
    h:f32[] = cond[
      branches=(
        {{ lambda ; i:f32[]. let j:f32[] = neg i in (j,) }}
        {{ lambda ; k:f32[]. let {p_k} in (k,) }}
      )
    ] b c
    l:f32[] m:f32[2] = scan[
      _split_transpose=False
      jaxpr={{ lambda ; n:f32[]. let {p_n} in (n, n) }}
      length=2
      linear=(False,)
      num_carry=1
      num_consts=0
      reverse=False
      unroll=1
    ] h
    o:f32[] = jit[name=inner jaxpr={{ lambda ; p:f32[]. let {p_p} in (p,) }}] l
  in (o,) }}",
        p_a = print("a"),
        p_d = print("d"),
        p_k = print("k"),
        p_n = print("n"),
        p_p = print("p"),
    );
    let j = parse(&text);
    let (text, callbacks) = lower_jaxpr_full(&j, "f", &LowerOptions::default()).unwrap();
    assert_eq!(callbacks.len(), 5);
    assert!(callbacks.iter().all(|c| c.token && c.print.is_some()));
    assert!(!text.contains("after_all"), "{text}");
    // Every private function with a print takes and returns the token; the branch
    // without one does not.
    for f in ["while_body", "branch", "scan_body", "inner"] {
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("func.func private @{f}"))
                    && l.contains("(%token: !stablehlo.token, ")
                    && l.contains("-> (!stablehlo.token, ")),
            "{f}: {text}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.contains("func.func private @branch") && !l.contains("token")),
        "{text}"
    );
    // The while carries it (with the scan's loop, which carries it last), the case
    // gives it back first.
    assert!(
        text.contains("}) : (!stablehlo.token, tensor<f32>) -> (!stablehlo.token, tensor<f32>)"),
        "{text}"
    );
    assert!(
        text.contains("}) : (tensor<i32>) -> (!stablehlo.token, tensor<f32>)"),
        "{text}"
    );
    assert!(
        text.contains(
            "!stablehlo.token) -> (tensor<i32>, tensor<f32>, tensor<2xf32>, !stablehlo.token)"
        ),
        "{text}"
    );
}

#[test]
fn transpose_keeps_forward_effects_and_refuses_linear_ones() {
    // A callback on a non-linear value runs with the forward part of the transposed
    // jaxpr; one on a linear value has no transpose (JAX refuses it too).
    let j = parse(
        "{ lambda ; a:f32[] b:f32[]. let
    debug_callback[callback=cb effect=Debug partitioned=False] a
    c:f32[] = mul a b
  in (c,) }",
    );
    let t = ferrax_ir::passes::transpose(&j, &[false, true]).unwrap();
    assert_eq!(prims(&t), ["debug_callback", "mul"]);
    let j = parse(
        "{ lambda ; a:f32[] b:f32[]. let
    debug_callback[callback=cb effect=Debug partitioned=False] b
    c:f32[] = mul a b
  in (c,) }",
    );
    let err = ferrax_ir::passes::transpose(&j, &[false, true]).unwrap_err();
    assert!(err.to_string().contains("debug_callback"), "{err}");
}
