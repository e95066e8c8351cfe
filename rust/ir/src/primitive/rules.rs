//! Shape and dtype rules of the built-in primitives.

use super::{Builtin, Family, ParamKind};
use crate::aval::{AbstractValue, BinaryMismatch, Shape, ShapeError};
use crate::dtype::DType;
use crate::jaxpr::ClosedJaxpr;
use crate::params::{DotDimensionNumbers, Param, Params};

mod collectives;
pub(crate) use collectives::unshard_aval;
mod conv;
mod indexing;
mod windowed;
pub use conv::{conv_dilate_dim, ConvGeometry};
mod linalg;
mod random;
use std::fmt;
pub(crate) use windowed::{dilate, select_comparison, Window};

/// Why a primitive cannot be applied to these operands and params.
///
/// # Examples
/// ```
/// use ferrax_ir::{AbstractValue, Builtin, DType, Param, Params, RuleError};
/// let x = AbstractValue::array(DType::F32, &[2, 3])?;
/// let e = Builtin::Sin.abstract_eval(&[x.clone(), x.clone()], &Params::empty()).unwrap_err();
/// assert!(matches!(e, RuleError::Arity { got: 2, .. }), "{e}");
/// let e = Builtin::Transpose.abstract_eval(&[x.clone()], &Params::empty()).unwrap_err();
/// assert_eq!(e, RuleError::MissingParam { name: "permutation" });
/// let p = Params::new([("permutation", Param::ints(&[0, 0]))]);
/// assert!(matches!(Builtin::Transpose.abstract_eval(&[x], &p), Err(RuleError::BadParam { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum RuleError {
    /// Wrong number of operands.
    Arity {
        /// What the primitive takes (`"2"`, `"at least 1"`).
        expected: String,
        /// What it got.
        got: usize,
    },
    /// A required param is absent.
    MissingParam {
        /// Its name.
        name: &'static str,
    },
    /// A param the primitive does not have.
    UnknownParam {
        /// Its name.
        name: String,
    },
    /// A param of the wrong kind.
    ParamKind {
        /// Its name.
        name: String,
        /// The kind the schema wants.
        expected: ParamKind,
        /// The kind given.
        got: &'static str,
    },
    /// A param of the right kind whose value is invalid (an axis out of range, ...).
    BadParam {
        /// Its name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An operand's dtype is not accepted.
    DType {
        /// Position of the operand.
        operand: usize,
        /// Its dtype.
        got: DType,
        /// What is accepted.
        expected: String,
    },
    /// Operand types disagree with each other or with the params.
    Operands {
        /// What disagreed, naming both sides.
        reason: String,
    },
    /// An output shape's element count overflows, or a dimension is negative.
    Shape(ShapeError),
    /// A sub-jaxpr's types disagree with the operands or with each other.
    SubJaxpr {
        /// Which param, and what disagreed.
        reason: String,
    },
    /// An extension primitive's own rule failed.
    Extension {
        /// Its message.
        message: String,
    },
    /// A collective names an axis no enclosing `shard_map` binds (JAX's `NameError`).
    UnboundAxis {
        /// The axis name.
        name: String,
    },
    /// The rule needs the size of an axis an open environment does not bind (the
    /// checker then trusts the declared types; see [`crate::AxisEnv`]).
    AxisSizeUnknown {
        /// The axis name.
        name: String,
    },
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::Arity { expected, got } => {
                write!(f, "takes {expected} operands but was given {got}")
            }
            RuleError::MissingParam { name } => write!(f, "missing param '{name}'"),
            RuleError::UnknownParam { name } => write!(f, "unknown param '{name}'"),
            RuleError::ParamKind {
                name,
                expected,
                got,
            } => write!(f, "param '{name}' must be a {expected}, got a {got}"),
            RuleError::BadParam { name, reason } => write!(f, "param '{name}': {reason}"),
            RuleError::DType {
                operand,
                got,
                expected,
            } => write!(f, "operand {operand} has dtype {got}; expected {expected}"),
            RuleError::Operands { reason } => f.write_str(reason),
            RuleError::Shape(e) => write!(f, "output shape: {e}"),
            RuleError::SubJaxpr { reason } => f.write_str(reason),
            RuleError::Extension { message } => f.write_str(message),
            RuleError::UnboundAxis { name } => write!(
                f,
                "Found an unbound axis name: {name}. To fix this, use it under a shard_map \
                 whose mesh has that axis"
            ),
            RuleError::AxisSizeUnknown { name } => {
                write!(f, "the size of axis '{name}' is not known here")
            }
        }
    }
}

impl std::error::Error for RuleError {}

impl From<ShapeError> for RuleError {
    fn from(e: ShapeError) -> RuleError {
        RuleError::Shape(e)
    }
}

type Rule = Result<Vec<AbstractValue>, RuleError>;

fn param_fits(kind: ParamKind, value: &Param) -> bool {
    use ParamKind as K;
    matches!(
        (kind, value),
        (K::Int, Param::Int(_))
            | (K::Bool, Param::Bool(_))
            | (K::IntOrBool, Param::Int(_) | Param::Bool(_))
            | (K::Str, Param::Str(_))
            | (K::OptStr, Param::Str(_) | Param::None)
            | (K::Ints, Param::Ints(_))
            | (K::OptInts, Param::Ints(_) | Param::None)
            | (K::Bools, Param::Bools(_))
            | (K::DType, Param::DType(_))
            | (K::OptDType, Param::DType(_) | Param::None)
            | (K::DotDims, Param::DotDims(_))
            | (K::Jaxpr, Param::Jaxpr(_))
            | (K::Jaxprs, Param::Jaxprs(_))
            | (K::NoneOnly, Param::None)
            | (K::GatherDims, Param::GatherDims(_))
            | (K::ScatterDims, Param::ScatterDims(_))
            | (K::GatherMode, Param::Mode(_))
            | (K::ConvDims, Param::ConvDims(_))
            | (K::PaddingConfig, Param::Padding(_))
            | (
                K::OptScalar,
                Param::None | Param::Bool(_) | Param::Int(_) | Param::Float(_)
            )
            | (K::OptJaxpr, Param::Jaxpr(_) | Param::None)
            | (K::Opaque, Param::Opaque(_))
            | (K::OptOpaque, Param::Opaque(_) | Param::None)
            | (K::Mesh, Param::Mesh(_))
            | (K::Spec, Param::Spec(_))
            | (K::Specs, Param::Specs(_))
            | (K::AxisNames, Param::Names(_))
            | (K::AxisNameSet, Param::NameSet(_))
            | (K::Pairs, Param::Pairs(_))
            | (K::AxisName, Param::Str(_) | Param::Names(_))
            | (K::Avals, Param::Avals(_))
    ) || (kind == K::Bools && matches!(value, Param::Ints(v) if v.is_empty()))
        || (kind == K::Ints && matches!(value, Param::Bools(v) if v.is_empty()))
}

