//! The typed-key primitives on host arrays, bit for bit as JAX 0.10 computes them with
//! threefry2x32 in its partitionable configuration (`jax_threefry_partitionable=True`,
//! the default): `split` and `random_bits` hash the counters of a 64-bit iota over the
//! requested shape (high word, low word), `fold_in` hashes the counter pair `(0, msg)`.
//!
//! A key element is stored packed in one `i64`: `(word0 << 32) | word1` (see
//! [`crate::eval`]).

use super::array::{HostArray, HostData};
use super::bits::threefry2x32_block;
use super::ops::{binary_shape, internal, param_int, param_ints, step_of, stretched};
use super::EvalError;
use crate::aval::Shape;
use crate::dtype::DType;
use crate::params::Params;

type R<T> = Result<T, EvalError>;

/// A key's packed storage from its two words.
pub(crate) fn pack_key(w0: u32, w1: u32) -> i64 {
    ((u64::from(w0) << 32) | u64::from(w1)) as i64
}

/// A key's two words from its packed storage.
pub(crate) fn unpack_key(k: i64) -> (u32, u32) {
    let k = k as u64;
    ((k >> 32) as u32, k as u32)
}

fn ints_of(x: &HostArray) -> R<&[i64]> {
    x.as_i64()
        .ok_or_else(|| internal(format!("an integer or key array expected, got {}", x.dtype)))
}

fn shape_of(dims: &[i64]) -> R<Shape> {
    Shape::new(dims).map_err(|e| internal(e.to_string()))
}

fn with_suffix(x: &HostArray, suffix: &[i64]) -> R<Shape> {
    let mut dims = x.shape.dims().to_vec();
    dims.extend_from_slice(suffix);
    shape_of(&dims)
}

fn keys(shape: Shape, data: Vec<i64>) -> HostArray {
    HostArray {
        shape,
        dtype: DType::KeyFry,
        data: HostData::Int(data),
    }
}

/// `random_seed`: JAX's `threefry_seed` of each seed: the high word is the seed shifted
/// right by 32 (zero for seeds of 32 bits or fewer), the low word its low 32 bits (a
/// negative narrow seed sign-extends, as JAX's `bitwise_and` promotion does).
pub(super) fn random_seed(seeds: &HostArray) -> R<HostArray> {
    let wide = seeds.dtype.size_bytes() == 8;
    let out = ints_of(seeds)?
        .iter()
        .map(|&s| {
            let hi = if wide { ((s as u64) >> 32) as u32 } else { 0 };
            pack_key(hi, s as u32)
        })
        .collect();
    Ok(keys(seeds.shape.clone(), out))
}

/// `random_wrap`: `u32[..., 2]` to keys.
pub(super) fn random_wrap(data: &HostArray) -> R<HostArray> {
    let dims = data.shape.dims();
    if dims.last() != Some(&2) {
        return Err(internal(
            "random_wrap of data not ending in a dimension of 2",
        ));
    }
    let out = ints_of(data)?
        .chunks_exact(2)
        .map(|w| pack_key(w[0] as u32, w[1] as u32))
        .collect();
    Ok(keys(shape_of(&dims[..dims.len() - 1])?, out))
}

/// `random_unwrap`: keys to `u32[..., 2]`.
pub(super) fn random_unwrap(k: &HostArray) -> R<HostArray> {
    let mut out = Vec::with_capacity(k.len() * 2);
    for &key in ints_of(k)? {
        let (w0, w1) = unpack_key(key);
        out.push(i64::from(w0));
        out.push(i64::from(w1));
    }
    Ok(HostArray {
        shape: with_suffix(k, &[2])?,
        dtype: DType::U32,
        data: HostData::Int(out),
    })
}

/// Calls `f` with each key's words and, for each of `count` counters in row-major order,
/// the threefry2x32 hash of the counter's 64-bit value as `(high, low)` words.
fn hash_counters(k: &HostArray, count: usize, mut f: impl FnMut(u32, u32)) -> R<()> {
    for &key in ints_of(k)? {
        let (k0, k1) = unpack_key(key);
        for i in 0..count as u64 {
            let (a, b) = threefry2x32_block(k0, k1, (i >> 32) as u32, i as u32);
            f(a, b);
        }
    }
    Ok(())
}

fn count_of(suffix: &Shape) -> usize {
    suffix.size() as usize
}

/// `random_split[shape]`: each key's `shape` new keys.
pub(super) fn random_split(k: &HostArray, params: &Params) -> R<HostArray> {
    let suffix = param_ints(params, "shape")?;
    let shape = with_suffix(k, suffix)?;
    let mut out = Vec::with_capacity(shape.size() as usize);
    hash_counters(k, count_of(&shape_of(suffix)?), |a, b| {
        out.push(pack_key(a, b))
    })?;
    Ok(keys(shape, out))
}

/// `random_bits[bit_width shape]`: 64-bit words are `(high << 32) | low`, narrower ones
/// the low bits of `high ^ low`.
pub(super) fn random_bits(k: &HostArray, params: &Params) -> R<HostArray> {
    let suffix = param_ints(params, "shape")?;
    let (dtype, mask) = match param_int(params, "bit_width")? {
        8 => (DType::U8, 0xFF),
        16 => (DType::U16, 0xFFFF),
        32 => (DType::U32, 0xFFFF_FFFF),
        64 => (DType::U64, 0),
        w => return Err(internal(format!("random_bits of bit width {w}"))),
    };
    let shape = with_suffix(k, suffix)?;
    let mut out = Vec::with_capacity(shape.size() as usize);
    hash_counters(k, count_of(&shape_of(suffix)?), |a, b| {
        out.push(if dtype == DType::U64 {
            pack_key(a, b)
        } else {
            i64::from(a ^ b) & mask
        })
    })?;
    Ok(HostArray {
        shape,
        dtype,
        data: HostData::Int(out),
    })
}

/// `random_fold_in keys msgs`: each key hashed with the counter pair `(0, msg)`, the
/// message taken modulo 2^32 (JAX converts it to `u32`); the operands broadcast.
pub(super) fn random_fold_in(k: &HostArray, msgs: &HostArray) -> R<HostArray> {
    let shape = binary_shape(k, msgs)?;
    let n = shape.size() as usize;
    let (ks, ms) = (stretched(k, &shape)?, stretched(msgs, &shape)?);
    let (kstep, mstep) = (step_of(ks.len(), n)?, step_of(ms.len(), n)?);
    let (kv, mv) = (ints_of(&ks)?, ints_of(&ms)?);
    let out = (0..n)
        .map(|i| {
            let (k0, k1) = unpack_key(kv[i * kstep]);
            let (a, b) = threefry2x32_block(k0, k1, 0, mv[i * mstep] as u32);
            pack_key(a, b)
        })
        .collect();
    Ok(keys(shape, out))
}
