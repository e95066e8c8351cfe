//! The properties the cargo-fuzz targets check, one function per target. Each takes the
//! fuzzer's input bytes, panics (with the jaxpr's text) when the property fails, and
//! returns what it checked. The fuzz targets in `fuzz/` call these, and so does
//! `rust/ir/tests/fuzz_corpus.rs` on every checked-in corpus file and crash.

use super::generate::{arbitrary_jaxpr_with_report, GenConfig};
use super::linear::arbitrary_linear_jaxpr;
use super::mutate::mutate;
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::eval::{check_close, eval_jaxpr_with, EvalError, EvalOptions, HostArray};
use crate::jaxpr::{Atom, Jaxpr};
use crate::passes::rewrite::{rewrite, RuleSet, ALGEBRAIC_RULES};
use crate::passes::{dce, partial_eval, toposort, transpose};
use crate::text::{parse_jaxpr, print_jaxpr};
use crate::typecheck::typecheck;
use arbitrary::Unstructured;

/// What one check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// The input gave a case that was checked (not skipped, e.g. for an evaluation over
    /// its limits).
    pub valid: bool,
    /// Soft findings: equations the generator's rules rejected (should be 0).
    pub findings: u64,
}

/// A target's check: the fuzzer's input bytes to what was checked (panics on a
/// failure).
pub type Check = fn(&[u8]) -> Checked;

/// The check functions by target name, for replaying corpora.
pub const TARGETS: &[(&str, Check)] = &[
    ("parse", check_parse),
    ("print_parse", check_print_parse),
    ("typecheck", check_typecheck),
    ("dce_toposort", check_dce_toposort),
    ("partial_eval", check_partial_eval),
    ("transpose", check_transpose),
    ("lower", check_lower),
    ("rewrite", check_rewrite),
];

// Field by field, so limits added to `EvalOptions` later keep their defaults.
#[allow(clippy::field_reassign_with_default)]
fn eval_options() -> EvalOptions {
    let mut options = EvalOptions::default();
    options.max_loop_iterations = Some(10_000);
    options.max_array_elements = Some(1 << 16);
    options
}

/// Whether an evaluation error says the program cannot be run here (the case is skipped)
/// rather than a bug: a limit of the evaluator, or a program whose meaning the evaluator
/// declines (`Unsupported`: e.g. a `cond` in a `shard_map` body whose index differs
/// between devices while its branches hold collectives, which no device order can run).
fn is_limit(e: &EvalError) -> bool {
    matches!(
        e,
        EvalError::IterationLimit { .. }
            | EvalError::ArrayTooLarge { .. }
            | EvalError::MemoryLimit { .. }
            | EvalError::WorkLimit { .. }
            | EvalError::Unsupported { .. }
    )
}

fn arg_for(u: &mut Unstructured<'_>, t: &AbstractValue) -> HostArray {
    let n = t.shape.size().max(0) as usize;
    let shape = t.shape.clone();
    let made = match t.dtype {
        DType::Bool => HostArray::from_bool(
            shape,
            (0..n).map(|_| u.arbitrary().unwrap_or(false)).collect(),
        ),
        d if d.is_int() => {
            let lo = if d.is_signed() { -3 } else { 0 };
            HostArray::from_i64(
                shape,
                d,
                (0..n)
                    .map(|_| u.int_in_range(lo..=5).unwrap_or(0))
                    .collect(),
            )
        }
        d => {
            const FLOATS: [f64; 8] = [0.5, -1.0, 2.0, 0.0, 1.5, -0.25, 3.0, 100.0];
            HostArray::from_f64(
                shape,
                d,
                (0..n).map(|_| *u.choose(&FLOATS).unwrap_or(&0.5)).collect(),
            )
        }
    };
    made.unwrap_or_else(|_| HostArray::zeros(t.shape.clone(), t.dtype))
}

fn args_for(u: &mut Unstructured<'_>, j: &Jaxpr) -> Vec<HostArray> {
    j.in_avals().iter().map(|t| arg_for(u, t)).collect()
}

