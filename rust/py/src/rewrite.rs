//! Term rewriting of jaxprs (`ferrax_ir::passes::rewrite`): rule sets and the pass.

use crate::errors::{ParseError, Result, RewriteError};
use crate::jaxpr::Jaxpr;
use ferrax_ir::passes::rewrite as ir;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

fn parse_error(e: ir::RuleParseError) -> PyErr {
    Python::attach(|py| {
        let err = ParseError::new_err(e.to_string());
        let value = err.value(py);
        let _ = value.setattr("line", e.line);
        let _ = value.setattr("column", e.column);
        err
    })
}

/// Named rewrite rules read from text (one rule per `name: lhs => rhs [if conditions]`;
/// see `ferrax.rewrite`). Unreadable rules are a `ParseError` with `.line` and
/// `.column`; a right side using a hole the left side never binds is refused here.
#[pyclass(frozen, module = "ferrax._ir", name = "RuleSet")]
pub struct RuleSet {
    pub(crate) inner: Arc<ir::RuleSet>,
}

#[pymethods]
impl RuleSet {
    #[new]
    fn new(text: &str) -> PyResult<RuleSet> {
        let inner = ir::RuleSet::parse(text).map_err(parse_error)?;
        Ok(RuleSet {
            inner: Arc::new(inner),
        })
    }

    /// The built-in algebraic simplifications (`mul ?x 1 => ?x`, `neg (neg ?x) => ?x`,
    /// `log (exp ?x) => ?x`, ...).
    #[staticmethod]
    fn algebraic() -> PyResult<RuleSet> {
        RuleSet::new(ir::ALGEBRAIC_RULES)
    }

    /// The rules' names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner
            .rules()
            .iter()
            .map(|r| r.name().to_owned())
            .collect()
    }

    /// The rules, one per line, as they read.
    fn __str__(&self) -> String {
        let lines: Vec<String> = self.inner.rules().iter().map(|r| r.to_string()).collect();
        lines.join("\n")
    }

    fn __repr__(&self) -> String {
        format!(
            "RuleSet({} rules: {})",
            self.inner.len(),
            self.names().join(", ")
        )
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// The rules of both sets (names must not repeat).
    fn __add__(&self, other: PyRef<'_, RuleSet>) -> PyResult<RuleSet> {
        let mut set = (*self.inner).clone();
        for r in other.inner.rules() {
            set.push(r.clone()).map_err(parse_error)?;
        }
        Ok(RuleSet {
            inner: Arc::new(set),
        })
    }
}

// The default above, spelled out so the signature Python sees shows it.
const _: () = assert!(ir::DEFAULT_MAX_ITERATIONS == 100);

/// Applies the rules everywhere in the jaxpr (nested jaxprs included) until none
/// applies, then removes dead equations (every input stays) and typechecks. Returns the
/// new jaxpr, how many times each rule applied (by name) and the number of passes that
/// changed something. More than `max_iterations` such passes is a `RewriteError` naming
/// the rules still firing; so is a right side that does not typecheck where it matched.
#[pyfunction]
#[pyo3(signature = (jaxpr, rules, max_iterations = 100))]
pub fn rewrite<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'py, Jaxpr>,
    rules: PyRef<'py, RuleSet>,
    max_iterations: usize,
) -> Result<(Jaxpr, Bound<'py, PyDict>, usize)> {
    let inner = &jaxpr.inner;
    let set = &rules.inner;
    let out = py
        .detach(|| ir::rewrite(inner, set, max_iterations))
        .map_err(|e| {
            let err = RewriteError::new_err(e.to_string());
            if let ir::RewriteError::NoFixpoint { rules, .. } = &e {
                let _ = err.value(py).setattr("rules", rules.clone());
            }
            err
        })?;
    let fired = PyDict::new(py);
    for (r, n) in set.rules().iter().zip(&out.fired) {
        fired.set_item(r.name(), *n)?;
    }
    Ok((Jaxpr::new(Arc::new(out.jaxpr)), fired, out.iterations))
}
