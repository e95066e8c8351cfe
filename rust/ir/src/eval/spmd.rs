//! Evaluation of `shard_map`: its body runs in lockstep over all the mesh's devices.
//!
//! Each variable of the body holds one value per device (devices numbered row-major
//! over the mesh axes). First-order equations apply on each device; collectives combine
//! the values of the devices in each group (the devices that differ only along the named
//! axes, as the lowering's `replica_groups`). A nested call, `cond`, `while` or `scan`
//! with no collective inside runs on each device with the ordinary evaluator; one that
//! holds a collective runs in lockstep too, which needs every device to take the same
//! branch and the same number of iterations: when they differ, the evaluation stops with
//! [`EvalError::Unsupported`] (XLA would deadlock or mismatch there).

use super::ops::{self, internal};
use super::{eval_jaxpr_with, EvalError, EvalOptions, HostArray, R};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, LitValue};
use crate::params::{Param, Params};
use crate::primitive::{Builtin, Primitive};
use crate::sharding::{Mesh, PartitionSpec};
use crate::JaxprBuilder;
use std::sync::Arc;

/// One value per device.
type PerDevice = Vec<HostArray>;

/// How deep calls holding collectives may nest inside a body.
const MAX_NESTING: usize = 64;

/// The most devices a mesh may have to be evaluated.
const MAX_DEVICES: i64 = 1 << 12;

fn unsupported(what: impl Into<String>) -> EvalError {
    EvalError::Unsupported { what: what.into() }
}

fn names(params: &Params, name: &str) -> R<Vec<Arc<str>>> {
    match params.get(name) {
        Some(Param::Str(s)) => Ok(vec![s.clone()]),
        Some(Param::Names(ns)) => Ok(ns.to_vec()),
        _ => Err(internal(format!("missing axis names param '{name}'"))),
    }
}

fn apply1(prim: Builtin, ins: &[&HostArray], params: Params) -> R<HostArray> {
    ops::apply(prim, ins, &params)?
        .pop()
        .ok_or_else(|| internal(format!("{} gave no output", prim.name())))
}

fn slice(x: &HostArray, starts: &[i64], limits: &[i64]) -> R<HostArray> {
    apply1(
        Builtin::Slice,
        &[x],
        Params::new([
            ("start_indices", Param::ints(starts)),
            ("limit_indices", Param::ints(limits)),
        ]),
    )
}

/// The block of `x` along `dim`: `[i * size, (i + 1) * size)`.
fn block_along(x: &HostArray, dim: usize, i: i64, size: i64) -> R<HostArray> {
    let dims = x.shape.dims();
    let starts: Vec<i64> = (0..dims.len())
        .map(|k| if k == dim { i * size } else { 0 })
        .collect();
    let limits: Vec<i64> = dims
        .iter()
        .enumerate()
        .map(|(k, &n)| if k == dim { (i + 1) * size } else { n })
        .collect();
    slice(x, &starts, &limits)
}

fn concat(parts: &[HostArray], dim: usize) -> R<HostArray> {
    let refs: Vec<&HostArray> = parts.iter().collect();
    apply1(
        Builtin::Concatenate,
        &refs,
        Params::new([("dimension", Param::Int(dim as i64))]),
    )
}

/// The block index of `device` along dimension `d` of a value laid out by `spec`.
fn block_index(mesh: &Mesh, spec: &PartitionSpec, d: usize, device: i64) -> i64 {
    let mut idx = 0;
    for n in spec.axes_of(d) {
        if let Some(i) = mesh.axis_index(n) {
            idx = idx * mesh.axes()[i].1 + mesh.coordinate(device, i);
        }
    }
    idx
}

/// Each device's block of a global value.
fn split(mesh: &Mesh, spec: &PartitionSpec, x: &HostArray) -> R<PerDevice> {
    let dims = x.shape.dims().to_vec();
    let tiles: Vec<i64> = (0..dims.len()).map(|d| spec.tiles(mesh, d)).collect();
    (0..mesh.size())
        .map(|dev| {
            let starts: Vec<i64> = (0..dims.len())
                .map(|d| block_index(mesh, spec, d, dev) * (dims[d] / tiles[d]))
                .collect();
            let limits: Vec<i64> = (0..dims.len())
                .map(|d| starts[d] + dims[d] / tiles[d])
                .collect();
            slice(x, &starts, &limits)
        })
        .collect()
}

