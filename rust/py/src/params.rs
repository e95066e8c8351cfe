//! Equation parameters between Python and the IR.
//!
//! To Python: `None`, `bool`, `int`, `float`, `str`, tuples of ints or bools, `numpy.dtype`,
//! `ClosedJaxpr`, a tuple of `ClosedJaxpr`, and dot dimension numbers as
//! `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`.
//!
//! From Python: a built-in primitive's params are read by the kind its schema gives the
//! name (so `new_dtype=numpy.float32` becomes a dtype and `axes=[0]` a tuple of ints);
//! other params (extension primitives', unknown names) by the value's Python type. A value
//! that does not fit its schema kind is still read by its type, so that the primitive's rule
//! reports the mismatch naming the equation.
//!
//! Gather and scatter params (the contract with `ferrax.lax`):
//! - `dimension_numbers` of `gather` / of the `scatter` family: from Python, any object
//!   with the five int-sequence attributes of JAX's `GatherDimensionNumbers`
//!   (`offset_dims`, `collapsed_slice_dims`, `start_index_map`, `operand_batching_dims`,
//!   `start_indices_batching_dims`) / `ScatterDimensionNumbers` (`update_window_dims`,
//!   `inserted_window_dims`, `scatter_dims_to_operand_dims`, `operand_batching_dims`,
//!   `scatter_indices_batching_dims`), such as `ferrax.lax.GatherDimensionNumbers(...)`,
//!   or a dict with those keys; absent batching fields mean `()`. To Python: an instance
//!   of `ferrax.lax.GatherDimensionNumbers` / `ferrax.lax.ScatterDimensionNumbers` (built
//!   from the five fields as keywords), or a dict of the fields if `ferrax.lax` has no such
//!   class.
//! - `conv_general_dilated`'s `dimension_numbers`: from Python, any object with the
//!   int-sequence attributes `lhs_spec`, `rhs_spec`, `out_spec` (JAX's
//!   `ConvDimensionNumbers`, a named tuple) or a dict with those keys; to Python,
//!   `ferrax.lax.ConvDimensionNumbers(...)` (or a dict). Its `padding` is a tuple of
//!   `(low, high)` pairs.
//! - `mode`: from Python, a `GatherScatterMode` member (read by its `.name`: `CLIP`,
//!   `FILL_OR_DROP`, `PROMISE_IN_BOUNDS`) or a string JAX's `GatherScatterMode.from_any`
//!   takes (`"clip"`, `"fill"`, `"drop"`, `"promise_in_bounds"`); `ONE_HOT` is refused. To
//!   Python: `ferrax.lax.GatherScatterMode[NAME]`, or the string `"GatherScatterMode.NAME"`
//!   if there is no such class.
//! - `fill_value`: `None`, a bool, an int or a float. `update_jaxpr`: `None` or a
//!   `ClosedJaxpr` (two scalars of the operand's dtype to one; informative only: the
//!   combiner is the primitive's own); `update_consts`: `()`.
//!
//! Opaque params (`custom_jvp_call`'s `jvp`, `custom_vjp_call`'s `fwd` and `bwd`,
//! `remat2`'s `policy`): from Python, any object other than `None` is kept as it is,
//! named as JAX prints it: a rule by its `__name__` (a `str` by itself; else its `repr`),
//! a policy by its `str` with memory addresses masked (`<function f at 0xXXXXXXXXXXXX>`);
//! to Python, the same
//! object. An opaque value read from text has no object: it comes back as its name, a
//! `str`.

use crate::avals::{describe, dtype_from_py, dtype_to_py, is_numpy_dtype, type_name};
use crate::errors::{self, Result};
use crate::jaxpr::ClosedJaxpr;
use ferrax_ir::params::{
    ConvDimensionNumbers, DotDimensionNumbers, GatherDimensionNumbers, GatherScatterMode, Opaque,
    Param, Params, ScatterDimensionNumbers,
};
use ferrax_ir::primitive::{ParamKind, Primitive};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use smallvec::SmallVec;
use std::sync::Arc;

/// A tuple of ints.
fn ints_to_py<'py>(py: Python<'py>, xs: &[i64]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, xs)
}

