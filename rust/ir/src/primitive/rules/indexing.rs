//! Shape rules of `gather` and the `scatter` family: XLA's, with the index vector always the
//! last dimension of the indices (as JAX has it). Every constraint XLA states is checked,
//! with checked arithmetic, and reported as a [`RuleError`] naming the field at fault.

use super::{arity, bad, check_dtype, ints, operands, shape, Rule, RuleError};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::params::{GatherDimensionNumbers, Param, Params, ScatterDimensionNumbers};
use crate::primitive::Builtin;

const DNUMS: &str = "dimension_numbers";

/// A tuple of ints as Python writes it: `()`, `(1,)`, `(1, 2)`.
fn tup(xs: &[i64]) -> String {
    match xs {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            xs.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn gather_dnums(params: &Params) -> Result<&GatherDimensionNumbers, RuleError> {
    match params.get(DNUMS) {
        Some(Param::GatherDims(d)) => Ok(d),
        _ => Err(RuleError::MissingParam { name: DNUMS }),
    }
}

fn scatter_dnums(params: &Params) -> Result<&ScatterDimensionNumbers, RuleError> {
    match params.get(DNUMS) {
        Some(Param::ScatterDims(d)) => Ok(d),
        _ => Err(RuleError::MissingParam { name: DNUMS }),
    }
}

/// `dims` are sorted (non-decreasing), as XLA requires of some fields.
fn sorted(field: &str, dims: &[i64]) -> Result<(), RuleError> {
    if dims.windows(2).any(|w| w[1] < w[0]) {
        return Err(bad(
            DNUMS,
            format!("{field} must be sorted; got {}", tup(dims)),
        ));
    }
    Ok(())
}

/// `dims` has no repeated entry.
fn unique(field: &str, dims: &[i64]) -> Result<(), RuleError> {
    let mut seen: Vec<i64> = dims.to_vec();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad(
            DNUMS,
            format!("{field} must not repeat; got {}", tup(dims)),
        ));
    }
    Ok(())
}

/// Every entry of `dims` is in `[0, rank)`.
fn in_range(field: &str, dims: &[i64], rank: usize, of: &str) -> Result<(), RuleError> {
    for &d in dims {
        if usize::try_from(d).map_or(true, |u| u >= rank) {
            return Err(bad(
                DNUMS,
                format!("{field} entry {d} is out of range [0, {rank}) of the {of}'s dimensions"),
            ));
        }
    }
    Ok(())
}

fn sorted_unique_in_range(
    field: &str,
    dims: &[i64],
    rank: usize,
    of: &str,
) -> Result<(), RuleError> {
    sorted(field, dims)?;
    unique(field, dims)?;
    in_range(field, dims, rank, of)
}

fn disjoint(f1: &str, d1: &[i64], f2: &str, d2: &[i64]) -> Result<(), RuleError> {
    let in_d2: std::collections::HashSet<i64> = d2.iter().copied().collect();
    if let Some(d) = d1.iter().find(|d| in_d2.contains(d)) {
        return Err(bad(
            DNUMS,
            format!(
                "{f1} and {f2} must be disjoint; both hold {d} ({} and {})",
                tup(d1),
                tup(d2)
            ),
        ));
    }
    Ok(())
}

/// The axes of `0..rank` named in `dims` (entries out of range are ignored: the callers
/// checked them), as a mask; linear time, so the rules stay linear in the ranks.
fn mask(rank: usize, dims: &[&[i64]]) -> Vec<bool> {
    let mut m = vec![false; rank];
    for &d in dims.iter().flat_map(|ds| ds.iter()) {
        if let Some(slot) = usize::try_from(d).ok().and_then(|i| m.get_mut(i)) {
            *slot = true;
        }
    }
    m
}

fn index_dtype(inputs: &[AbstractValue]) -> Result<(), RuleError> {
    check_dtype(inputs, 1, DType::is_int, "an integer dtype for the indices")
}

/// The rank of the indices, at least 1 (their last dimension is the index vector).
fn index_rank(indices: &AbstractValue, prim: &str) -> Result<usize, RuleError> {
    let r = indices.shape.rank();
    if r == 0 {
        return Err(operands(format!(
            "{prim} indices must have rank at least 1 (the last dimension holds the index \
             vectors); got {indices}"
        )));
    }
    Ok(r)
}

