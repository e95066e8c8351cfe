//! Host callbacks (`debug_callback`, `pure_callback`, `io_callback`): a
//! `stablehlo.custom_call` of jaxlib's CPU callback target, as JAX 0.10 lowers them. The
//! call names its callback by an index into the list of host callbacks the module is
//! compiled with
//! (`mhlo.backend_config = {index = K : ui64}`); the lowering collects the callbacks'
//! opaque params in index order (see [`lower_jaxpr_full`](super::lower_jaxpr_full)).
//!
//! An ordered callback (`debug_callback[effect=OrderedDebug]`, `io_callback[ordered=True]`)
//! takes a token and returns one, as JAX's does: within a function, each ordered callback takes the token the previous one
//! returned (the first one a token of `stablehlo.after_all`), so XLA runs them in order.
//! (JAX threads one token through the whole program, `@main`'s arguments and results and
//! every call, branch and loop included; ferrax's chain is per function, so ordered
//! callbacks in different functions, such as a loop body and the code around the loop,
//! are ordered by the program's data dependences only.)

use super::text::Ssa;
use super::{FuncState, HostCallback, LowerError, Module};
use crate::jaxpr::Eqn;
use crate::params::Param;
use crate::primitive::Builtin;

/// jaxlib's custom-call target that calls a Python function on the host (CPU).
const CPU_CALLBACK_TARGET: &str = "xla_ffi_python_cpu_callback";

impl Module {
    /// A host callback: the custom call with the next callback index, side-effecting
    /// for `debug_callback` and `io_callback` (never removed or merged by XLA), pure for
    /// `pure_callback`.
    pub(crate) fn lower_callback(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        result_types: &[String],
    ) -> Result<Vec<Ssa>, LowerError> {
        let Some(Param::Opaque(callback)) = e.params().get("callback") else {
            return Err(LowerError::BadParam {
                primitive: b.name().to_owned(),
                param: "callback",
            });
        };
        let ordered = match e.params().get(if b == Builtin::IoCallback {
            "ordered"
        } else {
            "effect"
        }) {
            Some(Param::Str(s)) => &**s == "OrderedDebug",
            Some(Param::Bool(ordered)) => *ordered,
            _ => false,
        };
        let index = self.host_callbacks.len();
        self.host_callbacks.push(HostCallback {
            callback: callback.clone(),
            token: ordered,
        });
        let side_effect = if b.has_effect() {
            "has_side_effect = true, "
        } else {
            ""
        };
        let attrs = format!(
            "call_target_name = \"{CPU_CALLBACK_TARGET}\", {side_effect}backend_config = \"\", \
             mhlo.backend_config = {{index = {index} : ui64}}"
        );
        if !ordered {
            let operands: Vec<&Ssa> = inputs.iter().collect();
            return Ok(self.op(f, "stablehlo.custom_call", &operands, &attrs, result_types));
        }
        const TOKEN: &str = "!stablehlo.token";
        let token = match f.token.take() {
            Some(t) => t,
            None => self
                .op(f, "stablehlo.after_all", &[], "", &[TOKEN.to_owned()])
                .remove(0),
        };
        let operands: Vec<&Ssa> = std::iter::once(&token).chain(inputs).collect();
        let mut types = vec![TOKEN.to_owned()];
        types.extend_from_slice(result_types);
        let mut outs = self.op(f, "stablehlo.custom_call", &operands, &attrs, &types);
        f.token = Some(outs.remove(0));
        Ok(outs)
    }
}
