//! Passes over jaxprs. Each is a function from a jaxpr to a new jaxpr, linear in the
//! number of equations, with no recursion a deep input could overflow.

pub mod closure;
pub mod cost;
pub mod dce;
mod rebuild;
pub mod toposort;

pub use closure::consts_to_invars;
pub use cost::{cost, Cost};
pub use dce::dce;
pub use toposort::toposort;

use std::fmt;

/// Why a pass could not run on its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Placeholder while a pass is being written.
    NotImplemented,
}

impl fmt::Display for PassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassError::FlagCount {
                what,
                expected,
                got,
            } => write!(f, "{what} has {got} flags but the jaxpr needs {expected}"),
            PassError::NotImplemented => f.write_str("not implemented"),
        }
    }
}

impl std::error::Error for PassError {}