/// Checks params against the primitive's schema: no unknown name, no missing required
/// one, each of the right kind.
pub(super) fn check_params(prim: Builtin, params: &Params) -> Result<(), RuleError> {
    let specs = prim.param_specs();
    for (name, value) in params.iter() {
        let Some(spec) = specs.iter().find(|s| s.name == name) else {
            return Err(RuleError::UnknownParam {
                name: name.to_owned(),
            });
        };
        if !param_fits(spec.kind, value) {
            return Err(RuleError::ParamKind {
                name: name.to_owned(),
                expected: spec.kind,
                got: value.kind_name(),
            });
        }
        // No dtype param names keys: keys are made by random_seed and random_wrap only
        // (JAX: "Cannot convert_element_type from ... to key<fry>").
        if let Param::DType(d) = value {
            if d.is_key() {
                return Err(bad(
                    name,
                    format!(
                        "{d} is not a numeric dtype (keys come from random_seed or random_wrap)"
                    ),
                ));
            }
        }
    }
    for spec in specs.iter().filter(|s| s.required) {
        if params.get(spec.name).is_none() {
            return Err(RuleError::MissingParam { name: spec.name });
        }
    }
    Ok(())
}

// Accessors after `check_params`: the kind is known, so a mismatch is a bug; still return
// an error rather than panic.
fn ints<'a>(params: &'a Params, name: &'static str) -> Result<&'a [i64], RuleError> {
    match params.get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn opt_ints<'a>(params: &'a Params, name: &'static str) -> Option<&'a [i64]> {
    match params.get(name) {
        Some(Param::Ints(v)) => Some(v),
        _ => None,
    }
}

fn int(params: &Params, name: &'static str) -> Result<i64, RuleError> {
    match params.get(name) {
        Some(Param::Int(v)) => Ok(*v),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn dtype(params: &Params, name: &'static str) -> Result<DType, RuleError> {
    match params.get(name) {
        Some(Param::DType(d)) => Ok(*d),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn jaxpr<'a>(params: &'a Params, name: &'static str) -> Result<&'a ClosedJaxpr, RuleError> {
    match params.get(name) {
        Some(Param::Jaxpr(j)) => Ok(j),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn bad(name: &str, reason: impl Into<String>) -> RuleError {
    RuleError::BadParam {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

fn operands(reason: impl Into<String>) -> RuleError {
    RuleError::Operands {
        reason: reason.into(),
    }
}

fn arity(inputs: &[AbstractValue], n: usize) -> Result<(), RuleError> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(RuleError::Arity {
            expected: n.to_string(),
            got: inputs.len(),
        })
    }
}

fn arity_at_least(inputs: &[AbstractValue], n: usize) -> Result<(), RuleError> {
    if inputs.len() >= n {
        Ok(())
    } else {
        Err(RuleError::Arity {
            expected: format!("at least {n}"),
            got: inputs.len(),
        })
    }
}

fn check_dtype(
    inputs: &[AbstractValue],
    operand: usize,
    ok: impl Fn(DType) -> bool,
    expected: &str,
) -> Result<(), RuleError> {
    let got = inputs[operand].dtype;
    if ok(got) {
        Ok(())
    } else {
        Err(RuleError::DType {
            operand,
            got,
            expected: expected.to_owned(),
        })
    }
}

fn shape(dims: &[i64]) -> Result<Shape, RuleError> {
    Ok(Shape::new(dims)?)
}

fn types_list(avals: &[AbstractValue]) -> String {
    let parts: Vec<String> = avals.iter().map(|a| a.to_string()).collect();
    format!("({})", parts.join(", "))
}

fn same_types(a: &[AbstractValue], b: &[AbstractValue]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_type(y))
}

/// Checks that `axes` are distinct and in `0..rank`.
fn check_axes(name: &str, axes: &[i64], rank: usize) -> Result<(), RuleError> {
    axes_mask(name, axes, rank).map(drop)
}

/// The axes of `0..rank` that `axes` names, as a mask (linear time, so rules stay linear
/// in the rank); an axis out of range or named twice is an error of param `name`.
fn axes_mask(name: &str, axes: &[i64], rank: usize) -> Result<Vec<bool>, RuleError> {
    let mut seen = vec![false; rank];
    for &a in axes {
        let Some(slot) = usize::try_from(a).ok().and_then(|i| seen.get_mut(i)) else {
            return Err(bad(
                name,
                format!("axis {a} is out of range for rank {rank}"),
            ));
        };
        if *slot {
            return Err(bad(name, format!("axis {a} appears twice")));
        }
        *slot = true;
    }
    Ok(seen)
}

/// The dimensions of `dims` whose axis is not in `drop` (a mask of the same length).
fn kept_dims(dims: &[i64], drop: &[bool]) -> Vec<i64> {
    dims.iter()
        .zip(drop)
        .filter(|(_, &d)| !d)
        .map(|(&s, _)| s)
        .collect()
}

/// An axis param as an index into `0..rank`.
fn axis_in(
    name: &str,
    axis: i64,
    rank: usize,
    what: impl fmt::Display,
) -> Result<usize, RuleError> {
    usize::try_from(axis)
        .ok()
        .filter(|&a| a < rank)
        .ok_or_else(|| bad(name, format!("{axis} is out of range for {what}")))
}

fn is_permutation(perm: &[i64], rank: usize) -> bool {
    perm.len() == rank && check_axes("permutation", perm, rank).is_ok()
}

pub(super) fn abstract_eval(
    prim: Builtin,
    inputs: &[AbstractValue],
    params: &Params,
    env: &crate::sharding::AxisEnv,
) -> Rule {
    if prim.is_collective() || prim == Builtin::ShardMap {
        return collectives::abstract_eval(prim, inputs, params, env);
    }
    random::refuse_keys(prim, inputs)?;
    match prim.family() {
        Family::UnaryFloat => unary(inputs, DType::is_float, "a float dtype"),
        Family::UnarySigned => unary(inputs, DType::is_signed, "a signed int or float dtype"),
        Family::UnaryNumeric => unary(inputs, |d| d != DType::Bool, "a numeric dtype"),
        Family::UnaryAny => unary(inputs, |_| true, "any dtype"),
        Family::UnaryBitwise => unary(inputs, |d| !d.is_float(), "bool or an integer dtype"),
        Family::UnaryInt => unary(inputs, DType::is_int, "an integer dtype"),
        Family::BinaryNumeric => binary(inputs, |d| d != DType::Bool, "a numeric dtype", None),
        Family::BinaryFloat => pow(inputs),
        Family::BinaryFloatOnly => binary(inputs, DType::is_float, "a float dtype", None),
        Family::BinaryAny => binary(inputs, |_| true, "any dtype", None),
        Family::BinaryBitwise => binary(inputs, |d| !d.is_float(), "bool or an integer", None),
        Family::BinaryShift => binary(inputs, DType::is_int, "an integer dtype", None),
        // JAX: a comparison of two weakly typed operands is a weakly typed bool.
        Family::Comparison => binary(inputs, |_| true, "any dtype", Some(DType::Bool)),
        Family::Special => special(prim, inputs, params),
    }
}

fn unary(inputs: &[AbstractValue], ok: impl Fn(DType) -> bool, expected: &str) -> Rule {
    arity(inputs, 1)?;
    check_dtype(inputs, 0, ok, expected)?;
    Ok(vec![inputs[0].clone()])
}

/// Two operands of one dtype whose shapes are equal, or one of them a scalar.
fn binary(
    inputs: &[AbstractValue],
    ok: impl Fn(DType) -> bool,
    expected: &str,
    out_dtype: Option<DType>,
) -> Rule {
    arity(inputs, 2)?;
    let (x, y) = (&inputs[0], &inputs[1]);
    if x.dtype != y.dtype {
        return Err(operands(format!(
            "operand dtypes {} and {} differ",
            x.dtype, y.dtype
        )));
    }
    check_dtype(inputs, 0, ok, expected)?;
    Ok(vec![AbstractValue {
        shape: binary_shape(x, y)?,
        dtype: out_dtype.unwrap_or(x.dtype),
        weak_type: x.weak_type && y.weak_type,
    }])
}

/// The shape of an elementwise binary op, as JAX 0.10 types it: the operands' shape if
/// equal; the non-scalar one's when the other is a scalar; for operands of equal rank,
/// each dimension the one that is not 1 (size-1 dimensions broadcast implicitly).
/// Operands of different non-zero ranks are refused (JAX broadcasts them explicitly).
fn binary_shape(x: &AbstractValue, y: &AbstractValue) -> Result<Shape, RuleError> {
    match x.shape.binary_broadcast(&y.shape) {
        Ok(dims) => shape(&dims),
        Err(BinaryMismatch::Ranks) => Err(operands(format!(
            "operand shapes {} and {} have different ranks (only a rank-0 operand, \
             or size-1 dimensions of an operand of equal rank, broadcast)",
            x.shape, y.shape
        ))),
        Err(BinaryMismatch::Dim(i, a, b)) => Err(operands(format!(
            "operand shapes {} and {} differ in dimension {i} ({a} and {b}, \
             neither of them 1)",
            x.shape, y.shape
        ))),
    }
}

/// `pow`, as JAX types it: a float base, and an exponent of the base's dtype or of any
/// integer dtype; the base's dtype out.
fn pow(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 2)?;
    let (x, y) = (&inputs[0], &inputs[1]);
    check_dtype(inputs, 0, DType::is_float, "a float dtype")?;
    check_dtype(
        inputs,
        1,
        |d| d.is_float() || d.is_int(),
        "a float or integer dtype",
    )?;
    if y.dtype.is_float() && y.dtype != x.dtype {
        return Err(operands(format!(
            "a float exponent must have the base's dtype: operand dtypes {} and {} differ",
            x.dtype, y.dtype
        )));
    }
    Ok(vec![AbstractValue {
        shape: binary_shape(x, y)?,
        dtype: x.dtype,
        weak_type: x.weak_type && y.weak_type,
    }])
}

fn special(prim: Builtin, inputs: &[AbstractValue], params: &Params) -> Rule {
    use Builtin::*;
    match prim {
        IntegerPow => {
            let out = unary(inputs, |d| d != DType::Bool, "a numeric dtype")?;
            let y = int(params, "y")?;
            if y < 0 && inputs[0].dtype.is_int() {
                return Err(bad(
                    "y",
                    format!("{} cannot be raised to the negative power {y}", inputs[0]),
                ));
            }
            Ok(out)
        }
        // JAX: a float operand, a bool of its shape and weak type out.
        IsFinite => {
            let mut out = unary(inputs, DType::is_float, "a float dtype")?;
            out[0].dtype = DType::Bool;
            Ok(out)
        }
        Round => {
            let out = unary(inputs, DType::is_float, "a float dtype")?;
            let method = int(params, "rounding_method")?;
            if !(0..=1).contains(&method) {
                return Err(bad(
                    "rounding_method",
                    format!(
                        "{method} is not a RoundingMethod (0 away from zero, 1 to nearest even)"
                    ),
                ));
            }
            Ok(out)
        }
        BitcastConvertType => bitcast_convert_type(inputs, params),
        Threefry2x32 => threefry2x32(inputs),
        SelectN => select_n(inputs),
        Clamp => clamp(inputs),
        ConvertElementType => {
            arity(inputs, 1)?;
            let weak = matches!(params.get("weak_type"), Some(Param::Bool(true)));
            Ok(vec![AbstractValue {
                shape: inputs[0].shape.clone(),
                dtype: dtype(params, "new_dtype")?,
                weak_type: weak,
            }])
        }
        ReduceSum | ReduceProd => reduce(inputs, params, |d| d != DType::Bool, "a numeric dtype"),
        ReduceMax | ReduceMin => reduce(inputs, params, |_| true, "any dtype"),
        // JAX: bool or integer operands; the result is never weakly typed.
        ReduceAnd | ReduceOr | ReduceXor => {
            let mut out = reduce(
                inputs,
                params,
                |d| !d.is_float(),
                "bool or an integer dtype",
            )?;
            out[0].weak_type = false;
            Ok(out)
        }
        ReducePrecision => reduce_precision(inputs, params),
        Argmax | Argmin => argminmax(inputs, params),
        BroadcastInDim => broadcast_in_dim(inputs, params),
        Reshape => reshape(inputs, params),
        Transpose => {
            arity(inputs, 1)?;
            let perm = ints(params, "permutation")?;
            let x = &inputs[0];
            if !is_permutation(perm, x.shape.rank()) {
                return Err(bad(
                    "permutation",
                    format!("{perm:?} is not a permutation of the axes of {x}"),
                ));
            }
            let dims: Vec<i64> = perm.iter().map(|&p| x.shape.dims()[p as usize]).collect();
            Ok(vec![
                AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type)
            ])
        }
        Squeeze => {
            arity(inputs, 1)?;
            let dims = ints(params, "dimensions")?;
            let x = &inputs[0];
            let squeezed = axes_mask("dimensions", dims, x.shape.rank())?;
            for &d in dims {
                if x.shape.dims()[d as usize] != 1 {
                    return Err(bad(
                        "dimensions",
                        format!("cannot squeeze axis {d} of {x}: its size is not 1"),
                    ));
                }
            }
            let kept = kept_dims(x.shape.dims(), &squeezed);
            Ok(vec![
                AbstractValue::new(shape(&kept)?, x.dtype).with_weak_type(x.weak_type)
            ])
        }
        ExpandDims => {
            arity(inputs, 1)?;
            let dims = ints(params, "dimensions")?;
            let x = &inputs[0];
            let out_rank = x.shape.rank() + dims.len();
            let inserted = axes_mask("dimensions", dims, out_rank)?;
            let mut src = x.shape.dims().iter();
            let out: Vec<i64> = inserted
                .iter()
                .map(|&new| {
                    if new {
                        1
                    } else {
                        src.next().copied().unwrap_or(1)
                    }
                })
                .collect();
            Ok(vec![
                AbstractValue::new(shape(&out)?, x.dtype).with_weak_type(x.weak_type)
            ])
        }
        Concatenate => concatenate(inputs, params),
        Split => split(inputs, params),
        Stack => stack(inputs, params),
        Unstack => unstack(inputs, params),
        Tile => tile(inputs, params),
        // Identity on any number of operands of any types.
        OptimizationBarrier => Ok(inputs.to_vec()),
        Slice => slice(inputs, params),
        DynamicSlice => dynamic_slice(inputs, params),
        DynamicUpdateSlice => dynamic_update_slice(inputs),
        DotGeneral => dot_general(inputs, params),
        ConvGeneralDilated => conv::conv_general_dilated(inputs, params),
        Iota => {
            arity(inputs, 0)?;
            let d = dtype(params, "dtype")?;
            if d == DType::Bool {
                return Err(bad("dtype", "iota needs a numeric dtype, got bool"));
            }
            let dims = ints(params, "shape")?;
            let s = shape(dims)?;
            let dim = int(params, "dimension")?;
            axis_in("dimension", dim, s.rank(), format_args!("shape {s}"))?;
            Ok(vec![AbstractValue::new(s, d)])
        }
        Gather => indexing::gather(inputs, params),
        Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax => {
            indexing::scatter(prim, inputs, params)
        }
        Rev => {
            arity(inputs, 1)?;
            let dims = ints(params, "dimensions")?;
            check_axes("dimensions", dims, inputs[0].shape.rank())?;
            Ok(vec![inputs[0].clone()])
        }
        Sort => sort(inputs, params),
        Cumsum | Cumprod | Cummax | Cummin | Cumlogsumexp => cumulative(prim, inputs, params),
        TopK => top_k(inputs, params),
        ReduceWindowSum | ReduceWindowMax | ReduceWindowMin => {
            windowed::reduce_window_monoid(prim, inputs, params)
        }
        ReduceWindow => windowed::reduce_window(inputs, params),
        SelectAndGatherAdd => windowed::select_and_gather_add(inputs, params),
        SelectAndScatterAdd => windowed::select_and_scatter_add(inputs, params),
        Cholesky => linalg::cholesky(inputs),
        TriangularSolve => linalg::triangular_solve(
            inputs,
            matches!(params.get("left_side"), Some(Param::Bool(true))),
        ),
        Lu => linalg::lu(inputs),
        Eigh => linalg::eigh(inputs),
        Svd => linalg::svd(
            inputs,
            matches!(params.get("full_matrices"), Some(Param::Bool(true))),
            matches!(params.get("compute_uv"), Some(Param::Bool(true))),
        ),
        Qr => linalg::qr(
            inputs,
            matches!(params.get("full_matrices"), Some(Param::Bool(true))),
            matches!(params.get("pivoting"), Some(Param::Bool(true))),
        ),
        Geqrf => linalg::geqrf(inputs),
        HouseholderProduct => linalg::householder_product(inputs),
        Geqp3 => linalg::geqp3(inputs),
        AddAny => add_any(inputs),
        RandomSeed => random::random_seed(inputs, params),
        RandomWrap => random::random_wrap(inputs, params),
        RandomUnwrap => random::random_unwrap(inputs),
        RandomBits => random::random_bits(inputs, params),
        RandomSplit => random::random_split(inputs, params),
        RandomFoldIn => random::random_fold_in(inputs),
        RandomClone => unary(inputs, |_| true, "any dtype"),
        Pad => pad(inputs, params),
        ShardingConstraint => {
            arity(inputs, 1)?;
            let (Some(Param::Mesh(mesh)), Some(Param::Spec(spec))) =
                (params.get("mesh"), params.get("spec"))
            else {
                return Err(RuleError::MissingParam { name: "spec" });
            };
            spec.check(mesh, inputs[0].shape.rank())
                .map_err(|e| bad("spec", e.to_string()))?;
            Ok(vec![inputs[0].clone()])
        }
        Jit | CustomJvpCall | CustomVjpCall | Remat => {
            let j = jaxpr(params, prim.call_jaxpr_param().unwrap_or("jaxpr"))?;
            if let Some(Param::Int(n)) = params.get("num_consts") {
                if *n < 0 || *n as usize > inputs.len() {
                    return Err(bad(
                        "num_consts",
                        format!("{n} is not in 0..={} (the operand count)", inputs.len()),
                    ));
                }
            }
            let expected = j.in_avals();
            if !same_types(inputs, &expected) {
                return Err(RuleError::SubJaxpr {
                    reason: format!(
                        "operand types {} differ from the jaxpr's input types {}",
                        types_list(inputs),
                        types_list(&expected)
                    ),
                });
            }
            Ok(j.out_avals())
        }
        Cond => cond(inputs, params),
        While => while_loop(inputs, params),
        Scan => scan(inputs, params),
        // Any operands; no outputs. The effect is JAX's `Debug` or `OrderedDebug`.
        DebugCallback => match params.get("effect") {
            Some(Param::Str(e)) if matches!(&**e, "Debug" | "OrderedDebug") => Ok(Vec::new()),
            _ => Err(bad("effect", "must be Debug or OrderedDebug")),
        },
        // Any operands; no outputs.
        DebugPrint => Ok(Vec::new()),
        // Any operands; the declared results.
        PureCallback | IoCallback => match params.get("result_avals") {
            Some(Param::Avals(avals)) => Ok(avals.to_vec()),
            _ => Err(RuleError::MissingParam {
                name: "result_avals",
            }),
        },
        _ => Err(operands(format!("no rule for {}", prim.name()))),
    }
}

/// `add_any` (JAX's `add_jaxvals_p`, which sums cotangents): two operands of exactly the
/// same numeric type, no implicit broadcasting; the first operand's type (weak type
/// included) out.
fn add_any(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 2)?;
    let (x, y) = (&inputs[0], &inputs[1]);
    check_dtype(inputs, 0, |d| d != DType::Bool, "a numeric dtype")?;
    if x.shape != y.shape || x.dtype != y.dtype {
        return Err(operands(format!(
            "add_any sums two values of one type, got {x} and {y}"
        )));
    }
    Ok(vec![x.clone()])
}

/// `pad`, as JAX and XLA type it: an operand and a scalar padding value of one dtype;
/// per dimension `(low, high, interior)` with `interior >= 0` and negative `low`/`high`
/// cropping; every result dimension `low + high + d + max(d - 1, 0) * interior` at least 0.
fn pad(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    let (x, v) = (&inputs[0], &inputs[1]);
    if x.dtype != v.dtype {
        return Err(operands(format!(
            "pad operand and padding_value must be same dtype: got {} and {}",
            x.dtype, v.dtype
        )));
    }
    if v.shape.rank() != 0 {
        return Err(operands(format!("padding_value must be a scalar, got {v}")));
    }
    let config: &[(i64, i64, i64)] = match params.get("padding_config") {
        Some(Param::Padding(c)) => c,
        _ => {
            return Err(RuleError::MissingParam {
                name: "padding_config",
            })
        }
    };
    let show = || {
        let parts: Vec<String> = config
            .iter()
            .map(|(l, h, i)| format!("({l}, {h}, {i})"))
            .collect();
        format!("({})", parts.join(", "))
    };
    if config.len() != x.shape.rank() {
        return Err(bad(
            "padding_config",
            format!(
                "has {} entries but the operand {x} has rank {}",
                config.len(),
                x.shape.rank()
            ),
        ));
    }
    if config.iter().any(|&(_, _, i)| i < 0) {
        return Err(bad(
            "padding_config",
            format!("interior padding must be nonnegative, got {}", show()),
        ));
    }
    let mut dims = Vec::with_capacity(config.len());
    for (&(lo, hi, interior), &d) in config.iter().zip(x.shape.dims()) {
        // Exact in i128: |lo|, |hi|, d <= 2^63 and (d - 1) * (interior + 1) < 2^126.
        let (lo, hi, interior, d) = (lo as i128, hi as i128, interior as i128, d as i128);
        let n = lo + hi + d + (d - 1).max(0) * interior;
        if n < 0 {
            return Err(bad(
                "padding_config",
                format!(
                    "dimension size after padding is not at least 0 for padding_config \
                     {} and operand {x}",
                    show()
                ),
            ));
        }
        dims.push(i64::try_from(n).map_err(|_| RuleError::Shape(ShapeError::Overflow))?);
    }
    Ok(vec![
        AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type && v.weak_type)
    ])
}

/// `bitcast_convert_type`, as JAX types it: the same bits read as `new_dtype`. Widths
/// equal: the operand's shape. Narrowing: a trailing dimension of the ratio is added.
/// Widening: the operand's last dimension (1 for a scalar) times its width must be the
/// new width, and that dimension goes. `bool` only to itself; never weakly typed.
fn bitcast_convert_type(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let new = dtype(params, "new_dtype")?;
    if (x.dtype == DType::Bool || new == DType::Bool) && x.dtype != new {
        return Err(bad(
            "new_dtype",
            format!(
                "bitcast_convert_type does not convert {} to {new}: bool converts only to itself",
                x.dtype
            ),
        ));
    }
    let (old_bits, new_bits) = (x.dtype.size_bytes() * 8, new.size_bytes() * 8);
    let dims = x.shape.dims();
    let out: Vec<i64> = match old_bits.cmp(&new_bits) {
        std::cmp::Ordering::Equal => dims.to_vec(),
        std::cmp::Ordering::Greater => {
            let mut d = dims.to_vec();
            d.push((old_bits / new_bits) as i64);
            d
        }
        std::cmp::Ordering::Less => {
            let last = dims.last().copied().unwrap_or(1);
            if last.checked_mul(old_bits as i64) != Some(new_bits as i64) {
                return Err(bad(
                    "new_dtype",
                    format!(
                        "converting {x} from {} ({old_bits} bits) to {new} ({new_bits} bits) \
                         needs a last dimension of {}, got {last}",
                        x.dtype,
                        new_bits / old_bits
                    ),
                ));
            }
            dims[..dims.len().saturating_sub(1)].to_vec()
        }
    };
    Ok(vec![AbstractValue::new(shape(&out)?, new)])
}

/// `threefry2x32`: four `u32` operands (two key words, two count words) that broadcast
/// together as JAX's elementwise operands do (scalars, and size-1 dimensions of operands
/// of equal rank); two `u32` outputs of the broadcast shape.
fn threefry2x32(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 4)?;
    for i in 0..4 {
        check_dtype(inputs, i, |d| d == DType::U32, "u32")?;
    }
    let mut acc = inputs[0].clone();
    for x in &inputs[1..] {
        acc = AbstractValue::new(binary_shape(&acc, x)?, DType::U32);
    }
    let out = AbstractValue::new(acc.shape, DType::U32);
    Ok(vec![out.clone(), out])
}

fn select_n(inputs: &[AbstractValue]) -> Rule {
    arity_at_least(inputs, 2)?;
    let which = &inputs[0];
    let cases = &inputs[1..];
    check_dtype(
        inputs,
        0,
        |d| d == DType::Bool || d.is_int(),
        "bool or an integer dtype",
    )?;
    if which.dtype == DType::Bool && cases.len() > 2 {
        return Err(operands(format!(
            "a bool predicate selects between at most 2 cases, got {}",
            cases.len()
        )));
    }
    let first = &cases[0];
    for (i, c) in cases.iter().enumerate().skip(1) {
        if !c.same_type(first) {
            return Err(operands(format!(
                "case {i} has type {c} but case 0 has type {first}"
            )));
        }
    }
    if which.shape.rank() != 0 && which.shape != first.shape {
        return Err(operands(format!(
            "predicate shape {} must be scalar or the cases' shape {}",
            which.shape, first.shape
        )));
    }
    let weak = cases.iter().all(|c| c.weak_type);
    Ok(vec![first.clone().with_weak_type(weak)])
}

fn clamp(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 3)?;
    let (lo, x, hi) = (&inputs[0], &inputs[1], &inputs[2]);
    for (name, b) in [("min", lo), ("max", hi)] {
        if b.dtype != x.dtype {
            return Err(operands(format!(
                "{name} has dtype {} but the operand has dtype {}",
                b.dtype, x.dtype
            )));
        }
        if b.shape.rank() != 0 && b.shape != x.shape {
            return Err(operands(format!(
                "{name} has shape {} which is neither scalar nor the operand's {}",
                b.shape, x.shape
            )));
        }
    }
    // JAX's clamp takes any dtype (`bool` included); weakly typed if all three are.
    let weak = inputs.iter().all(|a| a.weak_type);
    Ok(vec![x.clone().with_weak_type(weak)])
}

