//! The bit-level built-ins on host arrays: `population_count`, `clz`,
//! `bitcast_convert_type` and `threefry2x32`, and the float operations defined on bit
//! patterns, `nextafter` and `reduce_precision`.
//!
//! Every value is handled as its bit pattern (a `u64` holding the dtype's width). Floats
//! are stored in `f64` (see [`crate::eval`]): their patterns are exact for every value,
//! and a NaN keeps its sign and the payload bits the `f64` conversion keeps (a signalling
//! `f32` NaN read from bits comes back quieted, where XLA keeps it as it is).

use super::array::{HostArray, HostData};
use super::numeric::wrap_int;
use super::ops::{binary_shape, internal, step_of, stretched};
use super::EvalError;
use crate::aval::Shape;
use crate::dtype::DType;
use crate::primitive::Builtin;

type R<T> = Result<T, EvalError>;

fn width(dtype: DType) -> u32 {
    dtype.size_bytes() as u32 * 8
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The bits of an IEEE half-precision value (`x` exactly representable in `f16`).
fn f16_to_bits(x: f64) -> u64 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    if x.is_nan() {
        let payload = (x.to_bits() >> 42) & 0x3ff;
        return sign | 0x7c00 | if payload == 0 { 0x200 } else { payload };
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    if a < 2f64.powi(-14) {
        // Zero or subnormal: a multiple of 2^-24.
        return sign | (a * 2f64.powi(24)) as u64;
    }
    let bits = a.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    sign | (((e + 15) as u64) << 10) | ((bits >> 42) & 0x3ff)
}

/// The `f16` value of these bits, as an `f64`.
fn f16_from_bits(b: u64) -> f64 {
    let sign = if b & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 10) & 0x1f) as i32;
    let m = b & 0x3ff;
    match e {
        0 => sign * m as f64 * 2f64.powi(-24),
        0x1f if m == 0 => sign * f64::INFINITY,
        0x1f => f64::from_bits(((b & 0x8000) << 48) | 0x7ff8_0000_0000_0000 | (m << 42)),
        _ => sign * (1024 + m) as f64 * 2f64.powi(e - 25),
    }
}

/// The bit pattern of every element of `x` (in the low `width(x.dtype)` bits).
fn patterns(x: &HostArray) -> R<Vec<u64>> {
    let w = mask(width(x.dtype));
    Ok(match (&x.data, x.dtype) {
        (HostData::Int(v), _) => v.iter().map(|&a| a as u64 & w).collect(),
        (HostData::Float(v), DType::F64) => v.iter().map(|a| a.to_bits()).collect(),
        (HostData::Float(v), DType::F32) => {
            v.iter().map(|&a| u64::from((a as f32).to_bits())).collect()
        }
        (HostData::Float(v), DType::BF16) => v
            .iter()
            .map(|&a| u64::from((a as f32).to_bits() >> 16))
            .collect(),
        (HostData::Float(v), DType::F16) => v.iter().map(|&a| f16_to_bits(a)).collect(),
        (HostData::Bool(v), _) => v.iter().map(|&a| u64::from(a)).collect(),
        _ => return Err(internal(format!("no bit patterns for dtype {}", x.dtype))),
    })
}

/// Elements of `dtype` from their bit patterns.
fn from_patterns(dtype: DType, bits: Vec<u64>) -> R<HostData> {
    Ok(match dtype {
        DType::Bool => HostData::Bool(bits.iter().map(|&b| b != 0).collect()),
        DType::F64 => HostData::Float(bits.iter().map(|&b| f64::from_bits(b)).collect()),
        DType::F32 => HostData::Float(
            bits.iter()
                .map(|&b| f64::from(f32::from_bits(b as u32)))
                .collect(),
        ),
        DType::BF16 => HostData::Float(
            bits.iter()
                .map(|&b| f64::from(f32::from_bits((b as u32) << 16)))
                .collect(),
        ),
        DType::F16 => HostData::Float(bits.iter().map(|&b| f16_from_bits(b)).collect()),
        d if d.is_int() => HostData::Int(bits.iter().map(|&b| wrap_int(d, b as i64)).collect()),
        d => return Err(internal(format!("no elements of dtype {d} from bits"))),
    })
}

