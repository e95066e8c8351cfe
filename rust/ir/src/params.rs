//! Equation parameters: a typed value per name, sorted by name.

use crate::dtype::DType;
use crate::jaxpr::ClosedJaxpr;
use crate::sharding::{Mesh, PartitionSpec};
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, OnceLock};

/// A parameter name: one of the catalogue's (a shared `&'static str` from a fixed table,
/// no allocation) or any other name, owned (an extension primitive's, or one read from
/// text and then rejected). Nothing is leaked: reading a million distinct unknown names
/// allocates and frees them, and the table of known names never grows.
///
/// Compares, orders and hashes as its text; dereferences to `str`.
#[derive(Clone)]
pub struct ParamName(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Known(&'static str),
    Owned(Arc<str>),
}

impl ParamName {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NameRepr::Known(s) => s,
            NameRepr::Owned(s) => s,
        }
    }

    /// True if the name is one of the catalogue's, shared from the fixed table.
    pub fn is_known(&self) -> bool {
        matches!(self.0, NameRepr::Known(_))
    }
}

impl std::ops::Deref for ParamName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ParamName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for ParamName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for ParamName {
    fn eq(&self, other: &ParamName) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for ParamName {}

impl PartialEq<str> for ParamName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ParamName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for ParamName {
    fn partial_cmp(&self, other: &ParamName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ParamName {
    fn cmp(&self, other: &ParamName) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for ParamName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Debug for ParamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ParamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The catalogue's parameter names, sorted and deduplicated: the whole table of shared
/// names, fixed once built (its size is [`known_name_count`]).
fn known_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<&'static str> = crate::primitive::Builtin::ALL
            .iter()
            .flat_map(|b| b.param_specs().iter().map(|s| s.name))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    })
}

/// The number of names in the fixed table [`intern_name`] shares names from (the
/// catalogue's parameter names). It never changes: names outside the table are owned.
pub fn known_name_count() -> usize {
    known_names().len()
}

/// A parameter name: shared from the catalogue's table when it is one of its names
/// (no allocation), else owned.
pub fn intern_name(name: &str) -> ParamName {
    match known_name_index().get(name) {
        Some(&known) => ParamName(NameRepr::Known(known)),
        None => ParamName(NameRepr::Owned(Arc::from(name))),
    }
}

/// The table's names by hash: a lookup hashes the name once and compares it with one
/// entry, where a binary search compared it with eight (this runs for every parameter
/// of every equation read from Python or text).
fn known_name_index() -> &'static HashMap<&'static str, &'static str, BuildHasherDefault<Fnv>> {
    static INDEX: OnceLock<HashMap<&'static str, &'static str, BuildHasherDefault<Fnv>>> =
        OnceLock::new();
    INDEX.get_or_init(|| known_names().iter().map(|&n| (n, n)).collect())
}

/// FNV-1a: fast for the short names hashed here (std's default hasher is built to resist
/// chosen keys, which the table's fixed names do not need).
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// `dot_general`'s dimension numbers: `((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))`.
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, Builtin, DType, JaxprBuilder, Param, Params};
/// // A batched matmul: batch dimension 0 of each, contracting lhs 2 with rhs 1.
/// let dims = Param::dot_dims(&[2], &[1], &[0], &[0]);
/// let Param::DotDims(d) = &dims else { unreachable!() };
/// assert_eq!((d.lhs_batch.as_slice(), d.rhs_contracting.as_slice()), (&[0][..], &[1][..]));
/// assert_eq!(d.to_string(), "(([2], [1]), ([0], [0]))"); // as jaxpr text writes it
/// let mut b = JaxprBuilder::new();
/// let x = b.add_invar(AbstractValue::array(DType::F32, &[5, 2, 3])?);
/// let w = b.add_invar(AbstractValue::array(DType::F32, &[5, 3, 4])?);
/// let y = b.apply(Builtin::DotGeneral, [x, w], Params::new([("dimension_numbers", dims)]))?;
/// assert_eq!(b.var_aval(y).map(|t| t.to_string()).as_deref(), Some("f32[5,2,4]"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDimensionNumbers {
    /// Contracting dimensions of the left operand.
    pub lhs_contracting: Vec<i64>,
    /// Contracting dimensions of the right operand.
    pub rhs_contracting: Vec<i64>,
    /// Batch dimensions of the left operand.
    pub lhs_batch: Vec<i64>,
    /// Batch dimensions of the right operand.
    pub rhs_batch: Vec<i64>,
}