fn reduce(
    inputs: &[AbstractValue],
    params: &Params,
    ok: impl Fn(DType) -> bool,
    expected: &str,
) -> Rule {
    arity(inputs, 1)?;
    check_dtype(inputs, 0, ok, expected)?;
    let x = &inputs[0];
    let axes = ints(params, "axes")?;
    let reduced = axes_mask("axes", axes, x.shape.rank())?;
    let kept = kept_dims(x.shape.dims(), &reduced);
    Ok(vec![
        AbstractValue::new(shape(&kept)?, x.dtype).with_weak_type(x.weak_type)
    ])
}

/// `reduce_precision`: a float operand, its type out (weak type kept, as JAX's); at
/// least one exponent bit, no negative mantissa bits (JAX's checks), and both counts
/// 32-bit integers (the StableHLO attributes' type).
fn reduce_precision(inputs: &[AbstractValue], params: &Params) -> Rule {
    let out = unary(inputs, DType::is_float, "a float dtype")?;
    for (name, least) in [("exponent_bits", 1), ("mantissa_bits", 0)] {
        let bits = int(params, name)?;
        if bits < least {
            let what = if least == 1 {
                "positive"
            } else {
                "non-negative"
            };
            return Err(bad(name, format!("must be {what}; got {bits}")));
        }
        if i32::try_from(bits).is_err() {
            return Err(bad(name, format!("{bits} does not fit a 32-bit integer")));
        }
    }
    Ok(out)
}