/// `population_count` (set bits) or `clz` (leading zeros in the dtype's width) of an
/// integer array; the operand's dtype out.
pub(super) fn count_bits(prim: Builtin, x: &HostArray) -> R<HostArray> {
    if !x.dtype.is_int() {
        return Err(internal(format!("{} of dtype {}", prim.name(), x.dtype)));
    }
    let w = width(x.dtype);
    let counts: Vec<u64> = patterns(x)?
        .into_iter()
        .map(|b| match prim {
            Builtin::PopulationCount => u64::from(b.count_ones()),
            _ => u64::from(b.leading_zeros() - (64 - w)),
        })
        .collect();
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: x.dtype,
        data: from_patterns(x.dtype, counts)?,
    })
}

/// `bitcast_convert_type`: the same bits read as `new`. A narrower dtype splits each
/// element into a trailing dimension, least significant part first (XLA's order on a
/// little-endian host); a wider one joins the last dimension's parts the same way.
pub(super) fn bitcast_convert_type(x: &HostArray, new: DType) -> R<HostArray> {
    let (old_w, new_w) = (width(x.dtype), width(new));
    let bits = patterns(x)?;
    let dims = x.shape.dims();
    let (out_dims, out_bits): (Vec<i64>, Vec<u64>) = if old_w == new_w {
        (dims.to_vec(), bits)
    } else if old_w > new_w {
        let k = old_w / new_w;
        let m = mask(new_w);
        let mut d = dims.to_vec();
        d.push(i64::from(k));
        let out = bits
            .iter()
            .flat_map(|&b| (0..k).map(move |i| (b >> (i * new_w)) & m))
            .collect();
        (d, out)
    } else {
        let k = (new_w / old_w) as usize;
        if dims.last().copied().unwrap_or(1) != k as i64 {
            return Err(internal(
                "bitcast_convert_type's last dimension does not fit",
            ));
        }
        let out = bits
            .chunks(k)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u64, |acc, (i, &p)| acc | (p << (i as u32 * old_w)))
            })
            .collect();
        (dims[..dims.len().saturating_sub(1)].to_vec(), out)
    };
    let shape = Shape::new(&out_dims).map_err(|e| internal(e.to_string()))?;
    Ok(HostArray {
        shape,
        dtype: new,
        data: from_patterns(new, out_bits)?,
    })
}

/// A float format as bit fields: total width, exponent bits, stored mantissa bits.
struct Format {
    width: u32,
    exponent: u32,
    mantissa: u32,
}

fn float_format(dtype: DType) -> R<Format> {
    let (width, exponent, mantissa) = match dtype {
        DType::F16 => (16, 5, 10),
        DType::BF16 => (16, 8, 7),
        DType::F32 => (32, 8, 23),
        DType::F64 => (64, 11, 52),
        d => return Err(internal(format!("{d} is not a float dtype"))),
    };
    Ok(Format {
        width,
        exponent,
        mantissa,
    })
}

impl Format {
    fn sign(&self) -> u64 {
        1 << (self.width - 1)
    }
    fn exponent_mask(&self) -> u64 {
        mask(self.exponent) << self.mantissa
    }
    fn is_nan(&self, b: u64) -> bool {
        b & (self.sign() - 1) > self.exponent_mask()
    }
    /// The quiet NaN XLA produces (positive, only the quiet bit in the mantissa).
    fn canonical_nan(&self) -> u64 {
        self.exponent_mask() | (1 << (self.mantissa - 1))
    }
}