/// One param value as a Python object.
pub fn param_to_py<'py>(py: Python<'py>, p: &Param) -> PyResult<Bound<'py, PyAny>> {
    Ok(match p {
        Param::None => py.None().into_bound(py),
        Param::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Param::Int(i) => i.into_pyobject(py)?.into_any(),
        Param::Float(f) => PyFloat::new(py, *f).into_any(),
        Param::Str(s) => PyString::new(py, s).into_any(),
        Param::Ints(xs) => ints_to_py(py, xs)?.into_any(),
        Param::Bools(bs) => PyTuple::new(py, bs.iter().copied())?.into_any(),
        Param::DType(d) => dtype_to_py(py, *d)?,
        Param::DotDims(dn) => {
            let contracting = PyTuple::new(
                py,
                [
                    ints_to_py(py, &dn.lhs_contracting)?,
                    ints_to_py(py, &dn.rhs_contracting)?,
                ],
            )?;
            let batch = PyTuple::new(
                py,
                [
                    ints_to_py(py, &dn.lhs_batch)?,
                    ints_to_py(py, &dn.rhs_batch)?,
                ],
            )?;
            PyTuple::new(py, [contracting, batch])?.into_any()
        }
        Param::GatherDims(d) => record_to_py(
            py,
            "GatherDimensionNumbers",
            &GatherDimensionNumbers::FIELDS,
            d.fields(),
        )?,
        Param::ScatterDims(d) => record_to_py(
            py,
            "ScatterDimensionNumbers",
            &ScatterDimensionNumbers::FIELDS,
            d.fields(),
        )?,
        Param::ConvDims(d) => record_to_py(
            py,
            "ConvDimensionNumbers",
            &ConvDimensionNumbers::FIELDS,
            d.fields(),
        )?,
        Param::Mode(m) => match lax_class(py, "GatherScatterMode") {
            Some(cls) => cls.get_item(m.jax_name())?,
            None => PyString::new(py, &m.to_string()).into_any(),
        },
        Param::Padding(c) => {
            let triples = c
                .iter()
                .map(|&(lo, hi, interior)| PyTuple::new(py, [lo, hi, interior]))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, triples)?.into_any()
        }
        Param::Jaxpr(cj) => Bound::new(py, ClosedJaxpr::new(cj.clone()))?.into_any(),
        Param::Jaxprs(cjs) => {
            let items = cjs
                .iter()
                .map(|cj| Bound::new(py, ClosedJaxpr::new(cj.clone())))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
        Param::Opaque(o) => match o.object().and_then(|x| x.downcast_ref::<Py<PyAny>>()) {
            Some(obj) => obj.clone_ref(py).into_bound(py),
            None => PyString::new(py, o.name()).into_any(),
        },
        Param::Mesh(m) => {
            let axes = m
                .axes()
                .iter()
                .map(|(n, s)| {
                    PyTuple::new(
                        py,
                        [
                            PyString::new(py, n).into_any(),
                            s.into_pyobject(py)?.into_any(),
                        ],
                    )
                })
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, axes)?.into_any()
        }
        Param::Avals(avals) => {
            let items = avals
                .iter()
                .map(|a| Bound::new(py, crate::avals::ShapedArray::from_aval(a.clone())))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
        Param::Spec(spec) => spec_to_py(py, spec)?.into_any(),
        Param::Specs(specs) => {
            let items = specs
                .iter()
                .map(|sp| spec_to_py(py, sp))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
        Param::Names(ns) => PyTuple::new(py, ns.iter().map(|n| &**n))?.into_any(),
        Param::NameSet(ns) => {
            pyo3::types::PyFrozenSet::new(py, ns.iter().map(|n| &**n))?.into_any()
        }
        Param::Pairs(ps) => {
            let items = ps
                .iter()
                .map(|&(a, b)| PyTuple::new(py, [a, b]))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
    })
}

/// A partition spec as a tuple of entries: `None`, an axis name, or a tuple of names.
fn spec_to_py<'py>(
    py: Python<'py>,
    spec: &ferrax_ir::PartitionSpec,
) -> PyResult<Bound<'py, PyTuple>> {
    let entries = spec
        .entries()
        .iter()
        .map(|e| -> PyResult<Bound<'py, PyAny>> {
            Ok(match e.as_slice() {
                [] => py.None().into_bound(py),
                [n] => PyString::new(py, n).into_any(),
                names => PyTuple::new(py, names.iter().map(|n| &**n))?.into_any(),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, entries)
}

/// The items of any iterable but a string; `None` for a string or a non-iterable.
fn iter_items<'py>(v: &Bound<'py, PyAny>) -> Result<Option<Items<'py>>> {
    if v.is_instance_of::<PyString>() {
        return Ok(None);
    }
    if let Some(items) = sequence_items(v)? {
        return Ok(Some(items));
    }
    match v.try_iter() {
        Ok(it) => Ok(Some(it.collect::<PyResult<Items<'py>>>()?)),
        Err(_) => Ok(None),
    }
}

/// Axis names: a tuple (or any iterable) of str, or one str.
fn names_of(v: &Bound<'_, PyAny>) -> Result<Option<Vec<Arc<str>>>> {
    if let Some(s) = str_of(v)? {
        return Ok(Some(vec![s]));
    }
    let Some(items) = iter_items(v)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for it in &items {
        match str_of(it)? {
            Some(s) => out.push(s),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// A mesh: `(("x", 2), ("y", 2))`, or an object with `axis_names` and `axis_sizes`
/// (JAX's and ferrax's `Mesh`).
fn mesh_of(v: &Bound<'_, PyAny>) -> Result<Option<ferrax_ir::Mesh>> {
    let mut axes: Vec<(Arc<str>, i64)> = Vec::new();
    if let (Ok(names), Ok(sizes)) = (v.getattr("axis_names"), v.getattr("axis_sizes")) {
        let (Some(names), Some(sizes)) = (names_of(&names)?, ints_of(&sizes)?) else {
            return Ok(None);
        };
        if names.len() != sizes.len() {
            return Ok(None);
        }
        axes.extend(names.into_iter().zip(sizes.iter().copied()));
    } else {
        let Some(items) = iter_items(v)? else {
            return Ok(None);
        };
        for it in &items {
            let Some(pair) = sequence_items(it)? else {
                return Ok(None);
            };
            let [n, s] = pair.as_slice() else {
                return Ok(None);
            };
            let (Some(n), Some(s)) = (str_of(n)?, int_of(s)) else {
                return Ok(None);
            };
            axes.push((n, s));
        }
    }
    ferrax_ir::Mesh::new(axes)
        .map(Some)
        .map_err(|e| errors::value_error(format!("invalid mesh: {e}")))
}

/// A closed axis environment from a mapping of axis name to size.
pub fn axis_env_from_py(v: &Bound<'_, PyAny>) -> Result<ferrax_ir::AxisEnv> {
    let mut axes: Vec<(String, i64)> = Vec::new();
    for item in v.call_method0("items")?.try_iter()? {
        let (name, size): (String, i64) = item?.extract()?;
        axes.push((name, size));
    }
    Ok(ferrax_ir::AxisEnv::of(axes))
}

/// A mesh from Python (see [`mesh_of`]); anything else is a `ValueError`.
pub fn mesh_from_py(v: &Bound<'_, PyAny>) -> Result<ferrax_ir::Mesh> {
    mesh_of(v)?.ok_or_else(|| {
        errors::value_error(
            "a mesh is a sequence of (axis name, size) pairs, or has axis_names and axis_sizes",
        )
    })
}

/// A partition spec from Python (see [`spec_of`]).
pub fn spec_from_py(v: &Bound<'_, PyAny>) -> Result<Option<ferrax_ir::PartitionSpec>> {
    spec_of(v)
}

/// A partition spec: an iterable of entries, each `None`, an axis name or an iterable of
/// names (JAX's and ferrax's `PartitionSpec` iterate so).
fn spec_of(v: &Bound<'_, PyAny>) -> Result<Option<ferrax_ir::PartitionSpec>> {
    let Some(items) = iter_items(v)? else {
        return Ok(None);
    };
    let mut entries = Vec::with_capacity(items.len());
    for it in &items {
        if it.is_none() {
            entries.push(Vec::new());
            continue;
        }
        match names_of(it)? {
            Some(ns) => entries.push(ns),
            None => return Ok(None),
        }
    }
    Ok(Some(ferrax_ir::PartitionSpec::new(entries)))
}

/// The name of a custom rule (`jvp`, `fwd`, `bwd`), as JAX prints it: a `str` itself,
/// else its `__name__` (a `str`), else its `repr`.
fn rule_name(v: &Bound<'_, PyAny>) -> Result<String> {
    if let Some(s) = str_of(v)? {
        return Ok(s.to_string());
    }
    Ok(match v.getattr("__name__") {
        Ok(n) if n.is_instance_of::<PyString>() => n.extract::<String>()?,
        _ => v.repr()?.extract::<String>()?,
    })
}

/// The name of another opaque value (a checkpoint policy), as JAX prints a param it has
/// no rule for: its `str`, with each ` at 0x<hex>` address masked as ` at 0xXXXX` (one
/// `X` per digit), so that printouts do not depend on where objects live.
fn printed_name(v: &Bound<'_, PyAny>) -> Result<String> {
    let s: String = v.str()?.extract()?;
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(i) = rest.find(" at 0x") {
        let (head, tail) = rest.split_at(i + " at 0x".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
        out.extend(std::iter::repeat_n('X', digits));
        rest = &tail[digits..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether an extension's param value may be kept as an opaque object: anything but the
/// values that have typed kinds (numbers, strings, sequences, mappings), whose bad forms
/// (a huge int, a mixed tuple) stay errors.
fn is_opaque_candidate(v: &Bound<'_, PyAny>) -> bool {
    !(v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyString>()
        || v.is_instance_of::<PyTuple>()
        || v.is_instance_of::<PyList>()
        || v.is_instance_of::<PyDict>())
}

/// Keeps a Python object as an opaque param with this name; its identity is the
/// object's address (stable while the param holds it).
fn opaque_of(v: &Bound<'_, PyAny>, name: String) -> Result<Opaque> {
    let identity = v.as_ptr() as usize;
    let object: Arc<dyn std::any::Any + Send + Sync> = Arc::new(v.clone().unbind());
    Ok(Opaque::with_object(&name, identity, object))
}

/// A class of `ferrax.lax`, if the module imports and has it.
fn lax_class<'py>(py: Python<'py>, name: &str) -> Option<Bound<'py, PyAny>> {
    py.import("ferrax.lax").ok()?.getattr(name).ok()
}

/// Dimension numbers as `ferrax.lax.<class>(field=(...), ...)`, or a dict of the fields.
fn record_to_py<'py, const N: usize>(
    py: Python<'py>,
    class: &str,
    names: &[&str; N],
    fields: [&[i64]; N],
) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    for (name, xs) in names.iter().zip(fields) {
        kwargs.set_item(name, ints_to_py(py, xs)?)?;
    }
    match lax_class(py, class) {
        Some(cls) => cls.call((), Some(&kwargs)),
        None => Ok(kwargs.into_any()),
    }
}

/// An equation's params as a `dict`.
pub fn params_to_py<'py>(py: Python<'py>, params: &Params) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in params.iter() {
        if params.has_numpy_ints(name) {
            dict.set_item(name, marked_to_py(py, params, name, value)?)?;
        } else {
            dict.set_item(name, param_to_py(py, value)?)?;
        }
    }
    Ok(dict)
}

/// An int, int-tuple or padding param whose integers include NumPy ones: those as NumPy
/// scalars again (`numpy.int64(1)`), so a rule rebinding the params keeps them.
fn marked_to_py<'py>(
    py: Python<'py>,
    params: &Params,
    name: &str,
    value: &Param,
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy")?;
    let int = |i: usize, n: i64| -> PyResult<Bound<'py, PyAny>> {
        match params.numpy_int(name, i) {
            Some(d) => numpy.getattr(d.numpy_name())?.call1((n,)),
            None => Ok(n.into_pyobject(py)?.into_any()),
        }
    };
    Ok(match value {
        Param::Int(n) => int(0, *n)?,
        Param::Ints(xs) => {
            let items = xs
                .iter()
                .enumerate()
                .map(|(i, &n)| int(i, n))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
        Param::Padding(dims) => {
            let mut rows = Vec::with_capacity(dims.len());
            for (k, &(lo, hi, interior)) in dims.iter().enumerate() {
                let row = [
                    int(3 * k, lo)?,
                    int(3 * k + 1, hi)?,
                    int(3 * k + 2, interior)?,
                ];
                rows.push(PyTuple::new(py, row)?);
            }
            PyTuple::new(py, rows)?.into_any()
        }
        other => param_to_py(py, other)?,
    })
}

/// Reads the params of an equation of `primitive` from a mapping of names to values.
pub fn params_from_py<'py>(primitive: &Primitive, params: &Bound<'py, PyAny>) -> Result<Params> {
    let builtin = primitive.as_builtin();
    // The names stay Python strings until the end (no copy of each).
    let mut names: Vec<Bound<'py, PyString>> = Vec::new();
    let mut values: Vec<Param> = Vec::new();
    // NumPy integers among the ints, remembered so the printer writes them as JAX does.
    let mut marks: Vec<(String, usize, ferrax_ir::DType)> = Vec::new();
    let mut add = |name: &Bound<'py, PyAny>, value: &Bound<'py, PyAny>| -> Result<()> {
        let name_str = name.cast::<PyString>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "param names must be str, got {}",
                describe(name)
            ))
        })?;
        let name = name_str.to_str()?;
        let kind = builtin.and_then(|b| b.param_kind(name));
        let param = match kind {
            Some(kind) => match param_of_kind(kind, value)? {
                Some(p) => p,
                None => param_by_type(value)?.ok_or_else(|| {
                    errors::type_check(format!(
                        "{}: param '{name}' must be a {kind}, got {}",
                        primitive.name(),
                        describe(value)
                    ))
                })?,
            },
            None => match param_by_type(value)? {
                Some(p) => p,
                // An extension primitive may carry any Python object (a rule, a record of
                // what its rules need): kept as an opaque param, printed by its name.
                None if builtin.is_none() && is_opaque_candidate(value) => {
                    Param::Opaque(opaque_of(value, rule_name(value)?)?)
                }
                None => {
                    return Err(errors::type_check(format!(
                        "{}: param '{name}' has a value of unsupported type {}: {}",
                        primitive.name(),
                        type_name(value),
                        describe(value)
                    )))
                }
            },
        };
        if matches!(param, Param::Int(_) | Param::Ints(_) | Param::Padding(_)) {
            let mut next = 0;
            let mut found = Vec::new();
            numpy_int_marks(value, &mut next, &mut found)?;
            marks.extend(found.into_iter().map(|(i, d)| (name.to_owned(), i, d)));
        }
        names.push(name_str.clone());
        values.push(param);
        Ok(())
    };
    if let Ok(dict) = params.cast::<PyDict>() {
        for (name, value) in dict.iter() {
            add(&name, &value)?;
        }
    } else {
        for item in params.call_method0("items")?.try_iter()? {
            let (name, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            add(&name, &value)?;
        }
    }
    let names = names
        .iter()
        .map(|n| n.to_str())
        .collect::<PyResult<Vec<&str>>>()?;
    let params = Params::new(names.into_iter().zip(values));
    Ok(if marks.is_empty() {
        params
    } else {
        params.with_numpy_ints(marks)
    })
}

