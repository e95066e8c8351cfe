//! [`HostArray`]: a dense row-major array on the host, the values the evaluator computes
//! with.

use super::numeric::{float_is_canonical, int_is_canonical, int_to_f64, round_float, wrap_int};
use crate::aval::{AbstractValue, Shape};
use crate::dtype::{DType, DTypeKind};
use crate::jaxpr::LitValue;
use std::fmt;

/// The elements of a [`HostArray`], row-major. Every integer dtype is stored in `i64`
/// (`u64` as its bit pattern) and every float dtype in `f64`; see [`crate::eval`].
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// Elements of a `bool` array.
    Bool(Vec<bool>),
    /// Elements of an integer array.
    Int(Vec<i64>),
    /// Elements of a float array.
    Float(Vec<f64>),
}

impl HostData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::Bool(v) => v.len(),
            HostData::Int(v) => v.len(),
            HostData::Float(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name of the storage kind: `"bool"`, `"int"` or `"float"`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            HostData::Bool(_) => "bool",
            HostData::Int(_) => "int",
            HostData::Float(_) => "float",
        }
    }

    /// The storage kind a dtype uses, by name.
    fn kind_name_of(dtype: DType) -> &'static str {
        match dtype.kind() {
            DTypeKind::Bool => "bool",
            DTypeKind::SignedInt | DTypeKind::UnsignedInt | DTypeKind::Key => "int",
            DTypeKind::Float => "float",
        }
    }

    /// Empty data of the kind a dtype uses.
    fn empty_for(dtype: DType) -> HostData {
        match dtype.kind() {
            DTypeKind::Bool => HostData::Bool(Vec::new()),
            DTypeKind::SignedInt | DTypeKind::UnsignedInt | DTypeKind::Key => {
                HostData::Int(Vec::new())
            }
            DTypeKind::Float => HostData::Float(Vec::new()),
        }
    }
}

/// Why some data does not make a [`HostArray`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ArrayError {
    /// The number of elements differs from the shape's size.
    Length {
        /// The shape.
        shape: Shape,
        /// Elements given.
        got: usize,
    },
    /// The storage kind does not fit the dtype (`Float` data for an `i32` array, or a
    /// constructor for one kind used with a dtype of another).
    Kind {
        /// The dtype.
        dtype: DType,
        /// The storage kind given (`"bool"`, `"int"`, `"float"`).
        got: &'static str,
    },
    /// An element is not a value of the dtype (an `i8` array holding 300, an `f32` array
    /// holding an `f64` that is not an `f32`). Only [`HostArray::validate`] reports this:
    /// the constructors round and wrap instead.
    NotInDType {
        /// The dtype.
        dtype: DType,
        /// Position of the first such element.
        position: usize,
    },
}

impl fmt::Display for ArrayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrayError::Length { shape, got } => write!(
                f,
                "shape {shape} has {} elements but {got} were given",
                shape.size()
            ),
            ArrayError::Kind { dtype, got } => {
                write!(f, "dtype {dtype} is not stored as {got} data")
            }
            ArrayError::NotInDType { dtype, position } => {
                write!(f, "element {position} is not a value of dtype {dtype}")
            }
        }
    }
}

impl std::error::Error for ArrayError {}

