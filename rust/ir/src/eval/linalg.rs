//! The linear-algebra primitives by plain algorithms (in f64, rounded to the dtype at
//! the end), with LAPACK's conventions where JAX's CPU lowering exposes them:
//! `cholesky` leaves the strictly upper triangle as it was and is NaN where the matrix is
//! not positive definite; `lu` pivots on the first largest magnitude of each column.

use super::array::{HostArray, HostData};
use super::ops::internal;
use super::EvalError;
use crate::dtype::DType;

type R<T> = Result<T, EvalError>;

fn floats(x: &HostArray) -> R<&[f64]> {
    match &x.data {
        HostData::Float(v) => Ok(v),
        _ => Err(internal("a linear-algebra operand is not a float array")),
    }
}

/// The batch count and the matrix dims `(rows, columns)` of `x` (rank at least 2).
fn matrices(x: &HostArray) -> R<(usize, usize, usize)> {
    let dims = x.shape.dims();
    if dims.len() < 2 {
        return Err(internal("a linear-algebra operand of rank below 2"));
    }
    let to = |d: i64| usize::try_from(d).map_err(|_| internal("negative dimension"));
    let k = dims.len() - 2;
    let mut batch = 1usize;
    for &d in &dims[..k] {
        batch = batch
            .checked_mul(to(d)?)
            .ok_or_else(|| internal("batch size overflows"))?;
    }
    Ok((batch, to(dims[k])?, to(dims[k + 1])?))
}

fn array(dims: &[i64], dtype: DType, data: HostData) -> R<HostArray> {
    let shape = crate::aval::Shape::new(dims).map_err(|e| internal(e.to_string()))?;
    HostArray::new(shape, dtype, data).map_err(|e| internal(e.to_string()))
}

/// `cholesky`: per matrix, the lower factor `L` (`L Lᵀ` = the matrix's lower triangle
/// mirrored) in the lower triangle and the operand's strictly upper triangle above it;
/// all NaN where a pivot is not positive (LAPACK's `potrf` fails there).
pub(super) fn cholesky(x: &HostArray) -> R<HostArray> {
    let (batch, n, _) = matrices(x)?;
    let src = floats(x)?;
    let mut out = src.to_vec();
    for b in 0..batch {
        let m = &mut out[b * n * n..(b + 1) * n * n];
        let mut ok = true;
        for j in 0..n {
            let mut s = m[j * n + j];
            for k in 0..j {
                s -= m[j * n + k] * m[j * n + k];
            }
            if s.is_nan() || s <= 0.0 {
                ok = false;
                break;
            }
            let d = s.sqrt();
            m[j * n + j] = d;
            for i in j + 1..n {
                let mut t = m[i * n + j];
                for k in 0..j {
                    t -= m[i * n + k] * m[j * n + k];
                }
                m[i * n + j] = t / d;
            }
        }
        if !ok {
            m.fill(f64::NAN);
        }
    }
    array(x.shape.dims(), x.dtype, HostData::Float(out))
}

/// The flags of `triangular_solve`.
#[derive(Clone, Copy)]
pub(super) struct TriangularSolve {
    pub left_side: bool,
    pub lower: bool,
    pub transpose_a: bool,
    pub unit_diagonal: bool,
}