fn argminmax(inputs: &[AbstractValue], params: &Params) -> Rule {
    // JAX's argmax/argmin take any operand dtype, `bool` included.
    arity(inputs, 1)?;
    let x = &inputs[0];
    let axes = ints(params, "axes")?;
    if axes.len() != 1 {
        return Err(bad("axes", format!("takes exactly one axis, got {axes:?}")));
    }
    let reduced = axes_mask("axes", axes, x.shape.rank())?;
    if x.shape.dims()[axes[0] as usize] == 0 {
        return Err(bad("axes", format!("axis {} of {x} is empty", axes[0])));
    }
    let index_dtype = dtype(params, "index_dtype")?;
    if !index_dtype.is_int() {
        return Err(bad(
            "index_dtype",
            format!("must be an integer dtype, got {index_dtype}"),
        ));
    }
    let kept = kept_dims(x.shape.dims(), &reduced);
    Ok(vec![AbstractValue::new(shape(&kept)?, index_dtype)])
}

/// `sort`: operands of one shape (any dtypes), sorted together along `dimension` by
/// the first `num_keys`; the outputs are the operands' types (JAX's rule).
fn sort(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity_at_least(inputs, 1)?;
    let first = &inputs[0];
    if let Some(other) = inputs.iter().find(|a| a.shape != first.shape) {
        return Err(operands(format!(
            "Arguments to sort must have equal shapes, got: {} and {}",
            first.shape, other.shape
        )));
    }
    let dim = int(params, "dimension")?;
    axis_in(
        "dimension",
        dim,
        first.shape.rank(),
        format_args!("{first}"),
    )?;
    let keys = int(params, "num_keys")?;
    if keys < 1 || keys as usize > inputs.len() {
        return Err(bad(
            "num_keys",
            format!(
                "{keys} must be between 1 and {} (the operand count)",
                inputs.len()
            ),
        ));
    }
    Ok(inputs.to_vec())
}

