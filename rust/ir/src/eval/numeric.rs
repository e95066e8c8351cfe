//! Scalar arithmetic on the storage types (`bool`, `i64`, `f64`), rounded or wrapped to
//! a dtype.
//!
//! Storage conventions (see the module docs of [`crate::eval`]):
//! * every float dtype is stored in `f64` holding a value exactly representable in the
//!   dtype;
//! * every integer dtype is stored in `i64` holding the value wrapped to the dtype's width:
//!   signed dtypes sign-extended, `u8`/`u16`/`u32` as their non-negative value, and `u64`
//!   as the *bit pattern* of the `u64` (values at or above 2^63 are negative `i64`s).
//!   Addition, subtraction, multiplication and the bitwise operations are the same on bit
//!   patterns; comparisons, division, remainder and conversions treat unsigned values as
//!   unsigned.

use crate::dtype::{DType, DTypeKind};
use std::cmp::Ordering;

/// `2^e` as an `f64`, exactly, for `e` in the normal range of `f64`.
fn pow2(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e));
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Rounds a finite or infinite `f64` to the nearest value (ties to even) of a binary
/// floating-point format with `p` bits of precision (the implicit bit included) and
/// normal exponents `emin..=emax`, with gradual underflow; overflow gives an infinity.
fn round_to_format(x: f64, p: i32, emin: i32, emax: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let biased = ((x.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // An f64 subnormal: far below half the smallest subnormal of every format here.
        return 0.0f64.copysign(x);
    }
    let e = biased - 1023;
    // The unit in the last place of the format at x's binade (clamped to the subnormal
    // range); x / ulp is exact (a power-of-two scaling that stays normal).
    let ulp = pow2(e.max(emin) - (p - 1));
    let r = (x / ulp).round_ties_even() * ulp;
    let max_finite = (2.0 - pow2(1 - p)) * pow2(emax);
    if r.abs() > max_finite {
        f64::INFINITY.copysign(x)
    } else {
        r
    }
}

/// Rounds to IEEE half precision (`f16`), round to nearest even; the result is returned
/// as the exactly equal `f64`.
pub fn round_to_f16(x: f64) -> f64 {
    round_to_format(x, 11, -14, 15)
}

/// Rounds to bfloat16, round to nearest even; the result is returned as the exactly equal
/// `f64`.
pub fn round_to_bf16(x: f64) -> f64 {
    round_to_format(x, 8, -126, 127)
}

/// Rounds an `f64` to a float dtype (round to nearest even; NaN stays NaN). Non-float
/// dtypes return `x` unchanged.
pub fn round_float(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => (x as f32) as f64,
        DType::F16 => round_to_f16(x),
        DType::BF16 => round_to_bf16(x),
        _ => x,
    }
}

