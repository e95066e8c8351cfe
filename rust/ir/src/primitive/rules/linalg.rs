//! Shape rules of the linear-algebra primitives (`cholesky`, `triangular_solve`, `lu`,
//! `eigh`, `qr`, `svd`, `geqrf`, `householder_product`),
//! as JAX 0.10.2 states them: float operands whose last two dimensions are the matrix
//! (rank at least 2), the leading ones batch dimensions every operand shares, and the
//! outputs weakly typed only when every operand is.

use super::{arity, operands, shape, Rule, RuleError};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::primitive::Builtin;

/// Checks operand `i` is a float array of rank at least 2; returns its batch dims and
/// its matrix dims `(rows, columns)`.
fn matrix(
    prim: Builtin,
    inputs: &[AbstractValue],
    i: usize,
) -> Result<(&[i64], i64, i64), RuleError> {
    let x = &inputs[i];
    if !x.dtype.is_float() {
        return Err(RuleError::DType {
            operand: i,
            got: x.dtype,
            expected: "a float dtype".into(),
        });
    }
    let dims = x.shape.dims();
    if dims.len() < 2 {
        return Err(operands(format!(
            "Input {i} to {} must have rank at least 2, but got shape={}",
            prim.name(),
            py_tuple(dims)
        )));
    }
    let k = dims.len() - 2;
    Ok((&dims[..k], dims[k], dims[k + 1]))
}

/// A shape as Python prints a tuple: `()`, `(3,)`, `(2, 3)`.
fn py_tuple(dims: &[i64]) -> String {
    match dims {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn weak(inputs: &[AbstractValue]) -> bool {
    inputs.iter().all(|a| a.weak_type)
}

fn out(dims: &[i64], dtype: DType, weak: bool) -> Result<AbstractValue, RuleError> {
    Ok(AbstractValue::new(shape(dims)?, dtype).with_weak_type(weak))
}

/// `cholesky`: a square matrix (batched); its type out.
pub(super) fn cholesky(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 1)?;
    let (_, m, n) = matrix(Builtin::Cholesky, inputs, 0)?;
    if m != n {
        return Err(operands(format!(
            "The input to cholesky must be a square matrix. Got shape {}.",
            py_tuple(&[m, n])
        )));
    }
    Ok(vec![inputs[0].clone()])
}

/// `triangular_solve[left_side ...] a b`: `a` square, `b`'s rows (left side) or columns
/// (right side) as many as `a`'s, the same batch dims and dtype; `b`'s shape out.
pub(super) fn triangular_solve(inputs: &[AbstractValue], left_side: bool) -> Rule {
    arity(inputs, 2)?;
    let p = Builtin::TriangularSolve;
    let (a_batch, am, an) = matrix(p, inputs, 0)?;
    let (b_batch, bm, bn) = matrix(p, inputs, 1)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    if a.dtype != b.dtype {
        return Err(operands(format!(
            "lax.triangular_solve requires arguments to have the same dtypes, got {}, {}",
            a.dtype.numpy_name(),
            b.dtype.numpy_name()
        )));
    }
    if a_batch.len() != b_batch.len() {
        return Err(operands(format!(
            "All inputs to triangular_solve must have the same number of batch dimensions, \
             but got [{}, {}] batch dimensions for the inputs.",
            a_batch.len(),
            b_batch.len()
        )));
    }
    if am != an {
        return Err(operands(format!(
            "The first input to triangular_solve must be a square matrix. Got shape {}.",
            py_tuple(&[am, an])
        )));
    }
    let common = if left_side { bm } else { bn };
    if an != common || a_batch != b_batch {
        return Err(operands(format!(
            "Incompatible shapes for arguments to triangular_solve: {} and {}.",
            py_tuple(a.shape.dims()),
            py_tuple(b.shape.dims())
        )));
    }
    Ok(vec![b.clone().with_weak_type(weak(inputs))])
}

/// `lu`: an `m x n` matrix (batched); out the packed factors (its type), the row swaps
/// (`i32[..., min(m, n)]`) and the row permutation (`i32[..., m]`).
pub(super) fn lu(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 1)?;
    let (batch, m, n) = matrix(Builtin::Lu, inputs, 0)?;
    let w = weak(inputs);
    let with = |last: i64| -> Vec<i64> {
        let mut d = batch.to_vec();
        d.push(last);
        d
    };
    Ok(vec![
        inputs[0].clone(),
        out(&with(m.min(n)), DType::I32, w)?,
        out(&with(m), DType::I32, w)?,
    ])
}

