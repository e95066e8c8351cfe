//! Whole-jaxpr operations: parsing, typechecking and the passes.

use crate::avals::ShapedArray;
use crate::errors::Result;
use crate::jaxpr::{avals_to_py, Jaxpr};
use crate::primitives::ExtensionPrimitive;
use ferrax_ir::primitive::Registry;
use ferrax_ir::AbstractValue;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::Arc;

/// Reads a jaxpr from its text (as `str()` prints it, or as JAX prints it). Equations may
/// use the given extension primitives, found by name. Bad syntax is a `ParseError` (with
/// `.line` and `.column`); a text that parses but is ill formed or ill typed is a
/// `TypeCheckError`.
#[pyfunction]
#[pyo3(signature = (text, *, extensions = None))]
pub fn parse_jaxpr(
    py: Python<'_>,
    text: &str,
    extensions: Option<Vec<PyRef<'_, ExtensionPrimitive>>>,
) -> Result<Jaxpr> {
    let mut registry = Registry::new();
    for e in extensions.iter().flatten() {
        // Cannot fail: an ExtensionPrimitive's name was checked when it was made.
        registry
            .register(e.rule.clone())
            .map_err(|err| pyo3::exceptions::PyValueError::new_err(err.to_string()))?;
    }
    // The long passes run detached from the interpreter, so other Python threads go on
    // meanwhile (extension rules attach again to run).
    let jaxpr = py.detach(|| ferrax_ir::text::parse_jaxpr_with(text, &registry))?;
    Ok(Jaxpr::new(Arc::new(jaxpr)))
}

/// Typechecks a jaxpr and every jaxpr nested in it; returns the input and output types.
/// An error is a `TypeCheckError` naming the equation. `axis_env` (axis name to size)
/// puts named axes in scope, for a shard_map body checked by itself; without it a
/// collective outside every shard_map is an unbound axis name.
#[pyfunction]
#[pyo3(signature = (jaxpr, axis_env = None))]
pub fn typecheck<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'py, Jaxpr>,
    axis_env: Option<&Bound<'py, PyAny>>,
) -> Result<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let inner = &jaxpr.inner;
    let env = match axis_env {
        Some(m) if !m.is_none() => crate::params::axis_env_from_py(m)?,
        _ => ferrax_ir::AxisEnv::closed(),
    };
    let ty = py.detach(|| ferrax_ir::typecheck_in(inner, &env))?;
    let (ins, outs) = (ty.in_avals, ty.out_avals);
    Ok((avals_to_py(py, ins)?, avals_to_py(py, outs)?))
}

/// Dead-code elimination: drops the outputs not flagged in `used_outputs`, the equations
/// no used output depends on, and the inputs nothing uses. Returns the new jaxpr and one
/// flag per original input saying whether it is kept. A wrong number of flags is a
/// `PassError`.
#[pyfunction]
#[pyo3(signature = (jaxpr, used_outputs))]
pub fn dce(
    py: Python<'_>,
    jaxpr: PyRef<'_, Jaxpr>,
    used_outputs: Vec<bool>,
) -> Result<(Jaxpr, Vec<bool>)> {
    let inner = &jaxpr.inner;
    let (out, used_inputs) = py.detach(|| ferrax_ir::passes::dce(inner, &used_outputs))?;
    Ok((Jaxpr::new(Arc::new(out)), used_inputs))
}

/// Transposes a jaxpr linear in the inputs flagged in `linear` (one flag per input): the
/// backward half of reverse-mode differentiation. The result takes the non-linear inputs
/// (in order), then one cotangent per output of `jaxpr`, and returns one cotangent per
/// linear input (zeros for a linear input nothing depends on); constvars stay constvars.
/// A wrong number of flags, a linear value used non-linearly (`sin` of it, a product of
/// two linear values) or a primitive without a transpose rule is a `PassError`.
#[pyfunction]
#[pyo3(signature = (jaxpr, linear))]
pub fn transpose(py: Python<'_>, jaxpr: PyRef<'_, Jaxpr>, linear: Vec<bool>) -> Result<Jaxpr> {
    let inner = &jaxpr.inner;
    let out = py.detach(|| ferrax_ir::passes::transpose(inner, &linear))?;
    Ok(Jaxpr::new(Arc::new(out)))
}