fn eval(j: &Jaxpr, args: &[HostArray], what: &str) -> Option<Vec<HostArray>> {
    match eval_jaxpr_with(j, &[], args, &eval_options()) {
        Ok(v) => Some(v),
        Err(e) if is_limit(&e) => None,
        Err(e) => panic!("{what}: evaluation failed: {e}\n{j}"),
    }
}

fn same_values(got: &[HostArray], want: &[&HostArray], what: &str, j: &Jaxpr, orig: &Jaxpr) {
    assert_eq!(got.len(), want.len(), "{what}: output count\n{orig}\n{j}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if let Err(m) = check_close(g, w, 0.0, 0.0) {
            panic!("{what}: output {i} differs: {m}\noriginal:\n{orig}\nafter:\n{j}");
        }
    }
}

/// `parse`: arbitrary text gives a jaxpr or an error, never a panic; what parses
/// typechecks and prints back to text that parses to the same printed form.
pub fn check_parse(data: &[u8]) -> Checked {
    let Ok(text) = std::str::from_utf8(data) else {
        return Checked::default();
    };
    let Ok(j) = parse_jaxpr(text) else {
        return Checked::default();
    };
    if let Err(e) = typecheck(&j) {
        panic!("a parsed jaxpr does not typecheck: {e}\n{text}");
    }
    let printed = print_jaxpr(&j);
    let again = parse_jaxpr(&printed)
        .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{printed}"));
    assert_eq!(print_jaxpr(&again), printed, "printing is not stable");
    Checked {
        valid: true,
        findings: 0,
    }
}

fn generated(u: &mut Unstructured<'_>, config: &GenConfig) -> Option<(Jaxpr, u64)> {
    let (j, report) = arbitrary_jaxpr_with_report(u, config).ok()?;
    Some((j, report.rejected.len() as u64))
}

/// `print_parse`: a generated jaxpr (up to thousands of equations) prints to text that
/// parses back to a jaxpr printing identically.
pub fn check_print_parse(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::large()) else {
        return Checked::default();
    };
    let text = print_jaxpr(&j);
    let parsed = match parse_jaxpr(&text) {
        Ok(p) => p,
        Err(e) => panic!("printed jaxpr does not parse: {e}\n{text}"),
    };
    let again = print_jaxpr(&parsed);
    assert!(
        again == text,
        "print(parse(print(j))) differs:\n{text}\n--- vs ---\n{again}"
    );
    Checked {
        valid: true,
        findings,
    }
}

/// `typecheck`: generated jaxprs typecheck; ill-typed mutants of them are rejected.
pub fn check_typecheck(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::small()) else {
        return Checked::default();
    };
    if let Err(e) = typecheck(&j) {
        panic!("a generated jaxpr does not typecheck: {e}\n{j}");
    }
    let mut valid = false;
    for _ in 0..4 {
        let Ok(Some(m)) = mutate(&j, &mut u) else {
            continue;
        };
        valid = true;
        if let Ok(bad) = m.result {
            panic!(
                "typecheck accepted an ill-typed mutant ({}):\n{bad}\noriginal:\n{j}",
                m.mutation
            );
        }
    }
    Checked { valid, findings }
}

/// `j` rebuilt with its equations in an order drawn from `u`, then sorted by
/// [`crate::builder::JaxprBuilder::build_toposorted`].
fn shuffled_and_sorted(j: &Jaxpr, u: &mut Unstructured<'_>) -> Jaxpr {
    let (mut b, mut map) = super::builder_with_inputs(j);
    for e in j.eqns() {
        for &v in e.outvars() {
            map[v.index()] = Some(b.new_var(j.var_aval(v).clone()));
        }
    }
    let lits: Vec<Atom> = j.literals().iter().map(|l| b.literal(*l)).collect();
    let atom = |a: Atom| match a {
        Atom::Var(v) => Atom::Var(map[v.index()].unwrap_or(v)),
        Atom::Lit(l) => lits[l.index()],
    };
    let mut order: Vec<usize> = (0..j.eqns().len()).collect();
    for i in (1..order.len()).rev() {
        let k = u.int_in_range(0..=i).unwrap_or(0);
        order.swap(i, k);
    }
    for i in order {
        let e = &j.eqns()[i];
        b.add_eqn_with_outvars(
            e.primitive().clone(),
            e.inputs().iter().map(|&a| atom(a)).collect(),
            e.params().clone(),
            e.outvars()
                .iter()
                .map(|&v| map[v.index()].unwrap_or(v))
                .collect(),
        );
    }
    let outs = j.outvars().iter().map(|&a| atom(a)).collect();
    b.build_toposorted(outs)
        .unwrap_or_else(|e| panic!("toposort of shuffled equations failed: {e}\n{j}"))
}