/// Operand batching dims and indices batching dims: as many of each, of equal sizes.
fn batching(
    operand: &AbstractValue,
    indices: &AbstractValue,
    operand_dims: &[i64],
    (indices_field, indices_dims): (&str, &[i64]),
) -> Result<(), RuleError> {
    let ivd = indices.shape.rank() - 1;
    unique(indices_field, indices_dims)?;
    in_range(indices_field, indices_dims, indices.shape.rank(), "indices")?;
    if indices_dims.contains(&(ivd as i64)) {
        return Err(bad(
            DNUMS,
            format!(
                "{indices_field} cannot hold the index vector dimension {ivd}; got {}",
                tup(indices_dims)
            ),
        ));
    }
    if operand_dims.len() != indices_dims.len() {
        return Err(bad(
            DNUMS,
            format!(
                "operand_batching_dims {} and {indices_field} {} must have equal lengths",
                tup(operand_dims),
                tup(indices_dims)
            ),
        ));
    }
    for (&o, &i) in operand_dims.iter().zip(indices_dims) {
        let (so, si) = (
            operand.shape.dims()[o as usize],
            indices.shape.dims()[i as usize],
        );
        if so != si {
            return Err(operands(format!(
                "operand batching dimension {o} of {operand} (size {so}) and indices batching \
                 dimension {i} of {indices} (size {si}) differ"
            )));
        }
    }
    Ok(())
}

/// `gather`'s rule: operand and indices in, the gathered slices out (the operand's dtype
/// and weak type).
pub(super) fn gather(inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 2)?;
    index_dtype(inputs)?;
    let (operand, indices) = (&inputs[0], &inputs[1]);
    let dn = gather_dnums(params)?;
    let slice_sizes = ints(params, "slice_sizes")?;
    let op_rank = operand.shape.rank();
    let idx_rank = index_rank(indices, "gather")?;
    let ivd = idx_rank - 1;
    let out_rank = dn
        .offset_dims
        .len()
        .checked_add(ivd)
        .ok_or_else(|| bad(DNUMS, "too many offset_dims"))?;

    sorted_unique_in_range("offset_dims", &dn.offset_dims, out_rank, "output")?;
    let index_vector_size = indices.shape.dims()[ivd];
    if i64::try_from(dn.start_index_map.len()) != Ok(index_vector_size) {
        return Err(operands(format!(
            "start_index_map {} has {} entries but the index vectors (the last dimension of \
             the indices {indices}) have {index_vector_size}",
            tup(&dn.start_index_map),
            dn.start_index_map.len()
        )));
    }
    in_range("start_index_map", &dn.start_index_map, op_rank, "operand")?;
    unique("start_index_map", &dn.start_index_map)?;
    sorted_unique_in_range(
        "collapsed_slice_dims",
        &dn.collapsed_slice_dims,
        op_rank,
        "operand",
    )?;
    sorted_unique_in_range(
        "operand_batching_dims",
        &dn.operand_batching_dims,
        op_rank,
        "operand",
    )?;
    disjoint(
        "collapsed_slice_dims",
        &dn.collapsed_slice_dims,
        "operand_batching_dims",
        &dn.operand_batching_dims,
    )?;
    disjoint(
        "start_index_map",
        &dn.start_index_map,
        "operand_batching_dims",
        &dn.operand_batching_dims,
    )?;
    batching(
        operand,
        indices,
        &dn.operand_batching_dims,
        (
            "start_indices_batching_dims",
            &dn.start_indices_batching_dims,
        ),
    )?;

    if slice_sizes.len() != op_rank {
        return Err(bad(
            "slice_sizes",
            format!(
                "has {} entries but the operand {operand} has rank {op_rank}",
                slice_sizes.len()
            ),
        ));
    }
    let window =
        dn.offset_dims.len() + dn.collapsed_slice_dims.len() + dn.operand_batching_dims.len();
    if window != op_rank {
        return Err(bad(
            DNUMS,
            format!(
                "every operand dimension must be an offset, collapsed or batching dimension: \
                 {} offset_dims + {} collapsed_slice_dims + {} operand_batching_dims != rank \
                 {op_rank} of {operand}",
                dn.offset_dims.len(),
                dn.collapsed_slice_dims.len(),
                dn.operand_batching_dims.len()
            ),
        ));
    }
    let indices_empty = indices.shape.dims().contains(&0);
    for (i, (&size, &dim)) in slice_sizes.iter().zip(operand.shape.dims()).enumerate() {
        if size < 0 || (!indices_empty && size > dim) {
            return Err(bad(
                "slice_sizes",
                format!(
                    "slice size {size} of dimension {i} is out of range [0, {dim}] of {operand}"
                ),
            ));
        }
    }
    for &d in &dn.collapsed_slice_dims {
        let size = slice_sizes[d as usize];
        if size != 1 {
            return Err(bad(
                "slice_sizes",
                format!("collapsed dimension {d} must have slice size 1, got {size}"),
            ));
        }
    }
    for &d in &dn.operand_batching_dims {
        let size = slice_sizes[d as usize];
        if size > 1 {
            return Err(bad(
                "slice_sizes",
                format!("operand batching dimension {d} must have slice size 0 or 1, got {size}"),
            ));
        }
    }

    // Output: offset dims take the kept slice sizes in order, the others the indices'
    // batch dimensions in order.
    let dropped = mask(
        op_rank,
        &[&dn.collapsed_slice_dims, &dn.operand_batching_dims],
    );
    let mut kept = slice_sizes
        .iter()
        .zip(&dropped)
        .filter(|(_, &d)| !d)
        .map(|(&s, _)| s);
    let is_offset = mask(out_rank, &[&dn.offset_dims]);
    let mut batch = indices.shape.dims()[..ivd].iter().copied();
    let mut dims = Vec::with_capacity(out_rank);
    for &offset in &is_offset {
        let next = if offset { kept.next() } else { batch.next() };
        dims.push(next.ok_or_else(|| bad(DNUMS, "offset_dims do not fit the output rank"))?);
    }
    Ok(vec![
        AbstractValue::new(shape(&dims)?, operand.dtype).with_weak_type(operand.weak_type)
    ])
}

