//! The first-order built-in primitives on host arrays.
//!
//! Each function takes operands the typechecker has accepted (the jaxpr invariants), but
//! none indexes or unwraps on that trust: a broken assumption is an
//! [`EvalError::Internal`], never a panic.

use super::array::{by_kind, Elem, HostArray, HostData};
use super::numeric::{
    float_sign, float_to_int, fmax, fmin, int_cmp, int_div, int_max, int_min, int_min_max, int_rem,
    int_to_float, mulhi, round_float, shift_left, shift_right_arithmetic, shift_right_logical,
    wrap_int,
};
use super::EvalError;
use crate::aval::Shape;
use crate::dtype::{DType, DTypeKind};
use crate::jaxpr::ClosedJaxpr;
use crate::params::{DotDimensionNumbers, Param, Params};
use crate::primitive::Builtin;
use std::cmp::Ordering;

type R<T> = Result<T, EvalError>;

pub(super) fn internal(reason: impl Into<String>) -> EvalError {
    EvalError::Internal {
        reason: reason.into(),
    }
}

fn wrong_dtype(prim: Builtin, dtype: DType) -> EvalError {
    internal(format!("{} does not apply to dtype {dtype}", prim.name()))
}

// ----- Params -----

pub(super) fn param_ints<'a>(params: &'a Params, name: &str) -> R<&'a [i64]> {
    match params.get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(internal(format!("param '{name}' is not a tuple of ints"))),
    }
}

pub(super) fn param_int(params: &Params, name: &str) -> R<i64> {
    match params.get(name) {
        Some(Param::Int(v)) => Ok(*v),
        _ => Err(internal(format!("param '{name}' is not an int"))),
    }
}

pub(super) fn param_bool(params: &Params, name: &str) -> R<bool> {
    match params.get(name) {
        Some(Param::Bool(v)) => Ok(*v),
        _ => Err(internal(format!("param '{name}' is not a bool"))),
    }
}

fn param_dtype(params: &Params, name: &str) -> R<DType> {
    match params.get(name) {
        Some(Param::DType(d)) => Ok(*d),
        _ => Err(internal(format!("param '{name}' is not a dtype"))),
    }
}

pub(super) fn param_jaxpr<'a>(params: &'a Params, name: &str) -> R<&'a ClosedJaxpr> {
    match params.get(name) {
        Some(Param::Jaxpr(j)) => Ok(j),
        _ => Err(internal(format!("param '{name}' is not a jaxpr"))),
    }
}

pub(super) fn param_jaxprs<'a>(params: &'a Params, name: &str) -> R<&'a [ClosedJaxpr]> {
    match params.get(name) {
        Some(Param::Jaxprs(js)) => Ok(js),
        _ => Err(internal(format!("param '{name}' is not a tuple of jaxprs"))),
    }
}

/// A count param (`length`, `num_consts`, ...) as a `usize`.
pub(super) fn param_count(params: &Params, name: &str) -> R<usize> {
    let n = param_int(params, name)?;
    usize::try_from(n).map_err(|_| internal(format!("param '{name}' is negative ({n})")))
}

// ----- Indexing -----

pub(super) fn dims_of(shape: &Shape) -> Vec<usize> {
    shape.dims().iter().map(|&d| d as usize).collect()
}

pub(super) fn shape_of(dims: &[usize]) -> R<Shape> {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    Shape::new(&dims).map_err(|e| internal(format!("bad result shape {dims:?}: {e}")))
}

/// Row-major strides of the dimensions.
pub(super) fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![0; dims.len()];
    let mut acc = 1usize;
    for i in (0..dims.len()).rev() {
        s[i] = acc;
        acc = acc.saturating_mul(dims[i]);
    }
    s
}

/// Calls `f` with every multi-index of `dims`, in row-major order (once, with `[]`, for a
/// scalar; never for an empty shape).
pub(super) fn for_each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut axis = dims.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < dims[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
}

/// For every multi-index of `dims` in row-major order, the value of `f`.
pub(super) fn index_map(dims: &[usize], mut f: impl FnMut(&[usize]) -> usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(dims.iter().product());
    for_each_index(dims, |idx| out.push(f(idx)));
    out
}

fn gather_t<T: Elem>(src: &HostData, positions: &[usize]) -> R<HostData> {
    let s = T::slice(src).ok_or_else(|| internal("data kind changed during a gather"))?;
    let mut out = Vec::with_capacity(positions.len());
    for &p in positions {
        out.push(
            *s.get(p)
                .ok_or_else(|| internal(format!("gather position {p} is out of range")))?,
        );
    }
    Ok(T::data(out))
}

/// The elements of `x` at these row-major positions.
pub(super) fn gather(x: &HostArray, positions: &[usize]) -> R<HostData> {
    by_kind!(&x.data, gather_t(&x.data, positions))
}

fn range_t<T: Elem>(src: &HostData, start: usize, end: usize) -> R<HostData> {
    T::slice(src)
        .and_then(|s| s.get(start..end))
        .map(|s| T::data(s.to_vec()))
        .ok_or_else(|| internal(format!("range {start}..{end} is out of range")))
}

/// Element `i` along the leading axis of `x` (a scan's slice of an `xs` operand).
pub(super) fn index_leading(x: &HostArray, i: usize) -> R<HostArray> {
    let dims = dims_of(&x.shape);
    let Some((_, rest)) = dims.split_first() else {
        return Err(internal("cannot index a scalar along its leading axis"));
    };
    let inner: usize = rest.iter().product();
    let data = by_kind!(&x.data, range_t(&x.data, i * inner, (i + 1) * inner))?;
    Ok(HostArray {
        shape: shape_of(rest)?,
        dtype: x.dtype,
        data,
    })
}

fn concat_data_t<T: Elem>(parts: &[&HostData], outer: usize, blocks: &[usize]) -> R<HostData> {
    let slices: Vec<&[T]> = parts
        .iter()
        .map(|d| T::slice(d).ok_or_else(|| internal("concatenated operands differ in kind")))
        .collect::<R<_>>()?;
    let mut out = Vec::with_capacity(blocks.iter().sum::<usize>() * outer);
    for o in 0..outer {
        for (s, &b) in slices.iter().zip(blocks) {
            let block = s
                .get(o * b..(o + 1) * b)
                .ok_or_else(|| internal("concatenated block out of range"))?;
            out.extend_from_slice(block);
        }
    }
    Ok(T::data(out))
}

/// Stacks arrays of one type along a new leading axis into an array of `shape` (whose
/// leading dimension is the number of parts).
pub(super) fn stack(parts: &[HostArray], shape: Shape, dtype: DType) -> R<HostArray> {
    let n = shape.size() as usize;
    let Some(first) = parts.first() else {
        if n != 0 {
            return Err(internal("stacking no arrays into a non-empty shape"));
        }
        return Ok(HostArray::zeros(shape, dtype));
    };
    let datas: Vec<&HostData> = parts.iter().map(|p| &p.data).collect();
    let blocks: Vec<usize> = parts.iter().map(HostArray::len).collect();
    let data = by_kind!(&first.data, concat_data_t(&datas, 1, &blocks))?;
    if data.len() != n {
        return Err(internal("stacked arrays do not fill the result shape"));
    }
    Ok(HostArray { shape, dtype, data })
}

// ----- Dispatch -----