/// Reorders the equations by demand: depth-first from the outputs, each equation right
/// after what it needs; equations no output needs keep their order at the end.
#[pyfunction]
#[pyo3(signature = (jaxpr))]
pub fn toposort(py: Python<'_>, jaxpr: PyRef<'_, Jaxpr>) -> Jaxpr {
    let inner = &jaxpr.inner;
    Jaxpr::new(Arc::new(py.detach(|| ferrax_ir::passes::toposort(inner))))
}

/// The output types of applying a primitive (a built-in's name or an
/// `ExtensionPrimitive`) to operands of these types with these params: the same rule
/// the builder runs, without building anything. A rule failure is a `TypeCheckError`
/// whose message names the primitive and what mismatched.
///
/// `axis_env` maps the named axes in scope (those of the enclosing shard_maps' meshes) to
/// their sizes; a collective naming another axis is a `TypeCheckError` ("Found an
/// unbound axis name: z"). None means no axis is in scope.
#[pyfunction]
#[pyo3(signature = (primitive, avals, params, axis_env = None))]
pub fn abstract_eval<'py>(
    py: Python<'py>,
    primitive: &Bound<'py, PyAny>,
    avals: Vec<PyRef<'py, ShapedArray>>,
    params: &Bound<'py, PyAny>,
    axis_env: Option<&Bound<'py, PyAny>>,
) -> Result<Bound<'py, PyList>> {
    let prim = crate::builder::primitive_from_py(primitive)?;
    let params = crate::params::params_from_py(&prim, params)?;
    let ins: Vec<AbstractValue> = avals.iter().map(|a| a.aval.clone()).collect();
    let env = match axis_env {
        Some(m) if !m.is_none() => crate::params::axis_env_from_py(m)?,
        _ => ferrax_ir::AxisEnv::closed(),
    };
    let outs = prim
        .abstract_eval_in(&ins, &params, &env)
        .map_err(|e| crate::errors::type_check(format!("{} {e}", prim.name())))?;
    Ok(avals_to_py(py, outs)?)
}

/// The names of the built-in primitives of the Rust catalogue, in catalogue order (tests
/// generated over this table fail when a primitive lacks a Python rule or a test case).
#[pyfunction]
pub fn builtin_primitives() -> Vec<&'static str> {
    ferrax_ir::primitive::Builtin::ALL
        .iter()
        .map(|b| b.name())
        .collect()
}