/// The NumPy integer scalars (`np.int64(1)`) among the integers of an int, int-tuple or
/// padding param's value, by their index in printed order, with their dtypes. `next`
/// counts the integers seen. (The value is one of those kinds: at most two levels deep.)
fn numpy_int_marks(
    v: &Bound<'_, PyAny>,
    next: &mut usize,
    out: &mut Vec<(usize, ferrax_ir::DType)>,
) -> Result<()> {
    if v.is_exact_instance_of::<PyInt>() {
        *next += 1;
        return Ok(());
    }
    if let Some(items) = sequence_items(v)? {
        for item in &items {
            numpy_int_marks(item, next, out)?;
        }
        return Ok(());
    }
    if let Ok(dtype) = v.getattr("dtype") {
        if let Ok(d) = dtype_from_py(&dtype) {
            if d.is_int() {
                out.push((*next, d));
            }
        }
    }
    *next += 1;
    Ok(())
}

/// Reads a value as a param of `kind`; `None` if it is not one.
fn param_of_kind(kind: ParamKind, v: &Bound<'_, PyAny>) -> Result<Option<Param>> {
    use ParamKind as K;
    Ok(match kind {
        K::Int => int_of(v).map(Param::Int),
        K::Bool => bool_of(v).map(Param::Bool),
        K::IntOrBool => bool_of(v)
            .map(Param::Bool)
            .or_else(|| int_of(v).map(Param::Int)),
        K::Str => str_of(v)?.map(Param::Str),
        K::OptStr if v.is_none() => Some(Param::None),
        K::OptStr => str_of(v)?.map(Param::Str),
        K::Ints => ints_of(v)?.map(Param::Ints),
        K::OptInts if v.is_none() => Some(Param::None),
        K::OptInts => ints_of(v)?.map(Param::Ints),
        K::Bools => bools_of(v)?.map(Param::Bools),
        K::DType => dtype_of(v),
        K::OptDType if v.is_none() => Some(Param::None),
        K::OptDType => dtype_of(v),
        K::DotDims => dot_dims_of(v)?.map(|d| Param::DotDims(Arc::new(d))),
        K::Jaxpr => jaxpr_of(v).map(Param::Jaxpr),
        K::Jaxprs => jaxprs_of(v)?.map(|js| Param::Jaxprs(Arc::new(js))),
        K::NoneOnly => v.is_none().then_some(Param::None),
        K::GatherDims => record_of(v, &GatherDimensionNumbers::FIELDS, 3)?
            .map(|f| Param::GatherDims(Arc::new(GatherDimensionNumbers::from_fields(f)))),
        K::ScatterDims => record_of(v, &ScatterDimensionNumbers::FIELDS, 3)?
            .map(|f| Param::ScatterDims(Arc::new(ScatterDimensionNumbers::from_fields(f)))),
        K::GatherMode => mode_of(v)?.map(Param::Mode),
        K::ConvDims => record_of(v, &ConvDimensionNumbers::FIELDS, 3)?
            .map(|f| Param::ConvDims(Arc::new(ConvDimensionNumbers::from_fields(f)))),
        K::OptScalar if v.is_none() => Some(Param::None),
        K::OptScalar => scalar_of(v)?,
        K::OptJaxpr if v.is_none() => Some(Param::None),
        K::OptJaxpr => jaxpr_of(v).map(Param::Jaxpr),
        K::PaddingConfig => padding_of(v)?.map(Param::Padding),
        K::OptOpaque if v.is_none() => Some(Param::None),
        K::Opaque if v.is_none() => None,
        K::Opaque => Some(Param::Opaque(opaque_of(v, rule_name(v)?)?)),
        K::OptOpaque => Some(Param::Opaque(opaque_of(v, printed_name(v)?)?)),
        K::Mesh => mesh_of(v)?.map(|m| Param::Mesh(Arc::new(m))),
        K::Spec => spec_of(v)?.map(|sp| Param::Spec(Arc::new(sp))),
        K::Specs => match iter_items(v)? {
            Some(items) => items
                .iter()
                .map(spec_of)
                .collect::<Result<Option<Vec<_>>>>()?
                .map(|ps| Param::Specs(ps.into())),
            None => None,
        },
        K::AxisNames => names_of(v)?.map(|ns| Param::Names(ns.into())),
        // One name (all_to_all's and axis_index's `axis_name=y`) or a tuple of them.
        K::AxisName => match str_of(v)? {
            Some(s) => Some(Param::Str(s)),
            None => names_of(v)?.map(|ns| Param::Names(ns.into())),
        },
        K::AxisNameSet => match iter_items(v)? {
            Some(_) => names_of(v)?.map(|mut ns| {
                // A Python set has no order: keep a deterministic one.
                if !v.is_instance_of::<PyTuple>() && !v.is_instance_of::<PyList>() {
                    ns.sort();
                }
                Param::NameSet(ns.into())
            }),
            None => None,
        },
        K::Pairs => match sequence_items(v)? {
            Some(items) => {
                let mut out = Vec::with_capacity(items.len());
                for it in &items {
                    match ints_of(it)?.as_deref() {
                        Some(&[a, b]) => out.push((a, b)),
                        _ => return Ok(None),
                    }
                }
                Some(Param::Pairs(out.into()))
            }
            None => None,
        },
        // `pure_callback`'s `result_avals`: a sequence of `ShapedArray`s.
        K::Avals => match sequence_items(v)? {
            Some(items) => {
                let mut out = Vec::with_capacity(items.len());
                for it in &items {
                    match it.cast::<crate::avals::ShapedArray>() {
                        Ok(a) => out.push(a.get().aval.clone()),
                        Err(_) => return Ok(None),
                    }
                }
                Some(Param::Avals(out.into()))
            }
            None => None,
        },
        #[allow(unreachable_patterns)] // Kinds the crate may add later.
        _ => None,
    })
}