/// `gather`'s dimension numbers (JAX's `GatherDimensionNumbers`; the index vector is
/// always the last dimension of the indices).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GatherDimensionNumbers {
    /// Output dimensions that are dimensions of the slices.
    pub offset_dims: Vec<i64>,
    /// Operand dimensions removed from the slices (each of slice size 1).
    pub collapsed_slice_dims: Vec<i64>,
    /// The operand dimension each component of an index vector starts.
    pub start_index_map: Vec<i64>,
    /// Operand dimensions that are batch dimensions.
    pub operand_batching_dims: Vec<i64>,
    /// The indices' dimensions that match `operand_batching_dims`.
    pub start_indices_batching_dims: Vec<i64>,
}

/// `scatter`'s dimension numbers (JAX's `ScatterDimensionNumbers`; the index vector is
/// always the last dimension of the indices).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScatterDimensionNumbers {
    /// Dimensions of the updates that are dimensions of the update windows.
    pub update_window_dims: Vec<i64>,
    /// Operand dimensions absent from the windows (each of size 1).
    pub inserted_window_dims: Vec<i64>,
    /// The operand dimension each component of an index vector starts.
    pub scatter_dims_to_operand_dims: Vec<i64>,
    /// Operand dimensions that are batch dimensions.
    pub operand_batching_dims: Vec<i64>,
    /// The indices' dimensions that match `operand_batching_dims`.
    pub scatter_indices_batching_dims: Vec<i64>,
}

/// `conv_general_dilated`'s dimension numbers (JAX's `ConvDimensionNumbers`): each spec
/// lists an operand's dimensions in the order (batch, feature, spatial...) for `lhs` and
/// the output, (output feature, input feature, spatial...) for `rhs`.
///
/// # Examples
/// ```
/// use ferrax_ir::ConvDimensionNumbers;
/// // JAX's default layout for a 2-d convolution: NCHW, OIHW, NCHW.
/// let dn = ConvDimensionNumbers::identity(4);
/// assert_eq!(dn.lhs_spec, [0, 1, 2, 3]);
/// assert_eq!(dn.to_string(), "ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(0, 1, 2, 3), out_spec=(0, 1, 2, 3))");
/// // NHWC images, HWIO kernels:
/// let nhwc = ConvDimensionNumbers::from_fields([vec![0, 3, 1, 2], vec![3, 2, 0, 1], vec![0, 3, 1, 2]]);
/// assert_eq!(nhwc.fields()[1], [3, 2, 0, 1]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ConvDimensionNumbers {
    /// The lhs's batch, feature and spatial dimensions.
    pub lhs_spec: Vec<i64>,
    /// The rhs's output feature, input feature and spatial dimensions.
    pub rhs_spec: Vec<i64>,
    /// The output's batch, feature and spatial dimensions.
    pub out_spec: Vec<i64>,
}

impl ConvDimensionNumbers {
    /// The field names, in JAX's order.
    pub const FIELDS: [&'static str; 3] = ["lhs_spec", "rhs_spec", "out_spec"];

    /// The fields in JAX's order.
    pub fn fields(&self) -> [&[i64]; 3] {
        [&self.lhs_spec, &self.rhs_spec, &self.out_spec]
    }

    /// From the fields in JAX's order.
    pub fn from_fields([a, b, c]: [Vec<i64>; 3]) -> ConvDimensionNumbers {
        ConvDimensionNumbers {
            lhs_spec: a,
            rhs_spec: b,
            out_spec: c,
        }
    }

    /// The identity layout of rank `rank` (JAX's default, `NCHW`/`OIHW`/`NCHW`).
    pub fn identity(rank: usize) -> ConvDimensionNumbers {
        let iota: Vec<i64> = (0..rank as i64).collect();
        ConvDimensionNumbers {
            lhs_spec: iota.clone(),
            rhs_spec: iota.clone(),
            out_spec: iota,
        }
    }
}

impl fmt::Display for ConvDimensionNumbers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<(&str, &[i64])> = Self::FIELDS.into_iter().zip(self.fields()).collect();
        write_record(f, "ConvDimensionNumbers", &fields)
    }
}