/// A dense array on the host: shape, dtype and row-major elements.
///
/// The fields are public; an array built by hand may break the invariants (length equal
/// to the shape's size, storage kind fitting the dtype, every element a value of the
/// dtype), which [`HostArray::validate`] checks and the evaluator checks on its inputs.
/// The constructors establish them, rounding floats and wrapping integers to the dtype.
///
/// # Examples
/// ```
/// use ferrax_ir::eval::{ArrayError, HostArray, HostData};
/// use ferrax_ir::{DType, Shape};
/// let s = Shape::new(&[2, 2])?;
/// // Values are rounded and wrapped to the dtype: 300 is 44 in `u8`, 0.1 an `f32`.
/// let bytes = HostArray::from_i64(s.clone(), DType::U8, vec![1, 2, 3, 300])?;
/// assert_eq!(bytes.as_i64(), Some(&[1, 2, 3, 44][..]));
/// let x = HostArray::from_f64(s.clone(), DType::F32, vec![0.1, 0.0, 0.0, 0.0])?;
/// assert_eq!(x.as_f64().unwrap()[0], f64::from(0.1_f32));
/// assert_eq!(x.aval().to_string(), "f32[2,2]");
/// // The length must be the shape's size.
/// assert!(matches!(HostArray::from_f64(s, DType::F32, vec![1.0]), Err(ArrayError::Length { .. })));
/// assert_eq!(HostArray::scalar_bool(true).data, HostData::Bool(vec![true]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    /// The dimensions.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
    /// The elements, row-major.
    pub data: HostData,
}

impl HostArray {
    /// An array from data of the kind the dtype uses, after rounding floats and wrapping
    /// integers to the dtype. Fails if the kind or the length is wrong.
    pub fn new(shape: Shape, dtype: DType, data: HostData) -> Result<HostArray, ArrayError> {
        let data = match data {
            HostData::Float(v) if dtype.is_float() => {
                HostData::Float(v.into_iter().map(|x| round_float(dtype, x)).collect())
            }
            HostData::Int(v) if dtype.is_int() || dtype.is_key() => {
                HostData::Int(v.into_iter().map(|x| wrap_int(dtype, x)).collect())
            }
            d @ HostData::Bool(_) if dtype == DType::Bool => d,
            d => {
                return Err(ArrayError::Kind {
                    dtype,
                    got: d.kind_name(),
                })
            }
        };
        let a = HostArray { shape, dtype, data };
        a.check_length()?;
        Ok(a)
    }

    /// A float array; the values are rounded to `dtype`, which must be a float dtype.
    pub fn from_f64(shape: Shape, dtype: DType, data: Vec<f64>) -> Result<HostArray, ArrayError> {
        HostArray::new(shape, dtype, HostData::Float(data))
    }

    /// An integer array; the values are wrapped to `dtype`, which must be an integer dtype
    /// (for `u64`, negative values are bit patterns of values at or above 2^63).
    pub fn from_i64(shape: Shape, dtype: DType, data: Vec<i64>) -> Result<HostArray, ArrayError> {
        HostArray::new(shape, dtype, HostData::Int(data))
    }

    /// An unsigned integer array from `u64` values, wrapped to `dtype`, which must be an
    /// integer dtype.
    pub fn from_u64(shape: Shape, dtype: DType, data: Vec<u64>) -> Result<HostArray, ArrayError> {
        HostArray::new(
            shape,
            dtype,
            HostData::Int(data.into_iter().map(|x| x as i64).collect()),
        )
    }

    /// A `bool` array.
    pub fn from_bool(shape: Shape, data: Vec<bool>) -> Result<HostArray, ArrayError> {
        HostArray::new(shape, DType::Bool, HostData::Bool(data))
    }

    /// A scalar from a literal value of the kind the dtype uses (rounded or wrapped).
    pub fn scalar(dtype: DType, value: LitValue) -> Result<HostArray, ArrayError> {
        let data = match value {
            LitValue::Bool(b) => HostData::Bool(vec![b]),
            LitValue::Int(v) => HostData::Int(vec![v]),
            LitValue::Float(x) => HostData::Float(vec![x]),
        };
        HostArray::new(Shape::scalar(), dtype, data)
    }

    /// A float scalar, rounded to `dtype` (a float dtype).
    pub fn scalar_f64(dtype: DType, value: f64) -> Result<HostArray, ArrayError> {
        HostArray::scalar(dtype, LitValue::Float(value))
    }

    /// An integer scalar, wrapped to `dtype` (an integer dtype).
    pub fn scalar_i64(dtype: DType, value: i64) -> Result<HostArray, ArrayError> {
        HostArray::scalar(dtype, LitValue::Int(value))
    }