fn arg<'x>(ins: &[&'x HostArray], i: usize) -> R<&'x HostArray> {
    ins.get(i)
        .copied()
        .ok_or_else(|| internal(format!("missing operand {i}")))
}

/// Applies a first-order built-in to its operands.
pub(super) fn apply(prim: Builtin, ins: &[&HostArray], params: &Params) -> R<Vec<HostArray>> {
    use Builtin::*;
    let out = match prim {
        Neg | Abs | Sign | Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Tanh | Logistic | Sqrt
        | Rsqrt | Square | Not | Copy | Floor | Ceil => unary(prim, arg(ins, 0)?)?,
        ErfInv | Erf | Erfc | Lgamma | Digamma | Exp2 | Cbrt | Asin | Acos | Atan | Sinh | Cosh
        | Asinh | Acosh | Atanh => unary(prim, arg(ins, 0)?)?,
        Atan2 => binary(prim, arg(ins, 0)?, arg(ins, 1)?)?,
        Nextafter => super::bits::nextafter(arg(ins, 0)?, arg(ins, 1)?)?,
        Igamma | Igammac | IgammaGradA => binary(prim, arg(ins, 0)?, arg(ins, 1)?)?,
        ReducePrecision => super::bits::reduce_precision(
            arg(ins, 0)?,
            param_int(params, "exponent_bits")?,
            param_int(params, "mantissa_bits")?,
        )?,
        IsFinite => is_finite(arg(ins, 0)?)?,
        Round => round(arg(ins, 0)?, param_int(params, "rounding_method")?)?,
        PopulationCount | Clz => super::bits::count_bits(prim, arg(ins, 0)?)?,
        BitcastConvertType => {
            super::bits::bitcast_convert_type(arg(ins, 0)?, param_dtype(params, "new_dtype")?)?
        }
        Threefry2x32 => return super::bits::threefry2x32(ins),
        RandomSeed => super::random::random_seed(arg(ins, 0)?)?,
        RandomWrap => super::random::random_wrap(arg(ins, 0)?)?,
        RandomUnwrap => super::random::random_unwrap(arg(ins, 0)?)?,
        RandomBits => super::random::random_bits(arg(ins, 0)?, params)?,
        RandomSplit => super::random::random_split(arg(ins, 0)?, params)?,
        RandomFoldIn => super::random::random_fold_in(arg(ins, 0)?, arg(ins, 1)?)?,
        RandomClone => arg(ins, 0)?.clone(),
        IntegerPow => integer_pow(arg(ins, 0)?, param_int(params, "y")?)?,
        Pow => pow(arg(ins, 0)?, arg(ins, 1)?)?,
        Add | Sub | Mul | Div | Rem | Max | Min | And | Or | Xor | ShiftLeft
        | ShiftRightLogical | ShiftRightArithmetic | Mulhi | Eq | Ne | Lt | Le | Gt | Ge => {
            binary(prim, arg(ins, 0)?, arg(ins, 1)?)?
        }
        // The shape rule makes both operands of one type, so this is add without
        // broadcasting.
        AddAny => binary(Add, arg(ins, 0)?, arg(ins, 1)?)?,
        SelectN => select_n(arg(ins, 0)?, ins.get(1..).unwrap_or(&[]))?,
        Clamp => {
            let lower = binary(Max, arg(ins, 1)?, arg(ins, 0)?)?;
            binary(Min, &lower, arg(ins, 2)?)?
        }
        ConvertElementType => convert(arg(ins, 0)?, param_dtype(params, "new_dtype")?)?,
        ReduceSum | ReduceMax | ReduceMin | ReduceProd | ReduceAnd | ReduceOr | ReduceXor => {
            reduce(prim, arg(ins, 0)?, param_ints(params, "axes")?)?
        }
        Argmax | Argmin => arg_extreme(
            prim,
            arg(ins, 0)?,
            param_ints(params, "axes")?,
            param_dtype(params, "index_dtype")?,
        )?,
        BroadcastInDim => broadcast_in_dim(
            arg(ins, 0)?,
            param_ints(params, "shape")?,
            param_ints(params, "broadcast_dimensions")?,
        )?,
        Reshape => reshape(arg(ins, 0)?, params)?,
        Transpose => transpose(arg(ins, 0)?, param_ints(params, "permutation")?)?,
        Squeeze => squeeze(arg(ins, 0)?, param_ints(params, "dimensions")?)?,
        ExpandDims => expand_dims(arg(ins, 0)?, param_ints(params, "dimensions")?)?,
        Concatenate => concatenate(ins, param_int(params, "dimension")?)?,
        Split => {
            return split(
                arg(ins, 0)?,
                param_ints(params, "sizes")?,
                param_int(params, "axis")?,
            )
        }
        Stack => stack_along(ins, param_int(params, "axis")?)?,
        Unstack => return unstack(arg(ins, 0)?, param_int(params, "axis")?),
        Tile => tile(arg(ins, 0)?, param_ints(params, "reps")?)?,
        OptimizationBarrier => return Ok(ins.iter().map(|&x| x.clone()).collect()),
        Slice => slice(arg(ins, 0)?, params)?,
        DynamicSlice => dynamic_slice(
            arg(ins, 0)?,
            ins.get(1..).unwrap_or(&[]),
            param_ints(params, "slice_sizes")?,
        )?,
        DynamicUpdateSlice => {
            dynamic_update_slice(arg(ins, 0)?, arg(ins, 1)?, ins.get(2..).unwrap_or(&[]))?
        }
        DotGeneral => dot_general(arg(ins, 0)?, arg(ins, 1)?, params)?,
        ConvGeneralDilated => {
            super::conv::conv_general_dilated(arg(ins, 0)?, arg(ins, 1)?, params)?
        }
        Iota => iota(
            param_dtype(params, "dtype")?,
            param_ints(params, "shape")?,
            param_int(params, "dimension")?,
        )?,
        Gather => super::indexing::gather(arg(ins, 0)?, arg(ins, 1)?, params)?,
        Scatter | ScatterAdd | ScatterSub | ScatterMul | ScatterMin | ScatterMax => {
            super::indexing::scatter(prim, arg(ins, 0)?, arg(ins, 1)?, arg(ins, 2)?, params)?
        }
        Rev => super::indexing::rev(arg(ins, 0)?, param_ints(params, "dimensions")?)?,
        Sort => {
            return super::sorting::sort(
                ins,
                param_int(params, "dimension")?,
                param_int(params, "num_keys")?,
            )
        }
        Cholesky => super::linalg::cholesky(arg(ins, 0)?)?,
        TriangularSolve => super::linalg::triangular_solve(
            arg(ins, 0)?,
            arg(ins, 1)?,
            super::linalg::TriangularSolve {
                left_side: param_bool(params, "left_side")?,
                lower: param_bool(params, "lower")?,
                transpose_a: param_bool(params, "transpose_a")?,
                unit_diagonal: param_bool(params, "unit_diagonal")?,
            },
        )?,
        Lu => return super::linalg::lu(arg(ins, 0)?),
        Eigh => return super::linalg::eigh(arg(ins, 0)?, param_bool(params, "lower")?),
        Svd => {
            return super::linalg::svd(
                arg(ins, 0)?,
                param_bool(params, "full_matrices")?,
                param_bool(params, "compute_uv")?,
            )
        }
        Qr => {
            return super::linalg::qr(
                arg(ins, 0)?,
                param_bool(params, "full_matrices")?,
                param_bool(params, "pivoting")?,
            )
        }
        Geqp3 => return super::linalg::geqp3(arg(ins, 0)?, arg(ins, 1)?),
        Geqrf => return super::linalg::geqrf(arg(ins, 0)?),
        HouseholderProduct => super::linalg::householder_product(arg(ins, 0)?, arg(ins, 1)?)?,
        TopK => {
            return super::sorting::top_k(
                arg(ins, 0)?,
                param_int(params, "axis")?,
                param_int(params, "k")?,
            )
        }
        Cumsum | Cumprod | Cummax | Cummin | Cumlogsumexp => super::sorting::cumulative(
            prim,
            arg(ins, 0)?,
            param_int(params, "axis")?,
            param_bool(params, "reverse")?,
        )?,
        Pad => pad(arg(ins, 0)?, arg(ins, 1)?, params)?,
        ReduceWindowSum | ReduceWindowMax | ReduceWindowMin => {
            super::windowed::reduce_window_monoid(prim, arg(ins, 0)?, params)?
        }
        ReduceWindow => return super::windowed::reduce_window(ins, params),
        SelectAndGatherAdd => {
            super::windowed::select_and_gather_add(arg(ins, 0)?, arg(ins, 1)?, params)?
        }
        SelectAndScatterAdd => {
            super::windowed::select_and_scatter_add(arg(ins, 0)?, arg(ins, 1)?, params)?
        }
        StopGradient | ShardingConstraint => arg(ins, 0)?.clone(),
        // A collective outside a shard_map has no meaning on one device (the shape rule
        // refuses it in a closed axis environment).
        Psum | Pmax | Pmin | Pvary | AllGather | ReduceScatter | Ppermute | AllToAll
        | AxisIndex => {
            return Err(super::EvalError::Unsupported {
                what: format!("{} outside a shard_map", prim.name()),
            })
        }
        // The evaluator cannot call into the host: a debug callback does nothing here
        // (its side effect is the host's), and a pure callback's values only the host
        // can compute.
        DebugCallback | DebugPrint => return Ok(Vec::new()),
        PureCallback | IoCallback => {
            return Err(super::EvalError::Unsupported {
                what: format!(
                    "{} (the reference evaluator cannot call the host)",
                    prim.name()
                ),
            })
        }
        Jit | Cond | While | Scan | CustomJvpCall | CustomVjpCall | Remat | ShardMap => {
            return Err(internal(format!(
                "{} is higher-order: the frame machine evaluates it",
                prim.name()
            )))
        }
    };
    Ok(vec![out])
}