/// `triangular_solve`: per matrix, `X` with `op(A) X = B` (left side) or `X op(A) = B`,
/// where `A` is `a`'s lower or upper triangle (its diagonal ones if `unit_diagonal`) and
/// `op` transposes it if `transpose_a` (conjugation is the identity on reals).
pub(super) fn triangular_solve(a: &HostArray, b: &HostArray, t: TriangularSolve) -> R<HostArray> {
    let (batch, n, _) = matrices(a)?;
    let (b_batch, rows, cols) = matrices(b)?;
    if b_batch != batch || (if t.left_side { rows } else { cols }) != n {
        return Err(internal("triangular_solve operands of mismatched shapes"));
    }
    let (av, bv) = (floats(a)?, floats(b)?);
    let mut out = bv.to_vec();
    // The system as `T Y = C` with `T` triangular: for the right side, `X op(A) = B` is
    // `op(A)ᵀ Xᵀ = Bᵀ`, so `T` is `op(A)` transposed once more and `Y = Xᵀ`.
    let transposed = t.transpose_a ^ !t.left_side;
    let t_lower = t.lower ^ transposed;
    let (k, len) = if t.left_side {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let mut tm = vec![0.0; n * n];
    let mut y = vec![0.0; len];
    for bi in 0..batch {
        let am = &av[bi * n * n..(bi + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                let (r, c) = if transposed { (j, i) } else { (i, j) };
                let kept = if t.lower { r >= c } else { r <= c };
                tm[i * n + j] = if r == c && t.unit_diagonal {
                    1.0
                } else if kept {
                    am[r * n + c]
                } else {
                    0.0
                };
            }
        }
        let bm = &mut out[bi * rows * cols..(bi + 1) * rows * cols];
        for col in 0..k {
            // Column `col` of `C`: a column of `B` (left side) or a row (right side).
            let at = |i: usize| {
                if t.left_side {
                    i * cols + col
                } else {
                    col * cols + i
                }
            };
            for (i, yi) in y.iter_mut().enumerate() {
                *yi = bm[at(i)];
            }
            let order: Box<dyn Iterator<Item = usize>> = if t_lower {
                Box::new(0..n)
            } else {
                Box::new((0..n).rev())
            };
            for i in order {
                let mut s = y[i];
                let range = if t_lower { 0..i } else { i + 1..n };
                for j in range {
                    s -= tm[i * n + j] * y[j];
                }
                y[i] = s / tm[i * n + i];
            }
            for (i, &yi) in y.iter().enumerate() {
                bm[at(i)] = yi;
            }
        }
    }
    array(b.shape.dims(), b.dtype, HostData::Float(out))
}

/// `lu`: per `m x n` matrix, LAPACK's `getrf` by partial pivoting (the first row of
/// largest magnitude in each column): the packed factors (`L` below the diagonal with
/// an implicit unit diagonal, `U` on and above), the row swapped with each row (`i32`)
/// and the permutation those swaps make of `0..m`.
pub(super) fn lu(x: &HostArray) -> R<Vec<HostArray>> {
    let (batch, m, n) = matrices(x)?;
    let k = m.min(n);
    let mut a = floats(x)?.to_vec();
    let mut pivots = Vec::with_capacity(batch * k);
    let mut perms = Vec::with_capacity(batch * m);
    for bi in 0..batch {
        let s = &mut a[bi * m * n..(bi + 1) * m * n];
        let mut perm: Vec<i64> = (0..m as i64).collect();
        for c in 0..k {
            let mut p = c;
            for r in c + 1..m {
                if s[r * n + c].abs() > s[p * n + c].abs() {
                    p = r;
                }
            }
            pivots.push(p as i64);
            if p != c {
                for j in 0..n {
                    s.swap(c * n + j, p * n + j);
                }
                perm.swap(c, p);
            }
            let d = s[c * n + c];
            if d != 0.0 {
                for r in c + 1..m {
                    s[r * n + c] /= d;
                }
            }
            for r in c + 1..m {
                let l = s[r * n + c];
                for j in c + 1..n {
                    s[r * n + j] -= l * s[c * n + j];
                }
            }
        }
        perms.extend(perm);
    }
    let dims = x.shape.dims();
    let batch_dims = &dims[..dims.len() - 2];
    let with = |last: usize| {
        let mut d = batch_dims.to_vec();
        d.push(last as i64);
        d
    };
    Ok(vec![
        array(dims, x.dtype, HostData::Float(a))?,
        array(&with(k), DType::I32, HostData::Int(pivots))?,
        array(&with(m), DType::I32, HostData::Int(perms))?,
    ])
}

/// `eigh`: per matrix, the eigenvalues in ascending order and the eigenvectors (unit
/// columns, in that order) of the symmetric matrix `a`'s `lower` (or upper) triangle
/// describes, by cyclic Jacobi rotations (a reference: LAPACK's `syevd` may pick other
/// signs for the eigenvectors).
pub(super) fn eigh(x: &HostArray, lower: bool) -> R<Vec<HostArray>> {
    let (batch, n, _) = matrices(x)?;
    let src = floats(x)?;
    let mut vs = Vec::with_capacity(batch * n * n);
    let mut ws = Vec::with_capacity(batch * n);
    for bi in 0..batch {
        let m = &src[bi * n * n..(bi + 1) * n * n];
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let (r, c) = if (i >= j) == lower { (i, j) } else { (j, i) };
                a[i * n + j] = m[r * n + c];
            }
        }
        let mut v = vec![0.0; n * n];
        for i in 0..n {
            v[i * n + i] = 1.0;
        }
        let total: f64 = a.iter().map(|x| x * x).sum();
        for _sweep in 0..64 {
            let off: f64 = (0..n)
                .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
                .map(|(i, j)| a[i * n + j] * a[i * n + j])
                .sum();
            // Converged (off-diagonal mass negligible), or NaN (no rotation helps).
            if off.is_nan() || off <= 1e-32 * total {
                break;
            }
            for p in 0..n {
                for q in p + 1..n {
                    let apq = a[p * n + q];
                    if apq == 0.0 {
                        continue;
                    }
                    let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                    let t = if theta == 0.0 { 1.0 } else { t };
                    let c = 1.0 / (t * t + 1.0).sqrt();
                    let s = t * c;
                    for k in 0..n {
                        let (akp, akq) = (a[k * n + p], a[k * n + q]);
                        a[k * n + p] = c * akp - s * akq;
                        a[k * n + q] = s * akp + c * akq;
                    }
                    for k in 0..n {
                        let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                        a[p * n + k] = c * apk - s * aqk;
                        a[q * n + k] = s * apk + c * aqk;
                    }
                    for k in 0..n {
                        let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                        v[k * n + p] = c * vkp - s * vkq;
                        v[k * n + q] = s * vkp + c * vkq;
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| a[i * n + i].total_cmp(&a[j * n + j]));
        ws.extend(order.iter().map(|&i| a[i * n + i]));
        for r in 0..n {
            vs.extend(order.iter().map(|&c| v[r * n + c]));
        }
    }
    let dims = x.shape.dims();
    let mut wdims = dims[..dims.len() - 1].to_vec();
    if let Some(last) = wdims.last_mut() {
        *last = n as i64;
    }
    Ok(vec![
        array(dims, x.dtype, HostData::Float(vs))?,
        array(&wdims, x.dtype, HostData::Float(ws))?,
    ])
}

/// Householder reflections of the `m x n` row-major matrix `a` in place, as LAPACK's
/// `geqrf` picks them (`beta = -sign(alpha) ‖x‖`, so `r`'s diagonal may be negative; no
/// reflection where a column below the diagonal is already zero): `r` on and above the
/// diagonal, each reflection's vector below it (its leading 1 implicit); returns the
/// `min(m, n)` scales `tau`.
fn householder_reflections(a: &mut [f64], m: usize, n: usize) -> Vec<f64> {
    (0..m.min(n)).map(|j| reflect_column(a, m, n, j)).collect()
}

/// Step `j` of `geqrf`: the reflection zeroing column `j` below the diagonal, applied to
/// the trailing columns; returns its scale.
fn reflect_column(a: &mut [f64], m: usize, n: usize, j: usize) -> f64 {
    let alpha = a[j * n + j];
    let xnorm = (j + 1..m)
        .map(|i| a[i * n + j] * a[i * n + j])
        .sum::<f64>()
        .sqrt();
    if xnorm == 0.0 {
        return 0.0;
    }
    let beta = -alpha.signum() * alpha.hypot(xnorm);
    let tau = (beta - alpha) / beta;
    let scale = 1.0 / (alpha - beta);
    for i in j + 1..m {
        a[i * n + j] *= scale;
    }
    a[j * n + j] = beta;
    // The trailing columns times H = I - tau v vᵀ (v = [1, a[j+1.., j]]).
    for c in j + 1..n {
        let mut s = a[j * n + c];
        for i in j + 1..m {
            s += a[i * n + j] * a[i * n + c];
        }
        s *= tau;
        a[j * n + c] -= s;
        for i in j + 1..m {
            a[i * n + c] -= s * a[i * n + j];
        }
    }
    tau
}

/// `geqp3`'s reflections: the columns marked `fixed` moved to the front (in order),
/// then at each step the remaining column of largest norm below the diagonal (the first
/// such) swapped in before reflecting. Returns the scales and the column order
/// (0-based).
fn pivoted_reflections(
    a: &mut [f64],
    m: usize,
    n: usize,
    fixed: &[bool],
) -> (Vec<f64>, Vec<usize>) {
    let mut perm: Vec<usize> = (0..n).collect();
    let swap = |a: &mut [f64], perm: &mut [usize], x: usize, y: usize| {
        if x != y {
            for i in 0..m {
                a.swap(i * n + x, i * n + y);
            }
            perm.swap(x, y);
        }
    };
    let mut nfixed = 0;
    for (j, &is_fixed) in fixed.iter().enumerate().take(n) {
        if is_fixed {
            swap(a, &mut perm, j, nfixed);
            nfixed += 1;
        }
    }
    let mut taus = Vec::with_capacity(m.min(n));
    for j in 0..m.min(n) {
        if j >= nfixed {
            let norm =
                |a: &[f64], c: usize| (j..m).map(|i| a[i * n + c] * a[i * n + c]).sum::<f64>();
            let mut best = j;
            let mut best_norm = norm(a, j);
            for c in j + 1..n {
                let v = norm(a, c);
                if v > best_norm {
                    best = c;
                    best_norm = v;
                }
            }
            swap(a, &mut perm, j, best);
        }
        taus.push(reflect_column(a, m, n, j));
    }
    (taus, perm)
}

/// As LAPACK's `orgqr`: the first `k` columns (`m x k`, row-major) of the product
/// `H_0 ... H_{t-1}` of the reflections whose vectors are below the diagonal of the
/// `m x n` matrix `a` and whose scales are `taus` (`t` of them, `t <= min(m, n)`).
fn reflections_product(a: &[f64], m: usize, n: usize, taus: &[f64], k: usize) -> Vec<f64> {
    let mut q = vec![0.0; m * k];
    for i in 0..k.min(m) {
        q[i * k + i] = 1.0;
    }
    // Applied to the identity's columns last to first.
    for (j, &tau) in taus.iter().enumerate().rev() {
        if tau == 0.0 {
            continue;
        }
        for c in 0..k {
            let mut s = q[j * k + c];
            for i in j + 1..m {
                s += a[i * n + j] * q[i * k + c];
            }
            s *= tau;
            q[j * k + c] -= s;
            for i in j + 1..m {
                q[i * k + c] -= s * a[i * n + j];
            }
        }
    }
    q
}

/// `qr`: per matrix `a` (`m x n`), the Householder reflections (`geqrf`'s), then `q` as
/// `orgqr` forms it: the product of the reflections' first `k` columns (`k = m` with
/// `full_matrices`, else `min(m, n)`), and `r` the upper-trapezoidal `k x n` factor.
pub(super) fn qr(x: &HostArray, full_matrices: bool, pivoting: bool) -> R<Vec<HostArray>> {
    let (batch, m, n) = matrices(x)?;
    let src = floats(x)?;
    let k = if full_matrices { m } else { m.min(n) };
    let mut qs = Vec::with_capacity(batch * m * k);
    let mut rs = Vec::with_capacity(batch * k * n);
    let mut ps = Vec::with_capacity(if pivoting { batch * n } else { 0 });
    for bi in 0..batch {
        let mut a = src[bi * m * n..(bi + 1) * m * n].to_vec();
        let taus = if pivoting {
            // (An empty matrix has no pivots: zeros, as JAX's lowering gives.)
            let (taus, perm) = pivoted_reflections(&mut a, m, n, &vec![false; n]);
            let empty = m == 0;
            ps.extend(perm.iter().map(|&c| if empty { 0 } else { c as i64 }));
            taus
        } else {
            householder_reflections(&mut a, m, n)
        };
        qs.extend(reflections_product(&a, m, n, &taus, k));
        for i in 0..k {
            for c in 0..n {
                rs.push(if i <= c && i < m { a[i * n + c] } else { 0.0 });
            }
        }
    }
    let dims = x.shape.dims();
    let lead = &dims[..dims.len() - 2];
    let with = |r: usize, c: usize| {
        let mut d = lead.to_vec();
        d.extend([r as i64, c as i64]);
        d
    };
    let mut outs = vec![
        array(&with(m, k), x.dtype, HostData::Float(qs))?,
        array(&with(k, n), x.dtype, HostData::Float(rs))?,
    ];
    if pivoting {
        let mut d = lead.to_vec();
        d.push(n as i64);
        outs.push(array(&d, DType::I32, HostData::Int(ps))?);
    }
    Ok(outs)
}

/// `geqp3 a jpvt`: per matrix, LAPACK's column-pivoted QR factors (packed as `geqrf`'s),
/// the permutation (1-based, in `jpvt`'s dtype) and the scales; nonzero `jpvt` entries
/// mark columns moved to the front first.
pub(super) fn geqp3(x: &HostArray, jpvt: &HostArray) -> R<Vec<HostArray>> {
    let (batch, m, n) = matrices(x)?;
    let src = floats(x)?;
    let HostData::Int(js) = &jpvt.data else {
        return Err(internal("geqp3's pivots are not integers"));
    };
    if js.len() != batch * n {
        return Err(internal("geqp3's pivots do not fit its matrix"));
    }
    let p = m.min(n);
    let mut packed = Vec::with_capacity(batch * m * n);
    let mut perms = Vec::with_capacity(batch * n);
    let mut all_taus = Vec::with_capacity(batch * p);
    for bi in 0..batch {
        let mut a = src[bi * m * n..(bi + 1) * m * n].to_vec();
        // (An empty matrix keeps its column order: ferrax's lowering makes no call.)
        let fixed: Vec<bool> = js[bi * n..(bi + 1) * n]
            .iter()
            .map(|&v| v != 0 && p > 0)
            .collect();
        let (taus, perm) = pivoted_reflections(&mut a, m, n, &fixed);
        packed.extend(a);
        perms.extend(perm.iter().map(|&c| c as i64 + 1));
        all_taus.extend(taus);
    }
    let dims = x.shape.dims();
    let mut tau_dims = dims[..dims.len() - 2].to_vec();
    tau_dims.push(p as i64);
    Ok(vec![
        array(dims, x.dtype, HostData::Float(packed))?,
        array(jpvt.shape.dims(), jpvt.dtype, HostData::Int(perms))?,
        array(&tau_dims, x.dtype, HostData::Float(all_taus))?,
    ])
}

/// `geqrf`: per matrix, LAPACK's packed QR factors (`r` on and above the diagonal, the
/// Householder vectors below) and the reflections' scales (`[..., min(m, n)]`).
pub(super) fn geqrf(x: &HostArray) -> R<Vec<HostArray>> {
    let (batch, m, n) = matrices(x)?;
    let src = floats(x)?;
    let p = m.min(n);
    let mut packed = Vec::with_capacity(batch * m * n);
    let mut all_taus = Vec::with_capacity(batch * p);
    for bi in 0..batch {
        let mut a = src[bi * m * n..(bi + 1) * m * n].to_vec();
        all_taus.extend(householder_reflections(&mut a, m, n));
        packed.extend(a);
    }
    let dims = x.shape.dims();
    let mut tau_dims = dims[..dims.len() - 2].to_vec();
    tau_dims.push(p as i64);
    Ok(vec![
        array(dims, x.dtype, HostData::Float(packed))?,
        array(&tau_dims, x.dtype, HostData::Float(all_taus))?,
    ])
}

/// `householder_product a taus`: per matrix (`m x n`, `m >= n`), the first `n` columns
/// of the product of the reflections below `a`'s diagonal scaled by `taus` (LAPACK's
/// `orgqr`).
pub(super) fn householder_product(a: &HostArray, taus: &HostArray) -> R<HostArray> {
    let (batch, m, n) = matrices(a)?;
    let src = floats(a)?;
    let ts = floats(taus)?;
    let t = match taus.shape.dims().last() {
        Some(&t) => usize::try_from(t).map_err(|_| internal("negative dimension"))?,
        None => return Err(internal("householder_product's taus of rank 0")),
    };
    if t > m.min(n) || ts.len() != batch * t {
        return Err(internal("householder_product's taus do not fit its matrix"));
    }
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        let mat = &src[bi * m * n..(bi + 1) * m * n];
        out.extend(reflections_product(mat, m, n, &ts[bi * t..(bi + 1) * t], n));
    }
    array(a.shape.dims(), a.dtype, HostData::Float(out))
}

/// The `p x cols` matrix (row-major, `p` rows) whose first `have` columns are those of
/// `basis` (`p x have`, orthonormal or zero), its zero columns and the columns past
/// `have` filled by Gram-Schmidt on the unit vectors: orthonormal columns throughout.
fn complete(basis: &[f64], p: usize, have: usize, cols: usize) -> Vec<f64> {
    let mut out = vec![0.0; p * cols];
    for i in 0..p {
        for j in 0..have.min(cols) {
            out[i * cols + j] = basis[i * have + j];
        }
    }
    let mut unit = 0;
    for j in 0..cols {
        let norm: f64 = (0..p).map(|i| out[i * cols + j].powi(2)).sum();
        if j < have && norm > 0.5 {
            continue;
        }
        // The next unit vector with a large part outside the columns so far.
        while unit < p {
            let mut v = vec![0.0; p];
            v[unit] = 1.0;
            unit += 1;
            for c in 0..cols {
                if c == j {
                    continue;
                }
                let d: f64 = (0..p).map(|i| v[i] * out[i * cols + c]).sum();
                for (i, vi) in v.iter_mut().enumerate() {
                    *vi -= d * out[i * cols + c];
                }
            }
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            if n > 0.5 {
                for (i, vi) in v.iter().enumerate() {
                    out[i * cols + j] = vi / n;
                }
                break;
            }
        }
    }
    out
}

/// `svd`: per matrix (`m x n`, `k = min(m, n)`), the singular values in descending
/// order and (with `compute_uv`) `u` (`m x m` with `full_matrices`, else `m x k`) and
/// `vt` (`n x n`, else `k x n`), by one-sided Jacobi rotations of the columns of the
/// matrix (of its transpose when wide); a reference: LAPACK's `gesdd` may pick other
/// signs for the singular vectors.
pub(super) fn svd(x: &HostArray, full_matrices: bool, compute_uv: bool) -> R<Vec<HostArray>> {
    let (batch, m, n) = matrices(x)?;
    let src = floats(x)?;
    let tall = m >= n;
    let (p, q) = if tall { (m, n) } else { (n, m) };
    let k = q;
    let (ucols, vrows) = if full_matrices { (m, n) } else { (k, k) };
    let mut ss = Vec::with_capacity(batch * k);
    let mut us = Vec::with_capacity(batch * m * ucols);
    let mut vts = Vec::with_capacity(batch * vrows * n);
    for bi in 0..batch {
        let a = &src[bi * m * n..(bi + 1) * m * n];
        // w: p x q, the matrix (tall) or its transpose (wide).
        let mut w = vec![0.0; p * q];
        for i in 0..m {
            for j in 0..n {
                if tall {
                    w[i * q + j] = a[i * n + j];
                } else {
                    w[j * q + i] = a[i * n + j];
                }
            }
        }
        let mut v = vec![0.0; q * q];
        for i in 0..q {
            v[i * q + i] = 1.0;
        }
        for _sweep in 0..64 {
            let mut rotated = false;
            for j in 0..q {
                for l in j + 1..q {
                    let (mut alpha, mut beta, mut gamma) = (0.0, 0.0, 0.0);
                    for i in 0..p {
                        let (x, y) = (w[i * q + j], w[i * q + l]);
                        alpha += x * x;
                        beta += y * y;
                        gamma += x * y;
                    }
                    if gamma == 0.0
                        || gamma.abs() <= 1e-15 * (alpha * beta).sqrt()
                        || gamma.is_nan()
                    {
                        continue;
                    }
                    rotated = true;
                    let zeta = (beta - alpha) / (2.0 * gamma);
                    let t = if zeta == 0.0 {
                        1.0
                    } else {
                        zeta.signum() / (zeta.abs() + (zeta * zeta + 1.0).sqrt())
                    };
                    let c = 1.0 / (t * t + 1.0).sqrt();
                    let s = c * t;
                    for mat in [&mut w, &mut v] {
                        let rows = mat.len() / q;
                        for i in 0..rows {
                            let (x, y) = (mat[i * q + j], mat[i * q + l]);
                            mat[i * q + j] = c * x - s * y;
                            mat[i * q + l] = s * x + c * y;
                        }
                    }
                }
            }
            if !rotated {
                break;
            }
        }
        let norms: Vec<f64> = (0..q)
            .map(|j| (0..p).map(|i| w[i * q + j].powi(2)).sum::<f64>().sqrt())
            .collect();
        let mut order: Vec<usize> = (0..q).collect();
        order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]));
        ss.extend(order.iter().map(|&j| norms[j]));
        if !compute_uv {
            continue;
        }
        // left: p x q (the normalized columns), right: q x q (v), both in that order.
        let mut left = vec![0.0; p * q];
        let mut right = vec![0.0; q * q];
        for (c, &j) in order.iter().enumerate() {
            let s = norms[j];
            for i in 0..p {
                left[i * q + c] = if s > 0.0 { w[i * q + j] / s } else { 0.0 };
            }
            for i in 0..q {
                right[i * q + c] = v[i * q + j];
            }
        }
        let left = complete(&left, p, q, if tall { ucols } else { vrows });
        let lcols = if tall { ucols } else { vrows };
        if tall {
            // u = left (m x ucols), vt = rightᵀ (k x k; n = k here).
            us.extend(left);
            for r in 0..vrows {
                vts.extend((0..n).map(|c| right[c * q + r]));
            }
        } else {
            // u = right (m x m; k = m), vt = leftᵀ (vrows x n).
            us.extend(right);
            for r in 0..vrows {
                vts.extend((0..n).map(|c| left[c * lcols + r]));
            }
        }
    }
    let dims = x.shape.dims();
    let lead = &dims[..dims.len() - 2];
    let with = |extra: &[usize]| {
        let mut d = lead.to_vec();
        d.extend(extra.iter().map(|&e| e as i64));
        d
    };
    let mut out = vec![array(&with(&[k]), x.dtype, HostData::Float(ss))?];
    if compute_uv {
        out.push(array(&with(&[m, ucols]), x.dtype, HostData::Float(us))?);
        out.push(array(&with(&[vrows, n]), x.dtype, HostData::Float(vts))?);
    }
    Ok(out)
}