/// The global value whose blocks the devices hold (a block several devices hold is taken
/// from the first of them: with varying axes checked, they agree).
fn assemble(
    mesh: &Mesh,
    spec: &PartitionSpec,
    locals: &[HostArray],
    global: &AbstractValue,
) -> R<HostArray> {
    let mut out = HostArray::zeros(global.shape.clone(), global.dtype);
    let unused = spec.unused_axes(mesh);
    for (dev, local) in locals.iter().enumerate() {
        let dev = dev as i64;
        if unused.iter().any(|&i| mesh.coordinate(dev, i) != 0) {
            continue;
        }
        let mut ins: Vec<HostArray> = Vec::with_capacity(2 + global.shape.rank());
        for d in 0..global.shape.rank() {
            let start = block_index(mesh, spec, d, dev) * local.shape.dims()[d];
            ins.push(
                HostArray::scalar_i64(DType::I64, start).map_err(|e| internal(e.to_string()))?,
            );
        }
        let mut refs: Vec<&HostArray> = vec![&out, local];
        refs.extend(ins.iter());
        out = apply1(Builtin::DynamicUpdateSlice, &refs, Params::empty())?;
    }
    Ok(out)
}

/// True when a collective appears in the equation's sub-jaxprs (at any depth).
fn holds_collective(e: &Eqn) -> bool {
    let mut stack: Vec<&Eqn> = vec![e];
    let mut seen = std::collections::HashSet::new();
    while let Some(e) = stack.pop() {
        for (_, p) in e.params().iter() {
            let subs: &[ClosedJaxpr] = match p {
                Param::Jaxpr(cj) => std::slice::from_ref(cj),
                Param::Jaxprs(cjs) => cjs,
                _ => continue,
            };
            for sub in subs {
                if !seen.insert(Arc::as_ptr(sub.jaxpr())) {
                    continue;
                }
                for inner in sub.jaxpr().eqns() {
                    if let Primitive::Builtin(b) = inner.primitive() {
                        if b.is_collective() || *b == Builtin::ShardMap {
                            return true;
                        }
                    }
                    stack.push(inner);
                }
            }
        }
    }
    false
}

/// Evaluates a `shard_map` equation on its global operands.
pub(super) fn eval_shard_map(
    eqn: &Eqn,
    ins: Vec<HostArray>,
    options: &EvalOptions,
) -> R<Vec<HostArray>> {
    let params = eqn.params();
    let body = ops::param_jaxpr(params, "jaxpr")?;
    let (Some(Param::Mesh(mesh)), Some(Param::Specs(in_specs)), Some(Param::Specs(out_specs))) = (
        params.get("mesh"),
        params.get("in_specs"),
        params.get("out_specs"),
    ) else {
        return Err(internal("shard_map without mesh or specs"));
    };
    if mesh.size() > MAX_DEVICES {
        return Err(unsupported(format!(
            "a shard_map over {} devices (at most {MAX_DEVICES})",
            mesh.size()
        )));
    }
    let args = ins
        .iter()
        .zip(in_specs.iter())
        .map(|(x, spec)| split(mesh, spec, x))
        .collect::<R<Vec<_>>>()?;
    let mut spmd = Spmd {
        mesh,
        options,
        iterations: 0,
    };
    let outs = spmd.run(body, args, 0)?;
    let mut result = Vec::with_capacity(outs.len());
    for (k, (locals, spec)) in outs.iter().zip(out_specs.iter()).enumerate() {
        let local_aval = locals
            .first()
            .map(HostArray::aval)
            .ok_or_else(|| internal("a mesh without devices"))?;
        let global = crate::primitive::unshard_aval(mesh, spec, &local_aval)
            .map_err(|m| internal(format!("output {k}: {m}")))?;
        result.push(assemble(mesh, spec, locals, &global)?);
    }
    Ok(result)
}

struct Spmd<'m> {
    mesh: &'m Mesh,
    options: &'m EvalOptions,
    iterations: u64,
}

