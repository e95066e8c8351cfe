//! Element types of arrays.

use std::fmt;

/// The element type of an array.
///
/// # Examples
/// ```
/// use ferrax_ir::DType;
/// // Jaxpr text writes the short name, NumPy (and serde) the long one.
/// assert_eq!((DType::BF16.short_name(), DType::BF16.numpy_name()), ("bf16", "bfloat16"));
/// assert_eq!(DType::from_name("f32"), Some(DType::F32));
/// assert_eq!(DType::from_name("float32"), Some(DType::F32));
/// assert_eq!(DType::U16.size_bytes(), 2);
/// assert!(DType::I8.is_signed() && DType::I8.is_int() && !DType::I8.is_float());
/// // Keys are a dtype apart from the numeric ones.
/// assert!(DType::KeyFry.is_key() && !DType::ALL.contains(&DType::KeyFry));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans (`bool`).
    Bool,
    /// Signed 8-bit integers (`i8`).
    I8,
    /// Signed 16-bit integers (`i16`).
    I16,
    /// Signed 32-bit integers (`i32`).
    I32,
    /// Signed 64-bit integers (`i64`).
    I64,
    /// Unsigned 8-bit integers (`u8`).
    U8,
    /// Unsigned 16-bit integers (`u16`).
    U16,
    /// Unsigned 32-bit integers (`u32`).
    U32,
    /// Unsigned 64-bit integers (`u64`).
    U64,
    /// IEEE half precision (`f16`).
    F16,
    /// bfloat16 (`bf16`).
    BF16,
    /// IEEE single precision (`f32`).
    F32,
    /// IEEE double precision (`f64`).
    F64,
    /// Threefry-2x32 PRNG keys (`key<fry>`, JAX's typed key arrays). Not in
    /// [`DType::ALL`] (the numeric dtypes, which generators and tables iterate): see
    /// [`DType::KEY_FRY`]. No numeric primitive accepts it; one key is two `u32` words,
    /// lowered as a trailing dimension of 2 (`key<fry>[3]` is `tensor<3x2xui32>`).
    KeyFry,
}

/// The broad class a dtype belongs to, as the shape rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DTypeKind {
    /// `bool`.
    Bool,
    /// Signed integers.
    SignedInt,
    /// Unsigned integers.
    UnsignedInt,
    /// Floating point.
    Float,
    /// PRNG keys (`key<fry>`): opaque, only the `random_*` and structural primitives take
    /// them.
    Key,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The threefry key dtype (`key<fry>`), kept apart from the numeric [`DType::ALL`].
    pub const KEY_FRY: DType = DType::KeyFry;

    /// The short name used in jaxpr type annotations (`f32`, `i32`, `bool`, ...).
    pub fn short_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::KeyFry => "key<fry>",
        }
    }

    /// The NumPy name used in params (`float32`, `int32`, `bool`, `bfloat16`, ...).
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::KeyFry => "key<fry>",
        }
    }

    /// Reads a short name (`f32`) or a NumPy name (`float32`), or `key<fry>`.
    pub fn from_name(name: &str) -> Option<DType> {
        if name == "key<fry>" {
            return Some(DType::KeyFry);
        }
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.short_name() == name || d.numpy_name() == name)
    }

    /// True for PRNG key dtypes (`key<fry>`).
    pub fn is_key(self) -> bool {
        self == DType::KeyFry
    }

    /// The class of this dtype.
    pub fn kind(self) -> DTypeKind {
        match self {
            DType::Bool => DTypeKind::Bool,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => DTypeKind::SignedInt,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => DTypeKind::UnsignedInt,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => DTypeKind::Float,
            DType::KeyFry => DTypeKind::Key,
        }
    }

    /// True for floating-point dtypes.
    pub fn is_float(self) -> bool {
        self.kind() == DTypeKind::Float
    }

    /// True for signed and unsigned integers (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(self.kind(), DTypeKind::SignedInt | DTypeKind::UnsignedInt)
    }

    /// True for signed integers and floats (the dtypes `abs` accepts).
    pub fn is_signed(self) -> bool {
        matches!(self.kind(), DTypeKind::SignedInt | DTypeKind::Float)
    }

    /// Size of one element in bytes (`bool` takes one byte, a key two `u32` words).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::KeyFry => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}
