//! Lowering of the linear-algebra primitives as JAX 0.10.2's CPU lowering has them:
//! `stablehlo.custom_call`s of jaxlib's LAPACK FFI kernels (`lapack_spotrf_ffi`,
//! `lapack_dtrsm_ffi`, `lapack_sgetrf_ffi`, ...), column-major matrix layouts, the
//! leading dimensions as batch dimensions, and a failed factorization (LAPACK's `info`)
//! turned into NaNs. The kernels must be registered with the CPU client before the
//! module is compiled (ferrax's runtime does it when a module names one).

use super::ops::compare_attrs;
use super::text::{float_literal, i64_array, tensor_of, tensor_type, write_names, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::primitive::Builtin;
use std::fmt::Write as _;

/// LAPACK's type letter of a dtype (`s` single, `d` double), or an error for a dtype
/// jaxlib has no kernel for.
fn lapack_prefix(b: Builtin, d: DType) -> Result<char, LowerError> {
    match d {
        DType::F32 => Ok('s'),
        DType::F64 => Ok('d'),
        _ => Err(LowerError::Unsupported {
            primitive: format!("{} of {d}", b.name()),
        }),
    }
}

/// The dtype the kernels compute in: jaxlib's LAPACK kernels take float32 and float64
/// only, so half-precision operands go through float32 (JAX refuses them instead; the
/// Python API does too, but every well-typed jaxpr lowers).
fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The rank of a matrix operand (2 or more, as the shape rules require).
fn matrix_rank(b: Builtin, aval: &AbstractValue) -> Result<usize, LowerError> {
    match aval.shape.rank() {
        r if r >= 2 => Ok(r),
        _ => Err(LowerError::Unsupported {
            primitive: format!("{} of {aval}", b.name()),
        }),
    }
}

/// An MLIR `tensor<Nxindex>` layout attribute.
fn layout(xs: &[i64]) -> String {
    if xs.is_empty() {
        return "dense<> : tensor<0xindex>".to_owned();
    }
    let items: Vec<String> = xs.iter().map(i64::to_string).collect();
    format!("dense<[{}]> : tensor<{}xindex>", items.join(", "), xs.len())
}

/// The layout of a batch of matrices stored column-major (LAPACK's order): the two
/// matrix dimensions minor-most, rows fastest, then the batch dimensions.
fn matrix_layout(rank: usize) -> String {
    let r = rank as i64;
    let mut l = vec![r - 2, r - 1];
    l.extend((0..r - 2).rev());
    layout(&l)
}

/// The row-major layout of a rank-`rank` array.
fn default_layout(rank: usize) -> String {
    let l: Vec<i64> = (0..rank as i64).rev().collect();
    layout(&l)
}

/// One call's FFI attributes: `(name, value)` pairs passed as `ui8` characters.
type Attrs<'a> = &'a [(&'a str, u8)];

impl Module {
    /// `x` converted to dtype `to` (itself if it has that dtype), with its new aval.
    fn convert(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        to: DType,
    ) -> (Ssa, AbstractValue) {
        if aval.dtype == to {
            return (x.clone(), aval.clone());
        }
        let out = AbstractValue::new(aval.shape.clone(), to);
        let y = self.op1(f, "stablehlo.convert", &[x], "", tensor_type(&out));
        (y, out)
    }

    /// A `stablehlo.custom_call` of the FFI kernel `target` (every operand a matrix
    /// batch, results laid out by `result_layouts`, result `i` aliasing operand
    /// `aliases[i]`).
    #[allow(clippy::too_many_arguments)]
    fn lapack_call(
        &mut self,
        f: &mut FuncState<'_>,
        target: &str,
        operands: &[&Ssa],
        operand_layouts: &[String],
        attrs: Attrs<'_>,
        result_types: &[String],
        result_layouts: &[String],
        aliases: &[usize],
        batch_dims: usize,
    ) -> Vec<Ssa> {
        self.out.push_str("    ");
        let results = self.bind_results(f, result_types);
        let config: Vec<String> = attrs
            .iter()
            .map(|(k, v)| format!("{k} = {v} : ui8"))
            .collect();
        let single = result_types.len() == 1;
        let alias_text: Vec<String> = aliases
            .iter()
            .enumerate()
            .map(|(i, operand)| {
                let tuple_index = if single { String::new() } else { i.to_string() };
                format!(
                    "#stablehlo.output_operand_alias<output_tuple_indices = [{tuple_index}], \
                     operand_index = {operand}, operand_tuple_indices = []>"
                )
            })
            .collect();
        let out = &mut self.out;
        out.push_str("\"stablehlo.custom_call\"(");
        write_names(out, operands.iter().map(|s| s.name.as_str()));
        let _ = write!(
            out,
            ") {{call_target_name = \"{target}\", backend_config = \"\", \
             mhlo.backend_config = {{{}}}, \
             mhlo.frontend_attributes = {{num_batch_dims = \"{batch_dims}\"}}, \
             operand_layouts = [{}], \
             output_operand_aliases = [{}], \
             result_layouts = [{}]}} : (",
            config.join(", "),
            operand_layouts.join(", "),
            alias_text.join(", "),
            result_layouts.join(", "),
        );
        write_names(out, operands.iter().map(|s| s.ty.as_str()));
        out.push_str(") -> ");
        super::text::write_result_types(out, result_types);
        out.push('\n');
        results
    }

    /// A splat of `value` (text) to `dims`.
    fn fill(&mut self, f: &mut FuncState<'_>, value: &str, d: DType, dims: &[i64]) -> Ssa {
        let c = self.scalar_constant(f, value, d);
        self.broadcast_to(f, c, &AbstractValue::scalar(d), dims)
    }

    /// `x` where `ok` (one flag per batch member) holds, NaN elsewhere.
    fn nan_unless(
        &mut self,
        f: &mut FuncState<'_>,
        ok: &Ssa,
        x: &Ssa,
        aval: &AbstractValue,
        batch: &[i64],
    ) -> Ssa {
        let dims = aval.shape.dims();
        let d = aval.dtype;
        let mapped: Vec<i64> = (0..batch.len() as i64).collect();
        let attrs = format!("broadcast_dimensions = {}", i64_array(&mapped));
        let ok = self.op1(
            f,
            "stablehlo.broadcast_in_dim",
            &[ok],
            &attrs,
            tensor_of(dims, DType::Bool),
        );
        let nan = self.fill(f, &float_literal(f64::NAN, d), d, dims);
        self.op1(
            f,
            "stablehlo.select",
            &[&ok, x, &nan],
            "",
            tensor_type(aval),
        )
    }

    /// `info` compared with 0 (`dir` `EQ` or `GE`).
    fn info_ok(&mut self, f: &mut FuncState<'_>, info: &Ssa, batch: &[i64], dir: &str) -> Ssa {
        let zero = self.fill(f, "0", DType::I32, batch);
        self.op1(
            f,
            "stablehlo.compare",
            &[info, &zero],
            &compare_attrs(dir, DType::I32),
            tensor_of(batch, DType::Bool),
        )
    }

    /// `cholesky`: `potrf` of the lower triangle; NaN where it fails.
    pub(super) fn lower_cholesky(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_dtype = aval.dtype;
        let b = Builtin::Cholesky;
        let (x, aval) = &self.convert(f, x, aval, compute_dtype(aval.dtype));
        let p = lapack_prefix(b, aval.dtype)?;
        let rank = matrix_rank(b, aval)?;
        let batch = &aval.shape.dims()[..rank - 2];
        let types = [tensor_type(aval), tensor_of(batch, DType::I32)];
        let layouts = [matrix_layout(rank), default_layout(batch.len())];
        let r = self.lapack_call(
            f,
            &format!("lapack_{p}potrf_ffi"),
            &[x],
            &[matrix_layout(rank)],
            &[("uplo", b'L')],
            &types,
            &layouts,
            &[0],
            batch.len(),
        );
        let ok = self.info_ok(f, &r[1], batch, "EQ");
        let l = self.nan_unless(f, &ok, &r[0], aval, batch);
        Ok(vec![self.convert(f, &l, aval, out_dtype).0])
    }

    /// `triangular_solve`: `trsm` (its result aliasing `b`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lower_triangular_solve(
        &mut self,
        f: &mut FuncState<'_>,
        a: &Ssa,
        b_in: &Ssa,
        avals: [&AbstractValue; 2],
        flags: [bool; 5],
    ) -> Result<Vec<Ssa>, LowerError> {
        let [left_side, lower, transpose_a, conjugate_a, unit_diagonal] = flags;
        let out_dtype = avals[1].dtype;
        let to = compute_dtype(out_dtype);
        let (a, _) = &self.convert(f, a, avals[0], to);
        let (b_in, b_aval) = &self.convert(f, b_in, avals[1], to);
        let p = lapack_prefix(Builtin::TriangularSolve, b_aval.dtype)?;
        let rank = matrix_rank(Builtin::TriangularSolve, b_aval)?;
        // Real matrices: conjugation is the identity, so `C` (conjugate transpose) and `T`
        // solve the same system; JAX passes `C` when both flags are set.
        let trans = match (transpose_a, conjugate_a) {
            (false, _) => b'N',
            (true, false) => b'T',
            (true, true) => b'C',
        };
        let x = self.lapack_call(
            f,
            &format!("lapack_{p}trsm_ffi"),
            &[a, b_in],
            &[matrix_layout(rank), matrix_layout(rank)],
            &[
                ("diag", if unit_diagonal { b'U' } else { b'N' }),
                ("side", if left_side { b'L' } else { b'R' }),
                ("trans_x", trans),
                ("uplo", if lower { b'L' } else { b'U' }),
            ],
            &[tensor_type(b_aval)],
            &[matrix_layout(rank)],
            &[1],
            rank - 2,
        );
        Ok(vec![self.convert(f, &x[0], b_aval, out_dtype).0])
    }

    /// `lu`: `getrf` (pivots made 0-based, NaN where `info` is negative), then the
    /// permutation the row swaps make, by a loop over the swaps.
    pub(super) fn lower_lu(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_dtype = aval.dtype;
        let (x, aval) = &self.convert(f, x, aval, compute_dtype(out_dtype));
        let p = lapack_prefix(Builtin::Lu, aval.dtype)?;
        let rank = matrix_rank(Builtin::Lu, aval)?;
        let dims = aval.shape.dims();
        let batch = &dims[..rank - 2];
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = m.min(n);
        let piv_aval = out_avals
            .get(1)
            .ok_or_else(|| super::ops::bad(Builtin::Lu, "outputs"))?;
        let types = [
            tensor_type(aval),
            tensor_type(piv_aval),
            tensor_of(batch, DType::I32),
        ];
        let layouts = [
            matrix_layout(rank),
            default_layout(batch.len() + 1),
            default_layout(batch.len()),
        ];
        let r = self.lapack_call(
            f,
            &format!("lapack_{p}getrf_ffi"),
            &[x],
            &[matrix_layout(rank)],
            &[],
            &types,
            &layouts,
            &[0],
            batch.len(),
        );
        let piv_dims = piv_aval.shape.dims();
        let one = self.fill(f, "1", DType::I32, piv_dims);
        let pivots = self.op1(
            f,
            "stablehlo.subtract",
            &[&r[1], &one],
            "",
            types[1].clone(),
        );
        let ok = self.info_ok(f, &r[2], batch, "GE");
        let lu = self.nan_unless(f, &ok, &r[0], aval, batch);
        let perm = self.pivots_to_permutation(f, &pivots, batch, k, m);
        let lu = self.convert(f, &lu, aval, out_dtype).0;
        Ok(vec![lu, pivots, perm])
    }

    /// The permutation of `0..m` made by swapping row `i` with row `pivots[..., i]` for
    /// `i` in `0..k`, in order, for every batch member: a `stablehlo.while` over `i`
    /// whose body swaps two entries of every row by comparisons with an iota.
    fn pivots_to_permutation(
        &mut self,
        f: &mut FuncState<'_>,
        pivots: &Ssa,
        batch: &[i64],
        k: i64,
        m: i64,
    ) -> Ssa {
        let bsize = batch.iter().fold(1i64, |acc, &d| acc.saturating_mul(d));
        let i32s = |dims: &[i64]| tensor_of(dims, DType::I32);
        let flat_piv = self.op1(f, "stablehlo.reshape", &[pivots], "", i32s(&[bsize, k]));
        let perm0 = self.op1(
            f,
            "stablehlo.iota",
            &[],
            "iota_dimension = 1 : i64",
            i32s(&[bsize, m]),
        );
        let zero = self.scalar_constant(f, "0", DType::I32);
        let init = [zero, perm0];
        let k_text = k.to_string();
        let mut cond = |me: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Ssa {
            let kc = me.scalar_constant(f, &k_text, DType::I32);
            me.op1(
                f,
                "stablehlo.compare",
                &[&args[0], &kc],
                &compare_attrs("LT", DType::I32),
                tensor_of(&[], DType::Bool),
            )
        };
        let mut body = |me: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Vec<Ssa> {
            let (i, perm) = (&args[0], &args[1]);
            let zero = me.scalar_constant(f, "0", DType::I32);
            let col = |me: &mut Module, f: &mut FuncState<'_>, x: &Ssa| -> Ssa {
                let s = me.op1(
                    f,
                    "stablehlo.dynamic_slice",
                    &[x, &zero, i],
                    &format!("slice_sizes = {}", i64_array(&[bsize, 1])),
                    i32s(&[bsize, 1]),
                );
                me.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[&s],
                    "broadcast_dimensions = array<i64: 0, 1>",
                    i32s(&[bsize, m]),
                )
            };
            let p = col(me, f, &flat_piv);
            let at_i = col(me, f, perm);
            let iota = me.op1(
                f,
                "stablehlo.iota",
                &[],
                "iota_dimension = 1 : i64",
                i32s(&[bsize, m]),
            );
            let eq = compare_attrs("EQ", DType::I32);
            let bools = tensor_of(&[bsize, m], DType::Bool);
            let is_p = me.op1(f, "stablehlo.compare", &[&iota, &p], &eq, bools.clone());
            let zeros = me.fill(f, "0", DType::I32, &[bsize, m]);
            let only_p = me.op1(
                f,
                "stablehlo.select",
                &[&is_p, perm, &zeros],
                "",
                i32s(&[bsize, m]),
            );
            let init0 = me.scalar_constant(f, "0", DType::I32);
            let at_p = me.reduce(
                f,
                &only_p,
                &init0,
                &[1],
                "stablehlo.add",
                DType::I32,
                i32s(&[bsize]),
            );
            let at_p = me.op1(
                f,
                "stablehlo.broadcast_in_dim",
                &[&at_p],
                "broadcast_dimensions = array<i64: 0>",
                i32s(&[bsize, m]),
            );
            let swapped = me.op1(
                f,
                "stablehlo.select",
                &[&is_p, &at_i, perm],
                "",
                i32s(&[bsize, m]),
            );
            let ib = me.op1(
                f,
                "stablehlo.broadcast_in_dim",
                &[i],
                "broadcast_dimensions = array<i64>",
                i32s(&[bsize, m]),
            );
            let is_i = me.op1(f, "stablehlo.compare", &[&iota, &ib], &eq, bools);
            let next = me.op1(
                f,
                "stablehlo.select",
                &[&is_i, &at_p, &swapped],
                "",
                i32s(&[bsize, m]),
            );
            let one = me.scalar_constant(f, "1", DType::I32);
            let i1 = me.op1(f, "stablehlo.add", &[i, &one], "", i32s(&[]));
            vec![i1, next]
        };
        let out = self.while_op(f, &init, &mut cond, &mut body);
        let mut dims = batch.to_vec();
        dims.push(m);
        self.op1(f, "stablehlo.reshape", &[&out[1]], "", i32s(&dims))
    }
}

