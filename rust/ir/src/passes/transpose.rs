//! Transposition of linear jaxprs (the backward half of reverse-mode autodiff).
//!
//! [`transpose`] takes a jaxpr that is linear in some of its inputs and builds the jaxpr
//! of its transpose: given the non-linear inputs and one cotangent per output, it returns
//! one cotangent per linear input.
//!
//! The pass runs in two sweeps, neither of them recursive:
//! 1. forwards, marking every variable that depends on a linear input; equations that
//!    depend on none are copied into the result (they are evaluated forward, first);
//!    every other equation must be linear in its linear operands and have a rule;
//! 2. backwards over the linear equations, each turning the cotangent of its output into
//!    cotangents of its linear operands.
//!
//! Cotangents are accumulated per variable: the first contribution is kept as it is and
//! each further one (a value used more than once) is added with `add_any`, as JAX does.
//! A variable that receives no cotangent is a symbolic zero: its equation
//! contributes nothing, and a linear input left without one gets zeros made with
//! `broadcast_in_dim` of a `0` literal of its dtype.
//!
//! As in JAX, a non-linear operand of `add`, `sub` or `select_n`'s cases is taken to be
//! zero (the jaxpr is assumed linear, so it must be); it receives no cotangent.

use super::PassError;
use crate::aval::AbstractValue;
use crate::builder::JaxprBuilder;
use crate::dtype::DType;
use crate::jaxpr::{Atom, Eqn, Jaxpr, LitValue, Literal, VarId};
use crate::params::{
    DotDimensionNumbers, GatherDimensionNumbers, Param, Params, ScatterDimensionNumbers,
};
use crate::primitive::{Builtin, Primitive};
use std::sync::Arc;