/// `eigh`: a symmetric matrix (batched; one triangle read); out its eigenvectors (its
/// type, one per column) and eigenvalues (`[..., n]`).
pub(super) fn eigh(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 1)?;
    let (batch, m, n) = matrix(Builtin::Eigh, inputs, 0)?;
    if m != n {
        return Err(operands(format!(
            "Argument to symmetric eigendecomposition must have shape [..., n, n], got shape {}",
            py_tuple(&[m, n])
        )));
    }
    let x = &inputs[0];
    let mut dims = batch.to_vec();
    dims.push(n);
    Ok(vec![x.clone(), out(&dims, x.dtype, x.weak_type)?])
}

/// `qr[full_matrices pivoting]`: a matrix (batched, any shape); out `q` (`[..., m, k]`)
/// and `r` (`[..., k, n]`), `k` being `m` with `full_matrices`, else `min(m, n)`; with
/// `pivoting`, also the column permutation (`i32[..., n]`, `a[..., p] = q r`).
pub(super) fn qr(inputs: &[AbstractValue], full_matrices: bool, pivoting: bool) -> Rule {
    arity(inputs, 1)?;
    let (batch, m, n) = matrix(Builtin::Qr, inputs, 0)?;
    let k = if full_matrices { m } else { m.min(n) };
    let x = &inputs[0];
    let with = |a: i64, b: i64| {
        let mut d = batch.to_vec();
        d.extend([a, b]);
        d
    };
    let mut outs = vec![
        out(&with(m, k), x.dtype, x.weak_type)?,
        out(&with(k, n), x.dtype, x.weak_type)?,
    ];
    if pivoting {
        let mut d = batch.to_vec();
        d.push(n);
        outs.push(out(&d, DType::I32, x.weak_type)?);
    }
    Ok(outs)
}

/// `svd[full_matrices compute_uv]`: a matrix (batched, any shape); out its singular
/// values (`[..., k]`, `k = min(m, n)`) and, with `compute_uv`, `u` (`[..., m, m]` with
/// `full_matrices`, else `[..., m, k]`) and `vt` (`[..., n, n]`, else `[..., k, n]`).
pub(super) fn svd(inputs: &[AbstractValue], full_matrices: bool, compute_uv: bool) -> Rule {
    arity(inputs, 1)?;
    let (batch, m, n) = matrix(Builtin::Svd, inputs, 0)?;
    let k = m.min(n);
    let x = &inputs[0];
    let with = |extra: &[i64]| {
        let mut d = batch.to_vec();
        d.extend_from_slice(extra);
        d
    };
    let mut outs = vec![out(&with(&[k]), x.dtype, x.weak_type)?];
    if compute_uv {
        let (uc, vr) = if full_matrices { (m, n) } else { (k, k) };
        outs.push(out(&with(&[m, uc]), x.dtype, x.weak_type)?);
        outs.push(out(&with(&[vr, n]), x.dtype, x.weak_type)?);
    }
    Ok(outs)
}

/// `geqrf`: a matrix (batched, any shape); out the packed QR factors (its type: `r` in
/// the upper triangle, the Householder vectors below it) and the reflections' scales
/// (`[..., min(m, n)]`).
pub(super) fn geqrf(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 1)?;
    let (batch, m, n) = matrix(Builtin::Geqrf, inputs, 0)?;
    let x = &inputs[0];
    let mut dims = batch.to_vec();
    dims.push(m.min(n));
    Ok(vec![x.clone(), out(&dims, x.dtype, x.weak_type)?])
}

