//! Passes over jaxprs. Each is a function from a jaxpr to a new jaxpr, linear in the
//! number of equations, with no recursion a deep input could overflow.

pub mod dce;
pub mod toposort;