/// Reads a value by its Python type; `None` if no param kind holds it.
fn param_by_type(v: &Bound<'_, PyAny>) -> Result<Option<Param>> {
    if v.is_none() {
        return Ok(Some(Param::None));
    }
    if let Some(b) = bool_of(v) {
        return Ok(Some(Param::Bool(b)));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(Some(Param::Float(v.extract()?)));
    }
    if let Some(i) = int_of(v) {
        return Ok(Some(Param::Int(i)));
    }
    if let Some(s) = str_of(v)? {
        return Ok(Some(Param::Str(s)));
    }
    if let Some(j) = jaxpr_of(v) {
        return Ok(Some(Param::Jaxpr(j)));
    }
    if let Some(items) = sequence_items(v)? {
        if items.is_empty() {
            return Ok(Some(Param::Ints(Arc::from(Vec::new()))));
        }
        if let Some(bs) = items.iter().map(bool_of).collect::<Option<Vec<bool>>>() {
            return Ok(Some(Param::Bools(bs.into())));
        }
        if let Some(is) = items.iter().map(int_of).collect::<Option<Vec<i64>>>() {
            return Ok(Some(Param::Ints(is.into())));
        }
        if let Some(js) = items.iter().map(jaxpr_of).collect::<Option<Vec<_>>>() {
            return Ok(Some(Param::Jaxprs(Arc::new(js))));
        }
        if let Some(d) = dot_dims_of(v)? {
            return Ok(Some(Param::DotDims(Arc::new(d))));
        }
        return Ok(None);
    }
    // A dtype, or a type such as numpy.float32.
    if is_numpy_dtype(v)? || v.is_instance_of::<PyType>() {
        return Ok(dtype_of(v));
    }
    Ok(None)
}

