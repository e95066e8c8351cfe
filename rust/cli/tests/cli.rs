//! The command-line tool, run as a process.

use std::io::Write;
use std::process::{Command, Stdio};

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrax-jaxpr"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // The tool may stop before reading its input (a bad option): a closed pipe is fine.
    if let Err(e) = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
    {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    let out = child.wait_with_output().expect("finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TEXT: &str = "{ lambda ; x:f32[3] y:f32[]. let a:f32[3] = sin x; b:f32[] = cos y in (a, b) }";

#[test]
fn check_fmt_dce_toposort_lower() {
    let (code, out, _) = run(&["check", "-"], TEXT);
    assert_eq!(code, 0);
    assert_eq!(out, "ok: (f32[3], f32[]) -> (f32[3], f32[])\n");

    let (code, out, _) = run(&["fmt", "-"], TEXT);
    assert_eq!(code, 0);
    // Renamed, and on one line as JAX prints short jaxprs.
    assert_eq!(
        out,
        "{ lambda ; a:f32[3] b:f32[]. let c:f32[3] = sin a; d:f32[] = cos b in (c, d) }\n"
    );

    let (code, out, _) = run(&["dce", "-", "--used", "1,0"], TEXT);
    assert_eq!(code, 0);
    assert!(!out.contains("cos") && out.contains("sin"), "{out}");

    let (code, out, _) = run(&["toposort", "-"], TEXT);
    assert_eq!(code, 0);
    assert!(out.contains("sin") && out.contains("cos"));

    let (code, out, _) = run(&["lower", "-", "--name", "m"], TEXT);
    assert_eq!(code, 0);
    assert!(out.starts_with("module @m {"), "{out}");
}

#[test]
fn errors_are_reported_with_exit_codes() {
    let (code, _, err) = run(
        &["check", "-"],
        "{ lambda ; x:f32[3]. let y:f32[3] = add x z in (y,) }",
    );
    assert_eq!(code, 1);
    assert!(err.contains("'z'"), "{err}");

    let (code, _, err) = run(&["check", "-"], "{ lambda ; x:f32[");
    assert_eq!(code, 1);
    assert!(err.contains("line 1"), "{err}");

    let (code, _, err) = run(&["frobnicate", "-"], TEXT);
    assert_eq!(code, 2);
    assert!(err.contains("unknown command"), "{err}");

    let (code, _, err) = run(&["dce", "-", "--used", "1"], TEXT);
    assert_eq!(code, 2);
    assert!(err.contains("2 outputs"), "{err}");

    let (code, _, _) = run(&["check", "/no/such/file"], "");
    assert_eq!(code, 1);
}

#[test]
fn partial_eval_prints_both_halves() {
    let text = "{ lambda ; x:f32[3] y:f32[3]. let a:f32[3] = sin x; b:f32[3] = mul a y \
                in (b, a) }";
    let (code, out, err) = run(&["partial-eval", "-", "--unknown", "0,1"], text);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "known:\n{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b, b) }\n\
         unknown:\n{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = mul a b in (c,) }\n\
         residuals: 1\nunknown outputs: 1,0\n"
    );

    // Instantiated, the known output comes out of the unknown jaxpr too.
    let (code, out, _) = run(
        &[
            "partial-eval",
            "-",
            "--unknown",
            "0,1",
            "--instantiate",
            "0,1",
        ],
        text,
    );
    assert_eq!(code, 0);
    assert!(
        out.ends_with("residuals: 1\nunknown outputs: 1,1\n"),
        "{out}"
    );

    let (code, _, err) = run(&["partial-eval", "-"], text);
    assert_eq!(code, 2);
    assert!(err.contains("--unknown"), "{err}");

    let (code, _, err) = run(&["partial-eval", "-", "--unknown", "1"], text);
    assert_eq!(code, 2);
    assert!(
        err.contains("--unknown has 1 flags but the jaxpr has 2 inputs"),
        "{err}"
    );

    let (code, _, err) = run(
        &[
            "partial-eval",
            "-",
            "--unknown",
            "1,0",
            "--instantiate",
            "1,x",
        ],
        text,
    );
    assert_eq!(code, 2);
    assert!(err.contains("--instantiate takes 0/1 flags"), "{err}");
}

#[test]
fn transpose_prints_the_transposed_jaxpr() {
    // f(x, t) = x * t + t, linear in t: its transpose maps ct to x * ct + ct (the
    // cotangent takes the linear operand's place, as in JAX).
    let text = "{ lambda ; x:f32[3] t:f32[3]. let a:f32[3] = mul x t; b:f32[3] = add a t in (b,) }";
    let (code, out, err) = run(&["transpose", "-", "--linear", "0,1"], text);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "{ lambda ; a:f32[3] b:f32[3]. let\n    c:f32[3] = mul a b\n    d:f32[3] = add_any b c\n  in (d,) }\n"
    );
    // The output reads back (and typechecks).
    let (code, out2, _) = run(&["check", "-"], &out);
    assert_eq!(code, 0);
    assert_eq!(out2, "ok: (f32[3], f32[3]) -> (f32[3])\n");

    // Bad flags and non-linear uses are errors.
    let (code, _, err) = run(&["transpose", "-", "--linear", "1"], text);
    assert_eq!(code, 2);
    assert!(
        err.contains("--linear has 1 flags but the jaxpr has 2 inputs"),
        "{err}"
    );
    let (code, _, err) = run(&["transpose", "-", "--linear", "1,1"], text);
    assert_eq!(code, 1);
    assert!(err.contains("equation 0 (mul) is not linear"), "{err}");
    let (code, _, err) = run(&["transpose", "-"], text);
    assert_eq!(code, 2);
    assert!(err.contains("--linear") && err.contains("usage:"), "{err}");
}

