//! Lowering of `shard_map` and the collectives, as JAX 0.10 lowers them with Shardy.
//!
//! A `shard_map` is an `sdy.manual_computation` over all its mesh's axes whose region
//! calls the body's private function (lowered once per mesh, so collectives in it and in
//! the jaxprs it calls know their mesh). Collectives use `replica_groups` of partition
//! ids (devices numbered row-major over the mesh axes) with `use_global_device_ids`, and
//! `axis_index` reads `stablehlo.partition_id`.

use super::control::sub;
use super::text::{tensor_of, tensor_type, write_names, write_result_types, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::Eqn;
use crate::params::Param;
use crate::primitive::Builtin;
use crate::sharding::{mlir_string, Mesh};
use std::fmt::Write as _;
use std::sync::Arc;

fn bad(b: Builtin, param: &'static str) -> LowerError {
    LowerError::BadParam {
        primitive: b.name().to_owned(),
        param,
    }
}

fn names(e: &Eqn, b: Builtin, param: &'static str) -> Result<Vec<Arc<str>>, LowerError> {
    match e.params().get(param) {
        Some(Param::Str(s)) => Ok(vec![s.clone()]),
        Some(Param::Names(ns)) => Ok(ns.to_vec()),
        _ => Err(bad(b, param)),
    }
}

fn int(e: &Eqn, b: Builtin, param: &'static str) -> Result<i64, LowerError> {
    match e.params().get(param) {
        Some(Param::Int(i)) => Ok(*i),
        _ => Err(bad(b, param)),
    }
}

fn flag(e: &Eqn, param: &str) -> bool {
    matches!(e.params().get(param), Some(Param::Bool(true)))
}

/// `dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>`
fn dense_pairs(rows: &[Vec<i64>], width: usize) -> String {
    let body: Vec<String> = rows
        .iter()
        .map(|r| {
            let xs: Vec<String> = r.iter().map(|x| x.to_string()).collect();
            format!("[{}]", xs.join(", "))
        })
        .collect();
    format!(
        "dense<[{}]> : tensor<{}x{}xi64>",
        body.join(", "),
        rows.len(),
        width
    )
}

impl Module {
    fn channel(&mut self) -> String {
        let h = self.next_channel;
        self.next_channel += 1;
        format!("channel_handle = #stablehlo.channel_handle<handle = {h}, type = 1>")
    }

    /// The replica groups of a collective over `axes` of the function's mesh.
    fn groups(
        &self,
        f: &FuncState<'_>,
        b: Builtin,
        axes: &[Arc<str>],
    ) -> Result<(Arc<Mesh>, Vec<Vec<i64>>), LowerError> {
        let mesh = f.mesh.clone().ok_or_else(|| LowerError::NoMesh {
            primitive: b.name().to_owned(),
        })?;
        let groups = mesh.groups(axes).map_err(|e| LowerError::BadSharding {
            primitive: b.name().to_owned(),
            reason: e.to_string(),
        })?;
        Ok((mesh, groups))
    }

    /// An `all_reduce` or `reduce_scatter` with a combining region.
    #[allow(clippy::too_many_arguments)]
    fn reducing(
        &mut self,
        f: &mut FuncState<'_>,
        op: &str,
        x: &Ssa,
        attrs: &str,
        combine: &str,
        d: DType,
        out_ty: &str,
    ) -> Ssa {
        let r = f.fresh();
        let (a, c, s) = (f.fresh(), f.fresh(), f.fresh());
        let st = tensor_of(&[], d);
        let _ = writeln!(
            self.out,
            "    {r} = \"{op}\"({}) <{{{attrs}}}> ({{\n    ^bb0({a}: {st}, {c}: {st}):\n      {s} = \"{combine}\"({a}, {c}) : ({st}, {st}) -> {st}\n      \"stablehlo.return\"({s}) : ({st}) -> ()\n    }}) : ({}) -> {out_ty}",
            x.name, x.ty
        );
        Ssa::new(r, out_ty.to_owned())
    }

    pub(super) fn lower_collective(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_ty = out_avals.first().map(tensor_type).unwrap_or_default();
        let groups_text = |groups: &[Vec<i64>]| {
            let width = groups.first().map_or(0, Vec::len);
            dense_pairs(groups, width)
        };
        match b {
            Builtin::Pvary => Ok(inputs.to_vec()),
            Builtin::Psum | Builtin::Pmax | Builtin::Pmin => {
                let axes = names(e, b, "axes")?;
                if axes.is_empty() {
                    return Ok(inputs.to_vec());
                }
                let (_, groups) = self.groups(f, b, &axes)?;
                let combine = match b {
                    Builtin::Psum => "stablehlo.add",
                    Builtin::Pmax => "stablehlo.maximum",
                    _ => "stablehlo.minimum",
                };
                let attrs = format!(
                    "{}, replica_groups = {}, use_global_device_ids",
                    self.channel(),
                    groups_text(&groups)
                );
                let d = in_avals[0].dtype;
                Ok(vec![self.reducing(
                    f,
                    "stablehlo.all_reduce",
                    &inputs[0],
                    &attrs,
                    combine,
                    d,
                    &out_ty,
                )])
            }
            Builtin::AllGather => {
                let (_, groups) = self.groups(f, b, &names(e, b, "axis_name")?)?;
                let dim = int(e, b, "all_gather_dimension")?;
                let x = &in_avals[0];
                let mut operand = inputs[0].clone();
                if !flag(e, "tiled") {
                    // Gather along a new dimension of size 1.
                    let mut dims = x.shape.dims().to_vec();
                    dims.insert(dim as usize, 1);
                    let ty = tensor_of(&dims, x.dtype);
                    operand = self.op1(f, "stablehlo.reshape", &[&operand], "", ty);
                }
                let r = f.fresh();
                let ch = self.channel();
                let _ = writeln!(
                    self.out,
                    "    {r} = \"stablehlo.all_gather\"({}) <{{all_gather_dim = {dim} : i64, {}, replica_groups = {}, use_global_device_ids}}> : ({}) -> {out_ty}",
                    operand.name,
                    ch,
                    groups_text(&groups),
                    operand.ty
                );
                Ok(vec![Ssa::new(r, out_ty)])
            }
            Builtin::ReduceScatter => {
                let (_, groups) = self.groups(f, b, &names(e, b, "axis_name")?)?;
                let dim = int(e, b, "scatter_dimension")?;
                let x = &in_avals[0];
                let tiled = flag(e, "tiled");
                let scattered_ty = if tiled {
                    out_ty.clone()
                } else {
                    let mut dims = x.shape.dims().to_vec();
                    dims[dim as usize] = 1;
                    tensor_of(&dims, x.dtype)
                };
                let attrs = format!(
                    "{}, replica_groups = {}, scatter_dimension = {dim} : i64, use_global_device_ids",
                    self.channel(),
                    groups_text(&groups)
                );
                let r = self.reducing(
                    f,
                    "stablehlo.reduce_scatter",
                    &inputs[0],
                    &attrs,
                    "stablehlo.add",
                    x.dtype,
                    &scattered_ty,
                );
                if tiled {
                    return Ok(vec![r]);
                }
                Ok(vec![self.op1(f, "stablehlo.reshape", &[&r], "", out_ty)])
            }
            Builtin::Ppermute => {
                let (_, groups) = self.groups(f, b, &names(e, b, "axis_name")?)?;
                let Some(Param::Pairs(perm)) = e.params().get("perm") else {
                    return Err(bad(b, "perm"));
                };
                let mut pairs = Vec::new();
                for g in &groups {
                    for &(s, d) in perm.iter() {
                        let (Some(&s), Some(&d)) = (g.get(s as usize), g.get(d as usize)) else {
                            return Err(bad(b, "perm"));
                        };
                        pairs.push(vec![s, d]);
                    }
                }
                if pairs.is_empty() {
                    // Nothing is sent: every device receives zeros.
                    let x = &in_avals[0];
                    let zero = self.scalar_constant(
                        f,
                        &super::ops::scalar_text(crate::jaxpr::LitValue::Int(0), x.dtype),
                        x.dtype,
                    );
                    let dims = x.shape.dims().to_vec();
                    return Ok(vec![self.broadcast_to(
                        f,
                        zero,
                        &AbstractValue::scalar(x.dtype),
                        &dims,
                    )]);
                }
                let r = f.fresh();
                let ch = self.channel();
                let _ = writeln!(
                    self.out,
                    "    {r} = \"stablehlo.collective_permute\"({}) <{{{}, source_target_pairs = {}}}> : ({}) -> {out_ty}",
                    inputs[0].name,
                    ch,
                    dense_pairs(&pairs, 2),
                    inputs[0].ty
                );
                Ok(vec![Ssa::new(r, out_ty)])
            }
            Builtin::AllToAll => {
                let (_, groups) = self.groups(f, b, &names(e, b, "axis_name")?)?;
                let split = int(e, b, "split_axis")?;
                let concat = int(e, b, "concat_axis")?;
                let n = groups.first().map_or(1, Vec::len);
                let r = f.fresh();
                let ch = self.channel();
                let _ = writeln!(
                    self.out,
                    "    {r} = \"stablehlo.all_to_all\"({}) <{{{}, concat_dimension = {concat} : i64, replica_groups = {}, split_count = {n} : i64, split_dimension = {split} : i64}}> : ({}) -> {out_ty}",
                    inputs[0].name,
                    ch,
                    groups_text(&groups),
                    inputs[0].ty
                );
                Ok(vec![Ssa::new(r, out_ty)])
            }
            Builtin::AxisIndex => {
                let axes = names(e, b, "axis_name")?;
                let mesh = f.mesh.clone().ok_or_else(|| LowerError::NoMesh {
                    primitive: b.name().to_owned(),
                })?;
                let u32t = tensor_of(&[], DType::U32);
                let pid = self.op1(f, "stablehlo.partition_id", &[], "", u32t.clone());
                let mut acc: Option<Ssa> = None;
                for name in &axes {
                    let i = mesh
                        .axis_index(name)
                        .ok_or_else(|| LowerError::BadSharding {
                            primitive: b.name().to_owned(),
                            reason: format!("axis '{name}' is not in the mesh"),
                        })?;
                    let size = mesh.axes()[i].1;
                    let stride =
                        self.scalar_constant(f, &mesh.axis_stride(i).to_string(), DType::U32);
                    let modulus = self.scalar_constant(f, &size.to_string(), DType::U32);
                    let q = self.op1(f, "stablehlo.divide", &[&pid, &stride], "", u32t.clone());
                    let c = self.op1(f, "stablehlo.remainder", &[&q, &modulus], "", u32t.clone());
                    acc = Some(match acc {
                        None => c,
                        Some(prev) => {
                            let k = self.scalar_constant(f, &size.to_string(), DType::U32);
                            let m =
                                self.op1(f, "stablehlo.multiply", &[&prev, &k], "", u32t.clone());
                            self.op1(f, "stablehlo.add", &[&m, &c], "", u32t.clone())
                        }
                    });
                }
                let idx = match acc {
                    Some(a) => a,
                    None => self.scalar_constant(f, "0", DType::U32),
                };
                Ok(vec![self.op1(f, "stablehlo.convert", &[&idx], "", out_ty)])
            }
            _ => Err(LowerError::Unsupported {
                primitive: b.name().to_owned(),
            }),
        }
    }

    /// `shard_map`: an `sdy.manual_computation` over all the mesh's axes whose region
    /// calls the body.
    pub(super) fn lower_shard_map(
        &mut self,
        f: &mut FuncState<'_>,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::ShardMap;
        if f.mesh.is_some() {
            return Err(LowerError::NoMesh {
                primitive: "shard_map inside a shard_map".to_owned(),
            });
        }
        let body = sub(e, b, "jaxpr")?;
        let Some(Param::Mesh(mesh)) = e.params().get("mesh") else {
            return Err(bad(b, "mesh"));
        };
        let mesh = Arc::clone(mesh);
        let symbol = self.mesh_symbol(&mesh, b.name())?;
        let (Some(Param::Specs(in_specs)), Some(Param::Specs(out_specs))) =
            (e.params().get("in_specs"), e.params().get("out_specs"))
        else {
            return Err(bad(b, "in_specs"));
        };
        let shardings = |specs: &[crate::sharding::PartitionSpec],
                         avals: &[AbstractValue],
                         m: &Module|
         -> Result<Vec<String>, LowerError> {
            specs
                .iter()
                .zip(avals)
                .map(|(sp, a)| m.sdy_sharding(&symbol, &mesh, sp, a.shape.rank(), b))
                .collect()
        };
        let in_sh = shardings(in_specs, in_avals, self)?;
        let out_sh = shardings(out_specs, out_avals, self)?;
        let callee = self.function_for(body.jaxpr(), "shmap_body", Some(&mesh));
        let local_in: Vec<String> = body.jaxpr().in_avals().iter().map(tensor_type).collect();
        let local_out: Vec<String> = body.jaxpr().out_avals().iter().map(tensor_type).collect();
        let global_out: Vec<String> = out_avals.iter().map(tensor_type).collect();
        let tag = f.fresh().trim_start_matches('%').to_owned();
        let args: Vec<Ssa> = local_in
            .iter()
            .enumerate()
            .map(|(i, t)| Ssa::new(format!("%sm{tag}_{i}"), t.clone()))
            .collect();
        self.out.push_str("    ");
        let results = self.bind_results(f, &global_out);
        let manual: Vec<String> = mesh.axes().iter().map(|(n, _)| mlir_string(n)).collect();
        self.out.push_str("sdy.manual_computation(");
        write_names(&mut self.out, inputs.iter().map(|s| s.name.as_str()));
        let _ = write!(
            self.out,
            ") in_shardings=[{}] out_shardings=[{}] manual_axes={{{}}} (",
            in_sh.join(", "),
            out_sh.join(", "),
            manual.join(", ")
        );
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            let _ = write!(self.out, "{}: {}", a.name, a.ty);
        }
        self.out.push_str(") {\n");
        let arg_refs: Vec<&Ssa> = args.iter().collect();
        let outs = if self.threads_token(body.jaxpr()) {
            // The body's ordered callbacks run in order on a token of its own (the
            // manual computation's region takes and gives arrays only).
            let token = self
                .op(
                    f,
                    "stablehlo.after_all",
                    &[],
                    "",
                    &[super::TOKEN_TYPE.to_owned()],
                )
                .remove(0);
            let refs: Vec<&Ssa> = std::iter::once(&token).chain(arg_refs).collect();
            let mut types = vec![super::TOKEN_TYPE.to_owned()];
            types.extend_from_slice(&local_out);
            let mut outs = self.call(f, "      ", &callee, &refs, &types);
            outs.remove(0);
            outs
        } else {
            self.call(f, "      ", &callee, &arg_refs, &local_out)
        };
        self.out.push_str("      sdy.return");
        if !outs.is_empty() {
            self.out.push(' ');
            write_names(&mut self.out, outs.iter().map(|s| s.name.as_str()));
            self.out.push_str(" : ");
            write_names(&mut self.out, outs.iter().map(|s| s.ty.as_str()));
        }
        self.out.push_str("\n    } : (");
        write_names(&mut self.out, inputs.iter().map(|s| s.ty.as_str()));
        self.out.push_str(") -> ");
        write_result_types(&mut self.out, &global_out);
        self.out.push('\n');
        Ok(results)
    }
}
