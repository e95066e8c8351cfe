//! Lowering of the higher-order built-ins: each sub-jaxpr is a private function; regions
//! of `case` and `while` call them.
//!
//! A `while` with a batched predicate (`bool[s...]`, `s` a prefix of every carry's shape)
//! lowers as JAX lowers it: the cond region reduces the predicate with `or`; the body
//! region runs the body, the condition again on the old carry, and a `stablehlo.select`
//! per carry with the predicate broadcast along its leading dimensions (a key's words
//! included). With an ordered effect in the condition, the predicate is carried instead
//! (the condition runs once before the loop and once per iteration, on the new carry).

use super::text::{i64_array, tensor_of, tensor_type, write_names, write_result_types, Ssa};
use super::{FuncState, LowerError, Module, TOKEN_TYPE};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::{ClosedJaxpr, Eqn};
use crate::params::Param;
use crate::primitive::Builtin;
use std::fmt::Write as _;

/// Writes the ops of a `while` region from its block arguments; returns what it yields.
pub(super) type RegionWriter<'c, T> = dyn FnMut(&mut Module, &mut FuncState<'_>, &[Ssa]) -> T + 'c;

pub(super) fn sub<'a>(
    e: &'a Eqn,
    b: Builtin,
    name: &'static str,
) -> Result<&'a ClosedJaxpr, LowerError> {
    let cj = match e.params().get(name) {
        Some(Param::Jaxpr(cj)) => cj,
        _ => {
            return Err(LowerError::BadParam {
                primitive: b.name().to_owned(),
                param: name,
            })
        }
    };
    if !cj.consts().is_empty() {
        return Err(LowerError::NestedConstants {
            primitive: b.name().to_owned(),
            count: cj.consts().len(),
        });
    }
    Ok(cj)
}

fn int(e: &Eqn, b: Builtin, name: &'static str) -> Result<usize, LowerError> {
    match e.params().get(name) {
        Some(Param::Int(n)) if *n >= 0 => Ok(*n as usize),
        _ => Err(LowerError::BadParam {
            primitive: b.name().to_owned(),
            param: name,
        }),
    }
}

impl Module {
    /// Writes a `func.call` of `callee` (indented by `indent`) and returns its results.
    pub(super) fn call(
        &mut self,
        f: &mut FuncState<'_>,
        indent: &str,
        callee: &str,
        args: &[&Ssa],
        result_types: &[String],
    ) -> Vec<Ssa> {
        self.out.push_str(indent);
        let results = self.bind_results(f, result_types);
        self.out.push_str("\"func.call\"(");
        write_names(&mut self.out, args.iter().map(|s| s.name.as_str()));
        let _ = write!(self.out, ") {{callee = @{callee}}} : (");
        write_names(&mut self.out, args.iter().map(|s| s.ty.as_str()));
        self.out.push_str(") -> ");
        write_result_types(&mut self.out, result_types);
        self.out.push('\n');
        results
    }

    /// `"stablehlo.return"(values)` inside a region.
    fn region_return(&mut self, indent: &str, values: &[&Ssa]) {
        self.out.push_str(indent);
        self.out.push_str("\"stablehlo.return\"(");
        write_names(&mut self.out, values.iter().map(|s| s.name.as_str()));
        self.out.push_str(") : (");
        write_names(&mut self.out, values.iter().map(|s| s.ty.as_str()));
        self.out.push_str(") -> ()\n");
    }

    /// A call primitive (`jit`, `custom_jvp_call`, `custom_vjp_call`, `remat2`): a
    /// `func.call` of its jaxpr's function (the custom rules and the checkpoint policy
    /// matter only to differentiation, which has happened by now).
    pub(crate) fn lower_call(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let cj = sub(e, b, b.call_jaxpr_param().unwrap_or("jaxpr"))?;
        let hint = match e.params().get("name") {
            Some(Param::Str(s)) => s.to_string(),
            _ => b.name().to_owned(),
        };
        let callee = self.function_for(cj.jaxpr(), &hint, f.mesh.as_ref());
        let types: Vec<String> = out_avals.iter().map(tensor_type).collect();
        if !self.threads_token(cj.jaxpr()) {
            let args: Vec<&Ssa> = inputs.iter().collect();
            return Ok(self.call(f, "    ", &callee, &args, &types));
        }
        // The callee takes the token first and returns it first.
        let token = self.take_token(f);
        let args: Vec<&Ssa> = std::iter::once(&token).chain(inputs).collect();
        let mut with_token = vec![TOKEN_TYPE.to_owned()];
        with_token.extend(types);
        let mut outs = self.call(f, "    ", &callee, &args, &with_token);
        f.token = Some(outs.remove(0));
        Ok(outs)
    }

