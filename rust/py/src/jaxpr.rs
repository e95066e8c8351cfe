//! Read-only views of jaxprs: `Jaxpr`, `ClosedJaxpr`, `JaxprEqn`, `Var` and `Literal`.

use crate::avals::ShapedArray;
use crate::errors::{self, Result};
use crate::params::params_to_py;
use ferrax_ir::jaxpr::{Atom, ClosedJaxpr as IrClosedJaxpr, Const, Jaxpr as IrJaxpr, VarId};
use ferrax_ir::{AbstractValue, DType, LitValue, Literal as IrLiteral};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What a variable belongs to: a built jaxpr, or a builder (by its unique id).
#[derive(Clone)]
pub enum Origin {
    /// A variable of this jaxpr.
    Jaxpr(Arc<IrJaxpr>),
    /// A variable of the builder with this id.
    Builder(u64),
}

impl Origin {
    fn key(&self) -> (u8, usize) {
        match self {
            Origin::Jaxpr(j) => (0, Arc::as_ptr(j) as usize),
            Origin::Builder(id) => (1, *id as usize),
        }
    }
}

/// A variable of one jaxpr (or of one builder). Two `Var`s are equal when they are the
/// same variable of the same jaxpr; a variable means nothing in another jaxpr.
#[pyclass(frozen, eq, hash, module = "ferrax._ir", name = "Var")]
pub struct Var {
    pub(crate) origin: Origin,
    pub(crate) id: VarId,
    pub(crate) aval: AbstractValue,
}

impl PartialEq for Var {
    fn eq(&self, other: &Var) -> bool {
        self.id == other.id
            && match (&self.origin, &other.origin) {
                (Origin::Jaxpr(a), Origin::Jaxpr(b)) => Arc::ptr_eq(a, b),
                (Origin::Builder(a), Origin::Builder(b)) => a == b,
                _ => false,
            }
    }
}

impl Eq for Var {}

impl Hash for Var {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.origin.key().hash(state);
        self.id.hash(state);
    }
}

#[pymethods]
impl Var {
    /// The variable's type.
    #[getter]
    fn aval(&self) -> ShapedArray {
        ShapedArray::from_aval(self.aval.clone())
    }

    fn __repr__(&self) -> String {
        format!("Var({}:{})", self.id, self.aval)
    }
}

/// A scalar constant written inline in a jaxpr, such as `2.0:f32[]`. Literals are values:
/// equal when their value, dtype and weak type are, and usable in any builder.
#[pyclass(frozen, module = "ferrax._ir", name = "Literal")]
pub struct Literal {
    pub(crate) lit: IrLiteral,
}

fn lit_key(lit: &IrLiteral) -> (u8, u64) {
    match lit.value {
        LitValue::Bool(b) => (0, u64::from(b)),
        LitValue::Int(i) => (1, i as u64),
        LitValue::Float(f) => (2, f.to_bits()),
    }
}

#[pymethods]
impl Literal {
    /// The value, as a Python `bool`, `int` or `float`.
    #[getter]
    fn val<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        lit_value_to_py(py, self.lit.value, self.lit.dtype)
    }

    /// The literal's type (a scalar).
    #[getter]
    fn aval(&self) -> ShapedArray {
        ShapedArray::from_aval(self.lit.aval())
    }

    fn __eq__(&self, other: PyRef<'_, Literal>) -> bool {
        lit_key(&self.lit) == lit_key(&other.lit)
            && self.lit.dtype == other.lit.dtype
            && self.lit.weak_type == other.lit.weak_type
    }

    fn __hash__(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        lit_key(&self.lit).hash(&mut h);
        self.lit.dtype.hash(&mut h);
        self.lit.weak_type.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        format!("Literal({})", ferrax_ir::text::format_literal(&self.lit))
    }
}

/// A literal's value as a Python scalar.
pub fn lit_value_to_py(py: Python<'_>, v: LitValue, dtype: DType) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        LitValue::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        LitValue::Int(i) if dtype == DType::U64 => PyInt::new(py, i as u64).into_any(),
        LitValue::Int(i) => PyInt::new(py, i).into_any(),
        LitValue::Float(f) => PyFloat::new(py, f).into_any(),
    })
}