/// A Python scalar (bool, int, float, or a NumPy scalar of those kinds) as a param.
fn scalar_of(v: &Bound<'_, PyAny>) -> Result<Option<Param>> {
    if let Some(b) = bool_of(v) {
        return Ok(Some(Param::Bool(b)));
    }
    if let Some(i) = int_of(v) {
        return Ok(Some(Param::Int(i)));
    }
    if v.is_instance_of::<PyFloat>()
        || matches!(
            type_name(v).as_str(),
            "float16" | "float32" | "float64" | "bfloat16"
        )
    {
        return Ok(v.extract::<f64>().ok().map(Param::Float));
    }
    Ok(None)
}

/// Five int tuples read from the attributes (or dict keys) `names`; a missing batching
/// field (the last two) is `()`. `None` if the value has no such fields.
/// A record's int-tuple fields by name (attributes or dict keys); fields from `optional_from`
/// on may be absent (`()`).
fn record_of<const N: usize>(
    v: &Bound<'_, PyAny>,
    names: &[&str; N],
    optional_from: usize,
) -> Result<Option<[Vec<i64>; N]>> {
    let dict = v.cast::<PyDict>().ok();
    let mut out: [Vec<i64>; N] = std::array::from_fn(|_| Vec::new());
    for (i, name) in names.iter().enumerate() {
        let field = match &dict {
            Some(d) => d.get_item(name)?,
            None => v.getattr(*name).ok(),
        };
        let Some(field) = field else {
            if i >= optional_from {
                continue;
            }
            return Ok(None);
        };
        match ints_of(&field)? {
            Some(xs) => out[i] = xs.to_vec(),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// A `GatherScatterMode` member (by its `.name`) or one of the strings JAX accepts.
fn mode_of(v: &Bound<'_, PyAny>) -> Result<Option<GatherScatterMode>> {
    if let Some(s) = str_of(v)? {
        return Ok(GatherScatterMode::from_name(&s));
    }
    if type_name(v) == "GatherScatterMode" {
        if let Ok(name) = v.getattr("name") {
            if let Some(s) = str_of(&name)? {
                return Ok(GatherScatterMode::from_name(&s));
            }
        }
    }
    Ok(None)
}

fn bool_of(v: &Bound<'_, PyAny>) -> Option<bool> {
    // Python bools, and NumPy's (which are not `bool` subclasses).
    if let Ok(b) = v.cast::<PyBool>() {
        return Some(b.is_true());
    }
    if matches!(type_name(v).as_str(), "bool" | "bool_") {
        return v.extract::<bool>().ok();
    }
    None
}

fn int_of(v: &Bound<'_, PyAny>) -> Option<i64> {
    // `bool` is an `int` subclass, but a bool is not an integer param.
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyFloat>() {
        return None;
    }
    // Python ints and anything with `__index__` (NumPy integers).
    v.extract::<i64>().ok()
}

fn str_of(v: &Bound<'_, PyAny>) -> Result<Option<Arc<str>>> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(Some(Arc::from(s.to_str()?))),
        Err(_) => Ok(None),
    }
}

/// A sequence's items, up to eight inline: params' sequences are short, and reading
/// one allocates nothing.
type Items<'py> = SmallVec<[Bound<'py, PyAny>; 8]>;

/// The items of a tuple or list; `None` for anything else.
fn sequence_items<'py>(v: &Bound<'py, PyAny>) -> Result<Option<Items<'py>>> {
    if let Ok(t) = v.cast::<PyTuple>() {
        return Ok(Some(t.iter().collect()));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return Ok(Some(l.iter().collect()));
    }
    Ok(None)
}

