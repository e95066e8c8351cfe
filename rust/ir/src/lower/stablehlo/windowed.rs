//! Lowering of the windowed reductions and of the primitives of their derivatives, as
//! JAX 0.10.2 lowers them on CPU: `stablehlo.reduce_window` for the reductions and for
//! `select_and_gather_add` (a two-operand reduction over (operand, tangent) pairs), and
//! for `select_and_scatter_add` a `stablehlo.pad` of the operand with the selection's
//! identity, a `stablehlo.select_and_scatter` without padding and a `stablehlo.slice`
//! back to the operand's shape.

use super::control::sub;
use super::ops::{bad, compare_attrs, reduction_init};
use super::text::{float_literal, i64_array, tensor_of, tensor_type, write_names, Ssa};
use super::{FuncState, LowerError, Module};
use crate::aval::AbstractValue;
use crate::dtype::DType;
use crate::jaxpr::Eqn;
use crate::primitive::{select_comparison, Builtin, Window};
use std::fmt::Write as _;

/// Writes the ops of a region from its block arguments; returns what it yields.
type Body<'c> = dyn FnMut(&mut Module, &mut FuncState<'_>, &[Ssa]) -> Vec<Ssa> + 'c;

fn padding_attr(padding: &[(i64, i64)]) -> String {
    if padding.is_empty() {
        return "dense<> : tensor<0x2xi64>".to_owned();
    }
    let rows: Vec<String> = padding.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    format!(
        "dense<[{}]> : tensor<{}x2xi64>",
        rows.join(", "),
        padding.len()
    )
}

fn window(b: Builtin, e: &Eqn, rank: usize) -> Result<Window, LowerError> {
    Window::from_params(b, e.params(), rank).map_err(|_| bad(b, "window_dimensions"))
}

impl Module {
    /// Writes a region `^bb0(args): body; return` with block arguments of `types`.
    fn region(&mut self, f: &mut FuncState<'_>, types: &[String], body: &mut Body<'_>) {
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
        let outs = body(self, f, &args);
        self.out.push_str("      \"stablehlo.return\"(");
        write_names(&mut self.out, outs.iter().map(|s| s.name.as_str()));
        self.out.push_str(") : (");
        write_names(&mut self.out, outs.iter().map(|s| s.ty.as_str()));
        self.out.push_str(") -> ()\n");
    }

    /// A `stablehlo.reduce_window` of `operands` from `inits` (scalars), whose reducer
    /// `body` maps (accumulators, elements) to accumulators.
    fn reduce_window_op(
        &mut self,
        f: &mut FuncState<'_>,
        operands: &[&Ssa],
        inits: &[&Ssa],
        out_types: &[String],
        w: &Window,
        body: &mut Body<'_>,
    ) -> Vec<Ssa> {
        self.out.push_str("    ");
        let results = self.bind_results(f, out_types);
        self.out.push_str("\"stablehlo.reduce_window\"(");
        let all: Vec<&Ssa> = operands.iter().chain(inits).copied().collect();
        write_names(&mut self.out, all.iter().map(|s| s.name.as_str()));
        self.out.push_str(") ({\n");
        let scalar_types: Vec<String> = inits.iter().map(|s| s.ty.clone()).collect();
        let arg_types: Vec<String> = scalar_types.iter().chain(&scalar_types).cloned().collect();
        self.region(f, &arg_types, body);
        let _ = write!(
            self.out,
            "    }}) {{window_dimensions = {}, window_strides = {}, base_dilations = {}, window_dilations = {}, padding = {}}} : (",
            i64_array(&w.dims),
            i64_array(&w.strides),
            i64_array(&w.base_dilation),
            i64_array(&w.window_dilation),
            padding_attr(&w.padding),
        );
        write_names(&mut self.out, all.iter().map(|s| s.ty.as_str()));
        self.out.push_str(") -> ");
        super::text::write_result_types(&mut self.out, out_types);
        self.out.push('\n');
        results
    }