// ----- Element-wise -----

fn logistic(a: f64) -> f64 {
    1.0 / (1.0 + (-a).exp())
}

/// `is_finite`: neither infinite nor NaN.
fn is_finite(x: &HostArray) -> R<HostArray> {
    let HostData::Float(v) = &x.data else {
        return Err(wrong_dtype(Builtin::IsFinite, x.dtype));
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: DType::Bool,
        data: HostData::Bool(v.iter().map(|a| a.is_finite()).collect()),
    })
}

/// `round`: half-way cases away from zero (`rounding_method` 0) or to the even
/// neighbour (1).
fn round(x: &HostArray, method: i64) -> R<HostArray> {
    let HostData::Float(v) = &x.data else {
        return Err(wrong_dtype(Builtin::Round, x.dtype));
    };
    let f: fn(f64) -> f64 = if method == 0 {
        f64::round
    } else {
        f64::round_ties_even
    };
    let data = HostData::Float(v.iter().map(|&a| round_float(x.dtype, f(a))).collect());
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: x.dtype,
        data,
    })
}

fn unary(prim: Builtin, x: &HostArray) -> R<HostArray> {
    use Builtin::*;
    let dt = x.dtype;
    let data = match &x.data {
        HostData::Float(v) => {
            let f: fn(f64) -> f64 = match prim {
                Neg => |a| -a,
                Abs => f64::abs,
                Sign => float_sign,
                Exp => f64::exp,
                Log => f64::ln,
                Log1p => f64::ln_1p,
                Expm1 => f64::exp_m1,
                Sin => f64::sin,
                Cos => f64::cos,
                Tan => f64::tan,
                Tanh => f64::tanh,
                Logistic => logistic,
                Sqrt => f64::sqrt,
                Rsqrt => |a| 1.0 / a.sqrt(),
                Square => |a| a * a,
                Copy => |a| a,
                Floor => f64::floor,
                Ceil => f64::ceil,
                ErfInv => super::special::erf_inv,
                Erf => super::special::erf,
                Erfc => super::special::erfc,
                Lgamma => super::special::lgamma,
                Digamma => super::special::digamma,
                Exp2 => f64::exp2,
                Cbrt => f64::cbrt,
                Asin => f64::asin,
                Acos => f64::acos,
                Atan => f64::atan,
                Sinh => f64::sinh,
                Cosh => f64::cosh,
                Asinh => f64::asinh,
                Acosh => f64::acosh,
                Atanh => f64::atanh,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Float(v.iter().map(|&a| round_float(dt, f(a))).collect())
        }
        HostData::Int(v) => {
            let f: fn(i64) -> i64 = match prim {
                Neg => i64::wrapping_neg,
                Abs => i64::wrapping_abs,
                Sign if dt.kind() == DTypeKind::UnsignedInt => |a| i64::from(a != 0),
                Sign => i64::signum,
                Square => |a| a.wrapping_mul(a),
                Not => |a| !a,
                Copy => |a| a,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Int(v.iter().map(|&a| wrap_int(dt, f(a))).collect())
        }
        HostData::Bool(v) => {
            let f: fn(bool) -> bool = match prim {
                Not => |a| !a,
                Copy => |a| a,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Bool(v.iter().map(|&a| f(a)).collect())
        }
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: dt,
        data,
    })
}

/// `x ** y` as JAX lowers `integer_pow`: square-and-multiply in the dtype (each product
/// rounded or wrapped), then `1 / acc` (the dtype's division) for a negative `y`.
fn integer_pow(x: &HostArray, y: i64) -> R<HostArray> {
    fn power<T: Copy>(x: T, y: i64, one: T, mul: impl Fn(T, T) -> T, recip: impl Fn(T) -> T) -> T {
        if y == 0 {
            return one;
        }
        let mut e = y.unsigned_abs();
        let mut base = x;
        let mut acc: Option<T> = None;
        while e > 0 {
            if e & 1 == 1 {
                acc = Some(match acc {
                    None => base,
                    Some(a) => mul(a, base),
                });
            }
            e >>= 1;
            if e > 0 {
                base = mul(base, base);
            }
        }
        let acc = acc.unwrap_or(one);
        if y < 0 {
            recip(acc)
        } else {
            acc
        }
    }
    let dt = x.dtype;
    let data = match &x.data {
        HostData::Float(v) => HostData::Float(
            v.iter()
                .map(|&a| {
                    power(
                        a,
                        y,
                        1.0,
                        |p, q| round_float(dt, p * q),
                        |p| round_float(dt, 1.0 / p),
                    )
                })
                .collect(),
        ),
        HostData::Int(v) => HostData::Int(
            v.iter()
                .map(|&a| {
                    power(
                        a,
                        y,
                        1,
                        |p, q| wrap_int(dt, p.wrapping_mul(q)),
                        |p| int_div(dt, 1, p),
                    )
                })
                .collect(),
        ),
        HostData::Bool(_) => return Err(wrong_dtype(Builtin::IntegerPow, dt)),
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: dt,
        data,
    })
}

/// `pow(x, y)`: a float base, and an exponent of the base's dtype or of an integer dtype,
/// which is first converted to the base's dtype (as JAX lowers it).
fn pow(x: &HostArray, y: &HostArray) -> R<HostArray> {
    if y.dtype == x.dtype {
        binary(Builtin::Pow, x, y)
    } else {
        binary(Builtin::Pow, x, &convert(y, x.dtype)?)
    }
}

fn is_comparison(prim: Builtin) -> bool {
    use Builtin::*;
    matches!(prim, Eq | Ne | Lt | Le | Gt | Ge)
}

/// A comparison's result from the operands' order (`None`: unordered, a NaN).
fn compare(prim: Builtin, ord: Option<Ordering>) -> bool {
    use Builtin::*;
    use Ordering::*;
    match prim {
        Eq => ord == Some(Equal),
        Ne => ord != Some(Equal),
        Lt => ord == Some(Less),
        Le => matches!(ord, Some(Less | Equal)),
        Gt => ord == Some(Greater),
        Ge => matches!(ord, Some(Greater | Equal)),
        _ => false,
    }
}

/// The step of an operand of `len` elements read by a result of `n` elements: element
/// `i` reads position `i * step`, so 1 for a full operand and 0 for a broadcast scalar.
pub(super) fn step_of(len: usize, n: usize) -> R<usize> {
    if len == n {
        Ok(1)
    } else if len == 1 {
        Ok(0)
    } else {
        Err(internal(format!(
            "an operand of {len} elements does not broadcast to {n}"
        )))
    }
}

/// The result shape of a binary element-wise op: the operands' common shape, the other
/// operand's shape when one is a scalar, or, for operands of equal rank, each dimension
/// the one that is not 1.
pub(super) fn binary_shape(x: &HostArray, y: &HostArray) -> R<Shape> {
    let dims = x.shape.binary_broadcast(&y.shape).map_err(|_| {
        internal(format!(
            "shapes {} and {} do not broadcast",
            x.shape, y.shape
        ))
    })?;
    Shape::new(&dims).map_err(|e| internal(e.to_string()))
}

/// An operand of an element-wise op as read by a result of `shape`: itself when it has
/// the result's size or one element (read with step 1 or 0), else stretched along its
/// size-1 dimensions (operands of the result's rank only).
pub(super) fn stretched<'a>(x: &'a HostArray, shape: &Shape) -> R<std::borrow::Cow<'a, HostArray>> {
    let n = shape.size() as usize;
    if x.len() == n || x.len() == 1 {
        return Ok(std::borrow::Cow::Borrowed(x));
    }
    let dims: Vec<i64> = (0..x.shape.rank() as i64).collect();
    Ok(std::borrow::Cow::Owned(broadcast_in_dim(
        x,
        shape.dims(),
        &dims,
    )?))
}