fn ints_of(v: &Bound<'_, PyAny>) -> Result<Option<Arc<[i64]>>> {
    Ok(sequence_items(v)?.and_then(|items| {
        items
            .iter()
            .map(int_of)
            .collect::<Option<Vec<i64>>>()
            .map(Arc::from)
    }))
}

/// `pad`'s config: a sequence of `(low, high, interior)` int triples.
fn padding_of(v: &Bound<'_, PyAny>) -> Result<Option<Arc<[ferrax_ir::params::PadDim]>>> {
    let Some(items) = sequence_items(v)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for it in &items {
        match ints_of(it)?.as_deref() {
            Some(&[lo, hi, interior]) => out.push((lo, hi, interior)),
            _ => return Ok(None),
        }
    }
    Ok(Some(out.into()))
}

fn bools_of(v: &Bound<'_, PyAny>) -> Result<Option<Arc<[bool]>>> {
    Ok(sequence_items(v)?.and_then(|items| {
        items
            .iter()
            .map(bool_of)
            .collect::<Option<Vec<bool>>>()
            .map(Arc::from)
    }))
}

fn dtype_of(v: &Bound<'_, PyAny>) -> Option<Param> {
    if v.is_none() {
        // `numpy.dtype(None)` is float64; a missing dtype is not a dtype.
        return None;
    }
    dtype_from_py(v).ok().map(Param::DType)
}