impl Module {
    /// `eigh`: `syevd` (eigenvectors too, `uplo` the triangle read), eigenvectors and
    /// eigenvalues NaN where it fails.
    pub(super) fn lower_eigh(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        lower: bool,
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::Eigh;
        let out_dtype = aval.dtype;
        let (x, aval) = &self.convert(f, x, aval, compute_dtype(out_dtype));
        let p = lapack_prefix(b, aval.dtype)?;
        let rank = matrix_rank(b, aval)?;
        let dims = aval.shape.dims();
        let batch = &dims[..rank - 2];
        let w_aval = AbstractValue::new(
            crate::aval::Shape::new(&dims[..rank - 1]).map_err(|_| super::ops::bad(b, "shape"))?,
            aval.dtype,
        );
        let types = [
            tensor_type(aval),
            tensor_type(&w_aval),
            tensor_of(batch, DType::I32),
        ];
        let layouts = [
            matrix_layout(rank),
            default_layout(rank - 1),
            default_layout(batch.len()),
        ];
        let r = self.lapack_call(
            f,
            &format!("lapack_{p}syevd_ffi"),
            &[x],
            &[matrix_layout(rank)],
            &[("mode", b'V'), ("uplo", if lower { b'L' } else { b'U' })],
            &types,
            &layouts,
            &[0],
            batch.len(),
        );
        let ok = self.info_ok(f, &r[2], batch, "EQ");
        let v = self.nan_unless(f, &ok, &r[0], aval, batch);
        let w = self.nan_unless(f, &ok, &r[1], &w_aval, batch);
        let v = self.convert(f, &v, aval, out_dtype).0;
        let w = self.convert(f, &w, &w_aval, out_dtype).0;
        Ok(vec![v, w])
    }
}