fn binary(prim: Builtin, x: &HostArray, y: &HostArray) -> R<HostArray> {
    use Builtin::*;
    if x.dtype != y.dtype {
        return Err(internal(format!(
            "{} of dtypes {} and {}",
            prim.name(),
            x.dtype,
            y.dtype
        )));
    }
    let dt = x.dtype;
    let shape = binary_shape(x, y)?;
    let n = shape.size() as usize;
    let (x, y) = (stretched(x, &shape)?, stretched(y, &shape)?);
    let (sx, sy) = (step_of(x.len(), n)?, step_of(y.len(), n)?);
    if is_comparison(prim) {
        let out: Vec<bool> = match (&x.data, &y.data) {
            (HostData::Float(a), HostData::Float(b)) => (0..n)
                .map(|i| compare(prim, a[i * sx].partial_cmp(&b[i * sy])))
                .collect(),
            (HostData::Int(a), HostData::Int(b)) => (0..n)
                .map(|i| compare(prim, Some(int_cmp(dt, a[i * sx], b[i * sy]))))
                .collect(),
            (HostData::Bool(a), HostData::Bool(b)) => (0..n)
                .map(|i| compare(prim, Some(a[i * sx].cmp(&b[i * sy]))))
                .collect(),
            _ => return Err(internal("operands of different kinds")),
        };
        return Ok(HostArray {
            shape,
            dtype: DType::Bool,
            data: HostData::Bool(out),
        });
    }
    let data = match (&x.data, &y.data) {
        (HostData::Float(a), HostData::Float(b)) => {
            let f: fn(f64, f64) -> f64 = match prim {
                Add => |p, q| p + q,
                Sub => |p, q| p - q,
                Mul => |p, q| p * q,
                Div => |p, q| p / q,
                Rem => |p, q| p % q,
                Pow => f64::powf,
                Atan2 => f64::atan2,
                Igamma => super::igamma::igamma,
                Igammac => super::igamma::igammac,
                IgammaGradA => super::igamma::igamma_grad_a,
                Max => fmax,
                Min => fmin,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Float(
                (0..n)
                    .map(|i| round_float(dt, f(a[i * sx], b[i * sy])))
                    .collect(),
            )
        }
        (HostData::Int(a), HostData::Int(b)) => {
            let f: fn(DType, i64, i64) -> i64 = match prim {
                Add => |_, p, q| p.wrapping_add(q),
                Sub => |_, p, q| p.wrapping_sub(q),
                Mul => |_, p, q| p.wrapping_mul(q),
                Div => int_div,
                Rem => int_rem,
                Max => int_max,
                Min => int_min,
                And => |_, p, q| p & q,
                Or => |_, p, q| p | q,
                Xor => |_, p, q| p ^ q,
                ShiftLeft => shift_left,
                ShiftRightLogical => shift_right_logical,
                ShiftRightArithmetic => shift_right_arithmetic,
                Mulhi => mulhi,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Int(
                (0..n)
                    .map(|i| wrap_int(dt, f(dt, a[i * sx], b[i * sy])))
                    .collect(),
            )
        }
        (HostData::Bool(a), HostData::Bool(b)) => {
            let f: fn(bool, bool) -> bool = match prim {
                And | Min => |p, q| p & q,
                Or | Max => |p, q| p | q,
                Xor => |p, q| p ^ q,
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Bool((0..n).map(|i| f(a[i * sx], b[i * sy])).collect())
        }
        _ => return Err(internal("operands of different kinds")),
    };
    Ok(HostArray {
        shape,
        dtype: dt,
        data,
    })
}

fn select_t<T: Elem>(cases: &[&HostArray], picks: &[usize]) -> R<HostData> {
    let srcs: Vec<&[T]> = cases
        .iter()
        .map(|c| T::slice(&c.data).ok_or_else(|| internal("select_n cases differ in kind")))
        .collect::<R<_>>()?;
    picks
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            srcs.get(k)
                .and_then(|s| s.get(i))
                .copied()
                .ok_or_else(|| internal("select_n pick out of range"))
        })
        .collect::<R<Vec<T>>>()
        .map(T::data)
}

/// `select_n(which, *cases)`: element `i` of the result is element `i` of
/// `cases[which[i]]`. A `which` outside `0..cases.len()` is clamped into range, which is
/// what JAX's lowering (a tree of `which < k` selects) computes; with a single case JAX
/// returns it whatever `which` is (`true` included).
fn select_n(which: &HostArray, cases: &[&HostArray]) -> R<HostArray> {
    let Some(first) = cases.first() else {
        return Err(internal("select_n without cases"));
    };
    let n = first.len();
    let sw = step_of(which.len(), n)?;
    let last = cases.len() - 1;
    let picks: Vec<usize> = match &which.data {
        HostData::Bool(w) => (0..n).map(|i| usize::from(w[i * sw]).min(last)).collect(),
        HostData::Int(w) => (0..n)
            .map(|i| {
                let k = w[i * sw];
                match int_cmp(which.dtype, k, 0) {
                    Ordering::Less => 0,
                    _ => usize::try_from(k).map_or(last, |k| k.min(last)),
                }
            })
            .collect(),
        HostData::Float(_) => return Err(internal("select_n with a float predicate")),
    };
    let data = by_kind!(&first.data, select_t(cases, &picks))?;
    Ok(HostArray {
        shape: first.shape.clone(),
        dtype: first.dtype,
        data,
    })
}

/// `convert_element_type`: floats round to nearest even; floats to integers truncate
/// toward zero and saturate (NaN to 0); integers wrap; anything to `bool` is `x != 0`
/// (NaN is true); `bool` to numbers is 0/1.
pub(super) fn convert(x: &HostArray, dst: DType) -> R<HostArray> {
    let src = x.dtype;
    let data = match &x.data {
        HostData::Bool(v) => {
            if dst == DType::Bool {
                HostData::Bool(v.clone())
            } else if dst.is_float() {
                HostData::Float(v.iter().map(|&b| f64::from(u8::from(b))).collect())
            } else {
                HostData::Int(v.iter().map(|&b| i64::from(b)).collect())
            }
        }
        HostData::Int(v) => {
            if dst == DType::Bool {
                HostData::Bool(v.iter().map(|&a| a != 0).collect())
            } else if dst.is_float() {
                HostData::Float(v.iter().map(|&a| int_to_float(src, a, dst)).collect())
            } else {
                HostData::Int(v.iter().map(|&a| wrap_int(dst, a)).collect())
            }
        }
        HostData::Float(v) => {
            if dst == DType::Bool {
                HostData::Bool(v.iter().map(|&a| a != 0.0).collect())
            } else if dst.is_float() {
                HostData::Float(v.iter().map(|&a| round_float(dst, a)).collect())
            } else {
                HostData::Int(v.iter().map(|&a| float_to_int(a, dst)).collect())
            }
        }
    };
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: dst,
        data,
    })
}