/// `dce_toposort`: DCE (for a random set of used outputs) and toposort (of the
/// equations shuffled) keep the outputs' values under the reference evaluator.
pub fn check_dce_toposort(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::small()) else {
        return Checked::default();
    };
    let args = args_for(&mut u, &j);
    let Some(want) = eval(&j, &args, "original") else {
        return Checked {
            valid: false,
            findings,
        };
    };
    let all: Vec<&HostArray> = want.iter().collect();
    let sorted = toposort(&j);
    if let Some(got) = eval(&sorted, &args, "toposort") {
        same_values(&got, &all, "toposort", &sorted, &j);
    }
    let shuffled = shuffled_and_sorted(&j, &mut u);
    if let Some(got) = eval(&shuffled, &args, "shuffled") {
        same_values(&got, &all, "toposort of shuffled equations", &shuffled, &j);
    }
    let used: Vec<bool> = (0..j.outvars().len())
        .map(|_| u.arbitrary().unwrap_or(true))
        .collect();
    let (d, used_in) = dce(&j, &used).unwrap_or_else(|e| panic!("dce failed: {e}\n{j}"));
    if let Err(e) = typecheck(&d) {
        panic!("dce made an ill-typed jaxpr: {e}\n{j}\n{d}");
    }
    // Effects (debug callbacks, and calls and loops holding them) are never dropped.
    assert_eq!(
        effect_count(&d),
        effect_count(&j),
        "dce dropped an effect\n{j}\n{d}"
    );
    assert_eq!(
        effect_count(&sorted),
        effect_count(&j),
        "toposort lost an effect"
    );
    assert_eq!(used_in.len(), j.invars().len(), "dce: used_inputs length");
    let kept: Vec<HostArray> = args
        .iter()
        .zip(&used_in)
        .filter(|(_, &k)| k)
        .map(|(a, _)| a.clone())
        .collect();
    let wanted: Vec<&HostArray> = want
        .iter()
        .zip(&used)
        .filter(|(_, &k)| k)
        .map(|(w, _)| w)
        .collect();
    if let Some(got) = eval(&d, &kept, "dce") {
        same_values(&got, &wanted, &format!("dce {used:?}"), &d, &j);
    }
    Checked {
        valid: true,
        findings,
    }
}