impl Module {
    /// `qr`: `geqrf`, then `orgqr` of its reflections (the factor sliced to `m x m`
    /// for a wide matrix, padded with zero columns to `m x m` for a full `q` of a tall
    /// one), `r` the upper triangle of `geqrf`'s factor; an empty matrix gives the
    /// identity's columns and zeros, as JAX.
    pub(super) fn lower_qr(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        full_matrices: bool,
        pivoting: bool,
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::Qr;
        let out_dtype = aval.dtype;
        let (x, aval) = &self.convert(f, x, aval, compute_dtype(out_dtype));
        let d = aval.dtype;
        let p = lapack_prefix(b, d)?;
        let rank = matrix_rank(b, aval)?;
        let dims = aval.shape.dims();
        let batch = &dims[..rank - 2];
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = if full_matrices { m } else { m.min(n) };
        let with = |r: i64, c: i64| {
            let mut v = batch.to_vec();
            v.extend([r, c]);
            v
        };
        let q_aval = AbstractValue::new(
            crate::aval::Shape::new(&with(m, k)).map_err(|_| super::ops::bad(b, "shape"))?,
            d,
        );
        let r_aval = AbstractValue::new(
            crate::aval::Shape::new(&with(k, n)).map_err(|_| super::ops::bad(b, "shape"))?,
            d,
        );
        let mut pivots_dims = batch.to_vec();
        pivots_dims.push(n);
        let mut pivots = None;
        let (q, r) = if m == 0 || n == 0 {
            if pivoting {
                pivots = Some(self.fill(f, "0", DType::I32, &pivots_dims));
            }
            let eye = self.triangle_mask(f, m, k, batch, "EQ", 0);
            let one = self.fill(f, &float_literal(1.0, d), d, &with(m, k));
            let zero = self.fill(f, &float_literal(0.0, d), d, &with(m, k));
            let q = self.op1(
                f,
                "stablehlo.select",
                &[&eye, &one, &zero],
                "",
                tensor_type(&q_aval),
            );
            let r = self.fill(f, &float_literal(0.0, d), d, &with(k, n));
            (q, r)
        } else {
            let mut tau_dims = batch.to_vec();
            tau_dims.push(m.min(n));
            let g = if pivoting {
                // geqp3 from no fixed columns; its 1-based pivots made 0-based.
                let jpvt = self.fill(f, "0", DType::I32, &pivots_dims);
                let v = vector_layout(batch.len() + 1);
                let types = [
                    tensor_type(aval),
                    tensor_of(&pivots_dims, DType::I32),
                    tensor_of(&tau_dims, d),
                ];
                let g = self.lapack_call(
                    f,
                    &format!("lapack_{p}geqp3_ffi"),
                    &[x, &jpvt],
                    &[matrix_layout(rank), v.clone()],
                    &[],
                    &types,
                    &[matrix_layout(rank), v.clone(), v],
                    &[0, 1],
                    batch.len(),
                );
                let one = self.fill(f, "1", DType::I32, &pivots_dims);
                pivots = Some(self.op1(
                    f,
                    "stablehlo.subtract",
                    &[&g[1], &one],
                    "",
                    tensor_of(&pivots_dims, DType::I32),
                ));
                vec![g[0].clone(), g[2].clone()]
            } else {
                let types = [tensor_type(aval), tensor_of(&tau_dims, d)];
                let layouts = [matrix_layout(rank), vector_layout(batch.len() + 1)];
                self.lapack_call(
                    f,
                    &format!("lapack_{p}geqrf_ffi"),
                    &[x],
                    &[matrix_layout(rank)],
                    &[],
                    &types,
                    &layouts,
                    &[0],
                    batch.len(),
                )
            };
            let zeros = vec![0i64; rank];
            let ones = vec![1i64; rank];
            let slice = |me: &mut Module, f: &mut FuncState<'_>, v: &Ssa, r: i64, c: i64| {
                let attrs = format!(
                    "start_indices = {}, limit_indices = {}, strides = {}",
                    i64_array(&zeros),
                    i64_array(&with(r, c)),
                    i64_array(&ones)
                );
                me.op1(
                    f,
                    "stablehlo.slice",
                    &[v],
                    &attrs,
                    tensor_of(&with(r, c), d),
                )
            };
            let q_in = if m < n {
                slice(self, f, &g[0], m, m)
            } else if full_matrices && m > n {
                let zero = self.scalar_constant(f, &float_literal(0.0, d), d);
                let mut high = vec![0i64; rank];
                high[rank - 1] = m - n;
                let attrs = format!(
                    "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                    i64_array(&zeros),
                    i64_array(&high),
                    i64_array(&zeros)
                );
                self.op1(
                    f,
                    "stablehlo.pad",
                    &[&g[0], &zero],
                    &attrs,
                    tensor_of(&with(m, m), d),
                )
            } else {
                g[0].clone()
            };
            let q = self.lapack_call(
                f,
                &format!("lapack_{p}orgqr_ffi"),
                &[&q_in, &g[1]],
                &[matrix_layout(rank), default_layout(batch.len() + 1)],
                &[],
                &[tensor_type(&q_aval)],
                &[matrix_layout(rank)],
                &[0],
                batch.len(),
            );
            let r = if !full_matrices && m > n {
                slice(self, f, &g[0], n, n)
            } else {
                g[0].clone()
            };
            // Zero below the diagonal (row - 1 >= column).
            let below = self.triangle_mask(f, k, n, batch, "GE", -1);
            let zero = self.fill(f, &float_literal(0.0, d), d, &with(k, n));
            let r = self.op1(
                f,
                "stablehlo.select",
                &[&below, &zero, &r],
                "",
                tensor_type(&r_aval),
            );
            (q[0].clone(), r)
        };
        let q = self.convert(f, &q, &q_aval, out_dtype).0;
        let r = self.convert(f, &r, &r_aval, out_dtype).0;
        Ok(match pivots {
            Some(p) => vec![q, r, p],
            None => vec![q, r],
        })
    }

    /// A `rows x cols` mask (broadcast over `batch`): `row + offset <dir> column`.
    fn triangle_mask(
        &mut self,
        f: &mut FuncState<'_>,
        rows: i64,
        cols: i64,
        batch: &[i64],
        dir: &str,
        offset: i64,
    ) -> Ssa {
        let t = tensor_of(&[rows, cols], DType::I32);
        let mut row = self.op1(
            f,
            "stablehlo.iota",
            &[],
            "iota_dimension = 0 : i64",
            t.clone(),
        );
        if offset != 0 {
            let off = self.fill(f, &offset.to_string(), DType::I32, &[rows, cols]);
            row = self.op1(f, "stablehlo.add", &[&row, &off], "", t.clone());
        }
        let col = self.op1(f, "stablehlo.iota", &[], "iota_dimension = 1 : i64", t);
        let mask = self.op1(
            f,
            "stablehlo.compare",
            &[&row, &col],
            &compare_attrs(dir, DType::I32),
            tensor_of(&[rows, cols], DType::Bool),
        );
        if batch.is_empty() {
            return mask;
        }
        let mut full = batch.to_vec();
        full.extend([rows, cols]);
        let r = batch.len() as i64;
        let attrs = format!("broadcast_dimensions = {}", i64_array(&[r, r + 1]));
        self.op1(
            f,
            "stablehlo.broadcast_in_dim",
            &[&mask],
            &attrs,
            tensor_of(&full, DType::Bool),
        )
    }
}