/// Lowers a jaxpr to a StableHLO text module named `module_name`, whose `@main` takes the
/// constvars then the invars. A jaxpr that cannot be lowered (an extension primitive,
/// constants in a nested jaxpr) is a `LoweringError`.
///
/// For SPMD (Shardy): `mesh` (`(("x", 2), ("y", 2))`), with `arg_specs` (one per argument
/// of `@main`: constvars then invars) and `result_specs` (one per output), each a
/// partition spec or `None`, written as `sdy.sharding` attributes; `num_partitions`
/// (default: the largest of `mesh` and of the meshes the jaxpr's shard_maps and
/// sharding_constraints use, else 1) > 1 adds `mhlo.num_partitions` and
/// `mhlo.num_replicas = 1` to the module.
#[pyfunction]
#[pyo3(signature = (jaxpr, module_name = "ferrax", *, mesh = None, arg_specs = None, result_specs = None, num_partitions = None))]
pub fn lower_to_stablehlo(
    py: Python<'_>,
    jaxpr: PyRef<'_, Jaxpr>,
    module_name: &str,
    mesh: Option<&Bound<'_, PyAny>>,
    arg_specs: Option<&Bound<'_, PyAny>>,
    result_specs: Option<&Bound<'_, PyAny>>,
    num_partitions: Option<u32>,
) -> Result<String> {
    let inner = &jaxpr.inner;
    let mesh = match mesh {
        Some(m) if !m.is_none() => Some(crate::params::mesh_from_py(m)?),
        _ => None,
    };
    let specs = |v: Option<&Bound<'_, PyAny>>,
                 what: &str|
     -> Result<Vec<Option<ferrax_ir::PartitionSpec>>> {
        let Some(v) = v.filter(|v| !v.is_none()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for item in v.try_iter()? {
            let item = item?;
            if item.is_none() {
                out.push(None);
                continue;
            }
            match crate::params::spec_from_py(&item)? {
                Some(sp) => out.push(Some(sp)),
                None => {
                    return Err(crate::errors::value_error(format!(
                        "{what}: a partition spec is a sequence of entries, each None, an axis \
                         name or a sequence of names"
                    )))
                }
            }
        }
        Ok(out)
    };
    let options = ferrax_ir::lower::stablehlo::LowerOptions {
        num_partitions: num_partitions.unwrap_or_else(|| {
            let needed = ferrax_ir::lower::stablehlo::required_partitions(inner);
            let of_mesh = mesh
                .as_ref()
                .map_or(1, |m| m.size().clamp(1, u32::MAX as i64) as u32);
            needed.max(of_mesh)
        }),
        mesh,
        arg_specs: specs(arg_specs, "arg_specs")?,
        result_specs: specs(result_specs, "result_specs")?,
    };
    Ok(py.detach(|| ferrax_ir::lower::stablehlo::lower_jaxpr_with(inner, module_name, &options))?)
}

/// A host callback of a lowered module, for Python: its object and whether its call
/// passes a token.
type HostCallbackPy<'py> = (Bound<'py, PyAny>, bool);

