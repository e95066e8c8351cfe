//! Lowering to StableHLO: a jaxpr becomes an MLIR text module that jaxlib's XLA client
//! compiles as it is.
//!
//! The module has `func.func public @main`, taking the jaxpr's constvars then its invars
//! as arguments (constants are never embedded as text) and returning its outputs. Ops are
//! written in MLIR's generic form (`%3 = "stablehlo.add"(%1, %2) : (...) -> ...`), which
//! is uniform and stable across StableHLO versions.
//!
//! Every sub-jaxpr becomes a private function, emitted once however often it is used:
//! `jit` is a `func.call`; `cond` is a `stablehlo.case` whose branch regions call their
//! branch's function; `while` is a `stablehlo.while` whose regions call the condition and
//! the body; `scan` is a `stablehlo.while` over an index that slices the scanned inputs
//! and updates the stacked outputs around a call of the body. Functions are lowered from
//! a worklist, so nesting depth costs no stack; each is one pass over its equations
//! writing into the module's one buffer.

mod control;
mod indexing;
mod ops;
mod text;

use crate::jaxpr::{Atom, Jaxpr, VarId};
use crate::primitive::Primitive;
use std::collections::HashMap;
use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;

pub(crate) use text::{tensor_type, Ssa};

/// Why a jaxpr cannot be lowered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowerError {
    /// An extension primitive: it has no StableHLO lowering in the crate (the Python front
    /// end lowers extensions by decomposing them into built-ins first).
    Unsupported {
        /// The primitive's name.
        primitive: String,
    },
    /// A nested jaxpr closes over constants; they must be hoisted to the top level first
    /// (only the top-level jaxpr's constvars become arguments of `@main`).
    NestedConstants {
        /// The equation's primitive.
        primitive: String,
        /// How many constants the nested jaxpr has.
        count: usize,
    },
    /// A param the lowering needs is missing or ill formed (the typechecker prevents this
    /// for built jaxprs).
    BadParam {
        /// The primitive.
        primitive: String,
        /// The param.
        param: &'static str,
    },
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Unsupported { primitive } => write!(
                f,
                "primitive '{primitive}' has no StableHLO lowering (define a lowering by decomposition)"
            ),
            LowerError::NestedConstants { primitive, count } => write!(
                f,
                "a jaxpr nested in '{primitive}' closes over {count} constants; hoist them to the top level before lowering"
            ),
            LowerError::BadParam { primitive, param } => {
                write!(f, "'{primitive}' has no valid '{param}' param")
            }
        }
    }
}

impl std::error::Error for LowerError {}

/// Lowers a jaxpr to a StableHLO module named `module_name`. `@main` takes the constvars
/// (in order) and then the invars.
pub fn lower_jaxpr(jaxpr: &Jaxpr, module_name: &str) -> Result<String, LowerError> {
    let mut m = Module::new();
    m.out.reserve(jaxpr.eqns().len() * 96 + 256);
    let _ = writeln!(m.out, "module @{} {{", sanitize(module_name));
    m.function(jaxpr, "main", true)?;
    while let Some((j, name)) = m.pending.pop() {
        m.function(&j, &name, false)?;
    }
    m.out.push_str("}\n");
    Ok(m.out)
}

/// Makes a name usable as an MLIR symbol (letters, digits, `_`, `.`, `$`).
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("m_{s}")
    } else {
        s
    }
}

/// The module being written: its buffer, and the sub-jaxprs lowered (or queued) as
/// private functions, by identity.
pub(crate) struct Module {
    pub(crate) out: String,
    functions: HashMap<*const Jaxpr, String>,
    pending: Vec<(Arc<Jaxpr>, String)>,
}

impl Module {
    fn new() -> Module {
        Module {
            out: String::new(),
            functions: HashMap::new(),
            pending: Vec::new(),
        }
    }

    /// The name of the private function for a sub-jaxpr, queueing it the first time.
    pub(crate) fn function_for(&mut self, j: &Arc<Jaxpr>, hint: &str) -> String {
        let key = Arc::as_ptr(j);
        if let Some(name) = self.functions.get(&key) {
            return name.clone();
        }
        let name = format!("{}_{}", sanitize(hint), self.functions.len());
        self.functions.insert(key, name.clone());
        self.pending.push((Arc::clone(j), name.clone()));
        name
    }

    /// Writes one function: its signature, its equations, its return.
    fn function(&mut self, j: &Jaxpr, name: &str, public: bool) -> Result<(), LowerError> {
        let mut f = FuncState::new(j);
        let params: Vec<String> = j
            .constvars()
            .iter()
            .chain(j.invars())
            .enumerate()
            .map(|(i, &v)| {
                let arg = Ssa::new(format!("%arg{i}"), tensor_type(j.var_aval(v)));
                let s = format!("{}: {}", arg.name, arg.ty);
                f.bind(v, arg);
                s
            })
            .collect();
        let results: Vec<String> = j.out_avals().iter().map(tensor_type).collect();
        let _ = writeln!(
            self.out,
            "  func.func {}@{}({}) -> ({}) {{",
            if public { "public " } else { "private " },
            name,
            params.join(", "),
            results.join(", ")
        );
        for e in j.eqns() {
            let outs = match e.primitive() {
                Primitive::Builtin(b) => self.lower_eqn(&mut f, *b, e)?,
                Primitive::Extension(x) => {
                    return Err(LowerError::Unsupported {
                        primitive: x.name().to_owned(),
                    })
                }
            };
            for (&v, s) in e.outvars().iter().zip(outs) {
                f.bind(v, s);
            }
        }
        let outs: Vec<Ssa> = j.outvars().iter().map(|&a| f.atom(self, a)).collect();
        let names: Vec<&str> = outs.iter().map(|s| s.name.as_str()).collect();
        let _ = writeln!(
            self.out,
            "    \"func.return\"({}) : ({}) -> ()",
            names.join(", "),
            results.join(", ")
        );
        self.out.push_str("  }\n");
        Ok(())
    }
}

/// Per-function state: the SSA value of each jaxpr variable, and a counter for fresh
/// values.
pub(crate) struct FuncState<'j> {
    pub(crate) jaxpr: &'j Jaxpr,
    values: Vec<Option<Ssa>>,
    next: u32,
}

impl<'j> FuncState<'j> {
    fn new(jaxpr: &'j Jaxpr) -> FuncState<'j> {
        FuncState {
            jaxpr,
            values: vec![None; jaxpr.num_vars()],
            next: 0,
        }
    }

    fn bind(&mut self, v: VarId, s: Ssa) {
        self.values[v.index()] = Some(s);
    }

    /// A fresh SSA name.
    pub(crate) fn fresh(&mut self) -> String {
        let n = self.next;
        self.next += 1;
        format!("%{n}")
    }

    /// The SSA value of an atom: a variable's, or a constant emitted for a literal.
    pub(crate) fn atom(&mut self, m: &mut Module, a: Atom) -> Ssa {
        match a {
            Atom::Var(v) => self.values[v.index()].clone().unwrap_or_else(|| {
                // Unreachable for built jaxprs (every use follows its binding).
                Ssa::new(
                    format!("%undefined_{}", v.index()),
                    tensor_type(self.jaxpr.var_aval(v)),
                )
            }),
            Atom::Lit(l) => {
                let lit = *self.jaxpr.literal(l);
                ops::literal_constant(m, self, &lit)
            }
        }
    }
}