/// `cumsum`, `cumprod`, `cummax`, `cummin`, `cumlogsumexp`: one numeric operand (a
/// float one for `cumlogsumexp`), scanned along `axis`; its type out.
fn cumulative(prim: Builtin, inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let ok = if prim == Builtin::Cumlogsumexp {
        x.dtype.is_float()
    } else {
        x.dtype != DType::Bool
    };
    if !ok {
        return Err(RuleError::DType {
            operand: 0,
            got: x.dtype,
            expected: if prim == Builtin::Cumlogsumexp {
                "a float dtype".into()
            } else {
                "a numeric dtype".into()
            },
        });
    }
    axis_in(
        "axis",
        int(params, "axis")?,
        x.shape.rank(),
        format_args!("{x}"),
    )?;
    Ok(vec![x.clone()])
}

/// `top_k`: the `k` largest elements along `axis` (any dtype, the operand's weak type)
/// and their `i32` positions.
fn top_k(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let axis = axis_in(
        "axis",
        int(params, "axis")?,
        x.shape.rank(),
        format_args!("{x}"),
    )?;
    let k = int(params, "k")?;
    let n = x.shape.dims()[axis];
    if k < 0 || k > n {
        return Err(bad(
            "k",
            format!("k argument to top_k must be between 0 and {n} (the size along axis {axis} of {x}), got {k}"),
        ));
    }
    if n > i64::from(i32::MAX) + 1 {
        return Err(bad(
            "axis",
            format!("top_k returns int32 indices, which overflow for an axis of {n}"),
        ));
    }
    let mut dims = x.shape.dims().to_vec();
    dims[axis] = k;
    let s = shape(&dims)?;
    Ok(vec![
        AbstractValue::new(s.clone(), x.dtype).with_weak_type(x.weak_type),
        AbstractValue::new(s, DType::I32),
    ])
}