/// Transposes `jaxpr`, which is linear in the inputs flagged in `linear` (one flag per
/// input).
///
/// The result takes the non-linear inputs (in order), then one cotangent per output of
/// `jaxpr` (of the output's type), and returns one cotangent per linear input (of that
/// input's type). Constvars are kept as they are. Equations depending only on non-linear
/// values are copied first; the linear ones are transposed in reverse order.
///
/// Rules exist for `add`, `add_any`, `sub`, `neg`, `mul` and `div` by a non-linear operand,
/// `convert_element_type` (between float dtypes), `copy`, `reduce_sum`,
/// `broadcast_in_dim`, `reshape`, `transpose`, `squeeze`, `expand_dims`, `select_n` with
/// a non-linear predicate, `dot_general` with one linear operand, `rev`, `concatenate`,
/// `slice` (unit strides), `dynamic_slice` and `dynamic_update_slice`, `gather` (to
/// `scatter-add`) and `scatter-add` (non-linear indices); the implicit
/// broadcasting of a binary operand (rank 0, or size-1 dimensions) is summed back.
///
/// # Errors
/// [`PassError::FlagCount`] if `linear` has not one flag per input;
/// [`PassError::NonLinearUse`] if a linear value is used non-linearly (`sin` of it, the
/// product of two linear values, a linear divisor or predicate);
/// [`PassError::NoTransposeRule`] for a primitive linear in an operand that has no rule
/// yet (plain `scatter`, a strided `slice`, `jit`, `cond`, `while`, `scan`, and extension
/// primitives).
///
/// # Example
/// ```
/// use ferrax_ir::passes::transpose;
/// use ferrax_ir::text::parse_jaxpr;
///
/// // f(a, t) = a * t + t, linear in t.
/// let j = parse_jaxpr(
///     "{ lambda ; a:f32[3] t:f32[3]. let b:f32[3] = mul a t; c:f32[3] = add b t in (c,) }",
/// )
/// .unwrap();
/// let tj = transpose(&j, &[false, true]).unwrap();
/// // It takes a and the output's cotangent, and returns t's cotangent: ct * a + ct.
/// assert_eq!(tj.invars().len(), 2);
/// assert_eq!(tj.out_avals(), j.in_avals()[1..].to_vec());
/// ```
pub fn transpose(jaxpr: &Jaxpr, linear: &[bool]) -> Result<Jaxpr, PassError> {
    let invars = jaxpr.invars();
    if linear.len() != invars.len() {
        return Err(PassError::FlagCount {
            what: "linear",
            expected: invars.len(),
            got: linear.len(),
        });
    }
    let mut t = Transposer {
        src: jaxpr,
        out: JaxprBuilder::new(),
        is_lin: vec![false; jaxpr.num_vars()],
        fwd: vec![None; jaxpr.num_vars()],
        ct: vec![None; jaxpr.num_vars()],
    };
    for &c in jaxpr.constvars() {
        let nv = t.out.add_constvar(jaxpr.var_aval(c).clone());
        t.fwd[c.index()] = Some(nv);
    }
    for (&v, &lin) in invars.iter().zip(linear) {
        if lin {
            t.is_lin[v.index()] = true;
        } else {
            let nv = t.out.add_invar(jaxpr.var_aval(v).clone());
            t.fwd[v.index()] = Some(nv);
        }
    }
    let ct_ins: Vec<VarId> = jaxpr
        .out_avals()
        .into_iter()
        .map(|av| t.out.add_invar(av))
        .collect();

    // Forward sweep: copy non-linear equations, check linear ones.
    let mut linear_eqns: Vec<usize> = Vec::new();
    for (i, e) in jaxpr.eqns().iter().enumerate() {
        let lin_ops: Vec<bool> = e.inputs().iter().map(|&a| t.atom_is_lin(a)).collect();
        if lin_ops.iter().any(|&l| l) {
            check_linear(jaxpr, i, e, &lin_ops)?;
            for &o in e.outvars() {
                t.is_lin[o.index()] = true;
            }
            linear_eqns.push(i);
        } else {
            let inputs: Vec<Atom> = e.inputs().iter().map(|&a| t.fwd_atom(a)).collect();
            let outs = t.emit(i, e.primitive().clone(), inputs, e.params().clone())?;
            for (&o, n) in e.outvars().iter().zip(outs) {
                t.fwd[o.index()] = Some(n);
            }
        }
    }

    // Backward sweep.
    for (&o, &g) in jaxpr.outvars().iter().zip(&ct_ins) {
        if let Atom::Var(v) = o {
            if t.is_lin[v.index()] {
                t.accumulate(NO_EQN, v, g)?;
            }
        }
    }
    for &i in linear_eqns.iter().rev() {
        let e = &jaxpr.eqns()[i];
        let out = e.outvars()[0];
        let Some(g) = t.ct[out.index()] else {
            continue;
        };
        t.transpose_eqn(i, e, g)?;
    }

    let mut outs: Vec<Atom> = Vec::new();
    for (&v, &lin) in invars.iter().zip(linear) {
        if !lin {
            continue;
        }
        let g = match t.ct[v.index()] {
            Some(g) => g,
            None => t.zeros(NO_EQN, jaxpr.var_aval(v))?,
        };
        outs.push(Atom::Var(g));
    }
    t.out.build(outs).map_err(|e| PassError::IllTyped {
        eqn: None,
        message: e.to_string(),
    })
}

/// The equation index of what the pass emits for no source equation (the outputs'
/// cotangents and the zeros of unused linear inputs).
const NO_EQN: usize = usize::MAX;

/// Primitives linear in some operand whose transpose rule is not written yet.
fn is_linear_without_rule(p: Builtin) -> bool {
    use Builtin::*;
    matches!(p, Scatter | Jit | Cond | While | Scan)
}

