//! Shape rules of the collectives and of `shard_map`, as JAX 0.10.2's.
//!
//! Collectives look their axes up in the axis environment (the meshes of the enclosing
//! `shard_map`s); a `shard_map` checks its operands against its body's inputs, each
//! dimension divided by the sizes of the mesh axes its spec splits it over.

use super::{arity, axis_in, bad, int, jaxpr, shape, Rule, RuleError};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::params::{Param, Params};
use crate::primitive::Builtin;
use crate::sharding::{AxisEnv, Mesh, PartitionSpec};
use std::sync::Arc;

/// The axis names of a param: one name (`axis_name=y`) or a tuple of them.
pub(crate) fn axis_names(params: &Params, name: &'static str) -> Result<Vec<Arc<str>>, RuleError> {
    match params.get(name) {
        Some(Param::Str(s)) => Ok(vec![s.clone()]),
        Some(Param::Names(ns)) => Ok(ns.to_vec()),
        _ => Err(RuleError::MissingParam { name }),
    }
}

/// The `axis_size` param of `all_gather`/`reduce_scatter`: positive, and the size of
/// the named axes when the environment knows them.
fn checked_axis_size(env: &AxisEnv, params: &Params) -> Result<i64, RuleError> {
    let n = group_size(env, "axis_name", &axis_names(params, "axis_name")?)?;
    let size = int(params, "axis_size")?;
    if size < 1 {
        return Err(bad("axis_size", format!("{size} is not a positive size")));
    }
    if let Some(n) = n.filter(|&n| n != size) {
        return Err(bad(
            "axis_size",
            format!("{size} differs from the size of the named axes, {n}"),
        ));
    }
    Ok(size)
}

/// The product of the sizes of the named axes (`None`: some axis is unbound in an open
/// environment). A name given twice is an error of the param.
fn group_size(env: &AxisEnv, param: &str, names: &[Arc<str>]) -> Result<Option<i64>, RuleError> {
    let mut total = Some(1i64);
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(bad(param, format!("axis name '{n}' appears twice")));
        }
        match env.size(n) {
            Ok(Some(s)) => total = total.map(|t| t.saturating_mul(s)),
            Ok(None) => total = None,
            Err(name) => return Err(RuleError::UnboundAxis { name }),
        }
    }
    Ok(total)
}

fn flag(params: &Params, name: &'static str) -> Result<bool, RuleError> {
    match params.get(name) {
        Some(Param::Bool(b)) => Ok(*b),
        None => Ok(false),
        _ => Err(RuleError::MissingParam { name }),
    }
}

fn numeric(x: &AbstractValue) -> Result<(), RuleError> {
    if x.dtype == DType::Bool {
        return Err(RuleError::DType {
            operand: 0,
            got: x.dtype,
            expected: "a numeric dtype".to_owned(),
        });
    }
    Ok(())
}

fn with_dims(x: &AbstractValue, dims: &[i64]) -> Result<AbstractValue, RuleError> {
    Ok(AbstractValue::new(shape(dims)?, x.dtype).with_weak_type(x.weak_type))
}

/// The mesh and specs of a `shard_map`.
pub(crate) fn shard_map_params(
    params: &Params,
) -> Result<(&Mesh, &[PartitionSpec], &[PartitionSpec]), RuleError> {
    let Some(Param::Mesh(mesh)) = params.get("mesh") else {
        return Err(RuleError::MissingParam { name: "mesh" });
    };
    let Some(Param::Specs(ins)) = params.get("in_specs") else {
        return Err(RuleError::MissingParam { name: "in_specs" });
    };
    let Some(Param::Specs(outs)) = params.get("out_specs") else {
        return Err(RuleError::MissingParam { name: "out_specs" });
    };
    Ok((mesh, ins, outs))
}