fn jaxpr_of(v: &Bound<'_, PyAny>) -> Option<ferrax_ir::ClosedJaxpr> {
    v.cast::<ClosedJaxpr>()
        .ok()
        .map(|cj| cj.get().inner.clone())
}

fn jaxprs_of(v: &Bound<'_, PyAny>) -> Result<Option<Vec<ferrax_ir::ClosedJaxpr>>> {
    Ok(sequence_items(v)?.and_then(|items| items.iter().map(jaxpr_of).collect()))
}

/// `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`, as tuples or lists.
fn dot_dims_of(v: &Bound<'_, PyAny>) -> Result<Option<DotDimensionNumbers>> {
    let pair = |v: &Bound<'_, PyAny>| -> Result<Option<(Vec<i64>, Vec<i64>)>> {
        let Some(items) = sequence_items(v)? else {
            return Ok(None);
        };
        let [a, b] = items.as_slice() else {
            return Ok(None);
        };
        Ok(match (ints_of(a)?, ints_of(b)?) {
            (Some(a), Some(b)) => Some((a.to_vec(), b.to_vec())),
            _ => None,
        })
    };
    let Some(items) = sequence_items(v)? else {
        return Ok(None);
    };
    let [contracting, batch] = items.as_slice() else {
        return Ok(None);
    };
    Ok(match (pair(contracting)?, pair(batch)?) {
        (Some((lhs_contracting, rhs_contracting)), Some((lhs_batch, rhs_batch))) => {
            Some(DotDimensionNumbers {
                lhs_contracting,
                rhs_contracting,
                lhs_batch,
                rhs_batch,
            })
        }
        _ => None,
    })
}

