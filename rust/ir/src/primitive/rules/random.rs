//! Shape rules of the typed-key primitives (`random_seed`, `random_wrap`,
//! `random_unwrap`, `random_bits`, `random_split`, `random_fold_in`; `random_clone` is the
//! identity), and the gate that keeps keys out of every other primitive but the
//! structural ones JAX allows on key arrays.

use super::{arity, bad, binary_shape, check_dtype, int, ints, operands, shape, Rule, RuleError};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::params::{Param, Params};
use crate::primitive::Builtin;

/// Refuses key operands of the primitives that do not take keys (`add` of two keys is a
/// `RuleError::DType`, as JAX's `TypeError`).
pub(super) fn refuse_keys(prim: Builtin, inputs: &[AbstractValue]) -> Result<(), RuleError> {
    if prim.takes_keys() {
        return Ok(());
    }
    match inputs.iter().position(|a| a.dtype.is_key()) {
        Some(operand) => Err(RuleError::DType {
            operand,
            got: inputs[operand].dtype,
            expected: format!(
                "a numeric dtype ({} does not accept key arrays)",
                prim.name()
            ),
        }),
        None => Ok(()),
    }
}

/// The `impl` param: `fry` (threefry2x32) is the one implementation.
fn key_impl(params: &Params) -> Result<DType, RuleError> {
    match params.get("impl") {
        Some(Param::Str(s)) if &**s == "fry" => Ok(DType::KeyFry),
        Some(Param::Str(s)) => Err(bad(
            "impl",
            format!(
                "PRNG implementation '{s}' is not supported (ferrax has threefry2x32 keys, \
                 impl=fry, only)"
            ),
        )),
        _ => Err(RuleError::MissingParam { name: "impl" }),
    }
}

/// A shape as Python prints the tuple (`(3,)`, `(2, 3)`), as JAX's messages show it.
fn py_shape(dims: &[i64]) -> String {
    match dims {
        [d] => format!("({d},)"),
        _ => {
            let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

fn check_keys(inputs: &[AbstractValue], operand: usize) -> Result<(), RuleError> {
    check_dtype(inputs, operand, DType::is_key, "a key array (key<fry>)")
}

fn key_shape_param(params: &Params) -> Result<&[i64], RuleError> {
    let dims = ints(params, "shape")?;
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(bad(
            "shape",
            format!("dimension {d} of {dims:?} is negative"),
        ));
    }
    Ok(dims)
}

/// `random_seed[impl]`: integer seeds of any shape, one key per seed (JAX's
/// `threefry_seed`: "PRNG key seed must be an integer").
pub(super) fn random_seed(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let key = key_impl(params)?;
    check_dtype(
        inputs,
        0,
        DType::is_int,
        "an integer dtype (PRNG key seed must be an integer)",
    )?;
    Ok(vec![AbstractValue::new(inputs[0].shape.clone(), key)])
}

/// `random_wrap[impl]`: `u32[..., 2]` key data to `key<fry>[...]`, with the checks of
/// JAX's `_check_prng_key_data`.
pub(super) fn random_wrap(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    let key = key_impl(params)?;
    let x = &inputs[0];
    let dims = x.shape.dims();
    if dims.is_empty() {
        return Err(operands(
            "invalid PRNG key data: expected key_data.ndim >= 1; got ndim=0",
        ));
    }
    if dims[dims.len() - 1] != 2 {
        return Err(operands(format!(
            "invalid PRNG key data: expected key_data.shape to end with (2,); got shape={} \
             for impl=threefry2x32",
            py_shape(dims)
        )));
    }
    check_dtype(
        inputs,
        0,
        |d| d == DType::U32,
        "u32 (invalid PRNG key data: expected key_data.dtype = uint32)",
    )?;
    Ok(vec![AbstractValue::new(
        shape(&dims[..dims.len() - 1])?,
        key,
    )])
}

/// `random_unwrap`: `key<fry>[...]` to its data, `u32[..., 2]`.
pub(super) fn random_unwrap(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 1)?;
    check_keys(inputs, 0)?;
    let mut dims = inputs[0].shape.dims().to_vec();
    dims.push(2);
    Ok(vec![AbstractValue::new(shape(&dims)?, DType::U32)])
}

/// `random_bits[bit_width shape]`: `uint{bit_width}[*keys.shape, *shape]`.
pub(super) fn random_bits(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    check_keys(inputs, 0)?;
    let out_dtype = match int(params, "bit_width")? {
        8 => DType::U8,
        16 => DType::U16,
        32 => DType::U32,
        64 => DType::U64,
        w => {
            return Err(bad(
                "bit_width",
                format!("{w}: requires 8-, 16-, 32- or 64-bit field width"),
            ))
        }
    };
    let extra = key_shape_param(params)?;
    let mut dims = inputs[0].shape.dims().to_vec();
    dims.extend_from_slice(extra);
    Ok(vec![AbstractValue::new(shape(&dims)?, out_dtype)])
}

/// `random_split[shape]`: `key<fry>[*keys.shape, *shape]`.
pub(super) fn random_split(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 1)?;
    check_keys(inputs, 0)?;
    let extra = key_shape_param(params)?;
    let mut dims = inputs[0].shape.dims().to_vec();
    dims.extend_from_slice(extra);
    Ok(vec![AbstractValue::new(shape(&dims)?, inputs[0].dtype)])
}

/// `random_fold_in keys msgs`: integer messages (JAX converts them to `u32`) broadcast
/// against the keys as elementwise operands do; keys of the broadcast shape out.
pub(super) fn random_fold_in(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 2)?;
    check_keys(inputs, 0)?;
    check_dtype(
        inputs,
        1,
        DType::is_int,
        "an integer dtype (messages are u32)",
    )?;
    let (k, m) = (&inputs[0], &inputs[1]);
    let out = binary_shape(k, m).map_err(|_| {
        operands(format!(
            "random_fold_in got incompatible shapes for broadcasting: {}, {}",
            py_shape(k.shape.dims()),
            py_shape(m.shape.dims())
        ))
    })?;
    Ok(vec![AbstractValue::new(out, k.dtype)])
}