// ----- Reductions -----

/// Which axes of a rank-`rank` array are listed.
fn axis_mask(axes: &[i64], rank: usize) -> R<Vec<bool>> {
    let mut mask = vec![false; rank];
    for &a in axes {
        let slot = usize::try_from(a)
            .ok()
            .and_then(|a| mask.get_mut(a))
            .ok_or_else(|| internal(format!("axis {a} out of range for rank {rank}")))?;
        *slot = true;
    }
    Ok(mask)
}

/// Folds every element into the accumulator of its result position.
fn fold<T: Copy>(
    v: &[T],
    out_pos: &[usize],
    m: usize,
    init: T,
    f: impl Fn(T, T) -> T,
) -> R<Vec<T>> {
    let mut acc = vec![init; m];
    for (&a, &p) in v.iter().zip(out_pos) {
        let slot = acc
            .get_mut(p)
            .ok_or_else(|| internal("reduction position out of range"))?;
        *slot = f(*slot, a);
    }
    Ok(acc)
}

/// Reductions. Floats accumulate in `f64` in row-major order and round once at the end;
/// integers accumulate with wrapping arithmetic (the same result as wrapping after every
/// step). Empty reductions give the identity.
fn reduce(prim: Builtin, x: &HostArray, axes: &[i64]) -> R<HostArray> {
    use Builtin::*;
    let dims = dims_of(&x.shape);
    let mask = axis_mask(axes, dims.len())?;
    let out_dims: Vec<usize> = dims
        .iter()
        .zip(&mask)
        .filter(|(_, &m)| !m)
        .map(|(&d, _)| d)
        .collect();
    let out_strides = strides(&out_dims);
    let out_pos = index_map(&dims, |idx| {
        idx.iter()
            .zip(&mask)
            .filter(|(_, &m)| !m)
            .zip(&out_strides)
            .map(|((&i, _), &s)| i * s)
            .sum()
    });
    let m: usize = out_dims.iter().product();
    let dt = x.dtype;
    let data = match &x.data {
        HostData::Float(v) => {
            let (init, f): (f64, fn(f64, f64) -> f64) = match prim {
                ReduceSum => (0.0, |p, q| p + q),
                ReduceProd => (1.0, |p, q| p * q),
                ReduceMax => (f64::NEG_INFINITY, fmax),
                ReduceMin => (f64::INFINITY, fmin),
                _ => return Err(wrong_dtype(prim, dt)),
            };
            let acc = fold(v, &out_pos, m, init, f)?;
            HostData::Float(acc.into_iter().map(|a| round_float(dt, a)).collect())
        }
        HostData::Int(v) => {
            let (lo, hi) = int_min_max(dt);
            let (init, f): (i64, fn(DType, i64, i64) -> i64) = match prim {
                ReduceSum => (0, |_, p, q| p.wrapping_add(q)),
                ReduceProd => (1, |_, p, q| p.wrapping_mul(q)),
                ReduceMax => (lo, int_max),
                ReduceMin => (hi, int_min),
                // All ones (wrapped to the dtype below), as XLA's identity of and.
                ReduceAnd => (-1, |_, p, q| p & q),
                ReduceOr => (0, |_, p, q| p | q),
                ReduceXor => (0, |_, p, q| p ^ q),
                _ => return Err(wrong_dtype(prim, dt)),
            };
            let acc = fold(v, &out_pos, m, init, |p, q| f(dt, p, q))?;
            HostData::Int(acc.into_iter().map(|a| wrap_int(dt, a)).collect())
        }
        HostData::Bool(v) => {
            let (init, f): (bool, fn(bool, bool) -> bool) = match prim {
                ReduceMax | ReduceOr => (false, |p, q| p | q),
                ReduceMin | ReduceAnd => (true, |p, q| p & q),
                ReduceXor => (false, |p, q| p ^ q),
                _ => return Err(wrong_dtype(prim, dt)),
            };
            HostData::Bool(fold(v, &out_pos, m, init, f)?)
        }
    };
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: dt,
        data,
    })
}