fn var_to_py(py: Python<'_>, jaxpr: &Arc<IrJaxpr>, v: VarId) -> PyResult<Py<PyAny>> {
    let var = Var {
        origin: Origin::Jaxpr(Arc::clone(jaxpr)),
        id: v,
        aval: jaxpr.var_aval(v).clone(),
    };
    Ok(Py::new(py, var)?.into_any())
}

fn atom_to_py(py: Python<'_>, jaxpr: &Arc<IrJaxpr>, a: Atom) -> PyResult<Py<PyAny>> {
    match a {
        Atom::Var(v) => var_to_py(py, jaxpr, v),
        Atom::Lit(l) => Ok(Py::new(
            py,
            Literal {
                lit: *jaxpr.literal(l),
            },
        )?
        .into_any()),
    }
}

fn vars_to_py<'py>(
    py: Python<'py>,
    jaxpr: &Arc<IrJaxpr>,
    vars: &[VarId],
) -> PyResult<Bound<'py, PyList>> {
    let items = vars
        .iter()
        .map(|&v| var_to_py(py, jaxpr, v))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

fn atoms_to_py<'py>(
    py: Python<'py>,
    jaxpr: &Arc<IrJaxpr>,
    atoms: &[Atom],
) -> PyResult<Bound<'py, PyList>> {
    let items = atoms
        .iter()
        .map(|&a| atom_to_py(py, jaxpr, a))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// A list of `ShapedArray`s.
pub fn avals_to_py<'py>(
    py: Python<'py>,
    avals: Vec<AbstractValue>,
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, avals.into_iter().map(ShapedArray::from_aval))
}

/// A typed, immutable jaxpr: constvars, invars, equations and outputs. Made by a
/// `JaxprBuilder`, `parse_jaxpr` or a pass; `str()` prints it in JAX's text format.
#[pyclass(frozen, module = "ferrax._ir", name = "Jaxpr")]
pub struct Jaxpr {
    pub(crate) inner: Arc<IrJaxpr>,
}

impl Jaxpr {
    /// Wraps a jaxpr.
    pub fn new(inner: Arc<IrJaxpr>) -> Jaxpr {
        Jaxpr { inner }
    }
}

#[pymethods]
impl Jaxpr {
    /// The constant variables (bound to a `ClosedJaxpr`'s constants).
    #[getter]
    fn constvars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        vars_to_py(py, &self.inner, self.inner.constvars())
    }

    /// The input variables.
    #[getter]
    fn invars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        vars_to_py(py, &self.inner, self.inner.invars())
    }

    /// The outputs: variables or literals.
    #[getter]
    fn outvars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        atoms_to_py(py, &self.inner, self.inner.outvars())
    }

    /// The equations, each after the definitions of its inputs.
    #[getter]
    fn eqns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let n = self.inner.eqns().len();
        let items = (0..n)
            .map(|index| {
                Py::new(
                    py,
                    JaxprEqn {
                        jaxpr: Arc::clone(&self.inner),
                        index,
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The types of the inputs.
    #[getter]
    fn in_avals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        avals_to_py(py, self.inner.in_avals())
    }

    /// The types of the outputs.
    #[getter]
    fn out_avals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        avals_to_py(py, self.inner.out_avals())
    }

    fn __eq__(&self, other: PyRef<'_, Jaxpr>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn __hash__(&self) -> u64 {
        Arc::as_ptr(&self.inner) as usize as u64
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        self.inner.to_string()
    }
}

/// One equation of a jaxpr: `outvars = primitive[params] inputs`.
#[pyclass(frozen, module = "ferrax._ir", name = "JaxprEqn")]
pub struct JaxprEqn {
    jaxpr: Arc<IrJaxpr>,
    index: usize,
}

impl JaxprEqn {
    fn eqn(&self) -> &ferrax_ir::Eqn {
        // `index` was taken from this jaxpr's equations when the view was made.
        &self.jaxpr.eqns()[self.index]
    }
}

#[pymethods]
impl JaxprEqn {
    /// The primitive's name.
    #[getter]
    fn primitive(&self) -> &str {
        self.eqn().primitive().name()
    }

    /// The operands: variables or literals.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        atoms_to_py(py, &self.jaxpr, self.eqn().inputs())
    }

    /// The variables the equation binds.
    #[getter]
    fn outvars<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        vars_to_py(py, &self.jaxpr, self.eqn().outvars())
    }

    /// The parameters, as Python values (ints, floats, bools, None, str, tuples, numpy
    /// dtypes, `ClosedJaxpr`s, dimension numbers as nested tuples).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        params_to_py(py, self.eqn().params())
    }

    fn __repr__(&self) -> String {
        format!(
            "JaxprEqn(index={}, primitive='{}')",
            self.index,
            self.eqn().primitive().name()
        )
    }
}