/// How `gather` and `scatter` treat out-of-bounds indices (JAX's `GatherScatterMode`).
///
/// # Examples
/// ```
/// use ferrax_ir::GatherScatterMode;
/// // Read from JAX's printed form or the strings `from_any` takes.
/// assert_eq!(GatherScatterMode::from_name("GatherScatterMode.CLIP"), Some(GatherScatterMode::Clip));
/// assert_eq!(GatherScatterMode::from_name("drop"), Some(GatherScatterMode::FillOrDrop));
/// assert_eq!(GatherScatterMode::FillOrDrop.to_string(), "GatherScatterMode.FILL_OR_DROP");
/// assert_eq!(GatherScatterMode::from_name("wrap"), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GatherScatterMode {
    /// Indices are clamped so that the whole slice or window is in bounds.
    Clip,
    /// A gather returns the fill value for a slice not wholly in bounds; a scatter drops
    /// an update window not wholly in bounds.
    FillOrDrop,
    /// The caller promises indices in bounds; XLA clamps gathers and drops scatters.
    PromiseInBounds,
}

impl GatherScatterMode {
    /// Every mode.
    pub const ALL: [GatherScatterMode; 3] = [
        GatherScatterMode::Clip,
        GatherScatterMode::FillOrDrop,
        GatherScatterMode::PromiseInBounds,
    ];

    /// JAX's enum member name (`CLIP`, `FILL_OR_DROP`, `PROMISE_IN_BOUNDS`).
    pub fn jax_name(self) -> &'static str {
        match self {
            GatherScatterMode::Clip => "CLIP",
            GatherScatterMode::FillOrDrop => "FILL_OR_DROP",
            GatherScatterMode::PromiseInBounds => "PROMISE_IN_BOUNDS",
        }
    }

    /// The mode from JAX's member name, its printed form (`GatherScatterMode.CLIP`) or
    /// the strings JAX's `GatherScatterMode.from_any` takes (`clip`, `fill`, `drop`,
    /// `promise_in_bounds`).
    pub fn from_name(name: &str) -> Option<GatherScatterMode> {
        let bare = name.strip_prefix("GatherScatterMode.").unwrap_or(name);
        match bare {
            "CLIP" | "clip" => Some(GatherScatterMode::Clip),
            "FILL_OR_DROP" | "fill" | "drop" => Some(GatherScatterMode::FillOrDrop),
            "PROMISE_IN_BOUNDS" | "promise_in_bounds" => Some(GatherScatterMode::PromiseInBounds),
            _ => None,
        }
    }
}

impl fmt::Display for GatherScatterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatherScatterMode.{}", self.jax_name())
    }
}

/// Writes a Python tuple of ints: `()`, `(1,)`, `(1, 2)`.
fn write_py_tuple(f: &mut fmt::Formatter<'_>, xs: &[i64]) -> fmt::Result {
    f.write_str("(")?;
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    if xs.len() == 1 {
        f.write_str(",")?;
    }
    f.write_str(")")
}

fn write_record(f: &mut fmt::Formatter<'_>, name: &str, fields: &[(&str, &[i64])]) -> fmt::Result {
    write!(f, "{name}(")?;
    for (i, (field, xs)) in fields.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{field}=")?;
        write_py_tuple(f, xs)?;
    }
    f.write_str(")")
}

impl GatherDimensionNumbers {
    /// The field names, in JAX's order.
    pub const FIELDS: [&'static str; 5] = [
        "offset_dims",
        "collapsed_slice_dims",
        "start_index_map",
        "operand_batching_dims",
        "start_indices_batching_dims",
    ];

