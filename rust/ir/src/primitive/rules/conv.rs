//! The shape rule of `conv_general_dilated` (JAX's checks, in JAX's order, with checked
//! arithmetic), and [`ConvGeometry`], the params read once for the evaluator, the
//! lowering, the cost model and the transpose rules.

use super::{arity, bad, bit_width, operands, shape, Rule, RuleError};
use crate::aval::AbstractValue;
use crate::dtype::{DType, DTypeKind};
use crate::params::{ConvDimensionNumbers, Param, Params};

/// `conv_general_dilated`'s params, read and checked against each other (not yet against
/// the operands: see [`ConvGeometry::out_dims`]).
#[derive(Clone, Debug)]
pub struct ConvGeometry<'a> {
    /// The dimension numbers.
    pub dn: &'a ConvDimensionNumbers,
    /// One stride per spatial dimension (in `rhs_spec` order).
    pub window_strides: &'a [i64],
    /// `(low, high)` padding per spatial dimension.
    pub padding: &'a [(i64, i64)],
    /// The lhs's dilation per spatial dimension.
    pub lhs_dilation: &'a [i64],
    /// The rhs's dilation per spatial dimension.
    pub rhs_dilation: &'a [i64],
    /// `feature_group_count`.
    pub feature_group_count: i64,
    /// `batch_group_count`.
    pub batch_group_count: i64,
}

/// `max(0, 1 + dilation * (d - 1))` (JAX's `dilate_dim`), `None` on overflow.
pub fn conv_dilate_dim(d: i64, dilation: i64) -> Option<i64> {
    if d == 0 {
        return Some(0);
    }
    Some(
        dilation
            .checked_mul(d.checked_sub(1)?)?
            .checked_add(1)?
            .max(0),
    )
}