#[test]
fn partial_eval_of_a_jaxpr_without_inputs() {
    let (code, out, err) = run(
        &["partial-eval", "-", "--unknown", ""],
        "{ lambda ; . let  in (1.0:f32[],) }",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with("residuals: 0\nunknown outputs: 0\n"), "{out}");
}

#[test]
fn rewrite_applies_a_rule_file_or_the_algebraic_set() {
    let dir = std::env::temp_dir().join(format!("ferrax-cli-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.txt");
    std::fs::write(&rules, "# exp to log\nexp_log: exp ?x => log ?x\n").unwrap();
    let rules = rules.to_str().unwrap();
    let text = "{ lambda ; x:f32[3]. let a:f32[3] = exp x; b:f32[3] = mul a 1.0:f32[] in (b,) }";
    let (code, out, err) = run(&["rewrite", "-", "--rules", rules], text);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "{ lambda ; a:f32[3]. let b:f32[3] = log a; c:f32[3] = mul b 1.0:f32[] in (c,) }\n"
    );
    let (code, out, _) = run(&["rewrite", "-", "--rules", "@algebraic"], text);
    assert_eq!(code, 0);
    assert_eq!(out, "{ lambda ; a:f32[3]. let b:f32[3] = exp a in (b,) }\n");
    // A malformed rule file: one line, exit status 2, naming the file and the line.
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "ok: neg ?x => ?x\n\nbroken: neg ?x => ?y\n").unwrap();
    let (code, _, err) = run(&["rewrite", "-", "--rules", bad.to_str().unwrap()], text);
    assert_eq!(code, 2);
    assert!(err.contains("bad.txt: line 3: rule 'broken'"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // No rules; a bound that is not a number: usage.
    let (code, _, err) = run(&["rewrite", "-"], text);
    assert_eq!(code, 2);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let (code, _, _) = run(
        &["rewrite", "-", "--rules", rules, "--max-iterations", "x"],
        text,
    );
    assert_eq!(code, 2);
    // Rules that loop: exit status 1, naming them.
    let loops = dir.join("loops.txt");
    std::fs::write(&loops, "a: exp ?x => log ?x\nb: log ?x => exp ?x\n").unwrap();
    let (code, _, err) = run(
        &[
            "rewrite",
            "-",
            "--rules",
            loops.to_str().unwrap(),
            "--max-iterations",
            "3",
        ],
        text,
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("3 iterations") && err.contains("a, b"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn masks_of_the_wrong_length_are_one_line_usage_errors() {
    for args in [
        vec!["dce", "-", "--used", "1,1,1"],
        vec!["transpose", "-", "--linear", "1"],
        vec!["partial-eval", "-", "--unknown", "1"],
        vec![
            "partial-eval",
            "-",
            "--unknown",
            "1,0",
            "--instantiate",
            "1",
        ],
    ] {
        let (code, _, err) = run(&args, TEXT);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("flags but the jaxpr has"), "{args:?}: {err}");
    }
}

#[test]
fn cost_prints_the_totals_and_one_line_per_primitive() {
    let text = "{ lambda ; a:f32[8] b:i32[8]. let
    c:f32[8] = sin a
    d:f32[8] = mul c 2.0:f32[]
    e:i32[8] = add b b
    f:f32[] = reduce_sum[axes=(0,)] d
  in (f, e) }";
    let (code, out, err) = run(&["cost", "-"], text);
    assert_eq!(code, 0, "{err}");
    // By hand: sin of 8 floats, 8 transcendentals (32 bytes in, 32 out); the mul by a
    // scalar read as f32[8] (3 x 32 bytes), the integer add (3 x 32), 8 flops each; the
    // sum 7 adds, reading 32 bytes and an initial value, writing 4.
    assert_eq!(
        out,
        "total: flops=23 transcendentals=8 bytes_accessed=296 while_loops=0\n\
         add: flops=8 transcendentals=0 bytes_accessed=96\n\
         mul: flops=8 transcendentals=0 bytes_accessed=96\n\
         reduce_sum: flops=7 transcendentals=0 bytes_accessed=40\n\
         sin: flops=0 transcendentals=8 bytes_accessed=64\n"
    );
    // A while loop: one iteration counted, and said so; an ill-typed jaxpr is an error.
    let looped = "{ lambda ; a:i32[]. let
    b:i32[] = while[
      body_jaxpr={ lambda ; c:i32[]. let d:i32[] = add c 1:i32[] in (d,) }
      body_nconsts=0
      cond_jaxpr={ lambda ; e:i32[]. let f:bool[] = lt e 7:i32[] in (f,) }
      cond_nconsts=0
    ] a
  in (b,) }";
    let (code, out, _) = run(&["cost", "-"], looped);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("total: flops=2 transcendentals=0 bytes_accessed=21 while_loops=1\n"),
        "{out}"
    );
    let (code, _, err) = run(
        &["cost", "-"],
        "{ lambda ; a:f32[3]. let b:f32[4] = sin a in (b,) }",
    );
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
}