impl Module {
    /// `svd`: `gesdd` (`mode` `A` full, `S` reduced, `N` values only; `u` and `vt`
    /// allocated in every mode, as JAX's), every output NaN where it fails; an empty
    /// matrix gives no values and identity `u`/`vt`, as JAX.
    pub(super) fn lower_svd(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
        full_matrices: bool,
        compute_uv: bool,
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::Svd;
        let out_dtype = aval.dtype;
        let (x, aval) = &self.convert(f, x, aval, compute_dtype(out_dtype));
        let d = aval.dtype;
        let p = lapack_prefix(b, d)?;
        let rank = matrix_rank(b, aval)?;
        let dims = aval.shape.dims();
        let batch = &dims[..rank - 2];
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = m.min(n);
        let (uc, vr) = if full_matrices { (m, n) } else { (k, k) };
        let with = |extra: &[i64]| {
            let mut v = batch.to_vec();
            v.extend_from_slice(extra);
            v
        };
        let new = |shape: Vec<i64>| -> Result<AbstractValue, LowerError> {
            Ok(AbstractValue::new(
                crate::aval::Shape::new(&shape).map_err(|_| super::ops::bad(b, "shape"))?,
                d,
            ))
        };
        let s_aval = new(with(&[k]))?;
        let u_aval = new(with(&[m, uc]))?;
        let vt_aval = new(with(&[vr, n]))?;
        let (s, u, vt) = if m == 0 || n == 0 {
            let s = self.fill(f, &float_literal(0.0, d), d, &with(&[k]));
            let mut eye = |me: &mut Module, r: i64, c: i64| {
                let mask = me.triangle_mask(f, r, c, batch, "EQ", 0);
                let one = me.fill(f, &float_literal(1.0, d), d, &with(&[r, c]));
                let zero = me.fill(f, &float_literal(0.0, d), d, &with(&[r, c]));
                me.op1(
                    f,
                    "stablehlo.select",
                    &[&mask, &one, &zero],
                    "",
                    tensor_of(&with(&[r, c]), d),
                )
            };
            let u = eye(self, m, uc);
            let vt = eye(self, vr, n);
            (s, u, vt)
        } else {
            let mode = match (compute_uv, full_matrices) {
                (false, _) => b'N',
                (true, true) => b'A',
                (true, false) => b'S',
            };
            let types = [
                tensor_type(aval),
                tensor_type(&s_aval),
                tensor_type(&u_aval),
                tensor_type(&vt_aval),
                tensor_of(batch, DType::I32),
            ];
            let layouts = [
                matrix_layout(rank),
                default_layout(batch.len() + 1),
                matrix_layout(rank),
                matrix_layout(rank),
                default_layout(batch.len()),
            ];
            let r = self.lapack_call(
                f,
                &format!("lapack_{p}gesdd_ffi"),
                &[x],
                &[matrix_layout(rank)],
                &[("mode", mode)],
                &types,
                &layouts,
                &[0],
                batch.len(),
            );
            let ok = self.info_ok(f, &r[4], batch, "EQ");
            let s = self.nan_unless(f, &ok, &r[1], &s_aval, batch);
            let u = self.nan_unless(f, &ok, &r[2], &u_aval, batch);
            let vt = self.nan_unless(f, &ok, &r[3], &vt_aval, batch);
            (s, u, vt)
        };
        let mut outs = vec![self.convert(f, &s, &s_aval, out_dtype).0];
        if compute_uv {
            outs.push(self.convert(f, &u, &u_aval, out_dtype).0);
            outs.push(self.convert(f, &vt, &vt_aval, out_dtype).0);
        }
        Ok(outs)
    }
}