/// `partial_eval`: for random unknown inputs (and instantiated outputs), running the
/// known jaxpr, then the unknown one on its residuals, gives the original outputs.
pub fn check_partial_eval(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::small()) else {
        return Checked::default();
    };
    let args = args_for(&mut u, &j);
    let Some(want) = eval(&j, &args, "original") else {
        return Checked {
            valid: false,
            findings,
        };
    };
    let unknowns: Vec<bool> = (0..j.invars().len())
        .map(|_| u.arbitrary().unwrap_or(false))
        .collect();
    let instantiate: Vec<bool> = (0..j.outvars().len())
        .map(|_| u.ratio(1, 4).unwrap_or(false))
        .collect();
    let pe = partial_eval(&j, &unknowns, &instantiate)
        .unwrap_or_else(|e| panic!("partial_eval {unknowns:?} failed: {e}\n{j}"));
    for (name, half) in [("known", &pe.known), ("unknown", &pe.unknown)] {
        if let Err(e) = typecheck(half) {
            panic!("partial_eval {unknowns:?}: ill-typed {name} jaxpr: {e}\n{j}\n{half}");
        }
    }
    let known_args: Vec<HostArray> = args
        .iter()
        .zip(&unknowns)
        .filter(|(_, &k)| !k)
        .map(|(a, _)| a.clone())
        .collect();
    let unknown_args: Vec<HostArray> = args
        .iter()
        .zip(&unknowns)
        .filter(|(_, &k)| k)
        .map(|(a, _)| a.clone())
        .collect();
    let Some(known_outs) = eval(&pe.known, &known_args, "known") else {
        return Checked {
            valid: false,
            findings,
        };
    };
    let nres = pe.num_residuals;
    assert!(
        known_outs.len() >= nres,
        "known jaxpr returns fewer values than residuals"
    );
    let split = known_outs.len() - nres;
    let mut uargs: Vec<HostArray> = known_outs[split..].to_vec();
    uargs.extend(unknown_args);
    let Some(unknown_outs) = eval(&pe.unknown, &uargs, "unknown") else {
        return Checked {
            valid: false,
            findings,
        };
    };
    let (mut k, mut un) = (known_outs[..split].iter(), unknown_outs.iter());
    let mut got = Vec::with_capacity(want.len());
    for (i, &is_unknown) in pe.out_unknowns.iter().enumerate() {
        let next = if is_unknown { un.next() } else { k.next() };
        match next {
            Some(v) => got.push(v.clone()),
            None => panic!(
                "partial_eval {unknowns:?}: output {i} missing\n{j}\nknown:\n{}\nunknown:\n{}",
                pe.known, pe.unknown
            ),
        }
    }
    let all: Vec<&HostArray> = want.iter().collect();
    let what = format!(
        "partial_eval unknowns={unknowns:?} instantiate={instantiate:?} (known:\n{}\nunknown:\n{})",
        pe.known, pe.unknown
    );
    same_values(&got, &all, &what, &pe.unknown, &j);
    Checked {
        valid: true,
        findings,
    }
}

fn inner(a: &HostArray, b: &HostArray) -> f64 {
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .map(|(x, y)| x * y)
        .sum()
}

/// `transpose`: the transpose of a random linear jaxpr passes the dot-product test
/// `<ct, L t> = <L^T ct, t>`.
pub fn check_transpose(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Ok(lin) = arbitrary_linear_jaxpr(&mut u, 12) else {
        return Checked::default();
    };
    let j = &lin.jaxpr;
    let tj = transpose(j, &lin.linear)
        .unwrap_or_else(|e| panic!("transpose failed: {e}\n{j}\nlinear: {:?}", lin.linear));
    if let Err(e) = typecheck(&tj) {
        panic!("transpose made an ill-typed jaxpr: {e}\n{j}\n{tj}");
    }
    let mut args = Vec::new();
    let mut nonlin = Vec::new();
    let mut ts = Vec::new();
    for (t, &l) in j.in_avals().iter().zip(&lin.linear) {
        let n = t.shape.size().max(0) as usize;
        let v = if t.dtype.is_float() {
            let (lo, hi) = if l { (-1.0, 1.0) } else { (0.5, 1.5) };
            let data = (0..n)
                .map(|_| lo + (hi - lo) * u.int_in_range(0..=16).unwrap_or(8) as f64 / 16.0)
                .collect();
            HostArray::from_f64(t.shape.clone(), t.dtype, data)
        } else if t.dtype == DType::Bool {
            HostArray::from_bool(
                t.shape.clone(),
                (0..n).map(|_| u.arbitrary().unwrap_or(false)).collect(),
            )
        } else {
            HostArray::from_i64(
                t.shape.clone(),
                t.dtype,
                (0..n)
                    .map(|_| u.int_in_range(-1..=3).unwrap_or(0))
                    .collect(),
            )
        }
        .unwrap_or_else(|_| HostArray::zeros(t.shape.clone(), t.dtype));
        if l {
            ts.push(v.clone());
        } else {
            nonlin.push(v.clone());
        }
        args.push(v);
    }
    let Some(ys) = eval(j, &args, "linear jaxpr") else {
        return Checked::default();
    };
    let cts: Vec<HostArray> = j
        .out_avals()
        .iter()
        .map(|t| {
            let n = t.shape.size().max(0) as usize;
            let data = (0..n)
                .map(|_| -1.0 + u.int_in_range(0..=16).unwrap_or(8) as f64 / 8.0)
                .collect();
            HostArray::from_f64(t.shape.clone(), t.dtype, data)
                .unwrap_or_else(|_| HostArray::zeros(t.shape.clone(), t.dtype))
        })
        .collect();
    let lhs: f64 = cts.iter().zip(&ys).map(|(c, y)| inner(c, y)).sum();
    let mut targs = nonlin;
    targs.extend(cts.iter().cloned());
    let Some(tcts) = eval(&tj, &targs, "transposed jaxpr") else {
        return Checked::default();
    };
    assert_eq!(
        tcts.len(),
        ts.len(),
        "one cotangent per linear input\n{j}\n{tj}"
    );
    let rhs: f64 = tcts.iter().zip(&ts).map(|(c, t)| inner(c, t)).sum();
    let scale = 1.0 + lhs.abs().max(rhs.abs());
    assert!(
        (lhs - rhs).abs() <= 1e-3 * scale,
        "dot-product test failed: <ct, L t> = {lhs} but <L^T ct, t> = {rhs}\n{j}\n{tj}"
    );
    Checked {
        valid: true,
        findings: 0,
    }
}

