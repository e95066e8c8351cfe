//! `ferrax-jaxpr`: the IR crate's operations on jaxpr text files.
//!
//! ```text
//! ferrax-jaxpr check FILE            typecheck; print the input and output types
//! ferrax-jaxpr fmt FILE              print in the canonical format
//! ferrax-jaxpr dce FILE [--used 1,0] prune (all outputs used by default)
//! ferrax-jaxpr toposort FILE         reorder equations by demand
//! ferrax-jaxpr transpose FILE --linear 1,0
//!                                    transpose a jaxpr linear in the flagged inputs: the
//!                                    result takes the non-linear inputs, then one
//!                                    cotangent per output, and returns one cotangent per
//!                                    linear input
//! ferrax-jaxpr lower FILE [--name m] lower to a StableHLO module
//! ferrax-jaxpr partial-eval FILE --unknown 1,0 [--instantiate 0,1]
//!                                    split into known and unknown jaxprs
//! ferrax-jaxpr rewrite FILE --rules RULES [--max-iterations 100]
//!                                    apply rewrite rules (a rule file, or `@algebraic`
//!                                    for the built-in simplifications) to a fixpoint
//! ferrax-jaxpr cost FILE             the static cost: a `total:` line (flops,
//!                                    transcendentals, bytes_accessed, while_loops),
//!                                    then one line per primitive, by name
//! ```
//! `FILE` may be `-` for standard input. Errors go to standard error, on one line, with
//! exit code 1 (2 for bad usage: unknown commands or options, flag lists of the wrong
//! length, unreadable rule files).

use ferrax_ir::lower::stablehlo::lower_jaxpr;
use ferrax_ir::passes::rewrite::{rewrite, RuleSet, ALGEBRAIC_RULES, DEFAULT_MAX_ITERATIONS};
use ferrax_ir::passes::{cost_report, dce, partial_eval, toposort, transpose, Cost};
use ferrax_ir::text::{parse_jaxpr, print_jaxpr};
use ferrax_ir::{typecheck, AbstractValue, Jaxpr};
use std::io::Read;
use std::process::ExitCode;

const USAGE: &str =
    "usage: ferrax-jaxpr (check|fmt|dce|toposort|transpose|lower|partial-eval|rewrite|cost) \
     FILE [--used FLAGS] [--linear FLAGS] [--name NAME] [--unknown FLAGS] [--instantiate FLAGS] \
     [--rules RULES] [--max-iterations N]";

fn read(path: &str) -> Result<String, String> {
    if path == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
    }
}

fn types(avals: &[AbstractValue]) -> String {
    let v: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!("({})", v.join(", "))
}

/// Parses `1,0,...` flags given to `option`, one per input or output (`what`).
fn flags(text: &str, n: usize, option: &str, what: &str) -> Result<Vec<bool>, String> {
    // An empty list is no flags (a jaxpr without inputs or outputs).
    let v: Vec<bool> = text
        .split(',')
        .filter(|f| !(f.trim().is_empty() && text.trim().is_empty()))
        .map(|f| match f.trim() {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            other => Err(format!("{option} takes 0/1 flags, got '{other}'")),
        })
        .collect::<Result<_, _>>()?;
    if v.len() != n {
        return Err(format!(
            "{option} has {} flags but the jaxpr has {n} {what}",
            v.len()
        ));
    }
    Ok(v)
}

/// The counts of one [`Cost`] as `key=value` pairs.
fn counts(c: &Cost) -> String {
    format!(
        "flops={} transcendentals={} bytes_accessed={}",
        c.flops, c.transcendentals, c.bytes_accessed
    )
}