/// `householder_product a taus`: `a` (`[..., m, n]`, `m >= n`) holding Householder
/// vectors below its diagonal, `taus` (`[..., k]`, `k <= n`) their scales, of one dtype
/// and the same batch dims; out the product of the reflections' first `n` columns
/// (`a`'s type).
pub(super) fn householder_product(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 2)?;
    let p = Builtin::HouseholderProduct;
    let (a_batch, m, n) = matrix(p, inputs, 0)?;
    let (a, t) = (&inputs[0], &inputs[1]);
    if !t.dtype.is_float() {
        return Err(RuleError::DType {
            operand: 1,
            got: t.dtype,
            expected: "a float dtype".into(),
        });
    }
    if a.dtype != t.dtype {
        return Err(operands(format!(
            "householder_product requires arguments to have the same dtypes, got {}, {}.",
            a.dtype.numpy_name(),
            t.dtype.numpy_name()
        )));
    }
    let t_dims = t.shape.dims();
    let Some((&k, t_batch)) = t_dims.split_last() else {
        return Err(operands(format!(
            "Input 1 to householder_product must have rank at least 1, but got shape={}",
            py_tuple(t_dims)
        )));
    };
    if a_batch.len() != t_batch.len() {
        return Err(operands(format!(
            "All inputs to householder_product must have the same number of batch dimensions, \
             but got [{}, {}] batch dimensions for the inputs.",
            a_batch.len(),
            t_batch.len()
        )));
    }
    if a_batch != t_batch {
        return Err(operands(format!(
            "The inputs to householder_product must have the same batch dimensions, got shapes {} and {}.",
            py_tuple(a.shape.dims()),
            py_tuple(t_dims)
        )));
    }
    if m < n {
        return Err(operands(format!(
            "The first argument to householder_product must have at least as many rows as \
             columns, got shape {}",
            py_tuple(&[m, n])
        )));
    }
    if k > n {
        return Err(operands(
            "The second argument to householder_product must not have more rows than the \
             minimum of the first argument's rows and columns."
                .to_owned(),
        ));
    }
    Ok(vec![a.clone().with_weak_type(weak(inputs))])
}

/// `geqp3 a jpvt`: `a` a matrix (batched, any shape), `jpvt` integers (`[..., n]`, the
/// same batch dims; nonzero entries mark columns LAPACK moves to the front first); out
/// the packed QR factors of `a` with its columns pivoted (its type), the permutation
/// (`jpvt`'s type, 1-based, as LAPACK's) and the reflections' scales
/// (`[..., min(m, n)]`).
pub(super) fn geqp3(inputs: &[AbstractValue]) -> Rule {
    arity(inputs, 2)?;
    let (batch, m, n) = matrix(Builtin::Geqp3, inputs, 0)?;
    let (a, j) = (&inputs[0], &inputs[1]);
    if !j.dtype.is_int() {
        return Err(RuleError::DType {
            operand: 1,
            got: j.dtype,
            expected: "an integer dtype".into(),
        });
    }
    let j_dims = j.shape.dims();
    let Some((&jn, j_batch)) = j_dims.split_last() else {
        return Err(operands(format!(
            "Input 1 to geqp3 must have rank at least 1, but got shape={}",
            py_tuple(j_dims)
        )));
    };
    if j_batch.len() != batch.len() {
        return Err(operands(format!(
            "All inputs to geqp3 must have the same number of batch dimensions, \
             but got [{}, {}] batch dimensions for the inputs.",
            batch.len(),
            j_batch.len()
        )));
    }
    if j_batch != batch || jn != n {
        return Err(operands(format!(
            "The pivots of geqp3 must have shape [..., n] for the matrix's batch dims and \
             columns, got shapes {} and {}.",
            py_tuple(a.shape.dims()),
            py_tuple(j_dims)
        )));
    }
    let mut t = batch.to_vec();
    t.push(m.min(n));
    Ok(vec![a.clone(), j.clone(), out(&t, a.dtype, a.weak_type)?])
}
