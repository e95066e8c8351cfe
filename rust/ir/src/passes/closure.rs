//! Closure conversion: a jaxpr's constvars become its leading inputs.

use super::rebuild::Rebuilder;
use crate::jaxpr::Jaxpr;

/// The same jaxpr with no constvars: they become inputs, before the original inputs.
/// Callers then pass the constants as arguments (a nested `jit`, a compiled `@main`).
///
/// ```
/// use ferrax_ir::{passes::consts_to_invars, text::parse_jaxpr};
/// let j = parse_jaxpr("{ lambda a:f32[3]; b:f32[3]. let c:f32[3] = add a b in (c,) }")?;
/// let open = consts_to_invars(&j);
/// assert_eq!(open.to_string(), "{ lambda ; a:f32[3] b:f32[3]. let c:f32[3] = add a b in (c,) }");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
