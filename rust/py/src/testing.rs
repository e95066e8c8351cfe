//! The IR crate's testing tools for Python: random well-typed jaxprs and the reference
//! evaluator, so fuzzers and differential tests can check ferrax's lowering and XLA's
//! results against an independent interpreter.

use crate::avals::ShapedArray;
use crate::errors::{type_check, Result};
use crate::jaxpr::Jaxpr;
use ferrax_ir::eval::{eval_jaxpr, HostArray, HostData};
use ferrax_ir::generate::{random_jaxpr as gen_random, RandomOptions};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::Arc;

/// A random well-typed f32 jaxpr (elementwise math, reductions, broadcasts, nested `jit`,
/// `cond`, `while`, `scan`); the same seed gives the same jaxpr.
#[pyfunction]
#[pyo3(signature = (seed, *, eqns = 12, max_depth = 2, inputs = 3))]
pub fn random_jaxpr(seed: u64, eqns: usize, max_depth: usize, inputs: usize) -> Result<Jaxpr> {
    let opts = RandomOptions {
        eqns: eqns.clamp(1, 10_000),
        max_depth: max_depth.min(16),
        inputs: inputs.clamp(1, 64),
    };
    let j = gen_random(seed, opts).map_err(|e| type_check(e.to_string()))?;
    Ok(Jaxpr::new(Arc::new(j)))
}

/// Evaluates a jaxpr with the crate's reference evaluator. Each constant and argument is
/// `(aval, flat_values)` with the values in row-major order (bools, ints or floats);
/// returns the outputs the same way.
#[pyfunction]
#[pyo3(signature = (jaxpr, consts, args))]
pub fn reference_eval<'py>(
    py: Python<'py>,
    jaxpr: PyRef<'py, Jaxpr>,
    consts: Vec<(PyRef<'py, ShapedArray>, Bound<'py, PyAny>)>,
    args: Vec<(PyRef<'py, ShapedArray>, Bound<'py, PyAny>)>,
) -> Result<Bound<'py, PyList>> {
    let to_host =
        |(aval, values): &(PyRef<'py, ShapedArray>, Bound<'py, PyAny>)| -> Result<HostArray> {
            let a = &aval.aval;
            let data = if a.dtype == ferrax_ir::DType::Bool {
                HostData::Bool(values.extract::<Vec<bool>>()?)
            } else if a.dtype.is_float() {
                HostData::Float(values.extract::<Vec<f64>>()?)
            } else {
                HostData::Int(values.extract::<Vec<i64>>()?)
            };
            let arr = match data {
                HostData::Float(v) => HostArray::from_f64(a.shape.clone(), a.dtype, v),
                HostData::Int(v) => HostArray::from_i64(a.shape.clone(), a.dtype, v),
                HostData::Bool(v) => HostArray::from_bool(a.shape.clone(), v),
            };
            arr.map_err(|e| type_check(format!("bad value for {a}: {e}")))
        };
    let consts: Vec<HostArray> = consts.iter().map(to_host).collect::<Result<_>>()?;
    let args: Vec<HostArray> = args.iter().map(to_host).collect::<Result<_>>()?;
    let outs = eval_jaxpr(&jaxpr.inner, &consts, &args)
        .map_err(|e| type_check(format!("reference evaluation failed: {e}")))?;
    let items: Vec<Bound<'py, PyTuple>> = outs
        .iter()
        .map(|o| {
            let aval = Py::new(py, ShapedArray::from_aval(o.aval()))?;
            let values: Bound<'py, PyAny> = match &o.data {
                HostData::Bool(v) => v.clone().into_pyobject(py)?.into_any(),
                HostData::Int(v) => v.clone().into_pyobject(py)?.into_any(),
                HostData::Float(v) => v.clone().into_pyobject(py)?.into_any(),
            };
            PyTuple::new(py, [aval.into_bound(py).into_any(), values])
        })
        .collect::<PyResult<_>>()?;
    Ok(PyList::new(py, items)?)
}