    pub(crate) fn lower_cond(
        &mut self,
        f: &mut FuncState<'_>,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let branches: &[ClosedJaxpr] = match e.params().get("branches") {
            Some(Param::Jaxprs(b)) => b,
            _ => {
                return Err(LowerError::BadParam {
                    primitive: "cond".to_owned(),
                    param: "branches",
                })
            }
        };
        let mut callees = Vec::with_capacity(branches.len());
        let mut threaded = Vec::with_capacity(branches.len());
        for br in branches {
            threaded.push(self.threads_token(br.jaxpr()));
            if !br.consts().is_empty() {
                return Err(LowerError::NestedConstants {
                    primitive: "cond".to_owned(),
                    count: br.consts().len(),
                });
            }
            callees.push(self.function_for(br.jaxpr(), "branch", f.mesh.as_ref()));
        }
        // The index, as i32 clamped into range (XLA's case runs the last branch for any
        // out-of-range index; the evaluator clamps both ways).
        let i32_ty = tensor_of(&[], DType::I32);
        let mut index = inputs[0].clone();
        if in_avals[0].dtype != DType::I32 {
            index = self.op1(f, "stablehlo.convert", &[&index], "", i32_ty.clone());
        }
        let lo = self.scalar_constant(f, "0", DType::I32);
        let hi = self.scalar_constant(
            f,
            &(branches.len().saturating_sub(1)).to_string(),
            DType::I32,
        );
        let index = self.op1(
            f,
            "stablehlo.clamp",
            &[&lo, &index, &hi],
            "",
            i32_ty.clone(),
        );
        let mut types: Vec<String> = out_avals.iter().map(tensor_type).collect();
        // With an ordered effect in a branch, the case takes the token in (branches
        // without one return it as it came) and gives it back first.
        let any_threaded = threaded.iter().any(|&t| t);
        let token = if any_threaded {
            types.insert(0, TOKEN_TYPE.to_owned());
            Some(self.take_token(f))
        } else {
            None
        };
        self.out.push_str("    ");
        let mut results = self.bind_results(f, &types);
        let _ = writeln!(self.out, "\"stablehlo.case\"({}) (", index.name);
        let value_types = &types[usize::from(any_threaded)..];
        for (k, callee) in callees.iter().enumerate() {
            self.out
                .push_str(if k == 0 { "    {\n" } else { "    }, {\n" });
            let outs = match &token {
                Some(t) if threaded[k] => {
                    let ops: Vec<&Ssa> = std::iter::once(t).chain(&inputs[1..]).collect();
                    self.call(f, "      ", callee, &ops, &types)
                }
                _ => {
                    let ops: Vec<&Ssa> = inputs[1..].iter().collect();
                    let mut outs = self.call(f, "      ", callee, &ops, value_types);
                    if let Some(t) = &token {
                        outs.insert(0, t.clone());
                    }
                    outs
                }
            };
            let refs: Vec<&Ssa> = outs.iter().collect();
            self.region_return("      ", &refs);
        }
        self.out.push_str("    }) : (");
        self.out.push_str(&i32_ty);
        self.out.push_str(") -> ");
        write_result_types(&mut self.out, &types);
        self.out.push('\n');
        if any_threaded {
            f.token = Some(results.remove(0));
        }
        Ok(results)
    }

    /// Writes `"stablehlo.while"(init) ({cond region}, {body region})`, where the regions
    /// are written by the two closures given the block arguments.
    pub(super) fn while_op(
        &mut self,
        f: &mut FuncState<'_>,
        init: &[Ssa],
        cond: &mut RegionWriter<'_, Ssa>,
        body: &mut RegionWriter<'_, Vec<Ssa>>,
    ) -> Vec<Ssa> {
        let types: Vec<String> = init.iter().map(|s| s.ty.clone()).collect();
        self.out.push_str("    ");
        let results = self.bind_results(f, &types);
        self.out.push_str("\"stablehlo.while\"(");
        write_names(&mut self.out, init.iter().map(|s| s.name.as_str()));
        self.out.push_str(") ({\n");
        for region in 0..2 {
            if region == 1 {
                self.out.push_str("    }, {\n");
            }
            let args: Vec<Ssa> = types
                .iter()
                .map(|t| Ssa::new(f.fresh(), t.clone()))
                .collect();
            self.out.push_str("    ^bb0(");
            let decls: Vec<String> = args
                .iter()
                .map(|a| format!("{}: {}", a.name, a.ty))
                .collect();
            self.out.push_str(&decls.join(", "));
            self.out.push_str("):\n");
            if region == 0 {
                let p = cond(self, f, &args);
                self.region_return("      ", &[&p]);
            } else {
                let outs = body(self, f, &args);
                let refs: Vec<&Ssa> = outs.iter().collect();
                self.region_return("      ", &refs);
            }
        }
        self.out.push_str("    }) : (");
        write_names(&mut self.out, types.iter().map(|s| s.as_str()));
        self.out.push_str(") -> ");
        write_result_types(&mut self.out, &types);
        self.out.push('\n');
        results
    }

    pub(crate) fn lower_while(
        &mut self,
        f: &mut FuncState<'_>,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::While;
        let cond_j = sub(e, b, "cond_jaxpr")?;
        let body_j = sub(e, b, "body_jaxpr")?;
        let cn = int(e, b, "cond_nconsts")?;
        let bn = int(e, b, "body_nconsts")?;
        let cond_fn = self.function_for(cond_j.jaxpr(), "while_cond", f.mesh.as_ref());
        let body_fn = self.function_for(body_j.jaxpr(), "while_body", f.mesh.as_ref());
        let cond_consts: Vec<Ssa> = inputs[..cn].to_vec();
        let body_consts: Vec<Ssa> = inputs[cn..cn + bn].to_vec();
        let mut init: Vec<Ssa> = inputs[cn + bn..].to_vec();
        let carry_avals = &in_avals[cn + bn..];
        // A batched predicate (`bool[s...]`, `s` a prefix of every carry's shape): the
        // loop runs while any element is true, and the body keeps the old value of the
        // lanes whose element is false (as JAX lowers it).
        let pred_aval = cond_j
            .out_avals()
            .pop()
            .unwrap_or_else(|| AbstractValue::scalar(DType::Bool));
        let pred_rank = pred_aval.shape.rank();
        let batched = pred_rank > 0;
        let pred_ty = tensor_type(&pred_aval);
        let scalar_pred_ty = tensor_of(&[], DType::Bool);
        let carry_types: Vec<String> = init.iter().map(|s| s.ty.clone()).collect();
        // With an ordered effect in the body or the predicate, the token is carried
        // first (as JAX's loop carries it).
        let cond_threaded = self.threads_token(cond_j.jaxpr());
        let body_threaded = self.threads_token(body_j.jaxpr());
        if batched && cond_threaded {
            return Ok(self.batched_while_with_ordered_cond(
                f,
                &cond_fn,
                &body_fn,
                body_threaded,
                &pred_aval,
                &inputs[..cn],
                &inputs[cn..cn + bn],
                &init,
                carry_avals,
            ));
        }
        let threaded = cond_threaded || body_threaded;
        let skip = usize::from(threaded);
        let pred_axes: Vec<i64> = (0..pred_rank as i64).collect();
        let any_lane = |m: &mut Module, f: &mut FuncState<'_>, p: Ssa| -> Ssa {
            if !batched {
                return p;
            }
            let no = m.scalar_constant(f, "false", DType::Bool);
            m.reduce(
                f,
                &p,
                &no,
                &pred_axes,
                "stablehlo.or",
                DType::Bool,
                scalar_pred_ty.clone(),
            )
        };
        let mut cond = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Ssa {
            if cond_threaded {
                // The predicate's callbacks run in order with the token it is given
                // (a region of the predicate returns the predicate only).
                let all: Vec<&Ssa> = std::iter::once(&args[0])
                    .chain(&cond_consts)
                    .chain(&args[1..])
                    .collect();
                let types = [TOKEN_TYPE.to_owned(), pred_ty.clone()];
                let mut r = m.call(f, "      ", &cond_fn, &all, &types);
                return r
                    .pop()
                    .unwrap_or_else(|| Ssa::new(String::new(), String::new()));
            }
            let all: Vec<&Ssa> = cond_consts.iter().chain(&args[skip..]).collect();
            let p = m
                .call(f, "      ", &cond_fn, &all, std::slice::from_ref(&pred_ty))
                .pop()
                .unwrap_or_else(|| Ssa::new(String::new(), String::new()));
            any_lane(m, f, p)
        };
        let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Vec<Ssa> {
            let mut outs = if body_threaded {
                let all: Vec<&Ssa> = std::iter::once(&args[0])
                    .chain(&body_consts)
                    .chain(&args[1..])
                    .collect();
                let mut types = vec![TOKEN_TYPE.to_owned()];
                types.extend_from_slice(&carry_types);
                m.call(f, "      ", &body_fn, &all, &types)
            } else {
                let all: Vec<&Ssa> = body_consts.iter().chain(&args[skip..]).collect();
                let mut outs = m.call(f, "      ", &body_fn, &all, &carry_types);
                if threaded {
                    outs.insert(0, args[0].clone());
                }
                outs
            };
            if batched {
                // The predicate again, on the old carry; each carry takes the body's value
                // where it holds and keeps its old value elsewhere.
                let all: Vec<&Ssa> = cond_consts.iter().chain(&args[skip..]).collect();
                let p = m
                    .call(f, "      ", &cond_fn, &all, std::slice::from_ref(&pred_ty))
                    .pop()
                    .unwrap_or_else(|| Ssa::new(String::new(), String::new()));
                let attrs = format!("broadcast_dimensions = {}", i64_array(&pred_axes));
                for ((new, old), aval) in
                    outs[skip..].iter_mut().zip(&args[skip..]).zip(carry_avals)
                {
                    // The carry's physical shape: a key's words are a trailing 2.
                    let dims = super::ops::with_key_words(aval, aval.shape.dims(), 2);
                    let mask = m.op1(
                        f,
                        "stablehlo.broadcast_in_dim",
                        &[&p],
                        &attrs,
                        tensor_of(&dims, DType::Bool),
                    );
                    let ty = new.ty.clone();
                    *new = m.op1(f, "stablehlo.select", &[&mask, new, old], "", ty);
                }
            }
            outs
        };
        if init.is_empty() && !threaded {
            // A loop with no carry computes nothing observable.
            return Ok(Vec::new());
        }
        if threaded {
            init.insert(0, self.take_token(f));
        }
        let mut results = self.while_op(f, &init, &mut cond, &mut body);
        if threaded && !results.is_empty() {
            f.token = Some(results.remove(0));
        }
        Ok(results)
    }

    /// A `while` with a batched predicate whose condition has an ordered effect: the
    /// condition runs once before the loop and once after each iteration (as the
    /// evaluator runs it, its callbacks in that order), its predicate carried in the loop
    /// state `(token, pred, carry...)`; the cond region reduces it with `or`, and the
    /// body region selects per lane between the body's values and the old ones, then
    /// evaluates the condition on the new carry. (JAX's vmap refuses ordered effects; its
    /// lowering of this case keeps no lane's old value.)
    #[allow(clippy::too_many_arguments)]
    fn batched_while_with_ordered_cond(
        &mut self,
        f: &mut FuncState<'_>,
        cond_fn: &str,
        body_fn: &str,
        body_threaded: bool,
        pred_aval: &AbstractValue,
        cond_consts: &[Ssa],
        body_consts: &[Ssa],
        carry: &[Ssa],
        carry_avals: &[AbstractValue],
    ) -> Vec<Ssa> {
        let pred_ty = tensor_type(pred_aval);
        let pred_axes: Vec<i64> = (0..pred_aval.shape.rank() as i64).collect();
        let carry_types: Vec<String> = carry.iter().map(|s| s.ty.clone()).collect();
        let cond_types = [TOKEN_TYPE.to_owned(), pred_ty.clone()];
        // (token, pred) = cond(token, consts, carry)
        let run_cond = |m: &mut Module, f: &mut FuncState<'_>, token: &Ssa, carry: &[Ssa]| {
            let all: Vec<&Ssa> = std::iter::once(token)
                .chain(cond_consts)
                .chain(carry)
                .collect();
            m.call(f, "      ", cond_fn, &all, &cond_types)
        };
        let token = self.take_token(f);
        let mut init = run_cond(self, f, &token, carry);
        init.extend_from_slice(carry);
        let mut cond = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Ssa {
            let no = m.scalar_constant(f, "false", DType::Bool);
            m.reduce(
                f,
                &args[1],
                &no,
                &pred_axes,
                "stablehlo.or",
                DType::Bool,
                tensor_of(&[], DType::Bool),
            )
        };
        let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Vec<Ssa> {
            let (token, pred, old) = (&args[0], &args[1], &args[2..]);
            let (token, mut new) = if body_threaded {
                let all: Vec<&Ssa> = std::iter::once(token)
                    .chain(body_consts)
                    .chain(old)
                    .collect();
                let mut types = vec![TOKEN_TYPE.to_owned()];
                types.extend_from_slice(&carry_types);
                let mut outs = m.call(f, "      ", body_fn, &all, &types);
                let token = outs.remove(0);
                (token, outs)
            } else {
                let all: Vec<&Ssa> = body_consts.iter().chain(old).collect();
                (
                    token.clone(),
                    m.call(f, "      ", body_fn, &all, &carry_types),
                )
            };
            let attrs = format!("broadcast_dimensions = {}", i64_array(&pred_axes));
            for ((new, old), aval) in new.iter_mut().zip(old).zip(carry_avals) {
                let dims = super::ops::with_key_words(aval, aval.shape.dims(), 2);
                let mask = m.op1(
                    f,
                    "stablehlo.broadcast_in_dim",
                    &[pred],
                    &attrs,
                    tensor_of(&dims, DType::Bool),
                );
                let ty = new.ty.clone();
                *new = m.op1(f, "stablehlo.select", &[&mask, new, old], "", ty);
            }
            let mut state = run_cond(m, f, &token, &new);
            state.extend(new);
            state
        };
        let mut results = self.while_op(f, &init, &mut cond, &mut body);
        let rest = results.split_off(2.min(results.len()));
        f.token = results.into_iter().next();
        rest
    }

    pub(crate) fn lower_scan(
        &mut self,
        f: &mut FuncState<'_>,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let b = Builtin::Scan;
        let body_j = sub(e, b, "jaxpr")?;
        let length = int(e, b, "length")? as i64;
        let nc = int(e, b, "num_consts")?;
        let ncarry = int(e, b, "num_carry")?;
        let reverse = matches!(e.params().get("reverse"), Some(Param::Bool(true)));
        let body_fn = self.function_for(body_j.jaxpr(), "scan_body", f.mesh.as_ref());
        // With an ordered effect in the body, the token is carried last in the loop
        // state (after the index, the carry and the ys buffers).
        let threaded = self.threads_token(body_j.jaxpr());
        let consts: Vec<Ssa> = inputs[..nc].to_vec();
        let xs: Vec<Ssa> = inputs[nc + ncarry..].to_vec();
        let xs_avals: Vec<AbstractValue> = in_avals[nc + ncarry..].to_vec();
        let ys_avals: Vec<AbstractValue> = out_avals[ncarry..].to_vec();
        let body_out_types: Vec<String> = body_j.out_avals().iter().map(tensor_type).collect();

        // Loop state: (i, carry..., ys buffers...).
        let i32_ty = tensor_of(&[], DType::I32);
        let mut init: Vec<Ssa> = vec![self.scalar_constant(f, "0", DType::I32)];
        init.extend_from_slice(&inputs[nc..nc + ncarry]);
        for y in &ys_avals {
            let zero_text = super::ops::scalar_text(
                if y.dtype.is_float() {
                    crate::jaxpr::LitValue::Float(0.0)
                } else if y.dtype == DType::Bool {
                    crate::jaxpr::LitValue::Bool(false)
                } else {
                    crate::jaxpr::LitValue::Int(0)
                },
                y.dtype,
            );
            let z = self.scalar_constant(f, &zero_text, y.dtype);
            init.push(self.broadcast_to(f, z, &AbstractValue::scalar(y.dtype), y.shape.dims()));
        }
        if threaded {
            init.push(self.take_token(f));
        }
        let len_text = length.to_string();
        let mut cond = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Ssa {
            let n = m.scalar_constant(f, &len_text, DType::I32);
            let attrs = "comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>";
            m.op1(
                f,
                "stablehlo.compare",
                &[&args[0], &n],
                attrs,
                tensor_of(&[], DType::Bool),
            )
        };
        let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| -> Vec<Ssa> {
            let i = &args[0];
            let one = m.scalar_constant(f, "1", DType::I32);
            let t = if reverse {
                let last = m.scalar_constant(f, &(length - 1).to_string(), DType::I32);
                m.op1(f, "stablehlo.subtract", &[&last, i], "", i32_ty.clone())
            } else {
                i.clone()
            };
            let zero = m.scalar_constant(f, "0", DType::I32);
            let mut call_args: Vec<Ssa> = consts.clone();
            call_args.extend_from_slice(&args[1..1 + ncarry]);
            for (x, xa) in xs.iter().zip(&xs_avals) {
                let mut sizes = xa.shape.dims().to_vec();
                sizes[0] = 1;
                let mut idx: Vec<&Ssa> = vec![x, &t];
                // Keys: one more index and slice size for the words' trailing dimension.
                let words = super::ops::with_key_words(xa, &[], 2);
                for _ in 1..sizes.len() + words.len() {
                    idx.push(&zero);
                }
                let mut attr_sizes = sizes.clone();
                attr_sizes.extend_from_slice(&words);
                let attrs = format!("slice_sizes = {}", super::text::i64_array(&attr_sizes));
                let sl = m.op1(
                    f,
                    "stablehlo.dynamic_slice",
                    &idx,
                    &attrs,
                    tensor_of(&sizes, xa.dtype),
                );
                let row = m.op1(
                    f,
                    "stablehlo.reshape",
                    &[&sl],
                    "",
                    tensor_of(&xa.shape.dims()[1..], xa.dtype),
                );
                call_args.push(row);
            }
            let (outs, token) = if threaded {
                let token = &args[args.len() - 1];
                let refs: Vec<&Ssa> = std::iter::once(token).chain(&call_args).collect();
                let mut types = vec![TOKEN_TYPE.to_owned()];
                types.extend_from_slice(&body_out_types);
                let mut outs = m.call(f, "      ", &body_fn, &refs, &types);
                let token = outs.remove(0);
                (outs, Some(token))
            } else {
                let refs: Vec<&Ssa> = call_args.iter().collect();
                (m.call(f, "      ", &body_fn, &refs, &body_out_types), None)
            };
            let next_i = m.op1(f, "stablehlo.add", &[i, &one], "", i32_ty.clone());
            let mut state = vec![next_i];
            state.extend_from_slice(&outs[..ncarry]);
            for (k, ya) in ys_avals.iter().enumerate() {
                let y = &outs[ncarry + k];
                let mut one_row = ya.shape.dims().to_vec();
                one_row[0] = 1;
                let y1 = m.op1(
                    f,
                    "stablehlo.reshape",
                    &[y],
                    "",
                    tensor_of(&one_row, ya.dtype),
                );
                let buf = &args[1 + ncarry + k];
                let mut idx: Vec<&Ssa> = vec![buf, &y1, &t];
                let words = usize::from(ya.dtype.is_key());
                for _ in 1..one_row.len() + words {
                    idx.push(&zero);
                }
                state.push(m.op1(
                    f,
                    "stablehlo.dynamic_update_slice",
                    &idx,
                    "",
                    tensor_type(ya),
                ));
            }
            state.extend(token);
            state
        };
        let mut results = self.while_op(f, &init, &mut cond, &mut body);
        if threaded {
            f.token = results.pop();
        }
        Ok(results[1..].to_vec())
    }
}