/// The per-device type of a value of type `x` laid out by `spec` on `mesh` (each
/// dimension divided by the product of its axes' sizes); `Err` with a message naming the
/// dimension when one does not divide evenly.
pub(crate) fn shard_aval(
    mesh: &Mesh,
    spec: &PartitionSpec,
    x: &AbstractValue,
) -> Result<AbstractValue, String> {
    spec.check(mesh, x.shape.rank())
        .map_err(|e| e.to_string())?;
    let mut dims = x.shape.dims().to_vec();
    for (d, size) in dims.iter_mut().enumerate() {
        let k = spec.tiles(mesh, d);
        if *size % k != 0 {
            let axes: Vec<String> = spec
                .axes_of(d)
                .iter()
                .map(|n| format!("'{n}' (of size {})", mesh.axis_size(n).unwrap_or(1)))
                .collect();
            return Err(format!(
                "{spec} maps array axis {d} (of size {size}) to mesh axis {}, but {k} does not \
                 evenly divide {size}",
                axes.join(" and ")
            ));
        }
        *size /= k;
    }
    Ok(
        AbstractValue::new(Shape::new(&dims).map_err(|e| e.to_string())?, x.dtype)
            .with_weak_type(x.weak_type),
    )
}

/// The global type of a per-device value of type `x` laid out by `spec` on `mesh`.
pub(crate) fn unshard_aval(
    mesh: &Mesh,
    spec: &PartitionSpec,
    x: &AbstractValue,
) -> Result<AbstractValue, String> {
    spec.check(mesh, x.shape.rank())
        .map_err(|e| e.to_string())?;
    let dims: Vec<i64> = x
        .shape
        .dims()
        .iter()
        .enumerate()
        .map(|(d, &s)| s.saturating_mul(spec.tiles(mesh, d)))
        .collect();
    Ok(
        AbstractValue::new(Shape::new(&dims).map_err(|e| e.to_string())?, x.dtype)
            .with_weak_type(x.weak_type),
    )
}

use crate::aval::Shape;

