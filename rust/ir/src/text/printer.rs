//! The jaxpr printer (placeholder until the full printer lands).

use crate::jaxpr::{ClosedJaxpr, Jaxpr};
use crate::params::Param;

/// Prints a jaxpr in JAX's text format.
pub fn print_jaxpr(_j: &Jaxpr) -> String {
    String::new()
}

/// Prints a closed jaxpr (its constants are not printed; its constvars are).
pub fn print_closed_jaxpr(j: &ClosedJaxpr) -> String {
    print_jaxpr(j.jaxpr())
}

/// A param value that has no nested jaxpr, printed on one line; `None` for jaxprs.
pub(crate) fn format_param_flat(_p: &Param) -> Option<String> {
    None
}
