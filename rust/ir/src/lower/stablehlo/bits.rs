//! Lowering of `threefry2x32`: the cipher's 20 rounds written out as StableHLO integer
//! ops (JAX's unrolled lowering; its CPU lowering rolls the five groups of rounds into a
//! `while` loop, which computes the same bits).

use super::text::{tensor_of, Ssa};
use super::{FuncState, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use std::collections::HashMap;

/// The rotations of the rounds, four per group, groups alternating.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// Threefry's key-schedule parity constant.
const PARITY: u32 = 0x1BD1_1BDA;

impl Module {
    /// A `u32` constant of shape `dims` holding `value` everywhere (a splat).
    pub(super) fn u32_splat(&mut self, f: &mut FuncState<'_>, value: u32, dims: &[i64]) -> Ssa {
        let ty = tensor_of(dims, DType::U32);
        let attrs = format!("value = dense<{value}> : {ty}");
        self.op1(f, "stablehlo.constant", &[], &attrs, ty)
    }

    /// `threefry2x32(k0, k1, x0, x1)`: every operand broadcast to the result's shape
    /// `dims`, then the cipher; returns both words.
    pub(super) fn threefry2x32(
        &mut self,
        f: &mut FuncState<'_>,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        dims: &[i64],
    ) -> Vec<Ssa> {
        let ty = tensor_of(dims, DType::U32);
        let full: Vec<Ssa> = inputs
            .iter()
            .zip(in_avals)
            .map(|(x, a)| self.broadcast_to(f, x.clone(), a, dims))
            .collect();
        let mut consts: HashMap<u32, Ssa> = HashMap::new();
        let mut konst = |m: &mut Module, f: &mut FuncState<'_>, v: u32| -> Ssa {
            consts
                .entry(v)
                .or_insert_with(|| m.u32_splat(f, v, dims))
                .clone()
        };
        let parity = konst(self, f, PARITY);
        let k01 = self.op1(f, "stablehlo.xor", &[&full[0], &full[1]], "", ty.clone());
        let k2 = self.op1(f, "stablehlo.xor", &[&k01, &parity], "", ty.clone());
        let ks = [full[0].clone(), full[1].clone(), k2];
        let mut a = self.op1(f, "stablehlo.add", &[&full[2], &ks[0]], "", ty.clone());
        let mut b = self.op1(f, "stablehlo.add", &[&full[3], &ks[1]], "", ty.clone());
        for group in 0..5u32 {
            for &r in &ROTATIONS[(group % 2) as usize] {
                a = self.op1(f, "stablehlo.add", &[&a, &b], "", ty.clone());
                let left = konst(self, f, r);
                let right = konst(self, f, 32 - r);
                let hi = self.op1(f, "stablehlo.shift_left", &[&b, &left], "", ty.clone());
                let lo = self.op1(
                    f,
                    "stablehlo.shift_right_logical",
                    &[&b, &right],
                    "",
                    ty.clone(),
                );
                let rotated = self.op1(f, "stablehlo.or", &[&hi, &lo], "", ty.clone());
                b = self.op1(f, "stablehlo.xor", &[&a, &rotated], "", ty.clone());
            }
            let g = group as usize;
            a = self.op1(f, "stablehlo.add", &[&a, &ks[(g + 1) % 3]], "", ty.clone());
            b = self.op1(f, "stablehlo.add", &[&b, &ks[(g + 2) % 3]], "", ty.clone());
            let step = konst(self, f, group + 1);
            b = self.op1(f, "stablehlo.add", &[&b, &step], "", ty.clone());
        }
        vec![a, b]
    }
}
