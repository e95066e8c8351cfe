//! Closure conversion: a jaxpr's constvars become its leading inputs.

use super::rebuild::Rebuilder;
use crate::jaxpr::Jaxpr;

/// The same jaxpr with no constvars: they become inputs, before the original inputs.
/// Callers then pass the constants as arguments (a nested `jit`, a compiled `@main`).
pub fn consts_to_invars(jaxpr: &Jaxpr) -> Jaxpr {
    let mut rb = Rebuilder::new(jaxpr);
    for &v in jaxpr.constvars().iter().chain(jaxpr.invars()) {
        rb.invar(v);
    }
    for e in jaxpr.eqns() {
        rb.eqn(e);
    }
    rb.finish(jaxpr.outvars().iter().copied())
}