    /// A `bool` scalar.
    pub fn scalar_bool(value: bool) -> HostArray {
        HostArray {
            shape: Shape::scalar(),
            dtype: DType::Bool,
            data: HostData::Bool(vec![value]),
        }
    }

    /// An array of zeros (`false` for `bool`).
    pub fn zeros(shape: Shape, dtype: DType) -> HostArray {
        let n = shape.size() as usize;
        let data = match HostData::empty_for(dtype) {
            HostData::Bool(_) => HostData::Bool(vec![false; n]),
            HostData::Int(_) => HostData::Int(vec![0; n]),
            HostData::Float(_) => HostData::Float(vec![0.0; n]),
        };
        HostArray { shape, dtype, data }
    }

    /// The array's type (strongly typed).
    pub fn aval(&self) -> AbstractValue {
        AbstractValue::new(self.shape.clone(), self.dtype)
    }

    /// Number of elements stored.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when no elements are stored.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements of a float array.
    pub fn as_f64(&self) -> Option<&[f64]> {
        match &self.data {
            HostData::Float(v) => Some(v),
            _ => None,
        }
    }

    /// The stored elements of an integer array (`u64` as bit patterns).
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            HostData::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of a `bool` array.
    pub fn as_bool(&self) -> Option<&[bool]> {
        match &self.data {
            HostData::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// Every element as an `f64` (`bool` as 0/1, `u64` as unsigned; integers beyond 2^53
    /// are rounded).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            HostData::Bool(v) => v.iter().map(|&b| if b { 1.0 } else { 0.0 }).collect(),
            HostData::Int(v) => v.iter().map(|&x| int_to_f64(self.dtype, x)).collect(),
            HostData::Float(v) => v.clone(),
        }
    }

    fn check_length(&self) -> Result<(), ArrayError> {
        if self.data.len() as u64 != self.shape.size() as u64 {
            return Err(ArrayError::Length {
                shape: self.shape.clone(),
                got: self.data.len(),
            });
        }
        Ok(())
    }

    /// Checks the invariants: the storage kind fits the dtype, the length equals the
    /// shape's size, and every element is a value of the dtype.
    pub fn validate(&self) -> Result<(), ArrayError> {
        if self.data.kind_name() != HostData::kind_name_of(self.dtype) {
            return Err(ArrayError::Kind {
                dtype: self.dtype,
                got: self.data.kind_name(),
            });
        }
        self.check_length()?;
        let bad = match &self.data {
            HostData::Bool(_) => None,
            HostData::Int(v) => v.iter().position(|&x| !int_is_canonical(self.dtype, x)),
            HostData::Float(v) => v.iter().position(|&x| !float_is_canonical(self.dtype, x)),
        };
        match bad {
            Some(position) => Err(ArrayError::NotInDType {
                dtype: self.dtype,
                position,
            }),
            None => Ok(()),
        }
    }
}

