//! The transpose of `conv_general_dilated` in either operand (JAX's rules).
//!
//! Ignoring space, a convolution contracts `[batch, in] x [in, out] -> [batch, out]`, so
//! its transposes are convolutions too: w.r.t. the lhs, the cotangent convolved with the
//! spatially reversed kernel (its feature roles swapped), strides becoming lhs dilation
//! and the padding adjusted; w.r.t. the rhs, the lhs convolved with the cotangent, batch
//! and feature roles swapped in every spec. Feature groups of the forward convolution
//! become batch groups of the rhs transpose and stay feature groups (after moving the
//! group axis into the kernel's input features) of the lhs transpose; batch groups the
//! other way round.

use super::{params, PassError, Transposer};
use crate::aval::AbstractValue;
use crate::jaxpr::{Atom, Eqn, VarId};
use crate::params::{ConvDimensionNumbers, Param, Params};
use crate::primitive::{conv_dilate_dim, Builtin, ConvGeometry};
use std::sync::Arc;

/// `(batch, feature, ...)` with its first two entries swapped.
fn swap_roles(spec: &[i64]) -> Vec<i64> {
    let mut s = spec.to_vec();
    s.swap(0, 1);
    s
}

/// The entries of `shape` at the spatial positions of `spec`.
fn spatial(shape: &[i64], spec: &[i64]) -> Vec<i64> {
    spec[2..].iter().map(|&d| shape[d as usize]).collect()
}