/// Checks that equation `index` is linear in its linear operands and has a rule.
fn check_linear(src: &Jaxpr, index: usize, e: &Eqn, lin_ops: &[bool]) -> Result<(), PassError> {
    let name = e.primitive().name().to_owned();
    let non_linear = |operand: usize| PassError::NonLinearUse {
        primitive: name.clone(),
        eqn: index,
        operand,
    };
    let first_lin = lin_ops.iter().position(|&l| l).unwrap_or(0);
    let &Primitive::Builtin(p) = e.primitive() else {
        return Err(PassError::NoTransposeRule {
            primitive: name,
            eqn: index,
        });
    };
    use Builtin::*;
    match p {
        Add | AddAny | Sub | Neg | Copy | ReduceSum | BroadcastInDim | Reshape | Transpose
        | Squeeze | ExpandDims | Rev | Concatenate => Ok(()),
        Slice => match e.params().get("strides") {
            Some(Param::Ints(st)) if st.iter().any(|&s| s != 1) => {
                Err(PassError::NoTransposeRule {
                    primitive: "slice (with strides)".to_owned(),
                    eqn: index,
                })
            }
            _ => Ok(()),
        },
        Gather | ScatterAdd if lin_ops[1] => Err(non_linear(1)),
        Gather | ScatterAdd => Ok(()),
        DynamicSlice | DynamicUpdateSlice => {
            let first_index = if p == DynamicSlice { 1 } else { 2 };
            match (first_index..lin_ops.len()).find(|&k| lin_ops[k]) {
                Some(k) => Err(non_linear(k)),
                None => Ok(()),
            }
        }
        Mul => {
            if lin_ops[0] && lin_ops[1] {
                Err(non_linear(1))
            } else {
                Ok(())
            }
        }
        Div => {
            if lin_ops[1] {
                Err(non_linear(1))
            } else {
                Ok(())
            }
        }
        DotGeneral => {
            if lin_ops[0] && lin_ops[1] {
                Err(non_linear(1))
            } else {
                Ok(())
            }
        }
        SelectN => {
            if lin_ops[0] {
                Err(non_linear(0))
            } else {
                Ok(())
            }
        }
        ConvertElementType => {
            let from = src.atom_aval(e.inputs()[0]).dtype;
            let to = src.var_aval(e.outvars()[0]).dtype;
            if from.is_float() && to.is_float() {
                Ok(())
            } else {
                Err(non_linear(0))
            }
        }
        p if is_linear_without_rule(p) => Err(PassError::NoTransposeRule {
            primitive: name,
            eqn: index,
        }),
        _ => Err(non_linear(first_lin)),
    }
}

struct Transposer<'a> {
    src: &'a Jaxpr,
    out: JaxprBuilder,
    /// Per source variable: depends on a linear input.
    is_lin: Vec<bool>,
    /// Per non-linear source variable: its copy in the result.
    fwd: Vec<Option<VarId>>,
    /// Per linear source variable: its accumulated cotangent in the result.
    ct: Vec<Option<VarId>>,
}

fn ints(params: &Params, name: &str) -> Vec<i64> {
    match params.get(name) {
        Some(Param::Ints(v)) => v.to_vec(),
        _ => Vec::new(),
    }
}

fn params<const N: usize>(pairs: [(&str, Param); N]) -> Params {
    Params::new(pairs)
}

fn inverse_perm(perm: &[i64]) -> Vec<i64> {
    let mut inv = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    inv
}

