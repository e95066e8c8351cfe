//! `ShapedArray` (the abstract value of an array) and dtype conversion between NumPy
//! and the IR.

use crate::errors::{self, Error, Result};
use ferrax_ir::{AbstractValue, DType, Shape};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyInt, PyString, PyTuple};

/// The NumPy dtype objects of the IR's dtypes and their scalar types (`numpy.float32`), in
/// `DType::ALL` order, `numpy.dtype` and `numpy.ndarray`.
struct NumpyDTypes {
    dtypes: Vec<Py<PyAny>>,
    scalar_types: Vec<Py<PyAny>>,
    dtype_fn: Py<PyAny>,
    ndarray: Py<PyAny>,
}

static NUMPY_DTYPES: PyOnceLock<NumpyDTypes> = PyOnceLock::new();

impl NumpyDTypes {
    /// The IR dtype whose NumPy dtype object `obj` is (that very object), if any.
    fn own_dtype(&self, obj: &Bound<'_, PyAny>) -> Option<DType> {
        let i = self.dtypes.iter().position(|d| d.bind(obj.py()).is(obj))?;
        Some(DType::ALL[i])
    }
}

fn numpy_dtypes(py: Python<'_>) -> PyResult<&NumpyDTypes> {
    NUMPY_DTYPES.get_or_try_init(py, || {
        let numpy = py.import("numpy")?;
        let dtype_fn = numpy.getattr("dtype")?;
        let mut dtypes = Vec::with_capacity(DType::ALL.len());
        let mut scalar_types = Vec::with_capacity(DType::ALL.len());
        for d in DType::ALL {
            let dtype = if d == DType::BF16 {
                // NumPy has no bfloat16; ml_dtypes (a dependency, shipped with jaxlib) does.
                let bf16 = py.import("ml_dtypes")?.getattr("bfloat16")?;
                dtype_fn.call1((bf16,))?
            } else {
                dtype_fn.call1((d.numpy_name(),))?
            };
            scalar_types.push(dtype.getattr("type")?.unbind());
            dtypes.push(dtype.unbind());
        }
        Ok(NumpyDTypes {
            dtypes,
            scalar_types,
            dtype_fn: dtype_fn.unbind(),
            ndarray: numpy.getattr("ndarray")?.unbind(),
        })
    })
}

/// `ferrax.dtypes.key_fry`, the Python object of the key dtype (imported when first
/// needed: the extension does not import the package at load time).
fn key_fry(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("ferrax.dtypes")?.getattr("key_fry")
}

/// The `numpy.dtype` of an IR dtype (bfloat16 is `ml_dtypes`'), or
/// `ferrax.dtypes.key_fry` for `key<fry>`.
pub fn dtype_to_py(py: Python<'_>, d: DType) -> PyResult<Bound<'_, PyAny>> {
    if d.is_key() {
        return key_fry(py);
    }
    let cache = numpy_dtypes(py)?;
    let index = DType::ALL.iter().position(|&x| x == d).unwrap_or(0);
    match cache.dtypes.get(index) {
        Some(obj) => Ok(obj.bind(py).clone()),
        None => Err(PyTypeError::new_err(format!("no NumPy dtype for {d}"))),
    }
}

/// The abstract value of a `numpy.ndarray` (exactly that class, not a subclass) whose dtype
/// is one of NumPy's own objects for an IR dtype, as ferrax types it: 64-bit dtypes become
/// their 32-bit types unless `x64`. None for anything else (other objects, byte-swapped
/// or unsupported dtypes), which the caller reads the general way.
pub fn numpy_array_aval(obj: &Bound<'_, PyAny>, x64: bool) -> PyResult<Option<AbstractValue>> {
    let py = obj.py();
    let cache = numpy_dtypes(py)?;
    if !obj.get_type().is(cache.ndarray.bind(py)) {
        return Ok(None);
    }
    let Some(dtype) = cache.own_dtype(&obj.getattr(pyo3::intern!(py, "dtype"))?) else {
        return Ok(None);
    };
    // `ferrax.dtypes.canonical`'s narrowing (keep in step).
    let dtype = match dtype {
        DType::F64 if !x64 => DType::F32,
        DType::I64 if !x64 => DType::I32,
        DType::U64 if !x64 => DType::U32,
        d => d,
    };
    let shape = obj.getattr(pyo3::intern!(py, "shape"))?;
    let Ok(shape) = shape.cast::<PyTuple>() else {
        return Ok(None);
    };
    let mut dims = Vec::with_capacity(shape.len());
    for d in shape.iter() {
        dims.push(d.extract::<i64>()?);
    }
    Ok(Shape::new(&dims)
        .ok()
        .map(|shape| AbstractValue::new(shape, dtype)))
}

/// Whether `obj` is a `numpy.dtype` instance.
pub fn is_numpy_dtype(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    obj.is_instance(numpy_dtypes(obj.py())?.dtype_fn.bind(obj.py()))
}

/// Reads a dtype: a name (`"float32"`, `"f32"`, `"bfloat16"`), a `numpy.dtype`, or
/// anything `numpy.dtype()` accepts (`numpy.float32`, `float`, `"f4"`,
/// `ml_dtypes.bfloat16`), or `ferrax.dtypes.key_fry` (or `"key<fry>"`) for keys. A dtype
/// the IR does not have is a `TypeCheckError`.
pub fn dtype_from_py(obj: &Bound<'_, PyAny>) -> Result<DType> {
    if type_name(obj) == "KeyDType" && obj.eq(key_fry(obj.py())?)? {
        return Ok(DType::KeyFry);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let name = s.to_str()?;
        if let Some(d) = DType::from_name(name) {
            return Ok(d);
        }
        // Other names NumPy knows ("f4", "single", "float").
        return numpy_dtype_from_py(obj)
            .map_err(|_| errors::type_check(format!("unknown dtype '{name}'")));
    }
    numpy_dtype_from_py(obj)
}

fn numpy_dtype_from_py(obj: &Bound<'_, PyAny>) -> Result<DType> {
    let py = obj.py();
    let cache = numpy_dtypes(py)?;
    // Fast path: the canonical dtype objects NumPy hands out are singletons, and so are
    // the scalar types.
    if let Some(d) = cache.own_dtype(obj) {
        return Ok(d);
    }
    if let Some(i) = cache.scalar_types.iter().position(|t| t.bind(py).is(obj)) {
        return Ok(DType::ALL[i]);
    }
    let dtype = cache.dtype_fn.bind(py).call1((obj,)).map_err(|e| {
        errors::type_check(format!(
            "cannot interpret {} as a dtype ({e})",
            describe(obj)
        ))
    })?;
    if let Some(i) = cache
        .dtypes
        .iter()
        .position(|d| d.bind(py).eq(&dtype).unwrap_or(false))
    {
        return Ok(DType::ALL[i]);
    }
    // A non-canonical dtype object of a supported type (e.g. another byte order).
    let name: String = dtype
        .getattr("name")
        .and_then(|n| n.extract())
        .unwrap_or_else(|_| "?".to_owned());
    match DType::from_name(&name) {
        Some(d) => Ok(d),
        None => Err(errors::type_check(format!("unsupported dtype '{name}'"))),
    }
}

/// `repr()` of an object for an error message, or its type name if `repr` fails.
pub fn describe(obj: &Bound<'_, PyAny>) -> String {
    match obj.repr() {
        Ok(r) => r.to_string(),
        Err(_) => format!("a {}", type_name(obj)),
    }
}

/// The name of an object's type.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Reads a shape: a sequence of non-negative integers, the product of the nonzero ones
/// within int64 (`Shape::new`'s rule).
pub fn shape_from_py(obj: &Bound<'_, PyAny>) -> Result<Shape> {
    if obj.is_instance_of::<PyString>() {
        return Err(Error::Py(PyTypeError::new_err(
            "a shape must be a sequence of ints, not a str",
        )));
    }
    let mut dims: Vec<i64> = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        dims.push(dim_from_py(&item)?);
    }
    Ok(Shape::new(&dims)?)
}