fn broadcast_in_dim(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let out = shape(ints(params, "shape")?)?;
    let bdims = ints(params, "broadcast_dimensions")?;
    if bdims.len() != x.shape.rank() {
        return Err(bad(
            "broadcast_dimensions",
            format!(
                "has {} entries but the operand {x} has rank {}",
                bdims.len(),
                x.shape.rank()
            ),
        ));
    }
    check_axes("broadcast_dimensions", bdims, out.rank())?;
    for w in bdims.windows(2) {
        if w[0] >= w[1] {
            return Err(bad(
                "broadcast_dimensions",
                format!("{bdims:?} is not strictly increasing"),
            ));
        }
    }
    for (i, &bd) in bdims.iter().enumerate() {
        let (src, dst) = (x.shape.dims()[i], out.dims()[bd as usize]);
        if src != 1 && src != dst {
            return Err(operands(format!(
                "operand dimension {i} of {x} (size {src}) cannot broadcast to dimension {bd} of {out} (size {dst})"
            )));
        }
    }
    Ok(vec![
        AbstractValue::new(out, x.dtype).with_weak_type(x.weak_type)
    ])
}

fn reshape(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let out = shape(ints(params, "new_sizes")?)?;
    if out.size() != x.shape.size() {
        return Err(bad(
            "new_sizes",
            format!(
                "cannot reshape {x} ({} elements) to {out} ({} elements)",
                x.shape.size(),
                out.size()
            ),
        ));
    }
    if let Some(dims) = opt_ints(params, "dimensions") {
        if !is_permutation(dims, x.shape.rank()) {
            return Err(bad(
                "dimensions",
                format!("{dims:?} is not a permutation of the axes of {x}"),
            ));
        }
    }
    Ok(vec![
        AbstractValue::new(out, x.dtype).with_weak_type(x.weak_type)
    ])
}

fn concatenate(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity_at_least(inputs, 1)?;
    let dim = int(params, "dimension")?;
    let first = &inputs[0];
    let rank = first.shape.rank();
    let d = axis_in("dimension", dim, rank, format_args!("rank {rank}"))?;
    let mut total: i64 = 0;
    for (i, x) in inputs.iter().enumerate() {
        if x.dtype != first.dtype || x.shape.rank() != rank {
            return Err(operands(format!(
                "operand {i} has type {x} but operand 0 has type {first}"
            )));
        }
        for axis in 0..rank {
            if axis != d && x.shape.dims()[axis] != first.shape.dims()[axis] {
                return Err(operands(format!(
                    "operand {i} ({x}) and operand 0 ({first}) differ outside dimension {d}"
                )));
            }
        }
        total = total
            .checked_add(x.shape.dims()[d])
            .ok_or(RuleError::Shape(ShapeError::Overflow))?;
    }
    let mut dims = first.shape.dims().to_vec();
    dims[d] = total;
    let weak = inputs.iter().all(|x| x.weak_type);
    Ok(vec![
        AbstractValue::new(shape(&dims)?, first.dtype).with_weak_type(weak)
    ])
}

/// `stack[axis]`: one or more operands of one shape and dtype joined along a new axis
/// `axis` (in `0..=rank`) of size the operand count; weak only if all are (as JAX).
fn stack(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity_at_least(inputs, 1)?;
    let first = &inputs[0];
    let rank = first.shape.rank();
    let what = format_args!("rank {} (the operands' rank + 1)", rank + 1);
    let d = axis_in("axis", int(params, "axis")?, rank + 1, what)?;
    for (i, x) in inputs.iter().enumerate() {
        if x.dtype != first.dtype || x.shape != first.shape {
            return Err(operands(format!(
                "stack needs operands of one shape and dtype: operand {i} has type {x} \
                 but operand 0 has type {first}"
            )));
        }
    }
    let n = i64::try_from(inputs.len()).map_err(|_| RuleError::Shape(ShapeError::Overflow))?;
    let mut dims = first.shape.dims().to_vec();
    dims.insert(d, n);
    let weak = inputs.iter().all(|x| x.weak_type);
    Ok(vec![
        AbstractValue::new(shape(&dims)?, first.dtype).with_weak_type(weak)
    ])
}

/// The most results one `unstack` may have: its outputs are listed one by one, so an
/// axis larger than this is refused rather than allocated.
pub const MAX_UNSTACK_RESULTS: i64 = 1 << 20;

/// `unstack[axis]`: the operand (rank at least 1) cut into its `shape[axis]` slices
/// along `axis`, that axis removed from each.
fn unstack(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    if x.shape.rank() == 0 {
        return Err(operands(format!(
            "unstack requires arrays with rank > 0, got {x}"
        )));
    }
    let d = axis_in(
        "axis",
        int(params, "axis")?,
        x.shape.rank(),
        format_args!("{x}"),
    )?;
    let mut dims = x.shape.dims().to_vec();
    let n = dims.remove(d);
    if n > MAX_UNSTACK_RESULTS {
        return Err(bad(
            "axis",
            format!(
                "unstack of axis {d} of {x} would have {n} results (at most {MAX_UNSTACK_RESULTS})"
            ),
        ));
    }
    let out = AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type);
    Ok(vec![out; n as usize])
}

/// `tile[reps]`: the operand repeated `reps[i]` (non-negative) times along each axis.
fn tile(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let reps = ints(params, "reps")?;
    if reps.len() != x.shape.rank() {
        return Err(bad(
            "reps",
            format!(
                "reps length must be equal to the ndim of x, got len(reps)={} and x.ndim={}",
                reps.len(),
                x.shape.rank()
            ),
        ));
    }
    let mut dims = Vec::with_capacity(reps.len());
    for (&r, &n) in reps.iter().zip(x.shape.dims()) {
        if r < 0 {
            return Err(bad("reps", format!("{r} is a negative repeat count")));
        }
        dims.push(
            n.checked_mul(r)
                .ok_or(RuleError::Shape(ShapeError::Overflow))?,
        );
    }
    Ok(vec![
        AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type)
    ])
}