fn ints_param<'a>(params: &'a Params, name: &'static str) -> Result<&'a [i64], RuleError> {
    match params.get(name) {
        Some(Param::Ints(v)) => Ok(v),
        Some(Param::Bools(v)) if v.is_empty() => Ok(&[]),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn int_param(params: &Params, name: &'static str) -> Result<i64, RuleError> {
    match params.get(name) {
        Some(Param::Int(v)) => Ok(*v),
        _ => Err(RuleError::MissingParam { name }),
    }
}

/// A tuple as Python prints it.
fn tup(xs: &[i64]) -> String {
    match xs {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            xs.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `spec` is a permutation of `0..rank` (linear time).
fn check_perm(field: &str, spec: &[i64], rank: usize) -> Result<(), RuleError> {
    let mut seen = vec![false; rank];
    if spec.len() != rank {
        return Err(bad(
            "dimension_numbers",
            format!(
                "{field} {} must have one entry per operand dimension ({rank})",
                tup(spec)
            ),
        ));
    }
    for &a in spec {
        match usize::try_from(a).ok().and_then(|i| seen.get_mut(i)) {
            Some(slot) if !*slot => *slot = true,
            _ => {
                return Err(bad(
                    "dimension_numbers",
                    format!("{field} {} is not a permutation of 0..{rank}", tup(spec)),
                ))
            }
        }
    }
    Ok(())
}

impl<'a> ConvGeometry<'a> {
    /// Reads the params and checks those that do not depend on the operands: group counts
    /// positive and not both above 1, one stride, padding pair and dilation per spatial
    /// dimension, strides and dilations at least 1, the three specs of one length of at
    /// least 2.
    pub fn from_params(params: &'a Params) -> Result<ConvGeometry<'a>, RuleError> {
        let dn = match params.get("dimension_numbers") {
            Some(Param::ConvDims(d)) => &**d,
            _ => {
                return Err(RuleError::MissingParam {
                    name: "dimension_numbers",
                })
            }
        };
        let padding: &[(i64, i64)] = match params.get("padding") {
            Some(Param::Pairs(p)) => p,
            _ => return Err(RuleError::MissingParam { name: "padding" }),
        };
        let g = ConvGeometry {
            dn,
            window_strides: ints_param(params, "window_strides")?,
            padding,
            lhs_dilation: ints_param(params, "lhs_dilation")?,
            rhs_dilation: ints_param(params, "rhs_dilation")?,
            feature_group_count: int_param(params, "feature_group_count")?,
            batch_group_count: int_param(params, "batch_group_count")?,
        };
        let rank = dn.lhs_spec.len();
        if rank < 2 || dn.rhs_spec.len() != rank || dn.out_spec.len() != rank {
            return Err(bad(
                "dimension_numbers",
                format!("{dn}: the three specs must have one length of at least 2"),
            ));
        }
        for (what, v) in [
            ("feature_group_count", g.feature_group_count),
            ("batch_group_count", g.batch_group_count),
        ] {
            if v <= 0 {
                return Err(bad(
                    what,
                    format!("{what} must be a positive integer, got {v}."),
                ));
            }
        }
        if g.batch_group_count > 1 && g.feature_group_count > 1 {
            return Err(bad(
                "batch_group_count",
                format!(
                    "At most one of batch_group_count and feature_group_count may be > 1, got \
                     batch_group_count={} and feature_group_count={}",
                    g.batch_group_count, g.feature_group_count
                ),
            ));
        }
        let n = rank - 2;
        if g.window_strides.len() != n {
            return Err(bad(
                "window_strides",
                format!(
                    "window and window_strides must have the same number \
                     of dimensions, but got {n} and {}",
                    g.window_strides.len()
                ),
            ));
        }
        if g.padding.len() != n {
            return Err(bad(
                "padding",
                format!(
                    "Wrong number of explicit pads for convolution: expected {n}, got {}.",
                    g.padding.len()
                ),
            ));
        }
        for (name, v) in [
            ("lhs_dilation", g.lhs_dilation),
            ("rhs_dilation", g.rhs_dilation),
        ] {
            if v.len() != n {
                return Err(bad(
                    name,
                    format!(
                        "{} has {} entries for {n} spatial dimensions",
                        tup(v),
                        v.len()
                    ),
                ));
            }
            if v.iter().any(|&d| d < 1) {
                return Err(bad(
                    name,
                    format!("All dilations must be positive, got {}.", tup(v)),
                ));
            }
        }
        if g.window_strides.iter().any(|&s| s < 1) {
            return Err(bad(
                "window_strides",
                format!("strides must be positive, got {}", tup(g.window_strides)),
            ));
        }
        Ok(g)
    }

    /// The number of spatial dimensions.
    pub fn spatial(&self) -> usize {
        self.dn.lhs_spec.len() - 2
    }

    /// The output's dimensions for operands of these dimensions (JAX's checks: ranks,
    /// specs, group counts dividing the features and batch, padded sizes not negative).
    pub fn out_dims(&self, lhs: &[i64], rhs: &[i64]) -> Result<Vec<i64>, RuleError> {
        let dn = self.dn;
        if lhs.len() != rhs.len() {
            return Err(operands(format!(
                "lhs and rhs must have the same number of dimensions, \
                 but got {} and {}.",
                tup(lhs),
                tup(rhs)
            )));
        }
        let rank = lhs.len();
        check_perm("lhs_spec", &dn.lhs_spec, rank)?;
        check_perm("rhs_spec", &dn.rhs_spec, rank)?;
        check_perm("out_spec", &dn.out_spec, rank)?;
        let l = |i: usize| lhs[dn.lhs_spec[i] as usize];
        let r = |i: usize| rhs[dn.rhs_spec[i] as usize];
        let (fgc, bgc) = (self.feature_group_count, self.batch_group_count);
        let lhs_features = l(1);
        if lhs_features % fgc != 0 {
            return Err(operands(format!(
                "feature_group_count must divide lhs feature dimension \
                 size, but {fgc} does not divide {lhs_features}."
            )));
        }
        if lhs_features / fgc != r(1) {
            return Err(operands(format!(
                "lhs feature dimension size divided by \
                 feature_group_count must equal the rhs input feature dimension size, but \
                 {lhs_features} // {fgc} != {}.",
                r(1)
            )));
        }
        if r(0) % fgc != 0 {
            return Err(operands(format!(
                "rhs output feature dimension size must be a multiple \
                 of feature_group_count, but {} is not a multiple of {fgc}.",
                r(0)
            )));
        }
        if bgc > 1 && l(0) % bgc != 0 {
            return Err(operands(format!(
                "batch_group_count must divide lhs batch dimension \
                 size, but {bgc} does not divide {}.",
                l(0)
            )));
        }
        if r(0) % bgc != 0 {
            return Err(operands(format!(
                "rhs output feature dimension size must be a multiple \
                 of batch_group_count, but {} is not a multiple of {bgc}.",
                r(0)
            )));
        }
        let overflow = || operands("a dilated or padded size overflows");
        let mut out_trans = vec![l(0) / bgc, r(0)];
        for i in 0..self.spatial() {
            let lhs_d = conv_dilate_dim(l(i + 2), self.lhs_dilation[i]).ok_or_else(overflow)?;
            let rhs_d = conv_dilate_dim(r(i + 2), self.rhs_dilation[i]).ok_or_else(overflow)?;
            let (lo, hi) = self.padding[i];
            let padded = lhs_d
                .checked_add(lo)
                .and_then(|x| x.checked_add(hi))
                .ok_or_else(overflow)?;
            if padded < 0 {
                let pads: Vec<String> = self
                    .padding
                    .iter()
                    .map(|(a, b)| format!("({a}, {b})"))
                    .collect();
                let sdims: Vec<i64> = (0..self.spatial()).map(|j| l(j + 2)).collect();
                return Err(operands(format!(
                    "Negative padding is larger than the size of the corresponding dimension: \
                     got padding=[{}] for lhs_shape[2:]={}",
                    pads.join(", "),
                    tup(&sdims)
                )));
            }
            let span = padded.checked_sub(rhs_d).ok_or_else(overflow)?;
            let size = span.div_euclid(self.window_strides[i]) + 1;
            out_trans.push(size.max(0));
        }
        let mut out = vec![0; rank];
        for (i, &d) in dn.out_spec.iter().enumerate() {
            out[d as usize] = out_trans[i];
        }
        Ok(out)
    }
}

/// JAX's `_validate_preferred_element_type`: an integer input may ask for a float; else
/// the kinds agree (a signed input a signed type) and the width does not shrink.
fn check_preferred(input: DType, preferred: DType) -> Result<(), RuleError> {
    use DTypeKind as K;
    let (ik, pk) = (input.kind(), preferred.kind());
    if input.is_int() && pk == K::Float {
        return Ok(());
    }
    let compatible = match ik {
        K::SignedInt | K::UnsignedInt => preferred.is_int(),
        K::Float => pk == K::Float,
        K::Bool => true,
        K::Key => false,
    };
    if !compatible {
        return Err(bad(
            "preferred_element_type",
            "Input type is incompatible with `preferred_element_type`. The compatible \
             combinations of (input_type, preferred_element_type) are (integral, integral), \
             (integral, floating), (floating, floating), (complex, complex.",
        ));
    }
    if ik == K::SignedInt && pk != K::SignedInt {
        return Err(bad(
            "preferred_element_type",
            "`preferred_element_type` must have the same signedness as the original type.",
        ));
    }
    if bit_width(preferred) < bit_width(input) {
        return Err(bad(
            "preferred_element_type",
            "`preferred_element_type` must not be narrower than the original type.",
        ));
    }
    Ok(())
}

/// `conv_general_dilated`: two operands of one dtype and rank; the output's dtype is
/// theirs or `preferred_element_type`; weakly typed when both operands are.
pub(super) fn conv_general_dilated(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    let (l, r) = (&inputs[0], &inputs[1]);
    let g = ConvGeometry::from_params(params)?;
    if l.dtype != r.dtype {
        return Err(operands(format!(
            "requires arguments to have the same dtypes, got {}, {}.",
            l.dtype.numpy_name(),
            r.dtype.numpy_name()
        )));
    }
    if l.shape.rank() != g.dn.lhs_spec.len() || r.shape.rank() != g.dn.lhs_spec.len() {
        if l.shape.rank() != r.shape.rank() {
            return Err(operands(format!(
                "lhs and rhs must have the same number of dimensions, \
                 but got {} and {}.",
                tup(l.shape.dims()),
                tup(r.shape.dims())
            )));
        }
        return Err(bad(
            "dimension_numbers",
            format!(
                "{} has specs of length {} for operands of rank {}",
                g.dn,
                g.dn.lhs_spec.len(),
                l.shape.rank()
            ),
        ));
    }
    let dims = g.out_dims(l.shape.dims(), r.shape.dims())?;
    let out_dtype = match params.get("preferred_element_type") {
        Some(Param::DType(p)) => {
            check_preferred(l.dtype, *p)?;
            *p
        }
        _ => l.dtype,
    };
    Ok(vec![
        AbstractValue::new(shape(&dims)?, out_dtype).with_weak_type(l.weak_type && r.weak_type)
    ])
}

/// The most positions [`ConvGeometry::valid_pairs`] visits per spatial dimension.
const MAX_COUNTED: i128 = 1 << 16;

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The inverse of `a` modulo `m` (`a` and `m` coprime, `m >= 1`).
fn mod_inverse(a: i128, m: i128) -> i128 {
    let (mut old_r, mut r) = (a.rem_euclid(m), m);
    let (mut old_s, mut s) = (1i128, 0i128);
    while r != 0 {
        let q = old_r / r;
        (old_r, r) = (r, old_r - q * r);
        (old_s, s) = (s, old_s - q * s);
    }
    old_s.rem_euclid(m)
}

impl ConvGeometry<'_> {
    /// The (output, kernel) position pairs of spatial dimension `d` whose tap lands on an
    /// lhs element (not on padding or a hole of the lhs dilation), as XLA's cost analysis
    /// counts them. The tap of output `o` and kernel position `k` is at `o*s + k*rd - lo`
    /// in the dilated lhs; for each position of the shorter of the two ranges, the other
    /// range's matching positions are an arithmetic progression (a congruence), so the
    /// count costs the shorter range's length, capped at [`MAX_COUNTED`] positions (then
    /// extrapolated: shapes that large never run).
    fn valid_pairs(&self, d: usize, input: i64, kernel: i64, output: i64) -> f64 {
        let (s, rd, ld) = (
            i128::from(self.window_strides[d]),
            i128::from(self.rhs_dilation[d]),
            i128::from(self.lhs_dilation[d]),
        );
        let lo = i128::from(self.padding[d].0);
        if input <= 0 || output <= 0 || kernel <= 0 {
            return 0.0;
        }
        let last = (i128::from(input) - 1) * ld;
        let (outer, outer_coef, inner, inner_coef) = if kernel <= output {
            (i128::from(kernel), rd, i128::from(output), s)
        } else {
            (i128::from(output), s, i128::from(kernel), rd)
        };
        let counted = outer.min(MAX_COUNTED);
        let mut count: i128 = 0;
        for x in 0..counted {
            // Positions y of the inner range with 0 <= c + y*b <= last, c + y*b ≡ 0 (mod ld).
            let (c, b) = (x * outer_coef - lo, inner_coef);
            let y_lo = ((-c).div_euclid(b) + i128::from((-c).rem_euclid(b) != 0)).max(0);
            let y_hi = (last - c).div_euclid(b).min(inner - 1);
            if y_lo > y_hi {
                continue;
            }
            if ld == 1 {
                count += y_hi - y_lo + 1;
                continue;
            }
            let g = gcd(b, ld);
            if (-c).rem_euclid(g) != 0 {
                continue;
            }
            let m = ld / g;
            let y0 = ((-c) / g).rem_euclid(m) * mod_inverse(b / g, m) % m;
            let first = y_lo + (y0 - y_lo).rem_euclid(m);
            if first <= y_hi {
                count += (y_hi - first) / m + 1;
            }
        }
        count as f64 * (outer as f64 / counted as f64)
    }

    /// The multiply-adds of a convolution of these operand dimensions with this output,
    /// as XLA's cost analysis counts them: per output batch element and output feature,
    /// the input features of its group times the window taps that land on the lhs.
    pub fn multiply_adds(&self, lhs: &[i64], rhs: &[i64], out: &[i64]) -> f64 {
        let dim = |xs: &[i64], spec: &[i64], i: usize| -> i64 {
            spec.get(i)
                .and_then(|&a| usize::try_from(a).ok())
                .and_then(|a| xs.get(a))
                .copied()
                .unwrap_or(0)
        };
        let dn = self.dn;
        let mut total = dim(out, &dn.out_spec, 0) as f64
            * dim(rhs, &dn.rhs_spec, 0) as f64
            * dim(rhs, &dn.rhs_spec, 1) as f64;
        for d in 0..self.spatial() {
            total *= self.valid_pairs(
                d,
                dim(lhs, &dn.lhs_spec, d + 2),
                dim(rhs, &dn.rhs_spec, d + 2),
                dim(out, &dn.out_spec, d + 2),
            );
        }
        total
    }
}
