//! Lowering of the typed-key primitives. A `key<fry>[s...]` value is its physical data,
//! `tensor<s...x2xui32>` (JAX's layout), so `random_wrap`, `random_unwrap` and
//! `random_clone` are the identity; the others compute JAX 0.10's threefry bits in its
//! partitionable configuration: `random_split` and `random_bits` hash a 64-bit iota over
//! the requested shape (its high and low words as the counters), `random_fold_in` the
//! counters `(0, msg)`, and `random_seed` makes a seed's high and low words.

use super::text::{i64_array, tensor_of, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::Eqn;
use crate::params::Param;
use crate::primitive::Builtin;

fn u32_aval(dims: &[i64]) -> AbstractValue {
    AbstractValue::new(
        crate::aval::Shape::new(dims).unwrap_or_else(|_| crate::aval::Shape::scalar()),
        DType::U32,
    )
}

fn ints_param<'a>(e: &'a Eqn, b: Builtin, name: &'static str) -> Result<&'a [i64], LowerError> {
    match e.params().get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(LowerError::BadParam {
            primitive: b.name().to_owned(),
            param: name,
        }),
    }
}

impl Module {
    /// The two words of keys of shape `dims` (physical `dims x 2`), each `u32[dims]`.
    fn key_words(&mut self, f: &mut FuncState<'_>, keys: &Ssa, dims: &[i64]) -> [Ssa; 2] {
        let rank = dims.len();
        let word = |m: &mut Module, f: &mut FuncState<'_>, i: i64| -> Ssa {
            let mut start = vec![0; rank];
            start.push(i);
            let mut limit = dims.to_vec();
            limit.push(i + 1);
            let mut piece = dims.to_vec();
            piece.push(1);
            let attrs = format!(
                "start_indices = {}, limit_indices = {}, strides = {}",
                i64_array(&start),
                i64_array(&limit),
                i64_array(&vec![1; rank + 1])
            );
            let s = m.op1(
                f,
                "stablehlo.slice",
                &[keys],
                &attrs,
                tensor_of(&piece, DType::U32),
            );
            m.op1(
                f,
                "stablehlo.reshape",
                &[&s],
                "",
                tensor_of(dims, DType::U32),
            )
        };
        [word(self, f, 0), word(self, f, 1)]
    }

    /// Keys of shape `dims` from their two words (`u32[dims]` each): JAX's
    /// `stack([w0, w1], axis=-1)`.
    fn stack_words(&mut self, f: &mut FuncState<'_>, w0: &Ssa, w1: &Ssa, dims: &[i64]) -> Ssa {
        let rank = dims.len();
        let mut piece = dims.to_vec();
        piece.push(1);
        let mapped: Vec<i64> = (0..rank as i64).collect();
        let attrs = format!("broadcast_dimensions = {}", i64_array(&mapped));
        let parts: Vec<Ssa> = [w0, w1]
            .iter()
            .map(|w| {
                self.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[w],
                    &attrs,
                    tensor_of(&piece, DType::U32),
                )
            })
            .collect();
        let cat = format!("dimension = {rank} : i64");
        self.op1(
            f,
            "stablehlo.concatenate",
            &[&parts[0], &parts[1]],
            &cat,
            tensor_of(dims, DType::KeyFry),
        )
    }

    /// The high and low words of the row-major 64-bit iota over the last `counted`
    /// dimensions of `dims` (repeated over the leading ones), as JAX's `iota_2x32_shape`
    /// lowers it: one `u64` iota per counted dimension, scaled by its stride and summed.
    fn iota_2x32(&mut self, f: &mut FuncState<'_>, dims: &[i64], counted: usize) -> [Ssa; 2] {
        let lead = dims.len() - counted;
        if counted == 0 {
            return [self.u32_splat(f, 0, dims), self.u32_splat(f, 0, dims)];
        }
        let ty64 = tensor_of(dims, DType::U64);
        let mut acc: Option<Ssa> = None;
        let mut stride: u64 = 1;
        for d in (lead..dims.len()).rev() {
            let attrs = format!("iota_dimension = {d} : i64");
            let iota = self.op1(f, "stablehlo.iota", &[], &attrs, ty64.clone());
            let scaled = if stride == 1 {
                iota
            } else {
                let c = format!("value = dense<{stride}> : {ty64}");
                let s = self.op1(f, "stablehlo.constant", &[], &c, ty64.clone());
                self.op1(f, "stablehlo.multiply", &[&s, &iota], "", ty64.clone())
            };
            acc = Some(match acc {
                None => scaled,
                Some(a) => self.op1(f, "stablehlo.add", &[&scaled, &a], "", ty64.clone()),
            });
            stride = stride.wrapping_mul(dims[d].max(0) as u64);
        }
        let counts = acc.unwrap_or_else(|| Ssa::new(String::new(), String::new()));
        let c32 = format!("value = dense<32> : {ty64}");
        let shift = self.op1(f, "stablehlo.constant", &[], &c32, ty64.clone());
        let high = self.op1(
            f,
            "stablehlo.shift_right_logical",
            &[&counts, &shift],
            "",
            ty64,
        );
        let ty32 = tensor_of(dims, DType::U32);
        [
            self.op1(f, "stablehlo.convert", &[&high], "", ty32.clone()),
            self.op1(f, "stablehlo.convert", &[&counts], "", ty32),
        ]
    }

    /// Each key of shape `keys` hashed with the iota counters of `extra`: the two
    /// `u32[keys + extra]` words.
    fn hash_iota(
        &mut self,
        f: &mut FuncState<'_>,
        keys: &Ssa,
        key_dims: &[i64],
        extra: &[i64],
    ) -> Vec<Ssa> {
        let [w0, w1] = self.key_words(f, keys, key_dims);
        let mut dims = key_dims.to_vec();
        dims.extend_from_slice(extra);
        let [hi, lo] = self.iota_2x32(f, &dims, extra.len());
        let mapped: Vec<i64> = (0..key_dims.len() as i64).collect();
        let attrs = format!("broadcast_dimensions = {}", i64_array(&mapped));
        let mut full = Vec::with_capacity(4);
        for w in [w0, w1] {
            full.push(if extra.is_empty() {
                w
            } else {
                self.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[&w],
                    &attrs,
                    tensor_of(&dims, DType::U32),
                )
            });
        }
        full.push(hi);
        full.push(lo);
        let avals = vec![u32_aval(&dims); 4];
        self.threefry2x32(f, &full, &avals, &dims)
    }

    /// Lowers one typed-key equation.
    pub(super) fn lower_random(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let x = inputs.first().cloned().ok_or(LowerError::BadParam {
            primitive: b.name().to_owned(),
            param: "operands",
        })?;
        let dims = in_avals[0].shape.dims();
        Ok(vec![match b {
            Builtin::RandomWrap | Builtin::RandomUnwrap | Builtin::RandomClone => x,
            Builtin::RandomSeed => {
                let d = in_avals[0].dtype;
                let ty32 = tensor_of(dims, DType::U32);
                let high = if d.size_bytes() == 8 {
                    let ty = tensor_of(dims, d);
                    let c = format!("value = dense<32> : {ty}");
                    let shift = self.op1(f, "stablehlo.constant", &[], &c, ty.clone());
                    let h = self.op1(f, "stablehlo.shift_right_logical", &[&x, &shift], "", ty);
                    self.op1(f, "stablehlo.convert", &[&h], "", ty32.clone())
                } else {
                    self.u32_splat(f, 0, dims)
                };
                let low = if d == DType::U32 {
                    x
                } else {
                    self.op1(f, "stablehlo.convert", &[&x], "", ty32)
                };
                self.stack_words(f, &high, &low, dims)
            }
            Builtin::RandomSplit => {
                let extra = ints_param(e, b, "shape")?;
                let words = self.hash_iota(f, &x, dims, extra);
                self.stack_words(f, &words[0], &words[1], out.shape.dims())
            }
            Builtin::RandomBits => {
                let extra = ints_param(e, b, "shape")?;
                let words = self.hash_iota(f, &x, dims, extra);
                let odims = out.shape.dims();
                let ty32 = tensor_of(odims, DType::U32);
                let out_ty = tensor_of(odims, out.dtype);
                match out.dtype {
                    DType::U64 => {
                        let hi = self.op1(f, "stablehlo.convert", &[&words[0]], "", out_ty.clone());
                        let lo = self.op1(f, "stablehlo.convert", &[&words[1]], "", out_ty.clone());
                        let c = format!("value = dense<32> : {out_ty}");
                        let shift = self.op1(f, "stablehlo.constant", &[], &c, out_ty.clone());
                        let hi = self.op1(
                            f,
                            "stablehlo.shift_left",
                            &[&hi, &shift],
                            "",
                            out_ty.clone(),
                        );
                        self.op1(f, "stablehlo.or", &[&hi, &lo], "", out_ty)
                    }
                    DType::U32 => self.op1(f, "stablehlo.xor", &[&words[0], &words[1]], "", ty32),
                    _ => {
                        let bits = self.op1(f, "stablehlo.xor", &[&words[0], &words[1]], "", ty32);
                        self.op1(f, "stablehlo.convert", &[&bits], "", out_ty)
                    }
                }
            }
            Builtin::RandomFoldIn => {
                let odims = out.shape.dims();
                let [w0, w1] = self.key_words(f, &x, dims);
                let k0 = self.broadcast_to(f, w0, &u32_aval(dims), odims);
                let k1 = self.broadcast_to(f, w1, &u32_aval(dims), odims);
                let m_aval = &in_avals[1];
                let mut m = inputs[1].clone();
                if m_aval.dtype != DType::U32 {
                    let t = tensor_of(m_aval.shape.dims(), DType::U32);
                    m = self.op1(f, "stablehlo.convert", &[&m], "", t);
                }
                let m = self.broadcast_to(f, m, &u32_aval(m_aval.shape.dims()), odims);
                let zero = self.u32_splat(f, 0, odims);
                let avals = vec![u32_aval(odims); 4];
                let words = self.threefry2x32(f, &[k0, k1, zero, m], &avals, odims);
                self.stack_words(f, &words[0], &words[1], odims)
            }
            _ => {
                return Err(LowerError::Unsupported {
                    primitive: b.name().to_owned(),
                })
            }
        }])
    }
}
