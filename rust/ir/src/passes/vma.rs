//! Varying manual axes: the `pvary` insertion pass for `shard_map` bodies.
//!
//! In a `shard_map` body a value either varies over a mesh axis (devices along it may
//! hold different values) or is invariant over it. JAX 0.10 keeps that set (its "vma")
//! in each type; ferrax keeps JAX's semantics with explicit `pvary` equations instead:
//! [`insert_pvary`] infers, per variable, the axes it varies over, and inserts
//! `pvary[axes=...]` wherever an equation needs its operand to vary over more axes than
//! it does, as JAX's tracing does:
//! - an equation with several operands makes them all vary over the union of their
//!   axes (its outputs vary over the union);
//! - `psum`/`pmax`/`pmin` over axes its operand does not vary over get a `pvary` first
//!   (JAX's `psum_invariant`); their result no longer varies over those axes;
//! - `all_gather`, `reduce_scatter`, `ppermute`, `all_to_all` make their operand vary
//!   over their axes, and their result varies as it does; `axis_index` varies over its
//!   axes;
//! - a call (`jit`, `custom_jvp_call`, `custom_vjp_call`, `remat2`) is inferred through
//!   its jaxpr; `cond` makes its branches' outputs (and its index's axes) agree; `while`
//!   and `scan` widen their carries to a fixed point.
//!
//! Transposition then stays local: `psum`'s transpose is `pvary` (the identity on data)
//! and `pvary`'s is `psum`.

use super::PassError;
use crate::builder::JaxprBuilder;
use crate::jaxpr::{Atom, ClosedJaxpr, Eqn, Jaxpr, VarId};
use crate::params::{Param, Params};
use crate::primitive::{Builtin, Primitive};
use crate::sharding::Mesh;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Sub-jaxprs nest at most this deep for the pass.
const MAX_DEPTH: usize = 256;

/// Per value, the names of the mesh axes it varies over.
pub type AxisNames = Vec<Vec<Arc<str>>>;

/// A set of mesh axes, one bit per axis position.
type Axes = u64;