    /// The fields in JAX's order.
    pub fn fields(&self) -> [&[i64]; 5] {
        [
            &self.offset_dims,
            &self.collapsed_slice_dims,
            &self.start_index_map,
            &self.operand_batching_dims,
            &self.start_indices_batching_dims,
        ]
    }

    /// From the fields in JAX's order.
    pub fn from_fields([a, b, c, d, e]: [Vec<i64>; 5]) -> GatherDimensionNumbers {
        GatherDimensionNumbers {
            offset_dims: a,
            collapsed_slice_dims: b,
            start_index_map: c,
            operand_batching_dims: d,
            start_indices_batching_dims: e,
        }
    }
}

impl ScatterDimensionNumbers {
    /// The field names, in JAX's order.
    pub const FIELDS: [&'static str; 5] = [
        "update_window_dims",
        "inserted_window_dims",
        "scatter_dims_to_operand_dims",
        "operand_batching_dims",
        "scatter_indices_batching_dims",
    ];

    /// The fields in JAX's order.
    pub fn fields(&self) -> [&[i64]; 5] {
        [
            &self.update_window_dims,
            &self.inserted_window_dims,
            &self.scatter_dims_to_operand_dims,
            &self.operand_batching_dims,
            &self.scatter_indices_batching_dims,
        ]
    }

    /// From the fields in JAX's order.
    pub fn from_fields([a, b, c, d, e]: [Vec<i64>; 5]) -> ScatterDimensionNumbers {
        ScatterDimensionNumbers {
            update_window_dims: a,
            inserted_window_dims: b,
            scatter_dims_to_operand_dims: c,
            operand_batching_dims: d,
            scatter_indices_batching_dims: e,
        }
    }
}

impl fmt::Display for GatherDimensionNumbers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<(&str, &[i64])> = Self::FIELDS.into_iter().zip(self.fields()).collect();
        write_record(f, "GatherDimensionNumbers", &fields)
    }
}

impl fmt::Display for ScatterDimensionNumbers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<(&str, &[i64])> = Self::FIELDS.into_iter().zip(self.fields()).collect();
        write_record(f, "ScatterDimensionNumbers", &fields)
    }
}

/// A host value the IR carries but does not interpret: the Python function given as
/// `custom_jvp_call`'s `jvp`, `custom_vjp_call`'s `fwd` and `bwd`, a checkpoint policy.
/// It has a display name (what the printer prints: `f_jvp`, `<lambda>`) and, when it came
/// from the host, the host's object with an identity. Text read back has the name only.
///
/// Two opaque values are equal when both hold objects of the same identity, or both hold
/// none and have the same name.
///
/// # Examples
/// ```
/// use ferrax_ir::Opaque;
/// use std::sync::Arc;
/// let f = Opaque::with_object("f_jvp", 0x1234, Arc::new(42_i32));
/// assert_eq!((f.name(), f.identity(), f.to_string().as_str()), ("f_jvp", Some(0x1234), "f_jvp"));
/// assert_eq!(f.object().and_then(|o| o.downcast_ref::<i32>()), Some(&42));
/// // Read back from text, only the name is left, and it equals no object-holding value.
/// let named = Opaque::named("f_jvp");
/// assert!(named.object().is_none());
/// assert_ne!(named, f);
/// assert_eq!(named, Opaque::named("f_jvp"));
/// ```
#[derive(Clone)]
pub struct Opaque {
    name: Arc<str>,
    object: Option<(usize, Arc<dyn Any + Send + Sync>)>,
}

impl Opaque {
    /// An opaque value with a name and no object (as read from text).
    pub fn named(name: &str) -> Opaque {
        Opaque {
            name: Arc::from(name),
            object: None,
        }
    }

    /// An opaque value holding a host object; `identity` tells objects apart (the bindings
    /// use the Python object's address, stable while the object is held here).
    pub fn with_object(name: &str, identity: usize, object: Arc<dyn Any + Send + Sync>) -> Opaque {
        Opaque {
            name: Arc::from(name),
            object: Some((identity, object)),
        }
    }

    /// The display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host object, if any.
    pub fn object(&self) -> Option<&Arc<dyn Any + Send + Sync>> {
        self.object.as_ref().map(|(_, o)| o)
    }