/// A jaxpr with values for its constvars. The constants are arbitrary Python objects
/// (NumPy arrays), held by reference and handed back as they were given.
#[pyclass(frozen, module = "ferrax._ir", name = "ClosedJaxpr")]
pub struct ClosedJaxpr {
    pub(crate) inner: IrClosedJaxpr,
}

impl ClosedJaxpr {
    /// Wraps a closed jaxpr.
    pub fn new(inner: IrClosedJaxpr) -> ClosedJaxpr {
        ClosedJaxpr { inner }
    }
}

#[pymethods]
impl ClosedJaxpr {
    #[new]
    #[pyo3(signature = (jaxpr, consts))]
    fn py_new(jaxpr: PyRef<'_, Jaxpr>, consts: &Bound<'_, PyAny>) -> Result<ClosedJaxpr> {
        let j = Arc::clone(&jaxpr.inner);
        let objects = consts
            .try_iter()?
            .map(|item| item.map(Bound::unbind))
            .collect::<PyResult<Vec<Py<PyAny>>>>()?;
        let constvars = j.constvars();
        if objects.len() != constvars.len() {
            return Err(errors::type_check(format!(
                "the jaxpr has {} constvars but {} constants were given",
                constvars.len(),
                objects.len()
            )));
        }
        // Each constant takes its constvar's type: the object is opaque to the IR.
        let values: Vec<Const> = objects
            .into_iter()
            .zip(constvars)
            .map(|(obj, &v)| {
                let handle: Arc<dyn std::any::Any + Send + Sync> = Arc::new(obj);
                Const::new(j.var_aval(v).clone(), handle)
            })
            .collect();
        Ok(ClosedJaxpr {
            inner: IrClosedJaxpr::new(j, values)?,
        })
    }

    /// The jaxpr.
    #[getter]
    fn jaxpr(&self) -> Jaxpr {
        Jaxpr::new(Arc::clone(self.inner.jaxpr()))
    }

    /// The constants, one per constvar: the objects given (None for a constant whose
    /// value is unknown, as in a jaxpr read from text).
    #[getter]
    fn consts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self.inner.consts().iter().map(|c| {
            c.value()
                .and_then(|v| (**v).downcast_ref::<Py<PyAny>>())
                .map(|obj| obj.clone_ref(py))
                .unwrap_or_else(|| py.None())
        });
        PyList::new(py, items)
    }

    /// The types of the inputs (constvars excluded).
    #[getter]
    fn in_avals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        avals_to_py(py, self.inner.in_avals())
    }

    /// The types of the outputs.
    #[getter]
    fn out_avals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        avals_to_py(py, self.inner.out_avals())
    }

    fn __eq__(&self, other: PyRef<'_, ClosedJaxpr>) -> bool {
        self.inner.ptr_eq(&other.inner)
    }

    fn __hash__(&self) -> u64 {
        Arc::as_ptr(self.inner.jaxpr()) as usize as u64
    }

    fn __str__(&self) -> String {
        ferrax_ir::text::print_closed_jaxpr(&self.inner)
    }

    fn __repr__(&self) -> String {
        ferrax_ir::text::print_closed_jaxpr(&self.inner)
    }
}