impl Spmd<'_> {
    fn devices(&self) -> usize {
        self.mesh.size() as usize
    }

    fn tick(&mut self) -> R<()> {
        self.iterations += 1;
        if let Some(limit) = self.options.max_loop_iterations {
            if self.iterations > limit {
                return Err(unsupported(format!(
                    "more than {limit} loop iterations (the limit max_loop_iterations) in a \
                     shard_map body"
                )));
            }
        }
        Ok(())
    }

    /// Runs a closed jaxpr in lockstep on per-device arguments.
    fn run(&mut self, cj: &ClosedJaxpr, args: Vec<PerDevice>, depth: usize) -> R<Vec<PerDevice>> {
        if depth > MAX_NESTING {
            return Err(unsupported(format!(
                "calls holding collectives nested more than {MAX_NESTING} deep in a shard_map"
            )));
        }
        let j = cj.jaxpr();
        let n = self.devices();
        let mut env: Vec<Option<PerDevice>> = vec![None; j.num_vars()];
        let consts = super::closed_consts(cj)?;
        for (&v, c) in j.constvars().iter().zip(consts) {
            env[v.index()] = Some(vec![c; n]);
        }
        if args.len() != j.invars().len() {
            return Err(internal("shard_map body argument count"));
        }
        for (&v, a) in j.invars().iter().zip(args) {
            env[v.index()] = Some(a);
        }
        let read = |env: &[Option<PerDevice>], a: Atom| -> R<PerDevice> {
            match a {
                Atom::Var(v) => env
                    .get(v.index())
                    .and_then(Option::clone)
                    .ok_or_else(|| internal(format!("variable {v} read before it is bound"))),
                Atom::Lit(l) => {
                    let lit = j
                        .literals()
                        .get(l.index())
                        .ok_or_else(|| internal("literal out of range"))?;
                    Ok(vec![super::literal_array(lit)?; n])
                }
            }
        };
        for e in j.eqns() {
            let ins = e
                .inputs()
                .iter()
                .map(|&a| read(&env, a))
                .collect::<R<Vec<_>>>()?;
            let outs = self.eqn(j, e, ins, depth)?;
            if outs.len() != e.outvars().len() {
                return Err(internal(format!("{} output count", e.primitive().name())));
            }
            for (&v, o) in e.outvars().iter().zip(outs) {
                env[v.index()] = Some(o);
            }
        }
        j.outvars().iter().map(|&a| read(&env, a)).collect()
    }

    fn eqn(&mut self, j: &Jaxpr, e: &Eqn, ins: Vec<PerDevice>, depth: usize) -> R<Vec<PerDevice>> {
        let b = match e.primitive() {
            Primitive::Builtin(b) => *b,
            Primitive::Extension(x) => {
                return Err(EvalError::UnsupportedPrimitive {
                    name: x.name().to_owned(),
                })
            }
        };
        if b.is_collective() {
            return self.collective(b, e.params(), ins).map(|o| vec![o]);
        }
        if b == Builtin::ShardMap {
            return Err(unsupported("a shard_map inside a shard_map body"));
        }
        if b.is_higher_order() && holds_collective(e) {
            return self.control(j, b, e, ins, depth);
        }
        self.per_device(j, e, ins)
    }

    /// An equation run on each device by itself.
    fn per_device(&mut self, j: &Jaxpr, e: &Eqn, ins: Vec<PerDevice>) -> R<Vec<PerDevice>> {
        let n = self.devices();
        let mut outs: Vec<PerDevice> = vec![Vec::with_capacity(n); e.outvars().len()];
        let wrapper = if e
            .primitive()
            .as_builtin()
            .is_some_and(|b| b.is_higher_order())
        {
            Some(single_eqn_jaxpr(j, e)?)
        } else {
            None
        };
        for dev in 0..n {
            let args: Vec<&HostArray> = ins.iter().map(|v| &v[dev]).collect();
            let res = match (&wrapper, e.primitive()) {
                (Some(w), _) => {
                    let owned: Vec<HostArray> = args.into_iter().cloned().collect();
                    eval_jaxpr_with(w, &[], &owned, self.options)?
                }
                (None, Primitive::Builtin(b)) => ops::apply(*b, &args, e.params())?,
                (None, Primitive::Extension(x)) => {
                    return Err(EvalError::UnsupportedPrimitive {
                        name: x.name().to_owned(),
                    })
                }
            };
            for (slot, r) in outs.iter_mut().zip(res) {
                slot.push(r);
            }
        }
        Ok(outs)
    }

    /// Control flow holding collectives, in lockstep.
    fn control(
        &mut self,
        j: &Jaxpr,
        b: Builtin,
        e: &Eqn,
        ins: Vec<PerDevice>,
        depth: usize,
    ) -> R<Vec<PerDevice>> {
        let params = e.params();
        match b {
            Builtin::Jit | Builtin::CustomJvpCall | Builtin::CustomVjpCall | Builtin::Remat => {
                let sub = ops::param_jaxpr(params, b.call_jaxpr_param().unwrap_or("jaxpr"))?;
                self.run(sub, ins, depth + 1)
            }
            Builtin::Cond => {
                let branches = ops::param_jaxprs(params, "branches")?;
                let mut ins = ins;
                if ins.is_empty() {
                    return Err(internal("cond without an index"));
                }
                let index = ins.remove(0);
                let ks = index
                    .iter()
                    .map(|i| super::branch_index(i, branches.len()))
                    .collect::<R<Vec<_>>>()?;
                if ks.windows(2).any(|w| w[0] != w[1]) {
                    return Err(unsupported(
                        "a cond in a shard_map body whose branches hold collectives, with an \
                         index that differs between devices",
                    ));
                }
                self.run(&branches[ks[0]], ins, depth + 1)
            }
            Builtin::While => {
                let cond = ops::param_jaxpr(params, "cond_jaxpr")?;
                let body = ops::param_jaxpr(params, "body_jaxpr")?;
                let nc = ops::param_count(params, "cond_nconsts")?;
                let nb = ops::param_count(params, "body_nconsts")?;
                if nc + nb > ins.len() {
                    return Err(internal("while operand count"));
                }
                let mut rest = ins;
                let mut carry = rest.split_off(nc + nb);
                let body_consts = rest.split_off(nc);
                let cond_consts = rest;
                loop {
                    let mut cargs = cond_consts.clone();
                    cargs.extend(carry.iter().cloned());
                    let go = self.run(cond, cargs, depth + 1)?;
                    let preds = go
                        .into_iter()
                        .next()
                        .ok_or_else(|| internal("while cond gave nothing"))?;
                    // A batched predicate runs the loop while any lane's is true.
                    let flags = preds
                        .iter()
                        .map(|x| match x.as_bool() {
                            Some(p) => Ok(p.iter().any(|&b| b)),
                            None => Err(internal("while cond is not bool")),
                        })
                        .collect::<R<Vec<bool>>>()?;
                    let batched = preds.first().is_some_and(|p| p.shape.rank() > 0);
                    if flags.windows(2).any(|w| w[0] != w[1]) {
                        return Err(unsupported(
                            "a while loop in a shard_map body that holds collectives, whose \
                             trip count differs between devices",
                        ));
                    }
                    if !flags.first().copied().unwrap_or(false) {
                        return Ok(carry);
                    }
                    self.tick()?;
                    let mut bargs = body_consts.clone();
                    if !batched {
                        bargs.extend(carry);
                        carry = self.run(body, bargs, depth + 1)?;
                        continue;
                    }
                    // Lanes whose predicate is false keep their old carry.
                    bargs.extend(carry.iter().cloned());
                    let new = self.run(body, bargs, depth + 1)?;
                    if new.len() != carry.len() {
                        return Err(internal("while body carry count"));
                    }
                    let mut merged = Vec::with_capacity(new.len());
                    for (n, o) in new.into_iter().zip(&carry) {
                        let per_dev = n
                            .into_iter()
                            .zip(o)
                            .zip(&preds)
                            .map(|((n, o), p)| {
                                let p = p.as_bool().ok_or_else(|| internal("while cond"))?;
                                super::select_lanes(p, n, o)
                            })
                            .collect::<R<Vec<_>>>()?;
                        merged.push(per_dev);
                    }
                    carry = merged;
                }
            }
            Builtin::Scan => {
                let body = ops::param_jaxpr(params, "jaxpr")?;
                let length = ops::param_count(params, "length")?;
                let reverse = ops::param_bool(params, "reverse")?;
                let nconsts = ops::param_count(params, "num_consts")?;
                let ncarry = ops::param_count(params, "num_carry")?;
                if nconsts + ncarry > ins.len() {
                    return Err(internal("scan operand count"));
                }
                let mut rest = ins;
                let xs = rest.split_off(nconsts + ncarry);
                let mut carry = rest.split_off(nconsts);
                let consts = rest;
                let n = self.devices();
                let num_ys = e.outvars().len().saturating_sub(ncarry);
                let mut ys: Vec<Vec<PerDevice>> = vec![Vec::new(); num_ys];
                for step in 0..length {
                    self.tick()?;
                    let i = if reverse { length - 1 - step } else { step };
                    let mut args = consts.clone();
                    args.extend(carry);
                    for x in &xs {
                        args.push(
                            x.iter()
                                .map(|v| ops::index_leading(v, i))
                                .collect::<R<Vec<_>>>()?,
                        );
                    }
                    let mut outs = self.run(body, args, depth + 1)?;
                    let y = outs.split_off(ncarry);
                    carry = outs;
                    for (acc, yk) in ys.iter_mut().zip(y) {
                        acc.push(yk);
                    }
                }
                let mut result = carry;
                for (k, mut steps) in ys.into_iter().enumerate() {
                    if reverse {
                        steps.reverse();
                    }
                    let y = e
                        .outvars()
                        .get(ncarry + k)
                        .map(|&v| j.var_aval(v).clone())
                        .ok_or_else(|| internal("scan output count"))?;
                    let mut per_dev = Vec::with_capacity(n);
                    for dev in 0..n {
                        let parts: Vec<HostArray> = steps.iter().map(|s| s[dev].clone()).collect();
                        per_dev.push(ops::stack(&parts, y.shape.clone(), y.dtype)?);
                    }
                    result.push(per_dev);
                }
                Ok(result)
            }
            _ => Err(internal(format!("{} is not control flow", b.name()))),
        }
    }

    /// A collective over the per-device values of its operand.
    fn collective(&mut self, b: Builtin, params: &Params, ins: Vec<PerDevice>) -> R<PerDevice> {
        let mesh = self.mesh;
        let n = self.devices();
        if b == Builtin::AxisIndex {
            let axes = names(params, "axis_name")?;
            let groups = mesh.groups(&axes).map_err(|e| internal(e.to_string()))?;
            let mut out = vec![HostArray::scalar_bool(false); n];
            for g in &groups {
                for (pos, &dev) in g.iter().enumerate() {
                    out[dev as usize] = HostArray::scalar(DType::I32, LitValue::Int(pos as i64))
                        .map_err(|e| internal(e.to_string()))?;
                }
            }
            return Ok(out);
        }
        let mut ins = ins;
        let v = ins
            .pop()
            .ok_or_else(|| internal("a collective without an operand"))?;
        let axis_param = match b {
            Builtin::Psum | Builtin::Pmax | Builtin::Pmin | Builtin::Pvary => "axes",
            _ => "axis_name",
        };
        let axes = names(params, axis_param)?;
        let groups = mesh.groups(&axes).map_err(|e| internal(e.to_string()))?;
        let mut out: Vec<Option<HostArray>> = vec![None; n];
        let member = |d: i64| -> &HostArray { &v[d as usize] };
        match b {
            Builtin::Pvary => return Ok(v),
            Builtin::Psum | Builtin::Pmax | Builtin::Pmin => {
                let op = match b {
                    Builtin::Psum => Builtin::Add,
                    Builtin::Pmax => Builtin::Max,
                    _ => Builtin::Min,
                };
                for g in &groups {
                    let mut acc = member(g[0]).clone();
                    for &m in &g[1..] {
                        acc = apply1(op, &[&acc, member(m)], Params::empty())?;
                    }
                    for &m in g {
                        out[m as usize] = Some(acc.clone());
                    }
                }
            }
            Builtin::AllGather => {
                let d = ops::param_count(params, "all_gather_dimension")?;
                let tiled = ops::param_bool(params, "tiled")?;
                for g in &groups {
                    let parts = g
                        .iter()
                        .map(|&m| {
                            if tiled {
                                Ok(member(m).clone())
                            } else {
                                apply1(
                                    Builtin::ExpandDims,
                                    &[member(m)],
                                    Params::new([("dimensions", Param::ints(&[d as i64]))]),
                                )
                            }
                        })
                        .collect::<R<Vec<_>>>()?;
                    let all = concat(&parts, d)?;
                    for &m in g {
                        out[m as usize] = Some(all.clone());
                    }
                }
            }
            Builtin::ReduceScatter => {
                let d = ops::param_count(params, "scatter_dimension")?;
                let tiled = ops::param_bool(params, "tiled")?;
                for g in &groups {
                    let mut acc = member(g[0]).clone();
                    for &m in &g[1..] {
                        acc = apply1(Builtin::Add, &[&acc, member(m)], Params::empty())?;
                    }
                    let size = acc.shape.dims()[d] / g.len() as i64;
                    for (pos, &m) in g.iter().enumerate() {
                        let piece = block_along(&acc, d, pos as i64, size)?;
                        out[m as usize] = Some(if tiled {
                            piece
                        } else {
                            apply1(
                                Builtin::Squeeze,
                                &[&piece],
                                Params::new([("dimensions", Param::ints(&[d as i64]))]),
                            )?
                        });
                    }
                }
            }
            Builtin::Ppermute => {
                let Some(Param::Pairs(perm)) = params.get("perm") else {
                    return Err(internal("ppermute without perm"));
                };
                for g in &groups {
                    for &(s, dst) in perm.iter() {
                        let (Some(&s), Some(&dst)) = (g.get(s as usize), g.get(dst as usize))
                        else {
                            return Err(internal("ppermute index out of range"));
                        };
                        out[dst as usize] = Some(member(s).clone());
                    }
                }
                for (dev, slot) in out.iter_mut().enumerate() {
                    if slot.is_none() {
                        let x = &v[dev];
                        *slot = Some(HostArray::zeros(x.shape.clone(), x.dtype));
                    }
                }
            }
            Builtin::AllToAll => {
                let split_axis = ops::param_count(params, "split_axis")?;
                let concat_axis = ops::param_count(params, "concat_axis")?;
                for g in &groups {
                    let k = g.len() as i64;
                    let chunks = g
                        .iter()
                        .map(|&m| {
                            let x = member(m);
                            let size = x.shape.dims()[split_axis] / k;
                            (0..k)
                                .map(|j| block_along(x, split_axis, j, size))
                                .collect::<R<Vec<_>>>()
                        })
                        .collect::<R<Vec<_>>>()?;
                    for (j, &m) in g.iter().enumerate() {
                        let parts: Vec<HostArray> = chunks.iter().map(|c| c[j].clone()).collect();
                        out[m as usize] = Some(concat(&parts, concat_axis)?);
                    }
                }
            }
            _ => return Err(internal(format!("{} is not a collective", b.name()))),
        }
        out.into_iter()
            .map(|o| o.ok_or_else(|| internal("a device outside every group")))
            .collect()
    }
}

/// A jaxpr of one equation of `j` taking its operands as inputs (to run a higher-order
/// equation on one device with the ordinary evaluator).
fn single_eqn_jaxpr(j: &Jaxpr, e: &Eqn) -> R<Jaxpr> {
    let mut b = JaxprBuilder::new();
    let ins: Vec<Atom> = e
        .inputs()
        .iter()
        .map(|&a| Atom::Var(b.add_invar(j.atom_aval(a))))
        .collect();
    let outs: Vec<_> = e
        .outvars()
        .iter()
        .map(|&v| b.new_var(j.var_aval(v).clone()))
        .collect();
    b.add_eqn_with_outvars(e.primitive().clone(), ins, e.params().clone(), outs.clone());
    b.build(outs.into_iter().map(Atom::Var).collect())
        .map_err(|er| internal(format!("wrapping {}: {er}", e.primitive().name())))
}