fn dim_from_py(item: &Bound<'_, PyAny>) -> Result<i64> {
    match item.extract::<i64>() {
        Ok(d) => Ok(d),
        // An int too large for int64 is a bad shape, not a bad type.
        Err(_) if item.is_instance_of::<PyInt>() => Err(errors::type_check(format!(
            "invalid shape: dimension {} does not fit in int64",
            describe(item)
        ))),
        Err(_) => Err(Error::Py(PyTypeError::new_err(format!(
            "a shape's dimensions must be ints, got {}",
            describe(item)
        )))),
    }
}

/// The abstract value of an array: its shape, its dtype, and whether it is weakly typed
/// (a Python scalar's type, which gives way to the other operand's dtype).
#[pyclass(frozen, eq, hash, module = "ferrax._ir", name = "ShapedArray")]
#[derive(PartialEq, Eq, Hash)]
pub struct ShapedArray {
    pub(crate) aval: AbstractValue,
}

impl ShapedArray {
    /// Wraps an abstract value.
    pub fn from_aval(aval: AbstractValue) -> ShapedArray {
        ShapedArray { aval }
    }
}

#[pymethods]
impl ShapedArray {
    #[new]
    #[pyo3(signature = (shape, dtype, weak_type = false))]
    fn py_new(
        shape: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        weak_type: bool,
    ) -> Result<ShapedArray> {
        let shape = shape_from_py(shape)?;
        let dtype = dtype_from_py(dtype)?;
        Ok(ShapedArray {
            aval: AbstractValue::new(shape, dtype).with_weak_type(weak_type),
        })
    }

    /// The dimensions.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.aval.shape.dims())
    }

    /// The element type, as a `numpy.dtype`.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        dtype_to_py(py, self.aval.dtype)
    }

    /// Whether the value is weakly typed (came from a Python scalar).
    #[getter]
    fn weak_type(&self) -> bool {
        self.aval.weak_type
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.aval.shape.rank()
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> i64 {
        self.aval.shape.size()
    }

    /// The same abstract value with some fields replaced.
    #[pyo3(signature = (*, shape = None, dtype = None, weak_type = None))]
    fn update(
        &self,
        shape: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        weak_type: Option<bool>,
    ) -> Result<ShapedArray> {
        let mut aval = self.aval.clone();
        if let Some(shape) = shape {
            aval.shape = shape_from_py(shape)?;
        }
        if let Some(dtype) = dtype {
            aval.dtype = dtype_from_py(dtype)?;
        }
        if let Some(weak_type) = weak_type {
            aval.weak_type = weak_type;
        }
        Ok(ShapedArray { aval })
    }

    /// The short form used in jaxpr text, e.g. `f32[3,4]`.
    fn str_short(&self) -> String {
        self.aval.str_short()
    }

    fn __repr__(&self) -> String {
        let weak = if self.aval.weak_type {
            ", weak_type=True"
        } else {
            ""
        };
        format!(
            "ShapedArray({}{}{weak})",
            self.aval.dtype.numpy_name(),
            self.aval.shape
        )
    }
}