/// The float operands of a binary op as bit patterns, read at each element of the
/// result's shape (broadcast as the binary ops are).
fn binary_patterns(x: &HostArray, y: &HostArray) -> R<(Shape, Vec<(u64, u64)>)> {
    if x.dtype != y.dtype {
        return Err(internal(format!(
            "operands of dtypes {} and {}",
            x.dtype, y.dtype
        )));
    }
    let shape = binary_shape(x, y)?;
    let n = shape.size() as usize;
    let (x, y) = (stretched(x, &shape)?, stretched(y, &shape)?);
    let (sx, sy) = (step_of(x.len(), n)?, step_of(y.len(), n)?);
    let (bx, by) = (patterns(&x)?, patterns(&y)?);
    Ok((shape, (0..n).map(|i| (bx[i * sx], by[i * sy])).collect()))
}

/// `nextafter(x, y)`: the float next to `x` in the direction of `y`, as XLA's CPU
/// backend computes it (bit for bit): NaN if either is NaN (the canonical quiet NaN),
/// `y` if they are equal (so `nextafter(0.0, -0.0)` is `-0.0`), the smallest subnormal
/// of `y`'s sign from a zero, else `x`'s pattern stepped by one ulp. XLA compares `x`
/// and `y` as floats with subnormals flushed to zero in `f32`, `f64` and `bf16` (which
/// it computes in `f32`), so two operands that are each zero or subnormal count as
/// equal there and give `y`; `f16` compares exactly.
pub(super) fn nextafter(x: &HostArray, y: &HostArray) -> R<HostArray> {
    let fmt = float_format(x.dtype)?;
    let flushes = x.dtype != DType::F16;
    let (sign, exp) = (fmt.sign(), fmt.exponent_mask());
    let magnitude = |b: u64| b & (sign - 1);
    let tiny = |b: u64| b & exp == 0;
    let (shape, pairs) = binary_patterns(x, y)?;
    let out = pairs
        .into_iter()
        .map(|(a, b)| {
            if fmt.is_nan(a) || fmt.is_nan(b) {
                return fmt.canonical_nan();
            }
            let both_zero = magnitude(a) == 0 && magnitude(b) == 0;
            if a == b || both_zero || (flushes && tiny(a) && tiny(b)) {
                return b;
            }
            if magnitude(a) == 0 {
                return (b & sign) | 1;
            }
            // Patterns of one sign are ordered as their magnitudes.
            let away_from_zero = a & sign == b & sign && magnitude(b) > magnitude(a);
            if away_from_zero {
                a + 1
            } else {
                a - 1
            }
        })
        .collect();
    Ok(HostArray {
        shape,
        dtype: x.dtype,
        data: from_patterns(x.dtype, out)?,
    })
}

/// `reduce_precision`: each element rounded to a float of `exponent_bits` and
/// `mantissa_bits`, and back to its dtype, as XLA does it on the bit pattern: the
/// mantissa rounded to nearest even (a carry may raise the exponent, up to an
/// infinity); then exponents above the narrow format's range become infinities and
/// those at or below its smallest normal exponent become zeros (no subnormals), signs
/// kept. NaN stays NaN with its pattern, but in `bf16`, which XLA computes through
/// `f32`, becomes the quiet NaN of its sign (unless the format holds `f32`'s, where
/// XLA drops the operation).
pub(super) fn reduce_precision(
    x: &HostArray,
    exponent_bits: i64,
    mantissa_bits: i64,
) -> R<HostArray> {
    let fmt = float_format(x.dtype)?;
    if exponent_bits < 1 || mantissa_bits < 0 {
        return Err(internal(format!(
            "reduce_precision to {exponent_bits} exponent and {mantissa_bits} mantissa bits"
        )));
    }
    let (sign, exp) = (fmt.sign(), fmt.exponent_mask());
    let all = mask(fmt.width);
    let round = |b: u64| -> u64 {
        let mut v = b;
        if mantissa_bits < i64::from(fmt.mantissa) {
            let shift = fmt.mantissa - mantissa_bits as u32;
            let last = 1u64 << shift;
            let bias = (last >> 1) - 1 + ((v & last) >> shift);
            v = v.wrapping_add(bias) & all & !(last - 1);
        }
        if exponent_bits < i64::from(fmt.exponent) {
            let bias = (1u64 << (fmt.exponent - 1)) - 1;
            let reduced_bias = (1u64 << (exponent_bits - 1)) - 1;
            let e = v & exp;
            if e > (bias + reduced_bias) << fmt.mantissa {
                v = (v & sign) | exp;
            } else if e <= (bias - reduced_bias) << fmt.mantissa {
                v &= sign;
            }
        }
        v
    };
    let through_f32 = x.dtype == DType::BF16 && (exponent_bits < 8 || mantissa_bits < 23);
    let out = patterns(x)?
        .into_iter()
        .map(|b| match fmt.is_nan(b) {
            true if through_f32 => (b & sign) | fmt.canonical_nan(),
            true => b,
            false => round(b),
        })
        .collect();
    Ok(HostArray {
        shape: x.shape.clone(),
        dtype: x.dtype,
        data: from_patterns(x.dtype, out)?,
    })
}