/// Wraps an `i64` to an integer dtype (two's complement for signed dtypes, modulo 2^n for
/// unsigned ones; `i64` and `u64` are unchanged, `u64` being stored as its bit pattern).
/// Non-integer dtypes return `v` unchanged.
pub fn wrap_int(dtype: DType, v: i64) -> i64 {
    match dtype {
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// The bits of an integer dtype.
fn int_bits(dtype: DType) -> u32 {
    dtype.size_bytes() as u32 * 8
}

/// The stored integer's bits as an unsigned number of the dtype's width.
fn int_bits_of(dtype: DType, v: i64) -> u64 {
    let bits = int_bits(dtype);
    if bits >= 64 {
        v as u64
    } else {
        (v as u64) & ((1u64 << bits) - 1)
    }
}

/// XLA's `shift_left`: the amount is read as unsigned, and one of the dtype's width or
/// more gives 0.
pub(crate) fn shift_left(dtype: DType, a: i64, amount: i64) -> i64 {
    let n = int_bits_of(dtype, amount);
    if n >= u64::from(int_bits(dtype)) {
        return 0;
    }
    wrap_int(dtype, ((a as u64) << n) as i64)
}

/// XLA's `shift_right_logical`: zeros shifted in; an amount of the width or more (read as
/// unsigned) gives 0.
pub(crate) fn shift_right_logical(dtype: DType, a: i64, amount: i64) -> i64 {
    let n = int_bits_of(dtype, amount);
    if n >= u64::from(int_bits(dtype)) {
        return 0;
    }
    wrap_int(dtype, (int_bits_of(dtype, a) >> n) as i64)
}

/// `mulhi`: the high half of the double-width product (signed for signed dtypes,
/// unsigned for unsigned ones), as XLA's `chlo.mulhi`.
pub(crate) fn mulhi(dtype: DType, a: i64, b: i64) -> i64 {
    let bits = int_bits(dtype);
    let hi = if is_unsigned(dtype) {
        let p = u128::from(int_bits_of(dtype, a)) * u128::from(int_bits_of(dtype, b));
        (p >> bits) as i64
    } else {
        let p = i128::from(a) * i128::from(b);
        (p >> bits) as i64
    };
    wrap_int(dtype, hi)
}

/// XLA's `shift_right_arithmetic`: copies of the sign bit (the top bit, for unsigned
/// dtypes too) shifted in; an amount of the width or more (read as unsigned) fills
/// every bit with the sign.
pub(crate) fn shift_right_arithmetic(dtype: DType, a: i64, amount: i64) -> i64 {
    let bits = int_bits(dtype);
    let n = int_bits_of(dtype, amount).min(u64::from(bits) - 1) as u32;
    // Sign-extend from the dtype's width to 64 bits.
    let extend = 64 - bits;
    let signed = ((a as u64) << extend) as i64 >> extend;
    wrap_int(dtype, signed >> n)
}

/// True when the stored value is one the dtype has (see the storage conventions).
pub(crate) fn float_is_canonical(dtype: DType, x: f64) -> bool {
    x.is_nan() || round_float(dtype, x) == x
}

/// True when the stored integer is one the dtype has.
pub(crate) fn int_is_canonical(dtype: DType, v: i64) -> bool {
    wrap_int(dtype, v) == v
}

fn is_unsigned(dtype: DType) -> bool {
    dtype.kind() == DTypeKind::UnsignedInt
}

/// Orders two stored integers of a dtype (unsigned dtypes compare as unsigned).
pub(crate) fn int_cmp(dtype: DType, a: i64, b: i64) -> Ordering {
    if is_unsigned(dtype) {
        (a as u64).cmp(&(b as u64))
    } else {
        a.cmp(&b)
    }
}

/// The least and greatest values of an integer dtype, as stored.
pub(crate) fn int_min_max(dtype: DType) -> (i64, i64) {
    match dtype {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        // u64::MAX as a bit pattern.
        DType::U64 => (0, -1),
        _ => (i64::MIN, i64::MAX),
    }
}

/// The value of a stored integer as a (possibly rounded) `f64`.
pub(crate) fn int_to_f64(dtype: DType, v: i64) -> f64 {
    if dtype == DType::U64 {
        v as u64 as f64
    } else {
        v as f64
    }
}

/// A `u64` as an `f64` rounded to odd (truncate, then set the last bit if anything was
/// cut off). Rounding that result to nearest even with at most 51 bits of precision gives
/// the correctly rounded value of the integer, with no double-rounding error.
fn u64_to_f64_round_odd(m: u64) -> f64 {
    let bits = 64 - m.leading_zeros() as i32;
    if bits <= 53 {
        return m as f64;
    }
    let shift = bits - 53;
    let mut t = m >> shift;
    if m & ((1u64 << shift) - 1) != 0 {
        t |= 1;
    }
    t as f64 * pow2(shift)
}

/// Converts a stored integer of dtype `src` to the float dtype `dst`, correctly rounded.
pub(crate) fn int_to_float(src: DType, v: i64, dst: DType) -> f64 {
    let unsigned = src == DType::U64;
    match dst {
        DType::F32 => {
            if unsigned {
                (v as u64) as f32 as f64
            } else {
                v as f32 as f64
            }
        }
        DType::F16 | DType::BF16 => {
            let (neg, mag) = if unsigned {
                (false, v as u64)
            } else {
                (v < 0, v.unsigned_abs())
            };
            let odd = u64_to_f64_round_odd(mag);
            round_float(dst, if neg { -odd } else { odd })
        }
        _ => int_to_f64(src, v),
    }
}

/// Converts a float to an integer dtype as XLA does: truncation toward zero, saturation at
/// the dtype's bounds, NaN to 0. (Rust's `as` casts have exactly these semantics.)
pub(crate) fn float_to_int(x: f64, dst: DType) -> i64 {
    match dst {
        DType::I8 => x as i8 as i64,
        DType::I16 => x as i16 as i64,
        DType::I32 => x as i32 as i64,
        DType::U8 => x as u8 as i64,
        DType::U16 => x as u16 as i64,
        DType::U32 => x as u32 as i64,
        DType::U64 => x as u64 as i64,
        _ => x as i64,
    }
}

/// Integer division as XLA defines it: truncation toward zero; `x / 0` is `-1` (all bits
/// set: the maximum for unsigned dtypes); `MIN / -1` wraps to `MIN`.
pub(crate) fn int_div(dtype: DType, a: i64, b: i64) -> i64 {
    let q = if b == 0 {
        -1
    } else if is_unsigned(dtype) {
        ((a as u64) / (b as u64)) as i64
    } else {
        a.wrapping_div(b)
    };
    wrap_int(dtype, q)
}

/// Integer remainder as XLA defines it: the sign of the dividend (C's `%`); `x % 0` is
/// `x`; `MIN % -1` is 0.
pub(crate) fn int_rem(dtype: DType, a: i64, b: i64) -> i64 {
    let r = if b == 0 {
        a
    } else if is_unsigned(dtype) {
        ((a as u64) % (b as u64)) as i64
    } else {
        a.wrapping_rem(b)
    };
    wrap_int(dtype, r)
}

/// The maximum of two floats; NaN if either is NaN; `max(-0, +0)` is `+0`.
pub(crate) fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b || (a == b && !a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// The minimum of two floats; NaN if either is NaN; `min(-0, +0)` is `-0`.
pub(crate) fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// `sign` of a float: -1, +1, NaN for NaN, and a zero keeps its sign.
pub(crate) fn float_sign(a: f64) -> f64 {
    if a.is_nan() || a == 0.0 {
        a
    } else {
        1.0f64.copysign(a)
    }
}

/// The maximum of two stored integers of a dtype.
pub(crate) fn int_max(dtype: DType, a: i64, b: i64) -> i64 {
    if int_cmp(dtype, a, b) == Ordering::Less {
        b
    } else {
        a
    }
}

/// The minimum of two stored integers of a dtype.
pub(crate) fn int_min(dtype: DType, a: i64, b: i64) -> i64 {
    if int_cmp(dtype, a, b) == Ordering::Greater {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_and_bf16_rounding() {
        assert_eq!(round_to_bf16(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            round_to_bf16(1.0 + 3.0 * 2f64.powi(-8)),
            1.0 + 2f64.powi(-6)
        );
        assert_eq!(round_to_f16(65519.0), 65504.0);
        assert_eq!(round_to_f16(65520.0), f64::INFINITY);
        assert_eq!(round_to_f16(2f64.powi(-25)), 0.0);
        assert_eq!(round_to_f16(3.0 * 2f64.powi(-25)), 2f64.powi(-23));
        assert!(round_to_f16(-2f64.powi(-26)).is_sign_negative());
    }

    #[test]
    fn int_to_half_has_no_double_rounding() {
        // 2^60 + 2^52 + 1 is just above a bf16 tie at 2^60 + 2^52: rounds up. Through an
        // f64 (round to nearest) it would become the tie itself and round to even (down).
        let v = (1i64 << 60) + (1i64 << 52) + 1;
        assert_eq!(
            int_to_float(DType::I64, v, DType::BF16),
            2f64.powi(60) + 2f64.powi(53)
        );
    }
}