/// What the Householder QR lowerings (`geqrf`, `geqp3`) share: the matrix in its compute
/// dtype, the LAPACK prefix of that dtype, the matrix rank, the number of batch
/// dimensions, and the type of the scales `tau` (`batch..., min(m, n)`).
struct HouseholderOperand {
    x: Ssa,
    aval: AbstractValue,
    prefix: char,
    rank: usize,
    batch: usize,
    tau_aval: AbstractValue,
}

impl Module {
    fn householder_operand(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        x: &Ssa,
        aval: &AbstractValue,
    ) -> Result<HouseholderOperand, LowerError> {
        let (x, aval) = self.convert(f, x, aval, compute_dtype(aval.dtype));
        let prefix = lapack_prefix(b, aval.dtype)?;
        let rank = matrix_rank(b, &aval)?;
        let dims = aval.shape.dims();
        let mut tau_dims = dims[..rank - 2].to_vec();
        tau_dims.push(dims[rank - 2].min(dims[rank - 1]));
        let tau_aval = AbstractValue::new(
            crate::aval::Shape::new(&tau_dims).map_err(|_| super::ops::bad(b, "shape"))?,
            aval.dtype,
        );
        Ok(HouseholderOperand {
            x,
            aval,
            prefix,
            rank,
            batch: rank - 2,
            tau_aval,
        })
    }
}