/// The rotations of threefry2x32's rounds, four per group, groups alternating.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// The Threefry-2x32 block cipher (20 rounds, Salmon et al. 2011) on one block: keys
/// `(k0, k1)`, counts `(x0, x1)`.
pub(super) fn threefry2x32_block(k0: u32, k1: u32, x0: u32, x1: u32) -> (u32, u32) {
    let ks = [k0, k1, k0 ^ k1 ^ 0x1BD1_1BDA];
    let (mut a, mut b) = (x0.wrapping_add(ks[0]), x1.wrapping_add(ks[1]));
    for group in 0..5u32 {
        for &r in &ROTATIONS[(group % 2) as usize] {
            a = a.wrapping_add(b);
            b = b.rotate_left(r) ^ a;
        }
        let g = group as usize;
        a = a.wrapping_add(ks[(g + 1) % 3]);
        b = b.wrapping_add(ks[(g + 2) % 3]).wrapping_add(group + 1);
    }
    (a, b)
}

/// `threefry2x32` on four `u32` arrays that broadcast together.
pub(super) fn threefry2x32(ins: &[&HostArray]) -> R<Vec<HostArray>> {
    let [k0, k1, x0, x1] = ins else {
        return Err(internal("threefry2x32 takes 4 operands"));
    };
    let mut dims: Vec<i64> = Vec::new();
    for x in [k0, k1, x0, x1] {
        if x.dtype != DType::U32 {
            return Err(internal(format!("threefry2x32 of dtype {}", x.dtype)));
        }
        let acc = Shape::new(&dims).map_err(|e| internal(e.to_string()))?;
        dims = acc
            .binary_broadcast(&x.shape)
            .map_err(|_| internal("threefry2x32's operands do not broadcast"))?;
    }
    let shape = Shape::new(&dims).map_err(|e| internal(e.to_string()))?;
    let n = shape.size() as usize;
    let mut words = Vec::with_capacity(4);
    for x in [k0, k1, x0, x1] {
        let s = stretched(x, &shape)?;
        let step = step_of(s.len(), n)?;
        let HostData::Int(v) = &s.data else {
            return Err(internal("threefry2x32 of a non-integer array"));
        };
        words.push((v.clone(), step));
    }
    let word = |k: usize, i: usize| words[k].0[i * words[k].1] as u32;
    let (mut y0, mut y1) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let (a, b) = threefry2x32_block(word(0, i), word(1, i), word(2, i), word(3, i));
        y0.push(i64::from(a));
        y1.push(i64::from(b));
    }
    Ok(vec![
        HostArray {
            shape: shape.clone(),
            dtype: DType::U32,
            data: HostData::Int(y0),
        },
        HostArray {
            shape,
            dtype: DType::U32,
            data: HostData::Int(y1),
        },
    ])
}