/// Compares two arrays for tests: `Ok` when shapes and dtypes are equal and every pair of
/// elements is close; otherwise a message naming the first difference.
///
/// Integers and booleans must be equal. Floats `a` (from `actual`) and `b` (from
/// `expected`) are close when `|a - b| <= atol + rtol * |b|`, or both are NaN, or both are
/// the same infinity.
///
/// # Examples
/// ```
/// use ferrax_ir::eval::{allclose, check_close, HostArray};
/// use ferrax_ir::{DType, Shape};
/// let v = |x: Vec<f64>| HostArray::from_f64(Shape::new(&[2]).unwrap(), DType::F64, x).unwrap();
/// assert!(check_close(&v(vec![1.0, 2.0 + 1e-9]), &v(vec![1.0, 2.0]), 1e-6, 0.0).is_ok());
/// assert!(allclose(&v(vec![f64::NAN, 1.0]), &v(vec![f64::NAN, 1.0]), 0.0, 0.0));
/// let e = check_close(&v(vec![1.0, 2.5]), &v(vec![1.0, 2.0]), 1e-6, 0.0).unwrap_err();
/// assert!(e.contains("2.5"), "{e}");
/// ```
pub fn check_close(
    actual: &HostArray,
    expected: &HostArray,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    if actual.dtype != expected.dtype || actual.shape != expected.shape {
        return Err(format!(
            "type {} differs from the expected {}",
            actual.aval(),
            expected.aval()
        ));
    }
    let mismatch = |i: usize, a: &dyn fmt::Debug, b: &dyn fmt::Debug| {
        Err(format!(
            "element {i} of {} is {a:?}, expected {b:?}",
            actual.aval()
        ))
    };
    match (&actual.data, &expected.data) {
        (HostData::Bool(x), HostData::Bool(y)) if x.len() == y.len() => {
            match x.iter().zip(y).position(|(a, b)| a != b) {
                Some(i) => mismatch(i, &x[i], &y[i]),
                None => Ok(()),
            }
        }
        (HostData::Int(x), HostData::Int(y)) if x.len() == y.len() => {
            match x.iter().zip(y).position(|(a, b)| a != b) {
                Some(i) => mismatch(i, &x[i], &y[i]),
                None => Ok(()),
            }
        }
        (HostData::Float(x), HostData::Float(y)) if x.len() == y.len() => {
            let close = |a: f64, b: f64| {
                (a.is_nan() && b.is_nan())
                    || a == b
                    || (a.is_finite() && b.is_finite() && (a - b).abs() <= atol + rtol * b.abs())
            };
            match x.iter().zip(y).position(|(&a, &b)| !close(a, b)) {
                Some(i) => mismatch(i, &x[i], &y[i]),
                None => Ok(()),
            }
        }
        _ => Err(format!(
            "data of kind {} (length {}) differs from the expected {} (length {})",
            actual.data.kind_name(),
            actual.len(),
            expected.data.kind_name(),
            expected.len()
        )),
    }
}

/// True when [`check_close`] finds the arrays close.
pub fn allclose(actual: &HostArray, expected: &HostArray, rtol: f64, atol: f64) -> bool {
    check_close(actual, expected, rtol, atol).is_ok()
}

/// A storage element type: lets the shape-moving primitives work on any kind of data.
pub(crate) trait Elem: Copy {
    /// The elements, if the data is of this kind.
    fn slice(d: &HostData) -> Option<&[Self]>;
    /// Wraps elements as data.
    fn data(v: Vec<Self>) -> HostData;
}

impl Elem for bool {
    fn slice(d: &HostData) -> Option<&[bool]> {
        match d {
            HostData::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn data(v: Vec<bool>) -> HostData {
        HostData::Bool(v)
    }
}

impl Elem for i64 {
    fn slice(d: &HostData) -> Option<&[i64]> {
        match d {
            HostData::Int(v) => Some(v),
            _ => None,
        }
    }
    fn data(v: Vec<i64>) -> HostData {
        HostData::Int(v)
    }
}

impl Elem for f64 {
    fn slice(d: &HostData) -> Option<&[f64]> {
        match d {
            HostData::Float(v) => Some(v),
            _ => None,
        }
    }
    fn data(v: Vec<f64>) -> HostData {
        HostData::Float(v)
    }
}

/// Calls a function generic over [`Elem`] with the element type of some data:
/// `by_kind!(data, f(args...))` runs `f::<bool>`, `f::<i64>` or `f::<f64>`.
macro_rules! by_kind {
    ($data:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $data {
            $crate::eval::HostData::Bool(_) => $f::<bool>($($arg),*),
            $crate::eval::HostData::Int(_) => $f::<i64>($($arg),*),
            $crate::eval::HostData::Float(_) => $f::<f64>($($arg),*),
        }
    };
}
pub(crate) use by_kind;