/// The body with `pvary` equations inserted, and the axes each output varies over (in
/// mesh order). `in_axes` gives, per input, the axes it varies over (its `in_spec`'s).
/// With `out_axes` (per output, its `out_spec`'s axes), an output that varies over fewer
/// of them gets a `pvary` to them, as JAX's shard_map does; the caller then checks that
/// no output varies over an axis its `out_spec` does not name (JAX's error).
///
/// # Examples
/// ```
/// use ferrax_ir::{passes::insert_pvary, text::parse_jaxpr, Mesh};
/// use std::sync::Arc;
/// let mesh = Mesh::new([("x", 2)])?;
/// // `a` varies over `x` (its in_spec is P('x')), `b` is replicated: adding them makes
/// // `b` vary too, with an explicit `pvary`.
/// let body = parse_jaxpr("{ lambda ; a:f32[2] b:f32[2]. let c:f32[2] = add a b in (c,) }")?;
/// let x: Arc<str> = Arc::from("x");
/// let (out, out_axes) = insert_pvary(&body, &mesh, &[vec![x.clone()], vec![]], None)?;
/// assert_eq!(
///     out.to_string(),
///     "{ lambda ; a:f32[2] b:f32[2]. let
///     c:f32[2] = pvary[axes=('x',)] b
///     d:f32[2] = add a c
///   in (d,) }"
/// );
/// assert_eq!(out_axes, [vec![x]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn insert_pvary(
    body: &Jaxpr,
    mesh: &Mesh,
    in_axes: &[Vec<Arc<str>>],
    out_axes: Option<&[Vec<Arc<str>>]>,
) -> Result<(Jaxpr, AxisNames), PassError> {
    if mesh.axes().len() > 64 {
        return Err(PassError::Unsupported {
            what: "a mesh of more than 64 axes".to_owned(),
        });
    }
    if in_axes.len() != body.invars().len() {
        return Err(PassError::FlagCount {
            what: "in_axes",
            expected: body.invars().len(),
            got: in_axes.len(),
        });
    }
    let cx = Cx {
        mesh,
        memo: RefCell::new(HashMap::new()),
    };
    let masks = in_axes
        .iter()
        .map(|ns| cx.mask(ns))
        .collect::<Result<Vec<_>, _>>()?;
    let required = match out_axes {
        Some(o) if o.len() != body.outvars().len() => {
            return Err(PassError::FlagCount {
                what: "out_axes",
                expected: body.outvars().len(),
                got: o.len(),
            })
        }
        Some(o) => Some(
            o.iter()
                .map(|ns| cx.mask(ns))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let consts = vec![0; body.constvars().len()];
    let (j, outs) = cx.infer(body, &consts, &masks, required.as_deref(), 0)?;
    cx.memo.borrow_mut().clear();
    // The memo held the only other reference.
    let j = Arc::try_unwrap(j).map_err(|_| ill("pvary insertion: the body is still shared"))?;
    Ok((j, outs.iter().map(|&m| cx.names(m)).collect()))
}

/// A sub-jaxpr (by address) with the axes of its constvars and invars and the axes its
/// outputs must vary over.
type MemoKey = (usize, Vec<Axes>, Vec<Axes>, Option<Vec<Axes>>);

/// A sub-jaxpr with `pvary` inserted, and the axes each of its outputs varies over.
type Inferred = (Arc<Jaxpr>, Vec<Axes>);

struct Cx<'m> {
    mesh: &'m Mesh,
    /// Each sub-jaxpr inferred once per distinct input axes: `cond` infers its
    /// branches twice and `while`/`scan` their bodies to a fixed point and again, so
    /// without it nesting k levels deep would cost 2^k or more.
    memo: RefCell<HashMap<MemoKey, Inferred>>,
}

impl Cx<'_> {
    fn mask(&self, names: &[Arc<str>]) -> Result<Axes, PassError> {
        let mut m = 0;
        for n in names {
            let i = self
                .mesh
                .axis_index(n)
                .ok_or_else(|| PassError::Unsupported {
                    what: format!("axis '{n}' is not an axis of the mesh"),
                })?;
            m |= 1 << i;
        }
        Ok(m)
    }

    fn names(&self, m: Axes) -> Vec<Arc<str>> {
        self.mesh
            .axes()
            .iter()
            .enumerate()
            .filter(|(i, _)| m & (1 << i) != 0)
            .map(|(_, (n, _))| n.clone())
            .collect()
    }

    fn eqn_axes(&self, e: &Eqn, param: &str) -> Result<Axes, PassError> {
        let ns: Vec<Arc<str>> = match e.params().get(param) {
            Some(Param::Str(s)) => vec![s.clone()],
            Some(Param::Names(ns)) => ns.to_vec(),
            _ => Vec::new(),
        };
        self.mask(&ns)
    }

    /// A copy of `j` with pvary inserted, given the axes of its constvars and invars;
    /// with `required`, its outputs are made to vary over (at least) those axes.
    fn infer(
        &self,
        j: &Jaxpr,
        const_masks: &[Axes],
        in_masks: &[Axes],
        required: Option<&[Axes]>,
        depth: usize,
    ) -> Result<Inferred, PassError> {
        if depth > MAX_DEPTH {
            return Err(PassError::Unsupported {
                what: format!("sub-jaxprs nested more than {MAX_DEPTH} deep"),
            });
        }
        let key = (
            j as *const Jaxpr as usize,
            const_masks.to_vec(),
            in_masks.to_vec(),
            required.map(<[Axes]>::to_vec),
        );
        if let Some((done, outs)) = self.memo.borrow().get(&key) {
            return Ok((done.clone(), outs.clone()));
        }
        let result = self.infer_uncached(j, const_masks, in_masks, required, depth)?;
        self.memo.borrow_mut().insert(key, result.clone());
        Ok(result)
    }

    fn infer_uncached(
        &self,
        j: &Jaxpr,
        const_masks: &[Axes],
        in_masks: &[Axes],
        required: Option<&[Axes]>,
        depth: usize,
    ) -> Result<Inferred, PassError> {
        let mut b = JaxprBuilder::new();
        let mut map: Vec<Option<(VarId, Axes)>> = vec![None; j.num_vars()];
        for (&v, &m) in j.constvars().iter().zip(const_masks) {
            map[v.index()] = Some((b.add_constvar(j.var_aval(v).clone()), m));
        }
        for (&v, &m) in j.invars().iter().zip(in_masks) {
            map[v.index()] = Some((b.add_invar(j.var_aval(v).clone()), m));
        }
        let get = |map: &[Option<(VarId, Axes)>],
                   b: &mut JaxprBuilder,
                   a: Atom|
         -> Result<(Atom, Axes), PassError> {
            match a {
                Atom::Var(v) => map
                    .get(v.index())
                    .copied()
                    .flatten()
                    .map(|(nv, m)| (Atom::Var(nv), m))
                    .ok_or_else(|| ill("a variable read before it is bound")),
                Atom::Lit(l) => Ok((b.literal(*j.literal(l)), 0)),
            }
        };
        for e in j.eqns() {
            let ins = e
                .inputs()
                .iter()
                .map(|&a| get(&map, &mut b, a))
                .collect::<Result<Vec<_>, _>>()?;
            let (new_ins, params, out_masks) = self.eqn(&mut b, e, ins, depth)?;
            let outs: Vec<VarId> = e
                .outvars()
                .iter()
                .map(|&v| b.new_var(j.var_aval(v).clone()))
                .collect();
            b.add_eqn_with_outvars(e.primitive().clone(), new_ins, params, outs.clone());
            for ((&v, nv), m) in e.outvars().iter().zip(outs).zip(out_masks) {
                map[v.index()] = Some((nv, m));
            }
        }
        let mut outs = Vec::with_capacity(j.outvars().len());
        let mut masks = Vec::with_capacity(j.outvars().len());
        for (k, &a) in j.outvars().iter().enumerate() {
            let (mut atom, mut m) = get(&map, &mut b, a)?;
            if let Some(req) = required.and_then(|r| r.get(k)) {
                atom = pvary(&mut b, atom, m, *req, self)?;
                m |= req;
            }
            outs.push(atom);
            masks.push(m);
        }
        let built = b
            .build(outs)
            .map_err(|e| ill(&format!("pvary insertion: {e}")))?;
        Ok((Arc::new(built), masks))
    }

    /// One equation: its (possibly pvary'd) inputs, params (sub-jaxprs rewritten) and
    /// the axes of its outputs.
    fn eqn(
        &self,
        b: &mut JaxprBuilder,
        e: &Eqn,
        ins: Vec<(Atom, Axes)>,
        depth: usize,
    ) -> Result<(Vec<Atom>, Params, Vec<Axes>), PassError> {
        let n_out = e.outvars().len();
        let union: Axes = ins.iter().fold(0, |u, (_, m)| u | m);
        let widen = |b: &mut JaxprBuilder, ins: Vec<(Atom, Axes)>, to: Axes| {
            ins.into_iter()
                .map(|(a, m)| pvary(b, a, m, to, self))
                .collect::<Result<Vec<_>, _>>()
        };
        let prim = match e.primitive() {
            Primitive::Builtin(p) => *p,
            Primitive::Extension(_) => {
                let atoms = widen(b, ins, union)?;
                return Ok((atoms, e.params().clone(), vec![union; n_out]));
            }
        };
        use Builtin::*;
        match prim {
            Psum | Pmax | Pmin => {
                let axes = self.eqn_axes(e, "axes")?;
                let atoms = widen(b, ins, union | axes)?;
                Ok((atoms, e.params().clone(), vec![union & !axes; n_out]))
            }
            Pvary => Ok((
                ins.iter().map(|(a, _)| *a).collect(),
                e.params().clone(),
                vec![union | self.eqn_axes(e, "axes")?; n_out],
            )),
            AllGather | ReduceScatter | Ppermute | AllToAll => {
                let axes = self.eqn_axes(e, "axis_name")?;
                let atoms = widen(b, ins, union | axes)?;
                Ok((atoms, e.params().clone(), vec![union | axes; n_out]))
            }
            AxisIndex => Ok((
                Vec::new(),
                e.params().clone(),
                vec![self.eqn_axes(e, "axis_name")?; n_out],
            )),
            ShardMap => Err(PassError::Unsupported {
                what: "a shard_map inside a shard_map body".to_owned(),
            }),
            Jit | CustomJvpCall | CustomVjpCall | Remat => {
                let name = prim.call_jaxpr_param().unwrap_or("jaxpr");
                let Some(Param::Jaxpr(cj)) = e.params().get(name) else {
                    return Err(ill("a call without its jaxpr"));
                };
                let masks: Vec<Axes> = ins.iter().map(|(_, m)| *m).collect();
                let consts = vec![0; cj.jaxpr().constvars().len()];
                let (sub, outs) = self.infer(cj.jaxpr(), &consts, &masks, None, depth + 1)?;
                let params = e.params().with(name, Param::Jaxpr(reclose(cj, sub)?));
                Ok((ins.iter().map(|(a, _)| *a).collect(), params, outs))
            }
            Cond => {
                let Some(Param::Jaxprs(branches)) = e.params().get("branches") else {
                    return Err(ill("cond without branches"));
                };
                let index_mask = ins.first().map_or(0, |(_, m)| *m);
                let masks: Vec<Axes> = ins.iter().skip(1).map(|(_, m)| *m).collect();
                let mut out = vec![index_mask; n_out];
                for br in branches.iter() {
                    let consts = vec![0; br.jaxpr().constvars().len()];
                    let (_, o) = self.infer(br.jaxpr(), &consts, &masks, None, depth + 1)?;
                    for (u, m) in out.iter_mut().zip(o) {
                        *u |= m;
                    }
                }
                let mut new_branches = Vec::with_capacity(branches.len());
                for br in branches.iter() {
                    let consts = vec![0; br.jaxpr().constvars().len()];
                    let (sub, _) =
                        self.infer(br.jaxpr(), &consts, &masks, Some(&out), depth + 1)?;
                    new_branches.push(reclose(br, sub)?);
                }
                let params = e
                    .params()
                    .with("branches", Param::Jaxprs(Arc::new(new_branches)));
                Ok((ins.iter().map(|(a, _)| *a).collect(), params, out))
            }
            While => {
                let (Some(Param::Jaxpr(cond)), Some(Param::Jaxpr(body))) =
                    (e.params().get("cond_jaxpr"), e.params().get("body_jaxpr"))
                else {
                    return Err(ill("while without its jaxprs"));
                };
                let count = |name| match e.params().get(name) {
                    Some(Param::Int(n)) if *n >= 0 => Ok(*n as usize),
                    _ => Err(ill("while without its const counts")),
                };
                let (nc, nb) = (count("cond_nconsts")?, count("body_nconsts")?);
                let masks: Vec<Axes> = ins.iter().map(|(_, m)| *m).collect();
                if nc + nb > masks.len() {
                    return Err(ill("while operand count"));
                }
                let (cc, rest) = masks.split_at(nc);
                let (bc, init) = rest.split_at(nb);
                let carry = self.fixpoint(body, bc, init, &[], depth)?;
                let bconsts = vec![0; body.jaxpr().constvars().len()];
                let body_in: Vec<Axes> = bc.iter().chain(&carry).copied().collect();
                let (new_body, _) =
                    self.infer(body.jaxpr(), &bconsts, &body_in, Some(&carry), depth + 1)?;
                let cconsts = vec![0; cond.jaxpr().constvars().len()];
                let cond_in: Vec<Axes> = cc.iter().chain(&carry).copied().collect();
                let (new_cond, _) =
                    self.infer(cond.jaxpr(), &cconsts, &cond_in, None, depth + 1)?;
                let mut atoms = Vec::with_capacity(ins.len());
                for (k, (a, m)) in ins.into_iter().enumerate() {
                    let to = if k >= nc + nb { carry[k - nc - nb] } else { m };
                    atoms.push(pvary(b, a, m, to, self)?);
                }
                let params = e
                    .params()
                    .with("body_jaxpr", Param::Jaxpr(reclose(body, new_body)?))
                    .with("cond_jaxpr", Param::Jaxpr(reclose(cond, new_cond)?));
                Ok((atoms, params, carry))
            }
            Scan => {
                let Some(Param::Jaxpr(body)) = e.params().get("jaxpr") else {
                    return Err(ill("scan without its jaxpr"));
                };
                let count = |name| match e.params().get(name) {
                    Some(Param::Int(n)) if *n >= 0 => Ok(*n as usize),
                    _ => Err(ill("scan without its counts")),
                };
                let (nconsts, ncarry) = (count("num_consts")?, count("num_carry")?);
                let masks: Vec<Axes> = ins.iter().map(|(_, m)| *m).collect();
                if nconsts + ncarry > masks.len() {
                    return Err(ill("scan operand count"));
                }
                let (consts, rest) = masks.split_at(nconsts);
                let (init, xs) = rest.split_at(ncarry);
                let carry = self.fixpoint(body, consts, init, xs, depth)?;
                let bconsts = vec![0; body.jaxpr().constvars().len()];
                let body_in: Vec<Axes> = consts.iter().chain(&carry).chain(xs).copied().collect();
                let (_, outs) = self.infer(body.jaxpr(), &bconsts, &body_in, None, depth + 1)?;
                let mut required = carry.clone();
                required.extend_from_slice(&outs[ncarry.min(outs.len())..]);
                let (new_body, outs) =
                    self.infer(body.jaxpr(), &bconsts, &body_in, Some(&required), depth + 1)?;
                let mut atoms = Vec::with_capacity(ins.len());
                for (k, (a, m)) in ins.into_iter().enumerate() {
                    let to = if k >= nconsts && k < nconsts + ncarry {
                        carry[k - nconsts]
                    } else {
                        m
                    };
                    atoms.push(pvary(b, a, m, to, self)?);
                }
                let params = e
                    .params()
                    .with("jaxpr", Param::Jaxpr(reclose(body, new_body)?));
                Ok((atoms, params, outs))
            }
            // First-order: operands made to agree on the union.
            _ => {
                let atoms = if ins.len() > 1 {
                    widen(b, ins, union)?
                } else {
                    ins.into_iter().map(|(a, _)| a).collect()
                };
                Ok((atoms, e.params().clone(), vec![union; n_out]))
            }
        }
    }

    /// The carry axes of a `while` or `scan` body at the fixed point (carries only
    /// widen): the body takes `consts`, the carry and `xs` (none for `while`), and its
    /// first outputs are the carry.
    fn fixpoint(
        &self,
        body: &ClosedJaxpr,
        consts: &[Axes],
        init: &[Axes],
        xs: &[Axes],
        depth: usize,
    ) -> Result<Vec<Axes>, PassError> {
        let bconsts = vec![0; body.jaxpr().constvars().len()];
        let mut carry = init.to_vec();
        for _ in 0..=65 {
            let ins: Vec<Axes> = consts.iter().chain(&carry).chain(xs).copied().collect();
            let (_, outs) = self.infer(body.jaxpr(), &bconsts, &ins, None, depth + 1)?;
            let next: Vec<Axes> = carry.iter().zip(&outs).map(|(c, o)| c | o).collect();
            if next == carry {
                return Ok(carry);
            }
            carry = next;
        }
        Ok(carry)
    }
}

/// `x` made to vary over `to` (a `pvary` of the missing axes, or `x` itself).
fn pvary(
    b: &mut JaxprBuilder,
    x: Atom,
    has: Axes,
    to: Axes,
    cx: &Cx<'_>,
) -> Result<Atom, PassError> {
    let missing = to & !has;
    if missing == 0 {
        return Ok(x);
    }
    let outs = b
        .add_eqn(
            Builtin::Pvary.into(),
            vec![x],
            Params::new([("axes", Param::Names(cx.names(missing).into()))]),
        )
        .map_err(|e| ill(&format!("pvary: {e}")))?;
    Ok(Atom::Var(outs[0]))
}

fn reclose(old: &ClosedJaxpr, j: Arc<Jaxpr>) -> Result<ClosedJaxpr, PassError> {
    ClosedJaxpr::new(j, old.consts().to_vec()).map_err(|e| ill(&e.to_string()))
}

fn ill(message: &str) -> PassError {
    PassError::IllTyped {
        eqn: None,
        message: message.to_owned(),
    }
}