/// `lower`: every generated jaxpr lowers to StableHLO text without panicking.
pub fn check_lower(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::large()) else {
        return Checked::default();
    };
    let options = crate::lower::stablehlo::LowerOptions {
        num_partitions: crate::lower::stablehlo::required_partitions(&j),
        ..Default::default()
    };
    match crate::lower::stablehlo::lower_jaxpr_with(&j, "fuzz", &options) {
        Ok(text) => assert!(text.contains("func.func"), "lowering emitted no function"),
        Err(e) => panic!("lowering failed: {e}\n{j}"),
    }
    Checked {
        valid: true,
        findings,
    }
}

/// `rewrite`: the algebraic rule set (without `log_exp`, which is exact only in real
/// arithmetic) rewrites a generated jaxpr to a fixpoint, keeps its input and output
/// types and effects, and computes bit-for-bit the same outputs.
pub fn check_rewrite(data: &[u8]) -> Checked {
    let mut u = Unstructured::new(data);
    let Some((j, findings)) = generated(&mut u, &GenConfig::small()) else {
        return Checked::default();
    };
    let exact: String = ALGEBRAIC_RULES
        .lines()
        .filter(|l| !l.starts_with("log_exp:"))
        .collect::<Vec<_>>()
        .join("\n");
    let rules = RuleSet::parse(&exact).unwrap_or_else(|e| panic!("the rules read: {e}"));
    let r = rewrite(&j, &rules, 100).unwrap_or_else(|e| panic!("rewrite failed: {e}\n{j}"));
    if let Err(e) = typecheck(&r.jaxpr) {
        panic!("rewrite made an ill-typed jaxpr: {e}\n{j}\n{}", r.jaxpr);
    }
    assert_eq!(
        r.jaxpr.in_avals(),
        j.in_avals(),
        "rewrite: input types\n{j}"
    );
    assert_eq!(
        r.jaxpr.out_avals(),
        j.out_avals(),
        "rewrite: output types\n{j}"
    );
    assert_eq!(
        effect_count(&r.jaxpr),
        effect_count(&j),
        "rewrite lost an effect\n{j}"
    );
    let args = args_for(&mut u, &j);
    let Some(want) = eval(&j, &args, "original") else {
        return Checked {
            valid: false,
            findings,
        };
    };
    let all: Vec<&HostArray> = want.iter().collect();
    if let Some(got) = eval(&r.jaxpr, &args, "rewritten") {
        same_values(&got, &all, "rewrite", &r.jaxpr, &j);
    }
    Checked {
        valid: true,
        findings,
    }
}

/// The top-level equations with an effect (callbacks, and calls and loops holding them).
fn effect_count(j: &Jaxpr) -> usize {
    j.eqns().iter().filter(|e| e.has_effect()).count()
}