/// `split[sizes axis]`: the operand cut along `axis` into consecutive pieces of
/// `sizes` (non-negative, summing to the axis's size), one output each.
fn split(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let rank = x.shape.rank();
    let d = axis_in("axis", int(params, "axis")?, rank, format_args!("{x}"))?;
    let sizes = ints(params, "sizes")?;
    let mut total: i64 = 0;
    for &s in sizes {
        if s < 0 {
            return Err(bad("sizes", format!("{s} is a negative size")));
        }
        total = total
            .checked_add(s)
            .ok_or(RuleError::Shape(ShapeError::Overflow))?;
    }
    if total != x.shape.dims()[d] {
        return Err(bad(
            "sizes",
            format!(
                "the sizes add up to {total}, not to the size {} of axis {d} of {x}",
                x.shape.dims()[d]
            ),
        ));
    }
    let mut dims = x.shape.dims().to_vec();
    sizes
        .iter()
        .map(|&s| {
            dims[d] = s;
            Ok(AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type))
        })
        .collect()
}

fn slice(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let x = &inputs[0];
    let rank = x.shape.rank();
    let start = ints(params, "start_indices")?;
    let limit = ints(params, "limit_indices")?;
    let strides = opt_ints(params, "strides");
    for (name, v) in [("start_indices", start), ("limit_indices", limit)]
        .into_iter()
        .chain(strides.map(|s| ("strides", s)))
    {
        if v.len() != rank {
            return Err(bad(
                name,
                format!(
                    "has {} entries but the operand {x} has rank {rank}",
                    v.len()
                ),
            ));
        }
    }
    let mut dims = Vec::with_capacity(rank);
    for axis in 0..rank {
        let (s, l, n) = (start[axis], limit[axis], x.shape.dims()[axis]);
        let stride = strides.map_or(1, |st| st[axis]);
        if l > n {
            return Err(bad(
                "limit_indices",
                format!("limit {l} of axis {axis} is beyond its size in {x}"),
            ));
        }
        if s < 0 || s > l {
            return Err(bad(
                "start_indices",
                format!("slice {s}:{l} of axis {axis} of {x} is out of bounds"),
            ));
        }
        if stride < 1 {
            return Err(bad("strides", format!("stride {stride} must be positive")));
        }
        // ceil((l - s) / stride), without forming `l - s + stride - 1` (which overflows
        // for strides near i64::MAX); `0 <= s <= l` was checked.
        let len = l - s;
        dims.push(if len == 0 { 0 } else { (len - 1) / stride + 1 });
    }
    Ok(vec![
        AbstractValue::new(shape(&dims)?, x.dtype).with_weak_type(x.weak_type)
    ])
}

fn check_indices(inputs: &[AbstractValue], first: usize, rank: usize) -> Result<(), RuleError> {
    if inputs.len() - first != rank {
        return Err(RuleError::Arity {
            expected: format!("{} (operands and one index per axis)", first + rank),
            got: inputs.len(),
        });
    }
    for i in first..inputs.len() {
        let idx = &inputs[i];
        if idx.shape.rank() != 0 || !idx.dtype.is_int() {
            return Err(operands(format!(
                "index operand {i} must be an integer scalar, got {idx}"
            )));
        }
        // JAX: the indices are integers of one dtype.
        let idx0 = &inputs[first];
        if idx.dtype != idx0.dtype {
            return Err(operands(format!(
                "index operands must share one dtype: operand {first} is {idx0} but operand {i} is {idx}"
            )));
        }
    }
    Ok(())
}

fn dynamic_slice(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity_at_least(inputs, 1)?;
    let x = &inputs[0];
    check_indices(inputs, 1, x.shape.rank())?;
    let sizes = ints(params, "slice_sizes")?;
    if sizes.len() != x.shape.rank() {
        return Err(bad(
            "slice_sizes",
            format!(
                "has {} entries but the operand {x} has rank {}",
                sizes.len(),
                x.shape.rank()
            ),
        ));
    }
    for (axis, (&s, &n)) in sizes.iter().zip(x.shape.dims()).enumerate() {
        if s < 0 || s > n {
            return Err(bad(
                "slice_sizes",
                format!("size {s} of axis {axis} does not fit in {x}"),
            ));
        }
    }
    Ok(vec![
        AbstractValue::new(shape(sizes)?, x.dtype).with_weak_type(x.weak_type)
    ])
}

fn dynamic_update_slice(inputs: &[AbstractValue]) -> Rule {
    arity_at_least(inputs, 2)?;
    let (x, u) = (&inputs[0], &inputs[1]);
    if u.dtype != x.dtype || u.shape.rank() != x.shape.rank() {
        return Err(operands(format!(
            "update {u} does not match operand {x} in dtype and rank"
        )));
    }
    if u.shape
        .dims()
        .iter()
        .zip(x.shape.dims())
        .any(|(a, b)| a > b)
    {
        return Err(operands(format!("update {u} is larger than operand {x}")));
    }
    check_indices(inputs, 2, x.shape.rank())?;
    // JAX: weakly typed only if every operand (indices included) is.
    let weak = inputs.iter().all(|a| a.weak_type);
    Ok(vec![x.clone().with_weak_type(weak)])
}

fn dot_general(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    let (l, r) = (&inputs[0], &inputs[1]);
    let dn: &DotDimensionNumbers = match params.get("dimension_numbers") {
        Some(Param::DotDims(d)) => d,
        _ => {
            return Err(RuleError::MissingParam {
                name: "dimension_numbers",
            })
        }
    };
    let name = "dimension_numbers";
    if dn.lhs_contracting.len() != dn.rhs_contracting.len()
        || dn.lhs_batch.len() != dn.rhs_batch.len()
    {
        return Err(bad(
            name,
            format!("{dn}: lhs and rhs lists differ in length"),
        ));
    }
    let lhs_axes: Vec<i64> = dn
        .lhs_batch
        .iter()
        .chain(&dn.lhs_contracting)
        .copied()
        .collect();
    let rhs_axes: Vec<i64> = dn
        .rhs_batch
        .iter()
        .chain(&dn.rhs_contracting)
        .copied()
        .collect();
    let lhs_used = axes_mask(name, &lhs_axes, l.shape.rank())?;
    let rhs_used = axes_mask(name, &rhs_axes, r.shape.rank())?;
    for (&a, &b) in lhs_axes.iter().zip(&rhs_axes) {
        let (sa, sb) = (l.shape.dims()[a as usize], r.shape.dims()[b as usize]);
        if sa != sb {
            return Err(operands(format!(
                "lhs axis {a} of {l} (size {sa}) and rhs axis {b} of {r} (size {sb}) differ"
            )));
        }
    }
    let mut dims: Vec<i64> = dn
        .lhs_batch
        .iter()
        .map(|&a| l.shape.dims()[a as usize])
        .collect();
    dims.extend(kept_dims(l.shape.dims(), &lhs_used));
    dims.extend(kept_dims(r.shape.dims(), &rhs_used));
    // JAX (following XLA): operands of different dtypes give the more precise one; a
    // preferred element type may not be narrower than a non-float result.
    let result = if precision_key(l.dtype) >= precision_key(r.dtype) {
        l.dtype
    } else {
        r.dtype
    };
    let out_dtype = match params.get("preferred_element_type") {
        Some(Param::DType(p)) if *p != result => {
            if !result.is_float() && bit_width(*p) < bit_width(result) {
                return Err(bad(
                    "preferred_element_type",
                    format!("{p} is narrower than the result dtype {result}"),
                ));
            }
            *p
        }
        _ => result,
    };
    let weak = l.weak_type && r.weak_type;
    Ok(vec![
        AbstractValue::new(shape(&dims)?, out_dtype).with_weak_type(weak)
    ])
}