pub(super) fn abstract_eval(
    prim: Builtin,
    inputs: &[AbstractValue],
    params: &Params,
    env: &AxisEnv,
) -> Rule {
    use Builtin::*;
    match prim {
        Psum | Pmax | Pmin | Pvary => {
            arity(inputs, 1)?;
            if prim != Pvary {
                numeric(&inputs[0])?;
            }
            group_size(env, "axes", &axis_names(params, "axes")?)?;
            Ok(vec![inputs[0].clone()])
        }
        AxisIndex => {
            arity(inputs, 0)?;
            group_size(env, "axis_name", &axis_names(params, "axis_name")?)?;
            Ok(vec![AbstractValue::scalar(DType::I32)])
        }
        Ppermute => {
            arity(inputs, 1)?;
            let n = group_size(env, "axis_name", &axis_names(params, "axis_name")?)?;
            let Some(Param::Pairs(perm)) = params.get("perm") else {
                return Err(RuleError::MissingParam { name: "perm" });
            };
            let mut srcs = Vec::with_capacity(perm.len());
            let mut dsts = Vec::with_capacity(perm.len());
            for &(s, d) in perm.iter() {
                for i in [s, d] {
                    if i < 0 || n.is_some_and(|n| i >= n) {
                        return Err(bad(
                            "perm",
                            format!(
                                "index {i} is out of range for the axis size {}",
                                n.map_or("?".to_owned(), |n| n.to_string())
                            ),
                        ));
                    }
                }
                if srcs.contains(&s) {
                    return Err(bad("perm", format!("source {s} appears twice")));
                }
                if dsts.contains(&d) {
                    return Err(bad("perm", format!("destination {d} appears twice")));
                }
                srcs.push(s);
                dsts.push(d);
            }
            Ok(vec![inputs[0].clone()])
        }
        AllGather => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            let size = checked_axis_size(env, params)?;
            let tiled = flag(params, "tiled")?;
            let rank = x.shape.rank();
            let d = int(params, "all_gather_dimension")?;
            let d = axis_in(
                "all_gather_dimension",
                d,
                if tiled { rank } else { rank + 1 },
                format_args!("{x}"),
            )?;
            let mut dims = x.shape.dims().to_vec();
            if tiled {
                dims[d] = dims[d].saturating_mul(size);
            } else {
                dims.insert(d, size);
            }
            Ok(vec![with_dims(x, &dims)?])
        }
        ReduceScatter => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            numeric(x)?;
            let size = checked_axis_size(env, params)?;
            let tiled = flag(params, "tiled")?;
            let d = axis_in(
                "scatter_dimension",
                int(params, "scatter_dimension")?,
                x.shape.rank(),
                format_args!("{x}"),
            )?;
            let mut dims = x.shape.dims().to_vec();
            if tiled {
                if dims[d] % size != 0 {
                    return Err(RuleError::Operands {
                        reason: format!(
                            "tiled reduce_scatter operand scatter dimension size {} must be \
                             divisible by shard_count {size}",
                            dims[d]
                        ),
                    });
                }
                dims[d] /= size;
            } else {
                if dims[d] != size {
                    return Err(RuleError::Operands {
                        reason: format!(
                            "reduce_scatter operand scatter dimension size {} must match shard \
                             count {size}",
                            dims[d]
                        ),
                    });
                }
                dims.remove(d);
            }
            Ok(vec![with_dims(x, &dims)?])
        }
        AllToAll => {
            arity(inputs, 1)?;
            let x = &inputs[0];
            let names = axis_names(params, "axis_name")?;
            let n = group_size(env, "axis_name", &names)?;
            flag(params, "tiled")?;
            let rank = x.shape.rank();
            let split = axis_in(
                "split_axis",
                int(params, "split_axis")?,
                rank,
                format_args!("{x}"),
            )?;
            let concat = axis_in(
                "concat_axis",
                int(params, "concat_axis")?,
                rank,
                format_args!("{x}"),
            )?;
            let Some(n) = n else {
                let unknown = names
                    .iter()
                    .find(|n| env.size(n).ok().flatten().is_none())
                    .map_or(String::new(), |n| n.to_string());
                return Err(RuleError::AxisSizeUnknown { name: unknown });
            };
            let mut dims = x.shape.dims().to_vec();
            if dims[split] % n != 0 {
                return Err(RuleError::Operands {
                    reason: format!(
                        "the size of all_to_all split_axis ({}) has to be divisible by the size \
                         of the named axis ({n})",
                        dims[split]
                    ),
                });
            }
            dims[split] /= n;
            dims[concat] = dims[concat].saturating_mul(n);
            Ok(vec![AbstractValue::new(shape(&dims)?, x.dtype)])
        }
        ShardMap => {
            let body = jaxpr(params, "jaxpr")?;
            let (mesh, in_specs, out_specs) = shard_map_params(params)?;
            let body_ins = body.in_avals();
            let body_outs = body.out_avals();
            if in_specs.len() != inputs.len() {
                return Err(bad(
                    "in_specs",
                    format!("{} specs for {} operands", in_specs.len(), inputs.len()),
                ));
            }
            if body_ins.len() != inputs.len() {
                return Err(RuleError::SubJaxpr {
                    reason: format!(
                        "jaxpr takes {} inputs but shard_map has {} operands",
                        body_ins.len(),
                        inputs.len()
                    ),
                });
            }
            if out_specs.len() != body_outs.len() {
                return Err(bad(
                    "out_specs",
                    format!("{} specs for {} outputs", out_specs.len(), body_outs.len()),
                ));
            }
            for (i, ((x, spec), want)) in inputs.iter().zip(in_specs).zip(&body_ins).enumerate() {
                let local = shard_aval(mesh, spec, x)
                    .map_err(|m| bad("in_specs", format!("argument {i} of type {x}: {m}")))?;
                if !local.same_type(want) {
                    return Err(RuleError::SubJaxpr {
                        reason: format!(
                            "argument {i} of type {x} split by {spec} is {local} on each device, \
                             but the jaxpr takes {want}"
                        ),
                    });
                }
            }
            let mut outs = Vec::with_capacity(body_outs.len());
            for (i, (y, spec)) in body_outs.iter().zip(out_specs).enumerate() {
                outs.push(
                    unshard_aval(mesh, spec, y)
                        .map_err(|m| bad("out_specs", format!("output {i} of type {y}: {m}")))?,
                );
            }
            Ok(outs)
        }
        _ => Err(RuleError::Operands {
            reason: format!("{} is not a collective", prim.name()),
        }),
    }
}
