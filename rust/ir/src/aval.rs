//! Shapes and abstract values (the types of jaxpr variables).

use crate::dtype::DType;
use smallvec::SmallVec;
use std::fmt;

/// The dimensions of an array. Every dimension is non-negative and the product of its
/// nonzero dimensions fits in an `i64` (the [`Shape::new`] constructor checks both), so
/// the element count and the product of any subset of the dimensions (a stride, the size
/// of a slice of the axes) fit too, whatever the order of the dimensions.
///
/// # Examples
/// ```
/// use ferrax_ir::{Shape, ShapeError};
/// let s = Shape::new(&[2, 3, 4])?;
/// assert_eq!((s.rank(), s.size(), s.dims()), (3, 24, &[2, 3, 4][..]));
/// assert_eq!(s.to_string(), "[2,3,4]");
/// assert_eq!(Shape::scalar().size(), 1);
/// assert_eq!(Shape::new(&[2, -1]), Err(ShapeError::NegativeDim { axis: 1, size: -1 }));
/// assert_eq!(Shape::new(&[1 << 40, 1 << 40]), Err(ShapeError::Overflow));
/// # Ok::<(), ShapeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape(SmallVec<[i64; 4]>);

/// Why a list of dimensions is not a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// A dimension is negative.
    NegativeDim {
        /// Position of the dimension.
        axis: usize,
        /// Its value.
        size: i64,
    },
    /// The product of the nonzero dimensions overflows `i64` (a zero dimension does not
    /// make a shape valid: `[0, 2^40, 2^40]` and `[2^40, 2^40, 0]` are both refused).
    Overflow,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::NegativeDim { axis, size } => {
                write!(f, "dimension {axis} is negative ({size})")
            }
            ShapeError::Overflow => {
                f.write_str("the product of the nonzero dimensions overflows i64")
            }
        }
    }
}

impl std::error::Error for ShapeError {}

/// Why two shapes are not the operands of a binary element-wise primitive.
pub(crate) enum BinaryMismatch {
    /// Different ranks, neither of them 0.
    Ranks,
    /// Dimension `0` has sizes `1` and `2`, neither of them 1.
    Dim(usize, i64, i64),
}

impl Shape {
    /// The result dimensions of a binary element-wise primitive on operands of shapes
    /// `self` and `other`, as JAX 0.10 types them: equal shapes; a rank-0 operand; for
    /// equal ranks, each dimension the one that is not 1 (size-1 dimensions broadcast).
    pub(crate) fn binary_broadcast(&self, other: &Shape) -> Result<Vec<i64>, BinaryMismatch> {
        if self == other || other.rank() == 0 {
            return Ok(self.dims().to_vec());
        }
        if self.rank() == 0 {
            return Ok(other.dims().to_vec());
        }
        if self.rank() != other.rank() {
            return Err(BinaryMismatch::Ranks);
        }
        self.dims()
            .iter()
            .zip(other.dims())
            .enumerate()
            .map(|(i, (&a, &b))| match (a, b) {
                _ if a == b => Ok(a),
                (1, _) => Ok(b),
                (_, 1) => Ok(a),
                _ => Err(BinaryMismatch::Dim(i, a, b)),
            })
            .collect()
    }

    /// A shape from its dimensions, checked: no negative dimension (the first one is
    /// reported), and the product of the nonzero dimensions in `i64`.
    ///
    /// The second rule does not depend on the order of the dimensions, and it bounds every
    /// partial product (strides included), not only the element count. XLA, which the
    /// lowering feeds, accepts `[0, 2^40, 2^40]` but aborts the process on
    /// `[2^40, 2^40, 0]`; refusing both keeps every accepted shape safe to lower.
    pub fn new(dims: &[i64]) -> Result<Shape, ShapeError> {
        Shape::check(dims)?;
        Ok(Shape(SmallVec::from_slice(dims)))
    }

    /// Checks dimensions as [`Shape::new`] does, without making a shape.
    pub fn check(dims: &[i64]) -> Result<(), ShapeError> {
        let mut product: i64 = 1;
        let mut overflow = false;
        for (axis, &size) in dims.iter().enumerate() {
            if size < 0 {
                return Err(ShapeError::NegativeDim { axis, size });
            }
            if size != 0 && !overflow {
                match product.checked_mul(size) {
                    Some(p) => product = p,
                    None => overflow = true,
                }
            }
        }
        if overflow {
            Err(ShapeError::Overflow)
        } else {
            Ok(())
        }
    }

    /// The shape of a scalar (`[]`).
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (the product of the dimensions; 1 for a scalar).
    pub fn size(&self) -> i64 {
        // Cannot overflow: the product of the nonzero dimensions was checked at
        // construction, and a zero dimension only makes the product 0. Saturate anyway
        // rather than wrap.
        self.0.iter().fold(1i64, |n, &d| n.saturating_mul(d))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The type of a jaxpr variable: shape, dtype and whether the value is weakly typed (came
/// from a Python scalar, so it takes the other operand's dtype in mixed arithmetic).
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, DType};
/// let t = AbstractValue::array(DType::I32, &[2, 2])?;
/// assert_eq!((t.dtype, t.shape.dims()), (DType::I32, &[2, 2][..]));
/// // A Python scalar's type is weak: the same type to the typechecker, printed alike.
/// let weak = AbstractValue::scalar(DType::F32).with_weak_type(true);
/// assert!(weak.same_type(&AbstractValue::scalar(DType::F32)));
/// assert_ne!(weak, AbstractValue::scalar(DType::F32));
/// assert_eq!(weak.to_string(), "f32[]");
/// # Ok::<(), ferrax_ir::ShapeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AbstractValue {
    /// The dimensions.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
    /// Weakly typed (a Python scalar's type).
    pub weak_type: bool,
}

impl AbstractValue {
    /// A strongly typed abstract value.
    pub fn new(shape: Shape, dtype: DType) -> AbstractValue {
        AbstractValue {
            shape,
            dtype,
            weak_type: false,
        }
    }

    /// A strongly typed scalar.
    pub fn scalar(dtype: DType) -> AbstractValue {
        AbstractValue::new(Shape::scalar(), dtype)
    }

    /// A strongly typed array of these dimensions: `f32[3,4]` is
    /// `AbstractValue::array(DType::F32, &[3, 4])`.
    ///
    /// ```
    /// use ferrax_ir::{AbstractValue, DType};
    /// let t = AbstractValue::array(DType::F32, &[3, 4]).unwrap();
    /// assert_eq!(t.to_string(), "f32[3,4]");
    /// assert!(AbstractValue::array(DType::F32, &[-1]).is_err());
    /// ```
    pub fn array(dtype: DType, dims: &[i64]) -> Result<AbstractValue, ShapeError> {
        Ok(AbstractValue::new(Shape::new(dims)?, dtype))
    }

    /// Same shape and dtype, weak type ignored (the comparison the typechecker makes).
    pub fn same_type(&self, other: &AbstractValue) -> bool {
        self.dtype == other.dtype && self.shape == other.shape
    }

    /// The same value with another weak-type flag.
    pub fn with_weak_type(mut self, weak_type: bool) -> AbstractValue {
        self.weak_type = weak_type;
        self
    }

    /// The short form used in jaxpr text: `f32[3,4]`.
    pub fn str_short(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for AbstractValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