    /// Lowers one of the windowed primitives.
    pub(super) fn lower_windowed(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        in_avals: &[AbstractValue],
        out_avals: &[AbstractValue],
    ) -> Result<Vec<Ssa>, LowerError> {
        let out_types: Vec<String> = out_avals.iter().map(tensor_type).collect();
        match b {
            Builtin::ReduceWindowSum | Builtin::ReduceWindowMax | Builtin::ReduceWindowMin => {
                let x = &in_avals[0];
                let d = x.dtype;
                let w = window(b, e, x.shape.rank())?;
                let (init, combine) = match (b, d == DType::Bool) {
                    (Builtin::ReduceWindowSum, _) => {
                        (reduction_init(Builtin::ReduceSum, d), "stablehlo.add")
                    }
                    (Builtin::ReduceWindowMax, true) => ("false".to_owned(), "stablehlo.or"),
                    (Builtin::ReduceWindowMax, false) => {
                        (reduction_init(Builtin::ReduceMax, d), "stablehlo.maximum")
                    }
                    (_, true) => ("true".to_owned(), "stablehlo.and"),
                    (_, false) => (reduction_init(Builtin::ReduceMin, d), "stablehlo.minimum"),
                };
                let init = self.scalar_constant(f, &init, d);
                let t = tensor_of(&[], d);
                let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| {
                    vec![m.op1(f, combine, &[&args[0], &args[1]], "", t.clone())]
                };
                Ok(self.reduce_window_op(f, &[&inputs[0]], &[&init], &out_types, &w, &mut body))
            }
            Builtin::ReduceWindow => {
                let j = sub(e, b, "jaxpr")?;
                let n = inputs.len() / 2;
                let w = window(b, e, in_avals[0].shape.rank())?;
                let callee = self.function_for(j.jaxpr(), "reduce_window_reducer", f.mesh.as_ref());
                let scalar_types: Vec<String> = in_avals[n..].iter().map(tensor_type).collect();
                let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| {
                    let refs: Vec<&Ssa> = args.iter().collect();
                    m.call(f, "      ", &callee, &refs, &scalar_types)
                };
                let (ops, inits) = inputs.split_at(n);
                let ops: Vec<&Ssa> = ops.iter().collect();
                let inits: Vec<&Ssa> = inits.iter().collect();
                Ok(self.reduce_window_op(f, &ops, &inits, &out_types, &w, &mut body))
            }
            Builtin::SelectAndGatherAdd => {
                // JAX's CPU lowering: reduce (operand, tangent) pairs, keeping the pair
                // whose operand the comparison selects.
                let x = &in_avals[1];
                let d = x.dtype;
                let ge = select_comparison(e.params()).map_err(|_| bad(b, "select_prim"))?
                    == Builtin::Ge;
                let w = window(b, e, x.shape.rank())?;
                let lowest = if ge { f64::NEG_INFINITY } else { f64::INFINITY };
                let init_x = self.scalar_constant(f, &float_literal(lowest, d), d);
                let init_t = self.scalar_constant(f, &float_literal(0.0, d), d);
                let t = tensor_of(&[], d);
                let dir = if ge { "GE" } else { "LE" };
                let mut body = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| {
                    let (kx, vx, ky, vy) = (&args[0], &args[1], &args[2], &args[3]);
                    let which = m.op1(
                        f,
                        "stablehlo.compare",
                        &[kx, ky],
                        &compare_attrs(dir, d),
                        tensor_of(&[], DType::Bool),
                    );
                    let k = m.op1(f, "stablehlo.select", &[&which, kx, ky], "", t.clone());
                    let v = m.op1(f, "stablehlo.select", &[&which, vx, vy], "", t.clone());
                    vec![k, v]
                };
                let types = [out_types[0].clone(), out_types[0].clone()];
                let r = self.reduce_window_op(
                    f,
                    &[&inputs[1], &inputs[0]],
                    &[&init_x, &init_t],
                    &types,
                    &w,
                    &mut body,
                );
                Ok(r.into_iter().skip(1).collect())
            }
            Builtin::SelectAndScatterAdd => {
                let (s, x) = (&in_avals[0], &in_avals[1]);
                let w = window(b, e, x.shape.rank())?;
                let ge = select_comparison(e.params()).map_err(|_| bad(b, "select_prim"))?
                    == Builtin::Ge;
                Ok(vec![self.select_and_scatter_add(
                    f, &inputs[0], &inputs[1], s, x, &w, ge,
                )])
            }
            _ => Err(LowerError::Unsupported {
                primitive: b.name().to_owned(),
            }),
        }
    }