impl Transposer<'_> {
    fn ill(&self, i: usize, message: impl Into<String>) -> PassError {
        PassError::IllTyped {
            eqn: Some(i),
            message: message.into(),
        }
    }

    /// Reshapes `x` (JAX's `lax.reshape`: no equation when nothing changes; `dimensions`
    /// kept only when not the identity).
    fn conv_reshape(
        &mut self,
        i: usize,
        x: Atom,
        x_aval: &AbstractValue,
        sizes: &[i64],
        perm: Option<Vec<i64>>,
    ) -> Result<(Atom, AbstractValue), PassError> {
        let perm = perm.filter(|p| p.iter().enumerate().any(|(k, &d)| d != k as i64));
        if perm.is_none() && x_aval.shape.dims() == sizes {
            return Ok((x, x_aval.clone()));
        }
        let dims = match perm {
            Some(p) => Param::ints(&p),
            None => Param::None,
        };
        let r = self.emit1(
            i,
            Builtin::Reshape,
            vec![x],
            params([
                ("new_sizes", Param::ints(sizes)),
                ("dimensions", dims),
                ("sharding", Param::None),
            ]),
        )?;
        Ok((Atom::Var(r), self.aval(r)))
    }

    /// JAX's `_reshape_axis_out_of`: axis `src` split into `(size, rest)`.
    fn axis_out_of(
        &mut self,
        i: usize,
        src: usize,
        size: i64,
        x: (Atom, AbstractValue),
    ) -> Result<(Atom, AbstractValue), PassError> {
        let mut shape = x.1.shape.dims().to_vec();
        let rest = shape[src].checked_div(size).unwrap_or(0);
        shape.splice(src..=src, [size, rest]);
        self.conv_reshape(i, x.0, &x.1, &shape, None)
    }

    /// JAX's `_reshape_axis_into`: axis `src` merged into axis `dst` (numbered after
    /// `src` is removed), as its major part.
    fn axis_into(
        &mut self,
        i: usize,
        src: usize,
        dst: usize,
        x: (Atom, AbstractValue),
    ) -> Result<(Atom, AbstractValue), PassError> {
        let dims = x.1.shape.dims();
        let mut perm: Vec<i64> = (0..dims.len() as i64)
            .filter(|&k| k != src as i64)
            .collect();
        perm.insert(dst, src as i64);
        let mut shape: Vec<i64> = dims.to_vec();
        let moved = shape.remove(src);
        shape[dst] = shape[dst]
            .checked_mul(moved)
            .ok_or_else(|| self.ill(i, "conv transpose: a merged axis overflows"))?;
        self.conv_reshape(i, x.0, &x.1, &shape, Some(perm))
    }

    fn convert_to(
        &mut self,
        i: usize,
        x: Atom,
        aval: &AbstractValue,
        target: &AbstractValue,
    ) -> Result<Atom, PassError> {
        if aval.dtype == target.dtype {
            return Ok(x);
        }
        let r = self.emit1(
            i,
            Builtin::ConvertElementType,
            vec![x],
            params([
                ("new_dtype", Param::DType(target.dtype)),
                ("weak_type", Param::Bool(target.weak_type)),
                ("sharding", Param::None),
            ]),
        )?;
        Ok(Atom::Var(r))
    }

    /// The forward equation's params with the convolution's geometry replaced.
    #[allow(clippy::too_many_arguments)]
    fn conv_params(
        e: &Eqn,
        dn: ConvDimensionNumbers,
        strides: &[i64],
        padding: Vec<(i64, i64)>,
        lhs_dilation: &[i64],
        rhs_dilation: &[i64],
        fgc: i64,
        bgc: i64,
    ) -> Params {
        let p = e.params();
        let get = |name: &str| p.get(name).cloned().unwrap_or(Param::None);
        params([
            ("window_strides", Param::ints(strides)),
            ("padding", Param::Pairs(padding.into())),
            ("lhs_dilation", Param::ints(lhs_dilation)),
            ("rhs_dilation", Param::ints(rhs_dilation)),
            ("dimension_numbers", Param::ConvDims(Arc::new(dn))),
            ("feature_group_count", Param::Int(fgc)),
            ("batch_group_count", Param::Int(bgc)),
            ("precision", get("precision")),
            ("preferred_element_type", get("preferred_element_type")),
            ("out_sharding", Param::None),
        ])
    }

    pub(super) fn conv_general_dilated(
        &mut self,
        i: usize,
        e: &Eqn,
        g: VarId,
    ) -> Result<(), PassError> {
        let src = self.src;
        let ins = e.inputs();
        let geo =
            ConvGeometry::from_params(e.params()).map_err(|err| self.ill(i, err.to_string()))?;
        let lhs_aval = src.atom_aval(ins[0]);
        let rhs_aval = src.atom_aval(ins[1]);
        let g_aval = self.aval(g);
        let dn = geo.dn;
        let (lhs_spec, rhs_spec, out_spec) = (&dn.lhs_spec, &dn.rhs_spec, &dn.out_spec);
        let n = geo.spatial();
        let overflow = || PassError::IllTyped {
            eqn: Some(i),
            message: "conv transpose: padding overflows".to_owned(),
        };
        let dil = |xs: &[i64], by: &[i64]| -> Option<Vec<i64>> {
            xs.iter()
                .zip(by)
                .map(|(&x, &d)| conv_dilate_dim(x, d))
                .collect()
        };
        let in_s = spatial(lhs_aval.shape.dims(), lhs_spec);
        let k_s = spatial(rhs_aval.shape.dims(), rhs_spec);
        let out_s = spatial(g_aval.shape.dims(), out_spec);
        let lhs_d = dil(&in_s, geo.lhs_dilation).ok_or_else(overflow)?;
        let rhs_d = dil(&k_s, geo.rhs_dilation).ok_or_else(overflow)?;
        let out_d = dil(&out_s, geo.window_strides).ok_or_else(overflow)?;
        let sub = |a: i64, b: i64| a.checked_sub(b);
        if self.atom_is_lin(ins[0]) {
            let mut fgc = geo.feature_group_count;
            let bgc = geo.batch_group_count;
            let mut rhs = (self.fwd_atom(ins[1]), rhs_aval.clone());
            let groups = if fgc > 1 { fgc } else { bgc };
            if groups > 1 {
                let (o, inp) = (rhs_spec[0] as usize, rhs_spec[1] as usize);
                rhs = self.axis_out_of(i, o, groups, rhs)?;
                rhs = self.axis_into(i, o, inp, rhs)?;
                fgc = groups;
            }
            let mut padding = Vec::with_capacity(n);
            for k in 0..n {
                let before = sub(rhs_d[k], geo.padding[k].0)
                    .and_then(|x| sub(x, 1))
                    .ok_or_else(overflow)?;
                let after = lhs_d[k]
                    .checked_add(rhs_d[k])
                    .and_then(|x| sub(x, 1))
                    .and_then(|x| sub(x, out_d[k]))
                    .and_then(|x| sub(x, before))
                    .ok_or_else(overflow)?;
                padding.push((before, after));
            }
            let rev = self.emit1(
                i,
                Builtin::Rev,
                vec![rhs.0],
                params([("dimensions", Param::ints(&rhs_spec[2..]))]),
            )?;
            let rev_aval = self.aval(rev);
            let kernel = self.convert_to(i, Atom::Var(rev), &rev_aval, &g_aval)?;
            let trans_dn = ConvDimensionNumbers {
                lhs_spec: out_spec.clone(),
                rhs_spec: swap_roles(rhs_spec),
                out_spec: lhs_spec.clone(),
            };
            let p = Self::conv_params(
                e,
                trans_dn,
                geo.lhs_dilation,
                padding,
                geo.window_strides,
                geo.rhs_dilation,
                fgc,
                1,
            );
            let out = self.emit1(
                i,
                Builtin::ConvGeneralDilated,
                vec![Atom::Var(g), kernel],
                p,
            )?;
            let out_aval = self.aval(out);
            let mut res = (
                self.convert_to(i, Atom::Var(out), &out_aval, &lhs_aval)?,
                out_aval.clone().with_weak_type(lhs_aval.weak_type),
            );
            res.1.dtype = lhs_aval.dtype;
            if bgc > 1 {
                let (b, f) = (lhs_spec[0] as usize, lhs_spec[1] as usize);
                res = self.axis_out_of(i, f, bgc, res)?;
                res = self.axis_into(i, f, b, res)?;
            }
            let Atom::Var(v) = res.0 else {
                return Err(self.ill(i, "conv transpose gave a literal"));
            };
            self.give(i, ins[0], v)
        } else {
            if g_aval.shape.size() == 0 {
                // As JAX: no degenerate convolution; the rhs gets no contribution here.
                return Ok(());
            }
            let (fgc, bgc) = if geo.batch_group_count > 1 {
                (geo.batch_group_count, 1)
            } else if geo.feature_group_count > 1 {
                (1, geo.feature_group_count)
            } else {
                (1, 1)
            };
            let mut padding = Vec::with_capacity(n);
            for k in 0..n {
                let lo = geo.padding[k].0;
                let hi = sub(out_d[k], lhs_d[k])
                    .and_then(|x| x.checked_add(rhs_d[k]))
                    .and_then(|x| sub(x, lo))
                    .and_then(|x| sub(x, 1))
                    .ok_or_else(overflow)?;
                padding.push((lo, hi));
            }
            let lhs = self.fwd_atom(ins[0]);
            let lhs = self.convert_to(i, lhs, &lhs_aval, &g_aval)?;
            let trans_dn = ConvDimensionNumbers {
                lhs_spec: swap_roles(lhs_spec),
                rhs_spec: swap_roles(out_spec),
                out_spec: swap_roles(rhs_spec),
            };
            let p = Self::conv_params(
                e,
                trans_dn,
                geo.rhs_dilation,
                padding,
                geo.lhs_dilation,
                geo.window_strides,
                fgc,
                bgc,
            );
            let out = self.emit1(i, Builtin::ConvGeneralDilated, vec![lhs, Atom::Var(g)], p)?;
            let out_aval = self.aval(out);
            let res = self.convert_to(i, Atom::Var(out), &out_aval, &rhs_aval)?;
            let Atom::Var(v) = res else {
                return Err(self.ill(i, "conv transpose gave a literal"));
            };
            self.give(i, ins[1], v)
        }
    }
}