/// Lowers a jaxpr as `lower_to_stablehlo` does (one device), and returns with the text
/// the host callbacks its custom calls name by index (`debug_callback`'s and
/// `pure_callback`'s `callback` params, in index order; for `debug_print` a dict of
/// its params), each with whether its call
/// passes a token (an ordered callback): the module must be compiled with exactly these
/// callbacks. A callback read from text (a name, no object) is its name, a `str`.
#[pyfunction]
#[pyo3(signature = (jaxpr, module_name = "ferrax"))]
pub fn lower_with_callbacks<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'_, Jaxpr>,
    module_name: &str,
) -> Result<(String, Vec<HostCallbackPy<'py>>)> {
    let inner = &jaxpr.inner;
    let options = ferrax_ir::lower::stablehlo::LowerOptions {
        num_partitions: ferrax_ir::lower::stablehlo::required_partitions(inner),
        ..Default::default()
    };
    let (text, callbacks) =
        py.detach(|| ferrax_ir::lower::stablehlo::lower_jaxpr_full(inner, module_name, &options))?;
    let callbacks = callbacks
        .into_iter()
        .map(|h| {
            // `debug_print`'s: a dict of its params (the host formats from them).
            let obj = match &h.print {
                Some(params) => {
                    let d = pyo3::types::PyDict::new(py);
                    for (name, p) in params.iter() {
                        d.set_item(name, crate::params::param_to_py(py, p)?)?;
                    }
                    d.into_any()
                }
                None => {
                    crate::params::param_to_py(py, &ferrax_ir::params::Param::Opaque(h.callback))?
                }
            };
            Ok((obj, h.token))
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((text, callbacks))
}

/// The Shardy dimension shardings (`[{"x"}, {}]`) of an array of rank `rank` laid out by
/// `spec` on the mesh of these axes. Each spec entry is `None`, an axis name, or a
/// sequence of names. An unknown axis, an axis used twice or a sharded dimension past
/// the rank raises `ValueError`.
#[pyfunction]
#[pyo3(signature = (axis_names, axis_sizes, spec, rank))]
pub fn sdy_sharding(
    axis_names: Vec<String>,
    axis_sizes: Vec<i64>,
    spec: &Bound<'_, PyAny>,
    rank: usize,
) -> Result<String> {
    let (mesh, spec) = mesh_and_spec(&axis_names, &axis_sizes, spec)?;
    ferrax_ir::sdy_sharding(&mesh, &spec, rank)
        .map_err(|e| crate::errors::value_error(e.to_string()))
}

fn mesh_and_spec(
    axis_names: &[String],
    axis_sizes: &[i64],
    spec: &Bound<'_, PyAny>,
) -> Result<(ferrax_ir::Mesh, ferrax_ir::PartitionSpec)> {
    let mesh = ferrax_ir::Mesh::from_names_sizes(axis_names, axis_sizes)
        .map_err(|e| crate::errors::value_error(format!("invalid mesh: {e}")))?;
    let Some(spec) = crate::params::spec_from_py(spec)? else {
        return Err(crate::errors::value_error(
            "a partition spec is a sequence of entries, each None, an axis name or a sequence of names",
        ));
    };
    Ok((mesh, spec))
}

/// The GSPMD sharding text (`HloSharding`, as XLA prints it, with an explicit device
/// list of partition ids) of an array of rank `rank` laid out by `spec` on the mesh of
/// these axes (devices numbered row-major over the axes). Errors as `sdy_sharding`.
#[pyfunction]
#[pyo3(signature = (axis_names, axis_sizes, spec, rank))]
pub fn hlo_sharding(
    axis_names: Vec<String>,
    axis_sizes: Vec<i64>,
    spec: &Bound<'_, PyAny>,
    rank: usize,
) -> Result<String> {
    let (mesh, spec) = mesh_and_spec(&axis_names, &axis_sizes, spec)?;
    ferrax_ir::hlo_sharding(&mesh, &spec, rank)
        .map_err(|e| crate::errors::value_error(e.to_string()))
}

/// How an array of rank `rank` laid out by `spec` on the mesh of these axes is cut:
/// `(tiles per dimension, partition of each piece row-major over [tiles..., copies],
/// copies)`. Errors as `sdy_sharding`.
#[pyfunction]
#[pyo3(signature = (axis_names, axis_sizes, spec, rank))]
pub fn sharding_tiling(
    axis_names: Vec<String>,
    axis_sizes: Vec<i64>,
    spec: &Bound<'_, PyAny>,
    rank: usize,
) -> Result<(Vec<i64>, Vec<i64>, i64)> {
    let (mesh, spec) = mesh_and_spec(&axis_names, &axis_sizes, spec)?;
    let t = ferrax_ir::tiling(&mesh, &spec, rank)
        .map_err(|e| crate::errors::value_error(e.to_string()))?;
    Ok((t.tiles, t.partitions, t.copies))
}

/// The same jaxpr with its constvars turned into leading inputs (closure conversion).
#[pyfunction]
#[pyo3(signature = (jaxpr))]
pub fn consts_to_invars(jaxpr: PyRef<'_, Jaxpr>) -> Jaxpr {
    Jaxpr::new(Arc::new(ferrax_ir::passes::consts_to_invars(&jaxpr.inner)))
}

/// A cost report as a dict: the totals (`flops`, `transcendentals`, `bytes_accessed`,
/// `while_loops`) and `by_primitive`, `{name: {flops, transcendentals, bytes_accessed}}`.
fn report_dict<'py>(
    py: Python<'py>,
    r: &ferrax_ir::passes::CostReport,
) -> Result<Bound<'py, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("flops", r.total.flops)?;
    d.set_item("transcendentals", r.total.transcendentals)?;
    d.set_item("bytes_accessed", r.total.bytes_accessed)?;
    d.set_item("while_loops", r.total.while_loops)?;
    let by = pyo3::types::PyDict::new(py);
    for (name, c) in &r.by_primitive {
        let e = pyo3::types::PyDict::new(py);
        e.set_item("flops", c.flops)?;
        e.set_item("transcendentals", c.transcendentals)?;
        e.set_item("bytes_accessed", c.bytes_accessed)?;
        by.set_item(name, e)?;
    }
    d.set_item("by_primitive", by)?;
    Ok(d)
}