/// `argmax`/`argmin` over one axis: the first index of the extreme value; a NaN counts as
/// the extreme for both (JAX's comparator picks NaN), so the first NaN wins.
fn arg_extreme(prim: Builtin, x: &HostArray, axes: &[i64], index_dtype: DType) -> R<HostArray> {
    let dims = dims_of(&x.shape);
    let &[axis] = axes else {
        return Err(internal("argmax/argmin take one axis"));
    };
    let axis = usize::try_from(axis)
        .ok()
        .filter(|&a| a < dims.len())
        .ok_or_else(|| internal(format!("axis {axis} out of range")))?;
    let want = if prim == Builtin::Argmax {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let dt = x.dtype;
    // Whether the element at position `c` beats the best so far at position `b`.
    let beats: Box<dyn Fn(usize, usize) -> bool + '_> = match &x.data {
        HostData::Float(v) => Box::new(move |c, b| {
            let (c, b) = (v[c], v[b]);
            !b.is_nan() && (c.is_nan() || c.partial_cmp(&b) == Some(want))
        }),
        HostData::Int(v) => Box::new(move |c, b| int_cmp(dt, v[c], v[b]) == want),
        HostData::Bool(v) => Box::new(move |c, b| v[c].cmp(&v[b]) == want),
    };
    let st = strides(&dims);
    let out_dims: Vec<usize> = dims
        .iter()
        .enumerate()
        .filter(|&(a, _)| a != axis)
        .map(|(_, &d)| d)
        .collect();
    let kept_strides: Vec<usize> = st
        .iter()
        .enumerate()
        .filter(|&(a, _)| a != axis)
        .map(|(_, &s)| s)
        .collect();
    let n_axis = dims[axis];
    let step = st[axis];
    let mut out = Vec::with_capacity(out_dims.iter().product());
    if n_axis == 0 {
        // Unreachable for a typechecked jaxpr (the rule rejects an empty axis).
        return Err(internal("argmax/argmin over an empty axis"));
    }
    for_each_index(&out_dims, |idx| {
        let base: usize = idx.iter().zip(&kept_strides).map(|(&i, &s)| i * s).sum();
        let mut best = 0usize;
        for k in 1..n_axis {
            if beats(base + k * step, base + best * step) {
                best = k;
            }
        }
        out.push(wrap_int(index_dtype, best as i64));
    });
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: index_dtype,
        data: HostData::Int(out),
    })
}

// ----- Shapes -----

pub(super) fn to_usizes(name: &str, v: &[i64]) -> R<Vec<usize>> {
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| internal(format!("{name} has {d}"))))
        .collect()
}

fn broadcast_in_dim(x: &HostArray, shape: &[i64], bdims: &[i64]) -> R<HostArray> {
    let out_dims = to_usizes("shape", shape)?;
    let bdims = to_usizes("broadcast_dimensions", bdims)?;
    let xd = dims_of(&x.shape);
    let xs = strides(&xd);
    if bdims.len() != xd.len() || bdims.iter().any(|&b| b >= out_dims.len()) {
        return Err(internal("broadcast_dimensions do not fit"));
    }
    let pos = index_map(&out_dims, |o| {
        (0..xd.len())
            .map(|i| if xd[i] == 1 { 0 } else { o[bdims[i]] * xs[i] })
            .sum()
    });
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: x.dtype,
        data: gather(x, &pos)?,
    })
}

fn transpose(x: &HostArray, perm: &[i64]) -> R<HostArray> {
    let perm = to_usizes("permutation", perm)?;
    let xd = dims_of(&x.shape);
    let xs = strides(&xd);
    if perm.len() != xd.len() || perm.iter().any(|&p| p >= xd.len()) {
        return Err(internal("permutation does not fit"));
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| xd[p]).collect();
    let pos = index_map(&out_dims, |o| {
        o.iter().zip(&perm).map(|(&i, &p)| i * xs[p]).sum()
    });
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: x.dtype,
        data: gather(x, &pos)?,
    })
}

/// The same elements under another shape of the same size.
fn with_shape(x: HostArray, dims: &[usize]) -> R<HostArray> {
    let shape = shape_of(dims)?;
    if shape.size() as usize != x.len() {
        return Err(internal(format!(
            "cannot view {} elements as {shape}",
            x.len()
        )));
    }
    Ok(HostArray { shape, ..x })
}

/// `reshape`: with `dimensions`, the operand is first transposed by that permutation
/// (as JAX lowers it), then its row-major elements take the new shape.
fn reshape(x: &HostArray, params: &Params) -> R<HostArray> {
    let new_sizes = to_usizes("new_sizes", param_ints(params, "new_sizes")?)?;
    let src = match params.get("dimensions") {
        Some(Param::Ints(perm)) => transpose(x, perm)?,
        _ => x.clone(),
    };
    with_shape(src, &new_sizes)
}

fn squeeze(x: &HostArray, dims: &[i64]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let mask = axis_mask(dims, xd.len())?;
    let out: Vec<usize> = xd
        .iter()
        .zip(&mask)
        .filter(|(_, &m)| !m)
        .map(|(&d, _)| d)
        .collect();
    with_shape(x.clone(), &out)
}

fn expand_dims(x: &HostArray, dims: &[i64]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let mask = axis_mask(dims, xd.len() + dims.len())?;
    let mut src = xd.iter();
    let out: Vec<usize> = mask
        .iter()
        .map(|&m| {
            if m {
                1
            } else {
                src.next().copied().unwrap_or(1)
            }
        })
        .collect();
    with_shape(x.clone(), &out)
}

fn concatenate(ins: &[&HostArray], dim: i64) -> R<HostArray> {
    let Some(first) = ins.first() else {
        return Err(internal("concatenate without operands"));
    };
    let fd = dims_of(&first.shape);
    let d = usize::try_from(dim)
        .ok()
        .filter(|&d| d < fd.len())
        .ok_or_else(|| internal(format!("dimension {dim} out of range")))?;
    let outer: usize = fd[..d].iter().product();
    let inner: usize = fd[d + 1..].iter().product();
    let mut out_dims = fd.clone();
    out_dims[d] = 0;
    let mut blocks = Vec::with_capacity(ins.len());
    for x in ins {
        let xd = dims_of(&x.shape);
        let size = *xd
            .get(d)
            .ok_or_else(|| internal("concatenated operands differ in rank"))?;
        out_dims[d] += size;
        blocks.push(size * inner);
    }
    let datas: Vec<&HostData> = ins.iter().map(|x| &x.data).collect();
    let data = by_kind!(&first.data, concat_data_t(&datas, outer, &blocks))?;
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: first.dtype,
        data,
    })
}

fn slice(x: &HostArray, params: &Params) -> R<HostArray> {
    let start = to_usizes("start_indices", param_ints(params, "start_indices")?)?;
    let limit = to_usizes("limit_indices", param_ints(params, "limit_indices")?)?;
    let steps = match params.get("strides") {
        Some(Param::Ints(s)) => to_usizes("strides", s)?,
        _ => vec![1; x.shape.rank()],
    };
    slice_with(x, &start, &limit, &steps)
}

/// `stack[axis]`: each operand given a new axis of size 1 at `axis`, then joined there.
fn stack_along(ins: &[&HostArray], axis: i64) -> R<HostArray> {
    let expanded = ins
        .iter()
        .map(|x| expand_dims(x, &[axis]))
        .collect::<R<Vec<_>>>()?;
    let refs: Vec<&HostArray> = expanded.iter().collect();
    concatenate(&refs, axis)
}

/// `unstack[axis]`: the slices of size 1 along `axis`, that axis removed.
fn unstack(x: &HostArray, axis: i64) -> R<Vec<HostArray>> {
    let xd = dims_of(&x.shape);
    let a = usize::try_from(axis)
        .ok()
        .filter(|&a| a < xd.len())
        .ok_or_else(|| internal("unstack axis out of range"))?;
    split(x, &vec![1; xd[a]], axis)?
        .into_iter()
        .map(|piece| squeeze(&piece, &[axis]))
        .collect()
}