fn run(args: &[String]) -> Result<String, (u8, String)> {
    let usage = |m: &str| (2u8, format!("{m} ({USAGE})"));
    let (cmd, path) = match args {
        [cmd, path, ..] => (cmd.as_str(), path.as_str()),
        _ => return Err(usage("missing arguments")),
    };
    let mut used: Option<String> = None;
    let mut linear: Option<String> = None;
    let mut name = "ferrax".to_owned();
    let mut unknown: Option<String> = None;
    let mut instantiate: Option<String> = None;
    let mut rules: Option<String> = None;
    let mut max_iterations = DEFAULT_MAX_ITERATIONS;
    let mut rest = args[2..].iter();
    while let Some(a) = rest.next() {
        match (a.as_str(), rest.next()) {
            ("--used", Some(v)) => used = Some(v.clone()),
            ("--linear", Some(v)) => linear = Some(v.clone()),
            ("--name", Some(v)) => name = v.clone(),
            ("--unknown", Some(v)) => unknown = Some(v.clone()),
            ("--instantiate", Some(v)) => instantiate = Some(v.clone()),
            ("--rules", Some(v)) => rules = Some(v.clone()),
            ("--max-iterations", Some(v)) => {
                max_iterations = v
                    .parse()
                    .map_err(|_| usage(&format!("--max-iterations takes a count, got '{v}'")))?
            }
            _ => return Err(usage(&format!("unexpected argument '{a}'"))),
        }
    }
    let fail = |e: String| (1u8, e);
    // A flag list of the wrong length is bad usage.
    let bad = |e: String| (2u8, e);
    // The rule file first: a bad one is bad usage, whatever the jaxpr.
    let rule_set = match (&rules, cmd) {
        (Some(r), "rewrite") => {
            let text = if r == "@algebraic" {
                ALGEBRAIC_RULES.to_owned()
            } else {
                read(r).map_err(fail)?
            };
            Some(RuleSet::parse(&text).map_err(|e| bad(format!("{r}: {e}")))?)
        }
        (None, "rewrite") => {
            return Err(usage(
                "rewrite needs --rules RULES (a rule file, or @algebraic)",
            ))
        }
        _ => None,
    };
    let text = read(path).map_err(fail)?;
    let jaxpr: Jaxpr = parse_jaxpr(&text).map_err(|e| fail(e.to_string()))?;
    match cmd {
        "check" => {
            let ty = typecheck(&jaxpr).map_err(|e| fail(e.to_string()))?;
            Ok(format!(
                "ok: {} -> {}\n",
                types(&ty.in_avals),
                types(&ty.out_avals)
            ))
        }
        "fmt" => Ok(print_jaxpr(&jaxpr)),
        "cost" => {
            // The cost model relies on a well-typed jaxpr.
            typecheck(&jaxpr).map_err(|e| fail(e.to_string()))?;
            let r = cost_report(&jaxpr);
            let mut out = format!(
                "total: {} while_loops={}\n",
                counts(&r.total),
                r.total.while_loops
            );
            for (name, c) in &r.by_primitive {
                out.push_str(&format!("{name}: {}\n", counts(c)));
            }
            Ok(out)
        }
        "dce" => {
            let used = match used {
                Some(u) => flags(&u, jaxpr.outvars().len(), "--used", "outputs").map_err(bad)?,
                None => vec![true; jaxpr.outvars().len()],
            };
            let (pruned, _) = dce(&jaxpr, &used).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&pruned))
        }
        "toposort" => Ok(print_jaxpr(&toposort(&jaxpr))),
        "transpose" => {
            let Some(l) = linear else {
                return Err(usage(
                    "transpose needs --linear FLAGS (one 0/1 flag per input)",
                ));
            };
            let linear = flags(&l, jaxpr.invars().len(), "--linear", "inputs").map_err(bad)?;
            let t = transpose(&jaxpr, &linear).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&t))
        }
        "lower" => lower_jaxpr(&jaxpr, &name).map_err(|e| fail(e.to_string())),
        "partial-eval" => {
            let Some(unknown) = unknown else {
                return Err(usage("partial-eval needs --unknown FLAGS (one per input)"));
            };
            let n_out = jaxpr.outvars().len();
            let unknowns =
                flags(&unknown, jaxpr.invars().len(), "--unknown", "inputs").map_err(bad)?;
            let instantiate = match instantiate {
                Some(i) => flags(&i, n_out, "--instantiate", "outputs").map_err(bad)?,
                None => vec![false; n_out],
            };
            let pe =
                partial_eval(&jaxpr, &unknowns, &instantiate).map_err(|e| fail(e.to_string()))?;
            let mask: Vec<&str> = pe
                .out_unknowns
                .iter()
                .map(|&u| if u { "1" } else { "0" })
                .collect();
            Ok(format!(
                "known:\n{}\nunknown:\n{}\nresiduals: {}\nunknown outputs: {}\n",
                print_jaxpr(&pe.known).trim_end(),
                print_jaxpr(&pe.unknown).trim_end(),
                pe.num_residuals,
                mask.join(",")
            ))
        }
        "rewrite" => {
            let Some(set) = rule_set else {
                unreachable!("rewrite has its rules (checked above)")
            };
            let r = rewrite(&jaxpr, &set, max_iterations).map_err(|e| fail(e.to_string()))?;
            Ok(print_jaxpr(&r.jaxpr))
        }
        other => Err(usage(&format!("unknown command '{other}'"))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            if !out.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("ferrax-jaxpr: {message}");
            ExitCode::from(code)
        }
    }
}
