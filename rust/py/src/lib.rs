//! `ferrax._ir`: the Python bindings of `ferrax-ir`.
//!
//! Thin and typed: each class wraps an IR value (jaxprs are shared through `Arc`, never
//! copied), converts arguments once at the boundary, and turns every IR error into a
//! Python exception (see `errors`). No input, however malformed, panics. The typed Python
//! interface is `python/ferrax/_ir.pyi`, checked against this module by
//! `python -m mypy.stubtest ferrax._ir`.

mod avals;
mod builder;
mod dispatch;
mod errors;
mod jaxpr;
mod params;
mod passes;
mod primitives;
mod rewrite;
mod testing;

use pyo3::prelude::*;

#[pymodule]
fn _ir(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<avals::ShapedArray>()?;
    m.add_class::<jaxpr::Var>()?;
    m.add_class::<jaxpr::Literal>()?;
    m.add_class::<jaxpr::JaxprEqn>()?;
    m.add_class::<jaxpr::Jaxpr>()?;
    m.add_class::<jaxpr::ClosedJaxpr>()?;
    m.add_class::<builder::JaxprBuilder>()?;
    m.add_class::<params::PyParams>()?;
    m.add_class::<primitives::ExtensionPrimitive>()?;
    m.add_class::<rewrite::RuleSet>()?;
    m.add_class::<dispatch::Dispatcher>()?;
    m.add_function(wrap_pyfunction!(dispatch::set_dispatch_runtime, m)?)?;
    m.add_function(wrap_pyfunction!(passes::parse_jaxpr, m)?)?;
    m.add_function(wrap_pyfunction!(passes::typecheck, m)?)?;
    m.add_function(wrap_pyfunction!(passes::dce, m)?)?;
    m.add_function(wrap_pyfunction!(passes::toposort, m)?)?;
    m.add_function(wrap_pyfunction!(passes::transpose, m)?)?;
    m.add_function(wrap_pyfunction!(passes::abstract_eval, m)?)?;
    m.add_function(wrap_pyfunction!(passes::builtin_primitives, m)?)?;
    m.add_function(wrap_pyfunction!(passes::lower_to_stablehlo, m)?)?;
    m.add_function(wrap_pyfunction!(passes::lower_with_callbacks, m)?)?;
    m.add_function(wrap_pyfunction!(passes::hlo_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(passes::sharding_tiling, m)?)?;
    m.add_function(wrap_pyfunction!(passes::sdy_sharding, m)?)?;
    m.add_function(wrap_pyfunction!(passes::insert_pvary, m)?)?;
    m.add_function(wrap_pyfunction!(passes::consts_to_invars, m)?)?;
    m.add_function(wrap_pyfunction!(passes::cost_analysis, m)?)?;
    m.add_function(wrap_pyfunction!(passes::equation_costs, m)?)?;
    m.add_function(wrap_pyfunction!(passes::partial_eval, m)?)?;
    m.add_function(wrap_pyfunction!(rewrite::rewrite, m)?)?;
    m.add_function(wrap_pyfunction!(testing::random_jaxpr, m)?)?;
    m.add_function(wrap_pyfunction!(testing::reference_eval, m)?)?;
    Ok(())
}