/// `tile[reps]`: as JAX lowers it, the operand viewed as `(1, d0, 1, d1, ...)`,
/// broadcast to `(r0, d0, r1, d1, ...)` and viewed as `(r0 * d0, r1 * d1, ...)`.
fn tile(x: &HostArray, reps: &[i64]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let reps = to_usizes("reps", reps)?;
    if reps.len() != xd.len() {
        return Err(internal("reps do not fit the operand's rank"));
    }
    let ones: Vec<usize> = xd.iter().flat_map(|&d| [1, d]).collect();
    let wide: Vec<i64> = reps
        .iter()
        .zip(&xd)
        .flat_map(|(&r, &d)| [r as i64, d as i64])
        .collect();
    let all: Vec<i64> = (0..wide.len() as i64).collect();
    let spread = broadcast_in_dim(&with_shape(x.clone(), &ones)?, &wide, &all)?;
    let out: Vec<usize> = reps.iter().zip(&xd).map(|(&r, &d)| r * d).collect();
    with_shape(spread, &out)
}

/// `split[sizes axis]`: consecutive slices along `axis`.
fn split(x: &HostArray, sizes: &[i64], axis: i64) -> R<Vec<HostArray>> {
    let xd = dims_of(&x.shape);
    let axis = usize::try_from(axis)
        .ok()
        .filter(|&a| a < xd.len())
        .ok_or_else(|| internal("split axis out of range"))?;
    let sizes = to_usizes("sizes", sizes)?;
    let steps = vec![1; xd.len()];
    let mut start = vec![0; xd.len()];
    let mut limit = xd.clone();
    let mut at = 0;
    let mut out = Vec::with_capacity(sizes.len());
    for s in sizes {
        start[axis] = at;
        at += s;
        limit[axis] = at;
        out.push(slice_with(x, &start, &limit, &steps)?);
    }
    Ok(out)
}

fn slice_with(x: &HostArray, start: &[usize], limit: &[usize], steps: &[usize]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    if start.len() != xd.len() || limit.len() != xd.len() || steps.len() != xd.len() {
        return Err(internal("slice params do not fit the operand's rank"));
    }
    let mut out_dims = Vec::with_capacity(xd.len());
    for a in 0..xd.len() {
        if steps[a] == 0 || start[a] > limit[a] || limit[a] > xd[a] {
            return Err(internal("slice out of bounds"));
        }
        out_dims.push((limit[a] - start[a]).div_ceil(steps[a]));
    }
    let xs = strides(&xd);
    let pos = index_map(&out_dims, |o| {
        (0..o.len())
            .map(|a| (start[a] + o[a] * steps[a]) * xs[a])
            .sum()
    });
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: x.dtype,
        data: gather(x, &pos)?,
    })
}

/// Start indices of a dynamic slice, clamped like XLA to `[0, dim - size]`.
fn clamped_starts(idx: &[&HostArray], dims: &[usize], sizes: &[usize]) -> R<Vec<usize>> {
    if idx.len() != dims.len() || sizes.len() != dims.len() {
        return Err(internal("one start index per axis expected"));
    }
    idx.iter()
        .zip(dims.iter().zip(sizes))
        .map(|(i, (&d, &s))| {
            let v = match (i.as_i64(), i.dtype) {
                (Some(&[v]), DType::U64) if v < 0 => i64::MAX,
                (Some(&[v]), _) => v,
                _ => return Err(internal("a start index is not an integer scalar")),
            };
            let hi = d
                .checked_sub(s)
                .ok_or_else(|| internal("slice larger than the operand"))?;
            Ok(usize::try_from(v.max(0)).unwrap_or(usize::MAX).min(hi))
        })
        .collect()
}

fn dynamic_slice(x: &HostArray, idx: &[&HostArray], sizes: &[i64]) -> R<HostArray> {
    let sizes = to_usizes("slice_sizes", sizes)?;
    let xd = dims_of(&x.shape);
    let starts = clamped_starts(idx, &xd, &sizes)?;
    let xs = strides(&xd);
    let pos = index_map(&sizes, |o| {
        (0..o.len()).map(|a| (starts[a] + o[a]) * xs[a]).sum()
    });
    Ok(HostArray {
        shape: shape_of(&sizes)?,
        dtype: x.dtype,
        data: gather(x, &pos)?,
    })
}

fn pad_t<T: Elem>(x: &HostData, v: &HostData, positions: &[Option<usize>]) -> R<HostData> {
    let (Some(x), Some(&[v])) = (T::slice(x), T::slice(v)) else {
        return Err(internal("pad's operand and padding value differ in kind"));
    };
    let out = positions
        .iter()
        .map(|p| match p {
            Some(p) => x
                .get(*p)
                .copied()
                .ok_or_else(|| internal("pad position out of range")),
            None => Ok(v),
        })
        .collect::<R<Vec<T>>>()?;
    Ok(T::data(out))
}

/// `pad`: each result element is the operand element it lands on (after `low` elements,
/// `interior` between neighbours; negative `low`/`high` crop), else the padding value.
fn pad(x: &HostArray, v: &HostArray, params: &Params) -> R<HostArray> {
    let config: &[(i64, i64, i64)] = match params.get("padding_config") {
        Some(Param::Padding(c)) => c,
        _ => return Err(internal("param 'padding_config' is missing")),
    };
    let xd = dims_of(&x.shape);
    if config.len() != xd.len() {
        return Err(internal("padding_config does not fit the operand's rank"));
    }
    let mut out_dims = Vec::with_capacity(xd.len());
    for (&(lo, hi, interior), &d) in config.iter().zip(&xd) {
        let d = d as i64;
        let n = lo
            + hi
            + if d == 0 {
                0
            } else {
                (d - 1) * (interior + 1) + 1
            };
        out_dims.push(usize::try_from(n).map_err(|_| internal("negative padded size"))?);
    }
    let xs = strides(&xd);
    let mut pos = Vec::with_capacity(out_dims.iter().product());
    for_each_index(&out_dims, |o| {
        let mut p = Some(0usize);
        for (a, &(lo, _, interior)) in config.iter().enumerate() {
            let j = o[a] as i64 - lo;
            let step = interior + 1;
            let k = j / step;
            if j < 0 || j % step != 0 || k >= xd[a] as i64 {
                p = None;
                break;
            }
            p = p.map(|p| p + k as usize * xs[a]);
        }
        pos.push(p);
    });
    let data = by_kind!(&x.data, pad_t(&x.data, &v.data, &pos))?;
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: x.dtype,
        data,
    })
}

fn update_t<T: Elem>(x: &HostData, u: &HostData, positions: &[usize]) -> R<HostData> {
    let (Some(x), Some(u)) = (T::slice(x), T::slice(u)) else {
        return Err(internal("dynamic_update_slice operands differ in kind"));
    };
    let mut out = x.to_vec();
    for (&p, &v) in positions.iter().zip(u) {
        *out.get_mut(p)
            .ok_or_else(|| internal("update position out of range"))? = v;
    }
    Ok(T::data(out))
}

fn dynamic_update_slice(x: &HostArray, u: &HostArray, idx: &[&HostArray]) -> R<HostArray> {
    let xd = dims_of(&x.shape);
    let ud = dims_of(&u.shape);
    let starts = clamped_starts(idx, &xd, &ud)?;
    let xs = strides(&xd);
    let pos = index_map(&ud, |o| {
        (0..o.len()).map(|a| (starts[a] + o[a]) * xs[a]).sum()
    });
    let data = by_kind!(&x.data, update_t(&x.data, &u.data, &pos))?;
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: x.dtype,
        data,
    })
}