    /// The host object's identity, if there is an object.
    pub fn identity(&self) -> Option<usize> {
        self.object.as_ref().map(|(id, _)| *id)
    }
}

impl PartialEq for Opaque {
    fn eq(&self, other: &Opaque) -> bool {
        match (self.identity(), other.identity()) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.name == other.name,
            _ => false,
        }
    }
}

impl fmt::Debug for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.identity() {
            Some(id) => write!(f, "Opaque({:?} @ {id:#x})", self.name),
            None => write!(f, "Opaque({:?})", self.name),
        }
    }
}

impl fmt::Display for Opaque {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One dimension of `pad`'s padding config: `(low, high, interior)`.
pub type PadDim = (i64, i64, i64);

/// One parameter value.
///
/// # Examples
/// ```
/// use ferrax_ir::{DType, Param};
/// let axes = Param::ints(&[0, 2]);
/// assert_eq!((axes.as_ints(), axes.kind_name()), (Some(&[0, 2][..]), "tuple of ints"));
/// assert_eq!(axes.as_int(), None); // a tuple, not an int
/// assert_eq!(Param::DType(DType::I32).as_dtype(), Some(DType::I32));
/// assert_eq!(Param::str("f").as_str(), Some("f"));
/// assert_eq!(Param::names(&["x", "y"]), Param::names(&[String::from("x"), "y".into()]));
/// ```
#[derive(Clone, Debug)]
pub enum Param {
    /// Python's `None` (an absent optional value).
    None,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string (a name, a mode).
    Str(Arc<str>),
    /// A tuple of integers (axes, a shape, a permutation).
    Ints(Arc<[i64]>),
    /// A tuple of booleans.
    Bools(Arc<[bool]>),
    /// A dtype.
    DType(DType),
    /// `dot_general`'s dimension numbers.
    DotDims(Arc<DotDimensionNumbers>),
    /// `gather`'s dimension numbers.
    GatherDims(Arc<GatherDimensionNumbers>),
    /// `scatter`'s dimension numbers.
    ScatterDims(Arc<ScatterDimensionNumbers>),
    /// `gather`'s and `scatter`'s index mode.
    Mode(GatherScatterMode),
    /// `conv_general_dilated`'s dimension numbers.
    ConvDims(Arc<ConvDimensionNumbers>),
    /// `pad`'s padding config: `(low, high, interior)` per dimension.
    Padding(Arc<[PadDim]>),
    /// A sub-jaxpr.
    Jaxpr(ClosedJaxpr),
    /// A tuple of sub-jaxprs (`cond`'s branches).
    Jaxprs(Arc<Vec<ClosedJaxpr>>),
    /// A host value the IR does not interpret (a Python function, a policy).
    Opaque(Opaque),
    /// A mesh: `Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))`.
    Mesh(Arc<Mesh>),
    /// One partition spec: `P('x', None)`.
    Spec(Arc<PartitionSpec>),
    /// A tuple of partition specs: `(P('x',), P())`.
    Specs(Arc<[PartitionSpec]>),
    /// A tuple of axis names: `('x', 'y')`.
    Names(Arc<[Arc<str>]>),
    /// A set of axis names, printed as JAX prints a frozenset: `frozenset({'x', 'y'})`
    /// (in the order held).
    NameSet(Arc<[Arc<str>]>),
    /// A tuple of integer pairs (`ppermute`'s `perm`): `((0, 1), (1, 0))`.
    Pairs(Arc<[(i64, i64)]>),
    /// A tuple of abstract values (`pure_callback`'s `result_avals`):
    /// `(ShapedArray(float32[3]),)`.
    Avals(Arc<[crate::aval::AbstractValue]>),
}

impl PartialEq for Param {
    fn eq(&self, other: &Param) -> bool {
        match (self, other) {
            (Param::None, Param::None) => true,
            (Param::Bool(a), Param::Bool(b)) => a == b,
            (Param::Int(a), Param::Int(b)) => a == b,
            (Param::Float(a), Param::Float(b)) => a.to_bits() == b.to_bits(),
            (Param::Str(a), Param::Str(b)) => a == b,
            (Param::Ints(a), Param::Ints(b)) => a == b,
            (Param::Bools(a), Param::Bools(b)) => a == b,
            (Param::DType(a), Param::DType(b)) => a == b,
            (Param::DotDims(a), Param::DotDims(b)) => a == b,
            (Param::GatherDims(a), Param::GatherDims(b)) => a == b,
            (Param::ScatterDims(a), Param::ScatterDims(b)) => a == b,
            (Param::Mode(a), Param::Mode(b)) => a == b,
            (Param::ConvDims(a), Param::ConvDims(b)) => a == b,
            (Param::Padding(a), Param::Padding(b)) => a == b,
            (Param::Jaxpr(a), Param::Jaxpr(b)) => a.ptr_eq(b),
            (Param::Opaque(a), Param::Opaque(b)) => a == b,
            (Param::Mesh(a), Param::Mesh(b)) => a == b,
            (Param::Spec(a), Param::Spec(b)) => a == b,
            (Param::Specs(a), Param::Specs(b)) => a == b,
            (Param::Names(a), Param::Names(b)) => a == b,
            (Param::NameSet(a), Param::NameSet(b)) => a == b,
            (Param::Pairs(a), Param::Pairs(b)) => a == b,
            (Param::Avals(a), Param::Avals(b)) => a == b,
            (Param::Jaxprs(a), Param::Jaxprs(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.ptr_eq(y))
            }
            _ => false,
        }
    }
}

impl Param {
    /// A short name of the value's kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Param::None => "None",
            Param::Bool(_) => "bool",
            Param::Int(_) => "int",
            Param::Float(_) => "float",
            Param::Str(_) => "str",
            Param::Ints(_) => "tuple of ints",
            Param::Bools(_) => "tuple of bools",
            Param::DType(_) => "dtype",
            Param::DotDims(_) => "dimension numbers",
            Param::GatherDims(_) => "gather dimension numbers",
            Param::ScatterDims(_) => "scatter dimension numbers",
            Param::Mode(_) => "gather/scatter mode",
            Param::ConvDims(_) => "conv dimension numbers",
            Param::Padding(_) => "padding config",
            Param::Jaxpr(_) => "jaxpr",
            Param::Jaxprs(_) => "tuple of jaxprs",
            Param::Opaque(_) => "host object (opaque)",
            Param::Mesh(_) => "mesh",
            Param::Spec(_) => "partition spec",
            Param::Specs(_) => "tuple of partition specs",
            Param::Names(_) => "tuple of axis names",
            Param::NameSet(_) => "set of axis names",
            Param::Pairs(_) => "tuple of int pairs",
            Param::Avals(_) => "tuple of ShapedArrays",
        }
    }

    /// Builds a tuple-of-names parameter.
    pub fn names<N: AsRef<str>>(names: &[N]) -> Param {
        Param::Names(names.iter().map(|n| Arc::from(n.as_ref())).collect())
    }

    /// Builds a tuple-of-ints parameter.
    pub fn ints(values: &[i64]) -> Param {
        Param::Ints(Arc::from(values))
    }

    /// Builds a string parameter.
    pub fn str(s: &str) -> Param {
        Param::Str(Arc::from(s))
    }

    /// Builds `dot_general`'s dimension numbers: the contracting dimensions of each
    /// operand, then the batch dimensions of each (`x @ w` for a matrix `x` is
    /// `Param::dot_dims(&[1], &[0], &[], &[])`).
    pub fn dot_dims(
        lhs_contracting: &[i64],
        rhs_contracting: &[i64],
        lhs_batch: &[i64],
        rhs_batch: &[i64],
    ) -> Param {
        Param::DotDims(Arc::new(DotDimensionNumbers {
            lhs_contracting: lhs_contracting.to_vec(),
            rhs_contracting: rhs_contracting.to_vec(),
            lhs_batch: lhs_batch.to_vec(),
            rhs_batch: rhs_batch.to_vec(),
        }))
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Param::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The tuple of integers, if this is one.
    pub fn as_ints(&self) -> Option<&[i64]> {
        match self {
            Param::Ints(v) => Some(v),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Param::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Param::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The dtype, if this is one.
    pub fn as_dtype(&self) -> Option<DType> {
        match self {
            Param::DType(d) => Some(*d),
            _ => None,
        }
    }

    /// The sub-jaxpr, if this is one.
    pub fn as_jaxpr(&self) -> Option<&ClosedJaxpr> {
        match self {
            Param::Jaxpr(j) => Some(j),
            _ => None,
        }
    }

    /// The tuple of sub-jaxprs (`cond`'s branches), if this is one.
    pub fn as_jaxprs(&self) -> Option<&[ClosedJaxpr]> {
        match self {
            Param::Jaxprs(js) => Some(js),
            _ => None,
        }
    }
}

/// The parameters of one equation: name-value pairs sorted by name, names unique.
///
/// Params may also remember which of their integers JAX printed as NumPy scalars
/// (`broadcast_dimensions=(0, np.int64(1))`, as a `vmap` leaves them): the parser records
/// it and the printer writes them back so, but nothing else reads it, and two params
/// differing only in it are equal.
///
/// # Examples
/// ```
/// use ferrax_ir::{Param, Params};
/// // Any order in; sorted by name, as the printer writes them.
/// let p = Params::new([("shape", Param::ints(&[2, 3])), ("dimension", Param::Int(0))]);
/// let names: Vec<&str> = p.iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["dimension", "shape"]);
/// assert_eq!((p.get_int("dimension"), p.get_ints("shape")), (Some(0), Some(&[2, 3][..])));
/// // Params are values: `with` makes a new set.
/// let q = p.with("dimension", Param::Int(1));
/// assert_eq!((p.get_int("dimension"), q.get_int("dimension")), (Some(0), Some(1)));
/// assert!(Params::empty().is_empty() && q.len() == 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Params {
    items: Box<[(ParamName, Param)]>,
    /// `(param, index, dtype)`: the `index`-th integer of the param's value (counted in
    /// printed order) was printed `np.<dtype>(n)`. Sorted.
    numpy_ints: Option<Arc<[(ParamName, u32, DType)]>>,
}

impl PartialEq for Params {
    fn eq(&self, other: &Params) -> bool {
        self.items == other.items
    }
}

impl Params {
    /// No parameters.
    pub fn empty() -> Params {
        Params::default()
    }

    fn from_items(items: Box<[(ParamName, Param)]>) -> Params {
        Params {
            items,
            numpy_ints: None,
        }
    }

    /// The same params, with these integers marked as printed by NumPy (see the type's
    /// docs): `(param, index, dtype)`, the `index`-th integer of the param's value in
    /// printed order written `np.<dtype>(n)`. Marks naming no param are dropped.
    pub fn with_numpy_ints<N: AsRef<str>>(
        mut self,
        marks: impl IntoIterator<Item = (N, usize, DType)>,
    ) -> Params {
        let mut v: Vec<(ParamName, u32, DType)> = marks
            .into_iter()
            .filter(|(n, _, _)| self.get(n.as_ref()).is_some())
            .filter_map(|(n, i, d)| Some((intern_name(n.as_ref()), u32::try_from(i).ok()?, d)))
            .collect();
        v.sort_by(|a, b| (a.0.as_str(), a.1).cmp(&(b.0.as_str(), b.1)));
        v.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        self.numpy_ints = (!v.is_empty()).then(|| v.into());
        self
    }

    /// The NumPy dtype JAX printed the `index`-th integer of param `name` with, if it
    /// printed it as a NumPy scalar (`np.int64(1)`).
    pub fn numpy_int(&self, name: &str, index: usize) -> Option<DType> {
        self.numpy_ints
            .as_deref()?
            .iter()
            .find(|(n, i, _)| n.as_str() == name && *i as usize == index)
            .map(|&(_, _, d)| d)
    }

    /// True when some integer of param `name` was printed as a NumPy scalar.
    pub fn has_numpy_ints(&self, name: &str) -> bool {
        self.numpy_ints
            .as_deref()
            .is_some_and(|v| v.iter().any(|(n, _, _)| n.as_str() == name))
    }

    /// Parameters from pairs in any order. A repeated name keeps its last value.
    pub fn new<N: AsRef<str>>(pairs: impl IntoIterator<Item = (N, Param)>) -> Params {
        let mut items: Vec<(ParamName, Param)> = pairs
            .into_iter()
            .map(|(n, v)| (intern_name(n.as_ref()), v))
            .collect();
        // Stable sort keeps insertion order among equal names; keep the last of each (in
        // place: `dedup_by` drops the later of two equal neighbours, after taking its
        // value into the one kept).
        items.sort_by(|a, b| a.0.cmp(&b.0));
        items.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
        Params::from_items(items.into_boxed_slice())
    }

    /// The value of a parameter.
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.items
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.items[i].1)
    }

    /// Param `name` as an integer, if it is there and is one (`reduce_precision`'s
    /// `exponent_bits`).
    pub fn get_int(&self, name: &str) -> Option<i64> {
        self.get(name)?.as_int()
    }

    /// Param `name` as a tuple of integers, if it is there and is one.
    ///
    /// ```
    /// use ferrax_ir::text::parse_jaxpr;
    /// let j = parse_jaxpr("{ lambda ; a:f32[2,3]. let b:f32[2] = reduce_sum[axes=(1,) out_sharding=None] a in (b,) }").unwrap();
    /// let p = j.eqns()[0].params();
    /// assert_eq!(p.get_ints("axes"), Some(&[1][..]));
    /// assert_eq!(p.get_int("axes"), None); // there, but not an int
    /// assert_eq!(p.get_ints("shape"), None); // not there
    /// ```
    pub fn get_ints(&self, name: &str) -> Option<&[i64]> {
        self.get(name)?.as_ints()
    }

    /// Param `name` as a boolean, if it is there and is one.
    pub fn get_bool(&self, name: &str) -> Option<bool> {
        self.get(name)?.as_bool()
    }

    /// Param `name` as a string, if it is there and is one (`jit`'s `name`).
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name)?.as_str()
    }

    /// Param `name` as a dtype, if it is there and is one.
    pub fn get_dtype(&self, name: &str) -> Option<DType> {
        self.get(name)?.as_dtype()
    }

    /// Param `name` as a sub-jaxpr, if it is there and is one (`jit`'s `jaxpr`).
    pub fn get_jaxpr(&self, name: &str) -> Option<&ClosedJaxpr> {
        self.get(name)?.as_jaxpr()
    }

    /// Param `name` as a tuple of sub-jaxprs, if it is there and is one (`cond`'s
    /// `branches`).
    pub fn get_jaxprs(&self, name: &str) -> Option<&[ClosedJaxpr]> {
        self.get(name)?.as_jaxprs()
    }

    /// All pairs, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Param)> {
        self.items.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The same parameters with one value replaced or added.
    pub fn with(&self, name: &str, value: Param) -> Params {
        let mut p = Params::new(
            self.items
                .iter()
                .map(|(n, v)| (n.clone(), v.clone()))
                .chain(std::iter::once((intern_name(name), value))),
        );
        if let Some(marks) = &self.numpy_ints {
            p.numpy_ints = Some(
                marks
                    .iter()
                    .filter(|m| m.0.as_str() != name)
                    .cloned()
                    .collect(),
            )
            .filter(|v: &Arc<[_]>| !v.is_empty());
        }
        p
    }
}

impl fmt::Display for DotDimensionNumbers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, xs: &[i64]) -> fmt::Result {
            f.write_str("[")?;
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{x}")?;
            }
            f.write_str("]")
        }
        f.write_str("((")?;
        list(f, &self.lhs_contracting)?;
        f.write_str(", ")?;
        list(f, &self.rhs_contracting)?;
        f.write_str("), (")?;
        list(f, &self.lhs_batch)?;
        f.write_str(", ")?;
        list(f, &self.rhs_batch)?;
        f.write_str("))")
    }
}

impl Params {
    /// Consumes the params into their pairs.
    pub fn into_pairs(self) -> Vec<(ParamName, Param)> {
        self.items.into_vec()
    }
}