/// A primitive's params converted from Python once, for equations that reuse them: the
/// staging fast paths give the builder one of these instead of a dict, so an equation
/// costs no conversion. Given to an equation of another primitive, a `TypeCheckError`.
#[pyclass(frozen, module = "ferrax._ir", name = "Params")]
pub struct PyParams {
    primitive: Primitive,
    params: Params,
}

impl PyParams {
    /// These params, for an equation of `primitive`.
    pub fn for_primitive(&self, primitive: &Primitive) -> Result<Params> {
        if self.primitive != *primitive {
            return Err(errors::type_check(format!(
                "params made for {} given to an equation of {}",
                self.primitive.name(),
                primitive.name()
            )));
        }
        Ok(self.params.clone())
    }
}

#[pymethods]
impl PyParams {
    /// Converts `params` (a mapping of param names to values, as `add_eqn` takes them)
    /// for equations of `primitive` (a built-in's name or an `ExtensionPrimitive`).
    #[new]
    #[pyo3(signature = (primitive, params))]
    fn py_new(primitive: &Bound<'_, PyAny>, params: &Bound<'_, PyAny>) -> Result<PyParams> {
        let primitive = crate::builder::primitive_from_py(primitive)?;
        let params = params_from_py(&primitive, params)?;
        Ok(PyParams { primitive, params })
    }

    /// The primitive's name.
    #[getter]
    fn primitive(&self) -> &str {
        self.primitive.name()
    }

    /// The params as a dict, as `JaxprEqn.params` gives them.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        params_to_py(py, &self.params)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Params({:?}, {})",
            self.primitive.name(),
            params_to_py(py, &self.params)?.repr()?
        ))
    }
}