    /// JAX's CPU lowering of `select_and_scatter_add`: the operand padded with the
    /// selection's identity, a select-and-scatter without padding, then the operand's
    /// part of the result.
    #[allow(clippy::too_many_arguments)]
    fn select_and_scatter_add(
        &mut self,
        f: &mut FuncState<'_>,
        source: &Ssa,
        operand: &Ssa,
        s: &AbstractValue,
        x: &AbstractValue,
        w: &Window,
        ge: bool,
    ) -> Ssa {
        if x.shape.rank() == 0 {
            // One window of one element: the source lands on it. (XLA's CPU compiler
            // aborts on a rank-0 select_and_scatter, which JAX emits here.)
            return source.clone();
        }
        let d = x.dtype;
        let identity = if ge {
            reduction_init(Builtin::ReduceMax, d)
        } else {
            reduction_init(Builtin::ReduceMin, d)
        };
        let ident = self.scalar_constant(f, &identity, d);
        let xd = x.shape.dims();
        let padded_dims: Vec<i64> = xd
            .iter()
            .zip(&w.padding)
            .map(|(&n, &(lo, hi))| n.saturating_add(lo).saturating_add(hi))
            .collect();
        let lows: Vec<i64> = w.padding.iter().map(|p| p.0).collect();
        let highs: Vec<i64> = w.padding.iter().map(|p| p.1).collect();
        let attrs = format!(
            "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
            i64_array(&lows),
            i64_array(&highs),
            i64_array(&vec![0; xd.len()])
        );
        let padded_ty = tensor_of(&padded_dims, d);
        let padded = self.op1(
            f,
            "stablehlo.pad",
            &[operand, &ident],
            &attrs,
            padded_ty.clone(),
        );
        let sd = s.dtype;
        let zero = self.scalar_constant(f, &reduction_init(Builtin::ReduceSum, sd), sd);
        let out_padded = tensor_of(&padded_dims, sd);
        self.out.push_str("    ");
        let r = self.bind_results(f, std::slice::from_ref(&out_padded));
        let _ = writeln!(
            self.out,
            "\"stablehlo.select_and_scatter\"({}, {}, {}) ({{",
            padded.name, source.name, zero.name
        );
        let t = tensor_of(&[], d);
        let st = tensor_of(&[], sd);
        let dir = if ge { "GE" } else { "LE" };
        let mut select = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| {
            vec![m.op1(
                f,
                "stablehlo.compare",
                &[&args[0], &args[1]],
                &compare_attrs(dir, d),
                tensor_of(&[], DType::Bool),
            )]
        };
        self.region(f, &[t.clone(), t], &mut select);
        self.out.push_str("    }, {\n");
        let combine = if sd == DType::Bool {
            "stablehlo.or"
        } else {
            "stablehlo.add"
        };
        let mut scatter = |m: &mut Module, f: &mut FuncState<'_>, args: &[Ssa]| {
            vec![m.op1(f, combine, &[&args[0], &args[1]], "", st.clone())]
        };
        self.region(f, &[st.clone(), st.clone()], &mut scatter);
        let zeros = vec![0i64; xd.len()];
        let _ = writeln!(
            self.out,
            "    }}) {{window_dimensions = {}, window_strides = {}, padding = {}}} : ({padded_ty}, {}, {st}) -> {out_padded}",
            i64_array(&w.dims),
            i64_array(&w.strides),
            padding_attr(&zeros.iter().map(|&z| (z, z)).collect::<Vec<_>>()),
            source.ty,
        );
        let scattered = r
            .into_iter()
            .next()
            .unwrap_or_else(|| Ssa::new(String::new(), out_padded.clone()));
        let limits: Vec<i64> = lows.iter().zip(xd).map(|(&l, &n)| l + n).collect();
        let attrs = format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64_array(&lows),
            i64_array(&limits),
            i64_array(&vec![1; xd.len()])
        );
        self.op1(
            f,
            "stablehlo.slice",
            &[&scattered],
            &attrs,
            tensor_of(xd, sd),
        )
    }
}