/// `dot_general`: both operands are converted to the result dtype (as JAX's CPU lowering
/// does for operands of different dtypes; for equal dtypes and a wider
/// `preferred_element_type` the products are the same), then products are summed over
/// the contracting axes — floats in `f64`, rounded once at the end; integers wrapping;
/// `bool` as OR of ANDs. Result axes: batch, then the lhs's free axes, then the rhs's.
/// (Float operands with an integer `preferred_element_type` are thus truncated before
/// multiplying; XLA leaves that case unspecified.)
fn dot_general(l: &HostArray, r: &HostArray, params: &Params) -> R<HostArray> {
    let dn: &DotDimensionNumbers = match params.get("dimension_numbers") {
        Some(Param::DotDims(d)) => d,
        _ => return Err(internal("param 'dimension_numbers' is missing")),
    };
    // The result dtype: preferred, else the more precise operand's (the shape rule's
    // choice; the bound variable's type is checked against it).
    let out_dtype = match params.get("preferred_element_type") {
        Some(Param::DType(d)) => *d,
        _ => more_precise(l.dtype, r.dtype),
    };
    let l = convert(l, out_dtype)?;
    let r = convert(r, out_dtype)?;
    let (ld, rd) = (dims_of(&l.shape), dims_of(&r.shape));
    let (ls, rs) = (strides(&ld), strides(&rd));
    let lb = to_usizes("lhs_batch", &dn.lhs_batch)?;
    let rb = to_usizes("rhs_batch", &dn.rhs_batch)?;
    let lc = to_usizes("lhs_contracting", &dn.lhs_contracting)?;
    let rc = to_usizes("rhs_contracting", &dn.rhs_contracting)?;
    let fits = |axes: &[usize], rank: usize| axes.iter().all(|&a| a < rank);
    if lb.len() != rb.len()
        || lc.len() != rc.len()
        || !fits(&lb, ld.len())
        || !fits(&lc, ld.len())
        || !fits(&rb, rd.len())
        || !fits(&rc, rd.len())
    {
        return Err(internal("dimension numbers do not fit the operands"));
    }
    let free = |rank: usize, b: &[usize], c: &[usize]| -> Vec<usize> {
        (0..rank)
            .filter(|a| !b.contains(a) && !c.contains(a))
            .collect()
    };
    let lf = free(ld.len(), &lb, &lc);
    let rf = free(rd.len(), &rb, &rc);
    let out_dims: Vec<usize> = lb
        .iter()
        .map(|&a| ld[a])
        .chain(lf.iter().map(|&a| ld[a]))
        .chain(rf.iter().map(|&a| rd[a]))
        .collect();
    let c_dims: Vec<usize> = lc.iter().map(|&a| ld[a]).collect();
    // Offsets of every contracting multi-index in each operand. When the result is not
    // empty, every lhs axis outside the contraction has a nonzero size, so there are at
    // most as many as lhs elements; an empty result needs none (and the contraction may
    // then be huge).
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let out_empty = out_dims.contains(&0);
    for_each_index(if out_empty { &[0] } else { &c_dims[..] }, |ci| {
        let lo = ci.iter().zip(&lc).map(|(&i, &a)| i * ls[a]).sum();
        let ro = ci.iter().zip(&rc).map(|(&i, &a)| i * rs[a]).sum();
        pairs.push((lo, ro));
    });
    let (nb, nlf) = (lb.len(), lf.len());
    let mut bases: Vec<(usize, usize)> = Vec::new();
    for_each_index(&out_dims, |o| {
        let mut lo: usize = (0..nb).map(|j| o[j] * ls[lb[j]]).sum();
        let mut ro: usize = (0..nb).map(|j| o[j] * rs[rb[j]]).sum();
        lo += lf
            .iter()
            .enumerate()
            .map(|(j, &a)| o[nb + j] * ls[a])
            .sum::<usize>();
        ro += rf
            .iter()
            .enumerate()
            .map(|(j, &a)| o[nb + nlf + j] * rs[a])
            .sum::<usize>();
        bases.push((lo, ro));
    });
    fn contract<T: Copy>(
        a: &[T],
        b: &[T],
        bases: &[(usize, usize)],
        pairs: &[(usize, usize)],
        zero: T,
        mul_add: impl Fn(T, T, T) -> T,
    ) -> R<Vec<T>> {
        bases
            .iter()
            .map(|&(lb, rb)| {
                pairs.iter().try_fold(zero, |acc, &(lo, ro)| {
                    match (a.get(lb + lo), b.get(rb + ro)) {
                        (Some(&p), Some(&q)) => Ok(mul_add(acc, p, q)),
                        _ => Err(internal("dot_general position out of range")),
                    }
                })
            })
            .collect()
    }
    let dt = out_dtype;
    let data = match (&l.data, &r.data) {
        (HostData::Float(a), HostData::Float(b)) => HostData::Float(
            contract(a, b, &bases, &pairs, 0.0, |s, p, q| s + p * q)?
                .into_iter()
                .map(|s| round_float(dt, s))
                .collect(),
        ),
        (HostData::Int(a), HostData::Int(b)) => HostData::Int(
            contract(a, b, &bases, &pairs, 0, |s, p, q| {
                s.wrapping_add(p.wrapping_mul(q))
            })?
            .into_iter()
            .map(|s| wrap_int(dt, s))
            .collect(),
        ),
        (HostData::Bool(a), HostData::Bool(b)) => {
            HostData::Bool(contract(a, b, &bases, &pairs, false, |s, p, q| {
                s | (p & q)
            })?)
        }
        _ => return Err(internal("dot_general operands differ in kind")),
    };
    Ok(HostArray {
        shape: shape_of(&out_dims)?,
        dtype: dt,
        data,
    })
}

/// The more precise of two dtypes, in XLA's order (as JAX's `dot_general` picks its
/// result dtype): floats by exponent range then mantissa, then bit width, signed above
/// unsigned.
fn more_precise(a: DType, b: DType) -> DType {
    let key = |d: DType| {
        let (exp, mant) = match d {
            DType::F16 => (16, 10),
            DType::BF16 => (128, 7),
            DType::F32 => (128, 23),
            DType::F64 => (1024, 52),
            _ => (-1, -1),
        };
        let bits = if d == DType::Bool {
            1
        } else {
            8 * d.size_bytes()
        };
        (exp, mant, bits, d.kind() != DTypeKind::UnsignedInt)
    };
    if key(a) >= key(b) {
        a
    } else {
        b
    }
}

fn iota(dtype: DType, shape: &[i64], dimension: i64) -> R<HostArray> {
    let dims = to_usizes("shape", shape)?;
    let d = usize::try_from(dimension)
        .ok()
        .filter(|&d| d < dims.len())
        .ok_or_else(|| internal(format!("dimension {dimension} out of range")))?;
    let values = index_map(&dims, |idx| idx[d]);
    let data = if dtype.is_float() {
        HostData::Float(
            values
                .iter()
                .map(|&v| int_to_float(DType::I64, v as i64, dtype))
                .collect(),
        )
    } else if dtype.is_int() {
        HostData::Int(values.iter().map(|&v| wrap_int(dtype, v as i64)).collect())
    } else {
        return Err(internal("iota of bool"));
    };
    Ok(HostArray {
        shape: shape_of(&dims)?,
        dtype,
        data,
    })
}