impl Transposer<'_> {
    fn atom_is_lin(&self, a: Atom) -> bool {
        match a {
            Atom::Var(v) => self.is_lin[v.index()],
            Atom::Lit(_) => false,
        }
    }

    /// The result's atom for a non-linear source atom.
    fn fwd_atom(&mut self, a: Atom) -> Atom {
        match a {
            Atom::Var(v) => Atom::Var(
                self.fwd[v.index()].expect("non-linear variables are copied before their uses"),
            ),
            Atom::Lit(l) => self.out.literal(*self.src.literal(l)),
        }
    }

    fn aval(&self, v: VarId) -> AbstractValue {
        self.out
            .var_aval(v)
            .cloned()
            .expect("variables of the result's builder")
    }

    fn emit(
        &mut self,
        eqn: usize,
        prim: Primitive,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Result<Vec<VarId>, PassError> {
        self.out
            .add_eqn(prim, inputs, params)
            .map_err(|e| PassError::IllTyped {
                eqn: (eqn != NO_EQN).then_some(eqn),
                message: e.to_string(),
            })
    }

    fn emit1(
        &mut self,
        eqn: usize,
        prim: Builtin,
        inputs: Vec<Atom>,
        params: Params,
    ) -> Result<VarId, PassError> {
        Ok(self.emit(eqn, Primitive::Builtin(prim), inputs, params)?[0])
    }

    fn accumulate(&mut self, eqn: usize, v: VarId, g: VarId) -> Result<(), PassError> {
        let slot = &mut self.ct[v.index()];
        match *slot {
            None => *slot = Some(g),
            Some(prev) => {
                let sum = self.emit1(
                    eqn,
                    Builtin::AddAny,
                    vec![Atom::Var(prev), Atom::Var(g)],
                    Params::empty(),
                )?;
                self.ct[v.index()] = Some(sum);
            }
        }
        Ok(())
    }

    /// Adds `g` to the cotangent of operand `a` if it is linear.
    fn give(&mut self, eqn: usize, a: Atom, g: VarId) -> Result<(), PassError> {
        match a {
            Atom::Var(v) if self.is_lin[v.index()] => self.accumulate(eqn, v, g),
            _ => Ok(()),
        }
    }

    fn zeros(&mut self, eqn: usize, aval: &AbstractValue) -> Result<VarId, PassError> {
        let value = match aval.dtype {
            DType::Bool => LitValue::Bool(false),
            d if d.is_int() => LitValue::Int(0),
            _ => LitValue::Float(0.0),
        };
        let zero = self.out.literal(Literal {
            value,
            dtype: aval.dtype,
            weak_type: false,
        });
        self.emit1(
            eqn,
            Builtin::BroadcastInDim,
            vec![zero],
            params([
                ("shape", Param::ints(aval.shape.dims())),
                ("broadcast_dimensions", Param::ints(&[])),
            ]),
        )
    }

    /// Sums `g` back to the shape of an operand that was broadcast implicitly (rank 0,
    /// or size-1 dimensions of an operand of equal rank).
    fn unbroadcast(
        &mut self,
        eqn: usize,
        g: VarId,
        target: &AbstractValue,
    ) -> Result<VarId, PassError> {
        let gav = self.aval(g);
        if gav.shape == target.shape {
            return Ok(g);
        }
        let gd = gav.shape.dims();
        let axes: Vec<i64> = if target.shape.rank() == 0 {
            (0..gd.len() as i64).collect()
        } else {
            target
                .shape
                .dims()
                .iter()
                .zip(gd)
                .enumerate()
                .filter(|(_, (&t, &s))| t != s)
                .map(|(i, _)| i as i64)
                .collect()
        };
        let summed = self.emit1(
            eqn,
            Builtin::ReduceSum,
            vec![Atom::Var(g)],
            params([("axes", Param::ints(&axes))]),
        )?;
        if target.shape.rank() == 0 {
            return Ok(summed);
        }
        self.reshape(eqn, summed, target.shape.dims())
    }

    fn reshape(&mut self, eqn: usize, g: VarId, dims: &[i64]) -> Result<VarId, PassError> {
        self.emit1(
            eqn,
            Builtin::Reshape,
            vec![Atom::Var(g)],
            params([
                ("new_sizes", Param::ints(dims)),
                ("dimensions", Param::None),
            ]),
        )
    }

    fn transpose_eqn(&mut self, i: usize, e: &Eqn, g: VarId) -> Result<(), PassError> {
        let src = self.src;
        let ins = e.inputs();
        let in_aval = |k: usize| src.atom_aval(ins[k]);
        let &Primitive::Builtin(p) = e.primitive() else {
            unreachable!("check_linear refuses extension primitives");
        };
        let gv = Atom::Var(g);
        use Builtin::*;
        match p {
            Add | Sub => {
                for (k, &a) in ins.iter().enumerate() {
                    if !self.atom_is_lin(a) {
                        continue;
                    }
                    let mut gk = g;
                    if k == 1 && p == Sub {
                        gk = self.emit1(i, Neg, vec![gv], Params::empty())?;
                    }
                    let gk = self.unbroadcast(i, gk, &in_aval(k))?;
                    self.give(i, a, gk)?;
                }
            }
            AddAny => {
                self.give(i, ins[0], g)?;
                self.give(i, ins[1], g)?;
            }
            Neg => {
                let n = self.emit1(i, Neg, vec![gv], Params::empty())?;
                self.give(i, ins[0], n)?;
            }
            Copy => self.give(i, ins[0], g)?,
            Mul | Div => {
                let k = if self.atom_is_lin(ins[0]) { 0 } else { 1 };
                let other = self.fwd_atom(ins[1 - k]);
                let scaled = self.emit1(i, p, vec![gv, other], Params::empty())?;
                let gk = self.unbroadcast(i, scaled, &in_aval(k))?;
                self.give(i, ins[k], gk)?;
            }
            ConvertElementType => {
                let x = in_aval(0);
                let c = self.emit1(
                    i,
                    ConvertElementType,
                    vec![gv],
                    params([
                        ("new_dtype", Param::DType(x.dtype)),
                        ("weak_type", Param::Bool(x.weak_type)),
                        ("sharding", Param::None),
                    ]),
                )?;
                self.give(i, ins[0], c)?;
            }
            ReduceSum => {
                let x = in_aval(0);
                let axes = ints(e.params(), "axes");
                let kept: Vec<i64> = (0..x.shape.rank() as i64)
                    .filter(|a| !axes.contains(a))
                    .collect();
                let b = self.emit1(
                    i,
                    BroadcastInDim,
                    vec![gv],
                    params([
                        ("shape", Param::ints(x.shape.dims())),
                        ("broadcast_dimensions", Param::ints(&kept)),
                        ("sharding", Param::None),
                    ]),
                )?;
                self.give(i, ins[0], b)?;
            }
            BroadcastInDim => {
                let x = in_aval(0);
                let out = src.var_aval(e.outvars()[0]).shape.dims().to_vec();
                let bdims = ints(e.params(), "broadcast_dimensions");
                let mut summed = vec![true; out.len()];
                let mut stretched = false;
                for (k, &bd) in bdims.iter().enumerate() {
                    let keep = x.shape.dims()[k] == out[bd as usize];
                    summed[bd as usize] = !keep;
                    stretched |= !keep;
                }
                let axes: Vec<i64> = (0..out.len() as i64)
                    .filter(|&a| summed[a as usize])
                    .collect();
                let mut r = g;
                if !axes.is_empty() {
                    r = self.emit1(
                        i,
                        ReduceSum,
                        vec![gv],
                        params([("axes", Param::ints(&axes)), ("out_sharding", Param::None)]),
                    )?;
                }
                if stretched {
                    r = self.reshape(i, r, x.shape.dims())?;
                }
                self.give(i, ins[0], r)?;
            }
            Reshape => {
                let x = in_aval(0);
                let r = match e.params().get("dimensions") {
                    Some(Param::Ints(perm)) => {
                        let permuted: Vec<i64> =
                            perm.iter().map(|&d| x.shape.dims()[d as usize]).collect();
                        let r = self.reshape(i, g, &permuted)?;
                        self.emit1(
                            i,
                            Transpose,
                            vec![Atom::Var(r)],
                            params([("permutation", Param::ints(&inverse_perm(perm)))]),
                        )?
                    }
                    _ => self.reshape(i, g, x.shape.dims())?,
                };
                self.give(i, ins[0], r)?;
            }
            Transpose => {
                let perm = ints(e.params(), "permutation");
                let r = self.emit1(
                    i,
                    Transpose,
                    vec![gv],
                    params([("permutation", Param::ints(&inverse_perm(&perm)))]),
                )?;
                self.give(i, ins[0], r)?;
            }
            Squeeze => {
                let x = in_aval(0);
                let mut dims = ints(e.params(), "dimensions");
                dims.sort_unstable();
                dims.dedup();
                let r = if dims.is_empty() {
                    g
                } else {
                    self.emit1(
                        i,
                        ExpandDims,
                        vec![gv],
                        params([("dimensions", Param::ints(&dims))]),
                    )?
                };
                debug_assert_eq!(self.aval(r).shape, x.shape);
                self.give(i, ins[0], r)?;
            }
            ExpandDims => {
                let dims = ints(e.params(), "dimensions");
                let r = if dims.is_empty() {
                    g
                } else {
                    self.emit1(
                        i,
                        Squeeze,
                        vec![gv],
                        params([("dimensions", Param::ints(&dims))]),
                    )?
                };
                self.give(i, ins[0], r)?;
            }
            SelectN => {
                let pred = self.fwd_atom(ins[0]);
                let case_aval = self.aval(g);
                let mut zero: Option<VarId> = None;
                for k in 1..ins.len() {
                    if !self.atom_is_lin(ins[k]) {
                        continue;
                    }
                    let z = match zero {
                        Some(z) => z,
                        None => {
                            let z = self.zeros(i, &case_aval)?;
                            zero = Some(z);
                            z
                        }
                    };
                    let mut cases = vec![pred];
                    cases.extend((1..ins.len()).map(|c| Atom::Var(if c == k { g } else { z })));
                    let r = self.emit1(i, SelectN, cases, Params::empty())?;
                    self.give(i, ins[k], r)?;
                }
            }
            DotGeneral => self.dot_general(i, e, g)?,
            Gather => {
                let Some(Param::GatherDims(dn)) = e.params().get("dimension_numbers") else {
                    unreachable!("the typechecker requires gather's dimension numbers");
                };
                let sdn = ScatterDimensionNumbers {
                    update_window_dims: dn.offset_dims.clone(),
                    inserted_window_dims: dn.collapsed_slice_dims.clone(),
                    scatter_dims_to_operand_dims: dn.start_index_map.clone(),
                    operand_batching_dims: dn.operand_batching_dims.clone(),
                    scatter_indices_batching_dims: dn.start_indices_batching_dims.clone(),
                };
                let x = in_aval(0);
                let zeros = Atom::Var(self.zeros(i, &x)?);
                let indices = self.fwd_atom(ins[1]);
                let mut ps = vec![("dimension_numbers", Param::ScatterDims(Arc::new(sdn)))];
                for name in ["mode", "indices_are_sorted", "unique_indices"] {
                    if let Some(v) = e.params().get(name) {
                        ps.push((name, v.clone()));
                    }
                }
                let r = self.emit1(i, ScatterAdd, vec![zeros, indices, gv], Params::new(ps))?;
                self.give(i, ins[0], r)?;
            }
            ScatterAdd => {
                if self.atom_is_lin(ins[0]) {
                    self.give(i, ins[0], g)?;
                }
                if self.atom_is_lin(ins[2]) {
                    let Some(Param::ScatterDims(dn)) = e.params().get("dimension_numbers") else {
                        unreachable!("the typechecker requires scatter's dimension numbers");
                    };
                    let x = in_aval(0);
                    let u = in_aval(2);
                    let mut window = dn.update_window_dims.iter();
                    let slice_sizes: Vec<i64> = (0..x.shape.rank() as i64)
                        .map(|d| {
                            if dn.inserted_window_dims.contains(&d)
                                || dn.operand_batching_dims.contains(&d)
                            {
                                1
                            } else {
                                window.next().map_or(1, |&w| u.shape.dims()[w as usize])
                            }
                        })
                        .collect();
                    let gdn = GatherDimensionNumbers {
                        offset_dims: dn.update_window_dims.clone(),
                        collapsed_slice_dims: dn.inserted_window_dims.clone(),
                        start_index_map: dn.scatter_dims_to_operand_dims.clone(),
                        operand_batching_dims: dn.operand_batching_dims.clone(),
                        start_indices_batching_dims: dn.scatter_indices_batching_dims.clone(),
                    };
                    let indices = self.fwd_atom(ins[1]);
                    let mut ps = vec![
                        ("dimension_numbers", Param::GatherDims(Arc::new(gdn))),
                        ("slice_sizes", Param::ints(&slice_sizes)),
                    ];
                    for name in ["mode", "indices_are_sorted", "unique_indices"] {
                        if let Some(v) = e.params().get(name) {
                            ps.push((name, v.clone()));
                        }
                    }
                    let r = self.emit1(i, Gather, vec![gv, indices], Params::new(ps))?;
                    self.give(i, ins[2], r)?;
                }
            }
            Rev => {
                let r = self.emit1(i, Rev, vec![gv], e.params().clone())?;
                self.give(i, ins[0], r)?;
            }
            Concatenate => {
                let d = match e.params().get("dimension") {
                    Some(&Param::Int(d)) => d as usize,
                    _ => unreachable!("the typechecker requires concatenate's dimension"),
                };
                let out = self.aval(g).shape.dims().to_vec();
                let mut offset = 0i64;
                for (k, &a) in ins.iter().enumerate() {
                    let x = in_aval(k);
                    let size = x.shape.dims()[d];
                    if self.atom_is_lin(a) {
                        let mut start = vec![0i64; out.len()];
                        let mut limit = out.clone();
                        start[d] = offset;
                        limit[d] = offset + size;
                        let r = self.emit1(
                            i,
                            Slice,
                            vec![gv],
                            params([
                                ("start_indices", Param::ints(&start)),
                                ("limit_indices", Param::ints(&limit)),
                                ("strides", Param::None),
                            ]),
                        )?;
                        self.give(i, a, r)?;
                    }
                    offset += size;
                }
            }
            Slice => {
                let x = in_aval(0);
                let start = ints(e.params(), "start_indices");
                let dtype = if x.shape.dims().iter().all(|&n| i32::try_from(n).is_ok()) {
                    DType::I32
                } else {
                    DType::I64
                };
                let mut operands = vec![Atom::Var(self.zeros(i, &x)?), gv];
                for &s0 in &start {
                    operands.push(self.out.literal(Literal {
                        value: LitValue::Int(s0),
                        dtype,
                        weak_type: false,
                    }));
                }
                let r = self.emit1(i, DynamicUpdateSlice, operands, Params::empty())?;
                self.give(i, ins[0], r)?;
            }
            DynamicSlice => {
                // dynamic_slice and dynamic_update_slice clamp the start indices alike.
                let x = in_aval(0);
                let mut operands = vec![Atom::Var(self.zeros(i, &x)?), gv];
                for &a in &ins[1..] {
                    operands.push(self.fwd_atom(a));
                }
                let r = self.emit1(i, DynamicUpdateSlice, operands, Params::empty())?;
                self.give(i, ins[0], r)?;
            }
            DynamicUpdateSlice => {
                let idx: Vec<Atom> = ins[2..].iter().map(|&a| self.fwd_atom(a)).collect();
                if self.atom_is_lin(ins[0]) {
                    let u = in_aval(1);
                    let mut operands = vec![gv, Atom::Var(self.zeros(i, &u)?)];
                    operands.extend(idx.iter().copied());
                    let r = self.emit1(i, DynamicUpdateSlice, operands, Params::empty())?;
                    self.give(i, ins[0], r)?;
                }
                if self.atom_is_lin(ins[1]) {
                    let u = in_aval(1);
                    let mut operands = vec![gv];
                    operands.extend(idx.iter().copied());
                    let r = self.emit1(
                        i,
                        DynamicSlice,
                        operands,
                        params([("slice_sizes", Param::ints(u.shape.dims()))]),
                    )?;
                    self.give(i, ins[1], r)?;
                }
            }
            _ => unreachable!("check_linear admits only primitives with a rule"),
        }
        Ok(())
    }

    fn dot_general(&mut self, i: usize, e: &Eqn, g: VarId) -> Result<(), PassError> {
        let src = self.src;
        let ins = e.inputs();
        let Some(Param::DotDims(dn)) = e.params().get("dimension_numbers") else {
            unreachable!("the typechecker requires dot_general's dimension numbers");
        };
        let lin_is_lhs = self.atom_is_lin(ins[0]);
        let (lin, oth) = if lin_is_lhs { (0, 1) } else { (1, 0) };
        let (l_batch, l_con, o_batch, o_con) = if lin_is_lhs {
            (
                &dn.lhs_batch,
                &dn.lhs_contracting,
                &dn.rhs_batch,
                &dn.rhs_contracting,
            )
        } else {
            (
                &dn.rhs_batch,
                &dn.rhs_contracting,
                &dn.lhs_batch,
                &dn.lhs_contracting,
            )
        };
        let l_aval = src.atom_aval(ins[lin]);
        let o_aval = src.atom_aval(ins[oth]);
        let free = |rank: usize, batch: &[i64], con: &[i64]| -> Vec<i64> {
            (0..rank as i64)
                .filter(|a| !batch.contains(a) && !con.contains(a))
                .collect()
        };
        let l_free = free(l_aval.shape.rank(), l_batch, l_con);
        let o_free = free(o_aval.shape.rank(), o_batch, o_con);
        let nb = l_batch.len() as i64;
        // Positions of the other operand's free dimensions in the output (and so in g).
        let o_start = if lin_is_lhs {
            nb + l_free.len() as i64
        } else {
            nb
        };
        let g_con: Vec<i64> = (o_start..o_start + o_free.len() as i64).collect();
        let ct_dn = DotDimensionNumbers {
            lhs_contracting: g_con,
            rhs_contracting: o_free.clone(),
            lhs_batch: (0..nb).collect(),
            rhs_batch: o_batch.clone(),
        };
        let other = self.fwd_atom(ins[oth]);
        let r = self.emit1(
            i,
            Builtin::DotGeneral,
            vec![Atom::Var(g), other],
            params([
                ("dimension_numbers", Param::DotDims(Arc::new(ct_dn))),
                ("precision", Param::None),
                ("preferred_element_type", Param::None),
            ]),
        )?;
        // The product is in the wider of the two dtypes; bring it to the operand's (a
        // preferred element type could not narrow an integer product).
        let r = if self.aval(r).dtype == l_aval.dtype {
            r
        } else {
            self.emit1(
                i,
                Builtin::ConvertElementType,
                vec![Atom::Var(r)],
                params([
                    ("new_dtype", Param::DType(l_aval.dtype)),
                    ("weak_type", Param::Bool(l_aval.weak_type)),
                    ("sharding", Param::None),
                ]),
            )?
        };
        // The result's axes, as axes of the linear operand: its batch axes, its free
        // axes, then its contracting axes in the order of the other operand's axes.
        let mut o_con_sorted: Vec<(i64, i64)> = o_con
            .iter()
            .zip(l_con.iter())
            .map(|(&o, &l)| (o, l))
            .collect();
        o_con_sorted.sort_unstable();
        let src_axes: Vec<i64> = l_batch
            .iter()
            .copied()
            .chain(l_free.iter().copied())
            .chain(o_con_sorted.iter().map(|&(_, l)| l))
            .collect();
        let perm = inverse_perm(&src_axes);
        let identity = perm.iter().enumerate().all(|(k, &p)| p == k as i64);
        let r = if identity {
            r
        } else {
            self.emit1(
                i,
                Builtin::Transpose,
                vec![Atom::Var(r)],
                params([("permutation", Param::ints(&perm))]),
            )?
        };
        self.give(i, ins[lin], r)
    }
}