impl Module {
    /// `geqrf`: jaxlib's `geqrf` kernel, called for empty matrices too (as JAX's CPU
    /// lowering).
    pub(super) fn lower_geqrf(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        aval: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_dtype = aval.dtype;
        let h = self.householder_operand(f, Builtin::Geqrf, x, aval)?;
        let (p, rank, batch) = (h.prefix, h.rank, h.batch);
        let types = [tensor_type(&h.aval), tensor_type(&h.tau_aval)];
        let layouts = [matrix_layout(rank), default_layout(batch + 1)];
        let g = self.lapack_call(
            f,
            &format!("lapack_{p}geqrf_ffi"),
            &[&h.x],
            &[matrix_layout(rank)],
            &[],
            &types,
            &layouts,
            &[0],
            batch,
        );
        let a = self.convert(f, &g[0], &h.aval, out_dtype).0;
        let taus = self.convert(f, &g[1], &h.tau_aval, out_dtype).0;
        Ok(vec![a, taus])
    }

    /// `householder_product`: jaxlib's `orgqr` kernel (empty operands included, as
    /// JAX's CPU lowering).
    pub(super) fn lower_householder_product(
        &mut self,
        f: &mut FuncState<'_>,
        a: &Ssa,
        taus: &Ssa,
        a_aval: &AbstractValue,
        taus_aval: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::HouseholderProduct;
        let out_dtype = a_aval.dtype;
        let (a, a_aval) = &self.convert(f, a, a_aval, compute_dtype(out_dtype));
        let (taus, _) = &self.convert(f, taus, taus_aval, compute_dtype(out_dtype));
        let p = lapack_prefix(b, a_aval.dtype)?;
        let rank = matrix_rank(b, a_aval)?;
        let batch = rank - 2;
        let q = self.lapack_call(
            f,
            &format!("lapack_{p}orgqr_ffi"),
            &[a, taus],
            &[matrix_layout(rank), default_layout(batch + 1)],
            &[],
            &[tensor_type(a_aval)],
            &[matrix_layout(rank)],
            &[0],
            batch,
        );
        Ok(vec![self.convert(f, &q[0], a_aval, out_dtype).0])
    }
}