/// The `scatter` family's rule: operand, indices and updates in, the operand's type out.
pub(super) fn scatter(prim: Builtin, inputs: &[AbstractValue], params: &Params) -> Rule {
    arity(inputs, 3)?;
    index_dtype(inputs)?;
    let (operand, indices, updates) = (&inputs[0], &inputs[1], &inputs[2]);
    if operand.dtype != updates.dtype {
        return Err(operands(format!(
            "the operand {operand} and the updates {updates} must have the same dtype"
        )));
    }
    if matches!(
        prim,
        Builtin::ScatterAdd | Builtin::ScatterSub | Builtin::ScatterMul
    ) {
        check_dtype(inputs, 0, |d| d != DType::Bool, "a numeric dtype")?;
    }
    check_update_jaxpr(prim, operand.dtype, params)?;
    let dn = scatter_dnums(params)?;
    let op_rank = operand.shape.rank();
    let idx_rank = index_rank(indices, prim.name())?;
    let ivd = idx_rank - 1;
    let upd_rank = updates.shape.rank();
    let expected_rank = ivd.checked_add(dn.update_window_dims.len());
    if expected_rank != Some(upd_rank) {
        return Err(operands(format!(
            "the updates {updates} must have rank {} ({} scatter dimensions of the indices {indices} \
             + {} update_window_dims)",
            ivd.saturating_add(dn.update_window_dims.len()),
            ivd,
            dn.update_window_dims.len()
        )));
    }
    sorted_unique_in_range(
        "update_window_dims",
        &dn.update_window_dims,
        upd_rank,
        "updates",
    )?;
    sorted_unique_in_range(
        "inserted_window_dims",
        &dn.inserted_window_dims,
        op_rank,
        "operand",
    )?;
    sorted_unique_in_range(
        "operand_batching_dims",
        &dn.operand_batching_dims,
        op_rank,
        "operand",
    )?;
    disjoint(
        "inserted_window_dims",
        &dn.inserted_window_dims,
        "operand_batching_dims",
        &dn.operand_batching_dims,
    )?;
    disjoint(
        "scatter_dims_to_operand_dims",
        &dn.scatter_dims_to_operand_dims,
        "operand_batching_dims",
        &dn.operand_batching_dims,
    )?;
    batching(
        operand,
        indices,
        &dn.operand_batching_dims,
        (
            "scatter_indices_batching_dims",
            &dn.scatter_indices_batching_dims,
        ),
    )?;
    let window = dn.update_window_dims.len()
        + dn.inserted_window_dims.len()
        + dn.operand_batching_dims.len();
    if window != op_rank {
        return Err(bad(
            DNUMS,
            format!(
                "every operand dimension must be a window, inserted or batching dimension: \
                 {} update_window_dims + {} inserted_window_dims + {} operand_batching_dims != \
                 rank {op_rank} of {operand}",
                dn.update_window_dims.len(),
                dn.inserted_window_dims.len(),
                dn.operand_batching_dims.len()
            ),
        ));
    }
    let index_vector_size = indices.shape.dims()[ivd];
    if i64::try_from(dn.scatter_dims_to_operand_dims.len()) != Ok(index_vector_size) {
        return Err(operands(format!(
            "scatter_dims_to_operand_dims {} has {} entries but the index vectors (the last \
             dimension of the indices {indices}) have {index_vector_size}",
            tup(&dn.scatter_dims_to_operand_dims),
            dn.scatter_dims_to_operand_dims.len()
        )));
    }
    in_range(
        "scatter_dims_to_operand_dims",
        &dn.scatter_dims_to_operand_dims,
        op_rank,
        "operand",
    )?;
    unique(
        "scatter_dims_to_operand_dims",
        &dn.scatter_dims_to_operand_dims,
    )?;
    // Window bounds: each update window dimension fits its operand dimension.
    let not_window = mask(
        op_rank,
        &[&dn.inserted_window_dims, &dn.operand_batching_dims],
    );
    let window_operand_dims = (0..op_rank).filter(|&i| !not_window[i]);
    for (&uw, od) in dn.update_window_dims.iter().zip(window_operand_dims) {
        let (us, os) = (updates.shape.dims()[uw as usize], operand.shape.dims()[od]);
        if us > os {
            return Err(operands(format!(
                "update window dimension {uw} of {updates} (size {us}) exceeds operand \
                 dimension {od} of {operand} (size {os})"
            )));
        }
    }
    // Scatter dimensions of the updates: the indices' dimensions but the last, in order.
    let is_window = mask(upd_rank, &[&dn.update_window_dims]);
    let scatter_dims = (0..upd_rank).filter(|&d| !is_window[d]);
    for (k, ud) in scatter_dims.enumerate() {
        let (us, is) = (updates.shape.dims()[ud], indices.shape.dims()[k]);
        if us != is {
            return Err(operands(format!(
                "scatter dimension {ud} of the updates {updates} (size {us}) must equal \
                 dimension {k} of the indices {indices} (size {is})"
            )));
        }
    }
    Ok(vec![operand.clone()])
}

/// `update_jaxpr`, when given, maps two scalars of the operand's dtype to one; and
/// `update_consts` is empty (the combiner is the primitive's own).
fn check_update_jaxpr(prim: Builtin, dtype: DType, params: &Params) -> Result<(), RuleError> {
    if let Some(Param::Ints(c)) = params.get("update_consts") {
        if !c.is_empty() {
            return Err(bad(
                "update_consts",
                format!("must be empty, got {}", tup(c)),
            ));
        }
    }
    let Some(Param::Jaxpr(j)) = params.get("update_jaxpr") else {
        return Ok(());
    };
    let scalar = AbstractValue::scalar(dtype);
    let ins = j.in_avals();
    let outs = j.out_avals();
    let fits = |avals: &[AbstractValue], n: usize| {
        avals.len() == n
            && avals
                .iter()
                .all(|a| a.shape.rank() == 0 && a.dtype == dtype)
    };
    if !fits(&ins, 2) || !fits(&outs, 1) {
        return Err(RuleError::SubJaxpr {
            reason: format!(
                "{}'s update_jaxpr must map two {scalar} to one {scalar}; it maps {} to {}",
                prim.name(),
                super::types_list(&ins),
                super::types_list(&outs)
            ),
        });
    }
    Ok(())
}