/// The static cost of a jaxpr: `{"flops", "transcendentals", "bytes_accessed",
/// "while_loops", "by_primitive"}`, counted from the types (one iteration of each
/// `while` loop, whose trip count depends on data; `while_loops` says how many there are).
#[pyfunction]
#[pyo3(signature = (jaxpr))]
pub fn cost_analysis<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'py, Jaxpr>,
) -> Result<Bound<'py, pyo3::types::PyDict>> {
    report_dict(py, &ferrax_ir::passes::cost_report(&jaxpr.inner))
}

/// The static cost of each top-level equation of a jaxpr, in order, each as
/// `cost_analysis` reports a jaxpr's (nested jaxprs costed once each).
#[pyfunction]
#[pyo3(signature = (jaxpr))]
pub fn equation_costs<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'py, Jaxpr>,
) -> Result<Vec<Bound<'py, pyo3::types::PyDict>>> {
    ferrax_ir::passes::equation_reports(&jaxpr.inner)
        .iter()
        .map(|r| report_dict(py, r))
        .collect()
}

/// Partial evaluation: splits a jaxpr for inputs of which those flagged in `unknowns`
/// (one flag per input; constvars are known) are not known yet. Returns `(known, unknown,
/// out_unknowns, num_residuals)`: `known` takes the known inputs and returns the known
/// outputs then the residuals; `unknown` takes the residuals then the unknown inputs and
/// returns the unknown outputs; `out_unknowns` flags the outputs `unknown` returns (those
/// depending on an unknown input, and those flagged in `instantiate`, one flag per
/// output). A wrong number of flags is a `PassError`.
#[pyfunction]
#[pyo3(signature = (jaxpr, unknowns, instantiate))]
pub fn partial_eval(
    py: Python<'_>,
    jaxpr: PyRef<'_, Jaxpr>,
    unknowns: Vec<bool>,
    instantiate: Vec<bool>,
) -> Result<(Jaxpr, Jaxpr, Vec<bool>, usize)> {
    let inner = &jaxpr.inner;
    let pe = py.detach(|| ferrax_ir::passes::partial_eval(inner, &unknowns, &instantiate))?;
    Ok((
        Jaxpr::new(Arc::new(pe.known)),
        Jaxpr::new(Arc::new(pe.unknown)),
        pe.out_unknowns,
        pe.num_residuals,
    ))
}

/// The pvary insertion pass for a shard_map body traced without `pvary` where JAX would
/// insert one (see `ferrax_ir::passes::vma`): given the mesh (`(("x", 2), ...)`) and, per
/// input, the axes it varies over (its in_spec's axes), returns the body with `pvary`
/// equations inserted and, per output, the axes it varies over (mesh order). With
/// `out_axes` (per output, its out_spec's axes) outputs varying over fewer of them get a
/// `pvary` to them; the caller checks that no output varies over an axis its out_spec
/// does not name (JAX's error).
#[pyfunction]
#[pyo3(signature = (jaxpr, mesh, in_axes, out_axes = None))]
pub fn insert_pvary(
    py: Python<'_>,
    jaxpr: PyRef<'_, Jaxpr>,
    mesh: &Bound<'_, PyAny>,
    in_axes: Vec<Vec<String>>,
    out_axes: Option<Vec<Vec<String>>>,
) -> Result<(Jaxpr, Vec<Vec<String>>)> {
    let mesh = crate::params::mesh_from_py(mesh)?;
    let conv = |v: Vec<Vec<String>>| -> Vec<Vec<Arc<str>>> {
        v.into_iter()
            .map(|ns| ns.into_iter().map(|n| Arc::from(n.as_str())).collect())
            .collect()
    };
    let ins = conv(in_axes);
    let outs = out_axes.map(conv);
    let inner = &jaxpr.inner;
    let (j, axes) =
        py.detach(|| ferrax_ir::passes::insert_pvary(inner, &mesh, &ins, outs.as_deref()))?;
    let axes = axes
        .into_iter()
        .map(|ns| ns.iter().map(|n| n.to_string()).collect())
        .collect();
    Ok((Jaxpr::new(Arc::new(j)), axes))
}