fn bit_width(d: DType) -> usize {
    if d == DType::Bool {
        1
    } else {
        8 * d.size_bytes()
    }
}

/// XLA's `HigherPrecisionType` order, as JAX's `dot_general` uses it: floats by exponent
/// range then mantissa, then everything by bit width, signed above unsigned.
fn precision_key(d: DType) -> (i32, i32, usize, bool) {
    let (maxexp, nmant) = match d {
        DType::F16 => (16, 10),
        DType::BF16 => (128, 7),
        DType::F32 => (128, 23),
        DType::F64 => (1024, 52),
        _ => (-1, -1),
    };
    let signed = !matches!(d.kind(), crate::dtype::DTypeKind::UnsignedInt);
    (maxexp, nmant, bit_width(d), signed)
}

fn sub_types_err(
    param: &str,
    what: &str,
    got: &[AbstractValue],
    want: &[AbstractValue],
) -> RuleError {
    RuleError::SubJaxpr {
        reason: format!(
            "{param}: {what} {} differ from {}",
            types_list(got),
            types_list(want)
        ),
    }
}

fn cond(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity_at_least(inputs, 1)?;
    let index = &inputs[0];
    // JAX's cond typecheck wants an i32 scalar (`lax.cond` converts a bool predicate).
    if index.shape.rank() != 0 || index.dtype != DType::I32 {
        return Err(operands(format!(
            "the branch index must be an i32 scalar, got {index}"
        )));
    }
    let branches = match params.get("branches") {
        Some(Param::Jaxprs(b)) => b,
        _ => return Err(RuleError::MissingParam { name: "branches" }),
    };
    if branches.is_empty() {
        return Err(bad("branches", "needs at least one branch"));
    }
    let ops = &inputs[1..];
    let out0 = branches[0].out_avals();
    for (i, b) in branches.iter().enumerate() {
        let ins = b.in_avals();
        if !same_types(ops, &ins) {
            return Err(sub_types_err(
                "branches",
                &format!("branch {i} takes"),
                &ins,
                ops,
            ));
        }
        let outs = b.out_avals();
        if !same_types(&outs, &out0) {
            return Err(sub_types_err(
                "branches",
                &format!("branch {i} returns"),
                &outs,
                &out0,
            ));
        }
    }
    Ok(out0)
}

fn count(params: &Params, name: &'static str, limit: usize) -> Result<usize, RuleError> {
    let n = int(params, name)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= limit)
        .ok_or_else(|| bad(name, format!("{n} is out of range (0..={limit})")))
}

fn while_loop(inputs: &[AbstractValue], params: &Params) -> Rule {
    let cond_j = jaxpr(params, "cond_jaxpr")?;
    let body_j = jaxpr(params, "body_jaxpr")?;
    let cn = count(params, "cond_nconsts", inputs.len())?;
    let bn = count(params, "body_nconsts", inputs.len() - cn)?;
    let (cond_consts, rest) = inputs.split_at(cn);
    let (body_consts, carry) = rest.split_at(bn);
    let cond_in: Vec<AbstractValue> = cond_consts.iter().chain(carry).cloned().collect();
    if !same_types(&cond_j.in_avals(), &cond_in) {
        return Err(sub_types_err(
            "cond_jaxpr",
            "inputs",
            &cond_j.in_avals(),
            &cond_in,
        ));
    }
    let cond_out = cond_j.out_avals();
    if cond_out.len() != 1 || cond_out[0].dtype != DType::Bool {
        return Err(RuleError::SubJaxpr {
            reason: format!(
                "cond_jaxpr must return one bool[] (or a batched bool[s...]) but returns {}",
                types_list(&cond_out)
            ),
        });
    }
    // JAX's batched predicate: `bool[s...]` where `s` prefixes the shape of every carry
    // (the loop runs while any element is true; lanes whose element is false keep their
    // carry).
    let pred = cond_out[0].shape.dims();
    if let Some(c) = carry.iter().find(|c| !c.shape.dims().starts_with(pred)) {
        return Err(RuleError::SubJaxpr {
            reason: format!(
                "cond_jaxpr returns {}, a batched predicate whose shape {:?} is not a \
                 prefix of the shape of every carry: carry {c} does not start with it \
                 (carries {})",
                types_list(&cond_out),
                pred,
                types_list(carry)
            ),
        });
    }
    let body_in: Vec<AbstractValue> = body_consts.iter().chain(carry).cloned().collect();
    if !same_types(&body_j.in_avals(), &body_in) {
        return Err(sub_types_err(
            "body_jaxpr",
            "inputs",
            &body_j.in_avals(),
            &body_in,
        ));
    }
    let body_out = body_j.out_avals();
    if !same_types(&body_out, carry) {
        return Err(sub_types_err("body_jaxpr", "outputs", &body_out, carry));
    }
    // JAX gives the body's output types (their weak types included).
    Ok(body_out)
}

fn scan(inputs: &[AbstractValue], params: &Params) -> Rule {
    let body = jaxpr(params, "jaxpr")?;
    let length = int(params, "length")?;
    if length < 0 {
        return Err(bad("length", format!("{length} is negative")));
    }
    let nc = count(params, "num_consts", inputs.len())?;
    let ncarry = count(params, "num_carry", inputs.len() - nc)?;
    // An empty `linear` may be stored as either kind of empty tuple.
    let linear_len = match params.get("linear") {
        Some(Param::Bools(lin)) => Some(lin.len()),
        Some(Param::Ints(lin)) => Some(lin.len()),
        _ => None,
    };
    if let Some(n) = linear_len {
        if n != inputs.len() {
            return Err(bad(
                "linear",
                format!("has {n} entries for {} operands", inputs.len()),
            ));
        }
    }
    let (consts, rest) = inputs.split_at(nc);
    let (carry, xs) = rest.split_at(ncarry);
    let mut body_in: Vec<AbstractValue> = consts.iter().chain(carry).cloned().collect();
    for (i, x) in xs.iter().enumerate() {
        if x.shape.rank() == 0 || x.shape.dims()[0] != length {
            return Err(operands(format!(
                "scanned operand {} ({x}) must have leading dimension {length}",
                nc + ncarry + i
            )));
        }
        body_in.push(AbstractValue::new(shape(&x.shape.dims()[1..])?, x.dtype));
    }
    if !same_types(&body.in_avals(), &body_in) {
        return Err(sub_types_err("jaxpr", "inputs", &body.in_avals(), &body_in));
    }
    let outs = body.out_avals();
    if outs.len() < ncarry || !same_types(&outs[..ncarry], carry) {
        return Err(sub_types_err(
            "jaxpr",
            "carry outputs",
            &outs[..ncarry.min(outs.len())],
            carry,
        ));
    }
    // JAX: the body's carry output types, then each `y` stacked `length` times (weak
    // types kept).
    let mut result: Vec<AbstractValue> = outs[..ncarry].to_vec();
    for y in &outs[ncarry..] {
        let mut dims = vec![length];
        dims.extend_from_slice(y.shape.dims());
        result.push(AbstractValue::new(shape(&dims)?, y.dtype).with_weak_type(y.weak_type));
    }
    Ok(result)
}
