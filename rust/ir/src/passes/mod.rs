//! Passes over jaxprs. Each is a function from a jaxpr to a new jaxpr, linear in the
//! number of equations, with no recursion a deep input could overflow.

pub mod closure;
pub mod cost;
pub mod dce;
pub mod partial_eval;
mod rebuild;
pub mod rewrite;
pub mod toposort;
pub mod transpose;
pub mod vma;

pub use closure::consts_to_invars;
pub use cost::{cost, cost_report, equation_reports, Cost, CostReport};
pub use dce::dce;
pub use partial_eval::{partial_eval, PartialEval};
pub use rewrite::{rewrite, RewriteError, Rewritten, Rule, RuleParseError, RuleSet};
pub use toposort::toposort;
pub use transpose::transpose;
pub use vma::insert_pvary;

use std::fmt;

/// Why a pass could not run on its arguments.
///
/// # Examples
/// ```
/// use ferrax_ir::passes::{dce, transpose, PassError};
/// use ferrax_ir::text::parse_jaxpr;
/// let j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }")?;
/// // One flag per output, not two:
/// let e = dce(&j, &[true, true]).unwrap_err();
/// assert!(matches!(e, PassError::FlagCount { expected: 1, got: 2, .. }), "{e}");
/// // `sin` is not linear: there is nothing to transpose.
/// assert!(transpose(&j, &[true]).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PassError {
    /// A per-output (or per-input) flag list has the wrong length.
    FlagCount {
        /// Which argument.
        what: &'static str,
        /// How many flags the jaxpr needs.
        expected: usize,
        /// How many were given.
        got: usize,
    },
    /// [`transpose()`]: a linear value is used where the result would not be linear in it
    /// (`sin` of it, a product of two linear values, a linear divisor or predicate).
    NonLinearUse {
        /// The primitive of the equation.
        primitive: String,
        /// The equation's index.
        eqn: usize,
        /// The operand position holding the linear value.
        operand: usize,
    },
    /// [`transpose()`]: an equation is linear in an operand but its primitive has no
    /// transpose rule yet.
    NoTransposeRule {
        /// The primitive.
        primitive: String,
        /// The equation's index.
        eqn: usize,
    },
    /// [`transpose()`]: an extension primitive's transpose rule failed, or returned a
    /// jaxpr of the wrong signature.
    TransposeRule {
        /// The primitive.
        primitive: String,
        /// The equation's index.
        eqn: usize,
        /// The rule's message.
        message: String,
    },
    /// [`transpose()`]: a `while` loop carries a linear value. Its trip count depends on
    /// data, so reverse mode would need every iteration's values: not supported.
    WhileLoop {
        /// The equation's index.
        eqn: usize,
    },
    /// A pass built an equation (or a jaxpr) that does not typecheck: a bug in the pass,
    /// reported rather than panicking.
    IllTyped {
        /// The source equation being handled, if any.
        eqn: Option<usize>,
        /// The typechecker's message.
        message: String,
    },
    /// The pass does not handle this input (a shard_map nested in another, ...).
    Unsupported {
        /// What is not handled.
        what: String,
    },
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassError::FlagCount {
                what,
                expected,
                got,
            } => write!(f, "{what} has {got} flags but the jaxpr needs {expected}"),
            PassError::NonLinearUse {
                primitive,
                eqn,
                operand,
            } => write!(
                f,
                "equation {eqn} ({primitive}) is not linear in its operand {operand}, \
                 which depends on a linear input"
            ),
            PassError::NoTransposeRule { primitive, eqn } => write!(
                f,
                "equation {eqn} ({primitive}) is linear in an operand, but {primitive} \
                 has no transpose rule yet"
            ),
            PassError::TransposeRule {
                primitive,
                eqn,
                message,
            } => write!(
                f,
                "equation {eqn} ({primitive}): the transpose rule of {primitive} failed: \
                 {message}"
            ),
            PassError::WhileLoop { eqn } => write!(
                f,
                "equation {eqn} (while) carries a linear value: reverse-mode \
                 differentiation does not work for lax.while_loop or lax.fori_loop with \
                 dynamic start/stop values; use lax.scan, or fori_loop with static \
                 (Python int) start/stop, which becomes a scan"
            ),
            PassError::IllTyped {
                eqn: Some(eqn),
                message,
            } => write!(
                f,
                "the pass built an ill-typed equation for equation {eqn}: {message}"
            ),
            PassError::IllTyped { eqn: None, message } => {
                write!(f, "the pass built an ill-typed jaxpr: {message}")
            }
            PassError::Unsupported { what } => write!(f, "not supported: {what}"),
        }
    }
}

impl std::error::Error for PassError {}

/// A jaxpr a pass built does not typecheck (a bug in the pass).
impl From<crate::TypeError> for PassError {
    fn from(e: crate::TypeError) -> PassError {
        PassError::IllTyped {
            eqn: None,
            message: e.to_string(),
        }
    }
}