/// The layout of a batch of vectors of rank `rank` (the default, major to minor).
fn vector_layout(rank: usize) -> String {
    default_layout(rank)
}

impl Module {
    /// `geqp3 a jpvt`: jaxlib's `geqp3` kernel (the factors aliasing `a`, the pivots
    /// `jpvt`), as JAX's CPU lowering; for an empty matrix, no call (the kernel fails on
    /// one in ferrax's runtime): `a` itself, no scales, the identity permutation.
    pub(super) fn lower_geqp3(
        &mut self,
        f: &mut FuncState<'_>,
        x: &Ssa,
        jpvt: &Ssa,
        aval: &AbstractValue,
        jpvt_aval: &AbstractValue,
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_dtype = aval.dtype;
        let h = self.householder_operand(f, Builtin::Geqp3, x, aval)?;
        let (x, aval, tau_aval) = (&h.x, &h.aval, &h.tau_aval);
        let (p, rank, d) = (h.prefix, h.rank, aval.dtype);
        let dims = aval.shape.dims();
        let tau_dims = tau_aval.shape.dims();
        if dims[rank - 2] == 0 || dims[rank - 1] == 0 {
            let j_dims = jpvt_aval.shape.dims();
            let jd = jpvt_aval.dtype;
            let iota = self.op1(
                f,
                "stablehlo.iota",
                &[],
                &format!("iota_dimension = {} : i64", j_dims.len() - 1),
                tensor_type(jpvt_aval),
            );
            let one = self.fill(f, "1", jd, j_dims);
            let perm = self.op1(
                f,
                "stablehlo.add",
                &[&iota, &one],
                "",
                tensor_type(jpvt_aval),
            );
            let taus = self.fill(f, &float_literal(0.0, d), d, tau_dims);
            let a = self.convert(f, x, aval, out_dtype).0;
            let taus = self.convert(f, &taus, tau_aval, out_dtype).0;
            return Ok(vec![a, perm, taus]);
        }
        let v = vector_layout(h.batch + 1);
        let types = [
            tensor_type(aval),
            tensor_type(jpvt_aval),
            tensor_type(tau_aval),
        ];
        let g = self.lapack_call(
            f,
            &format!("lapack_{p}geqp3_ffi"),
            &[x, jpvt],
            &[matrix_layout(rank), v.clone()],
            &[],
            &types,
            &[matrix_layout(rank), v.clone(), v],
            &[0, 1],
            h.batch,
        );
        let a = self.convert(f, &g[0], aval, out_dtype).0;
        let taus = self.convert(f, &g[2], tau_aval, out_dtype).0;
        Ok(vec![a, g[1].clone(), taus])
    }
}
