//! Host callbacks (`debug_callback`, `debug_print`, `pure_callback`, `io_callback`): a
//! `stablehlo.custom_call` of jaxlib's CPU callback target, as JAX 0.10 lowers them. The
//! call names its callback by an index into the list of host callbacks the module is
//! compiled with
//! (`mhlo.backend_config = {index = K : ui64}`); the lowering collects the callbacks'
//! opaque params in index order (see [`lower_jaxpr_full`](super::lower_jaxpr_full)).
//!
//! An ordered callback (`debug_callback[effect=OrderedDebug]`, `debug_print[ordered=True]`,
//! `io_callback[ordered=True]`) takes a token and returns one, as JAX's does: one token
//! runs through the whole program (`@main` takes it first and returns it first, marked
//! `jax.token`; every function with an ordered effect in it, at any depth, takes and
//! returns it, and calls, branches and loops pass it on), so XLA runs ordered callbacks
//! in program order, within one run and, as the runtime passes the token of one run to
//! the next, across runs.

use super::text::Ssa;
use super::{FuncState, HostCallback, LowerError, Module};
use crate::jaxpr::Eqn;
use crate::params::Param;
use crate::primitive::Builtin;

/// jaxlib's custom-call target that calls a Python function on the host (CPU).
const CPU_CALLBACK_TARGET: &str = "xla_ffi_python_cpu_callback";

impl Module {
    /// A host callback: the custom call with the next callback index, side-effecting
    /// for `debug_callback`, `debug_print` and `io_callback` (never removed or merged by XLA), pure for
    /// `pure_callback`.
    pub(crate) fn lower_callback(
        &mut self,
        f: &mut FuncState<'_>,
        b: Builtin,
        e: &Eqn,
        inputs: &[Ssa],
        result_types: &[String],
    ) -> Result<Vec<Ssa>, LowerError> {
        // `debug_print` has no callback object: the host formats the line from the
        // equation's params (see [`HostCallback::print`]).
        let (callback, print) = if b == Builtin::DebugPrint {
            (
                crate::params::Opaque::named("debug_print"),
                Some(e.params().clone()),
            )
        } else {
            match e.params().get("callback") {
                Some(Param::Opaque(callback)) => (callback.clone(), None),
                _ => {
                    return Err(LowerError::BadParam {
                        primitive: b.name().to_owned(),
                        param: "callback",
                    })
                }
            }
        };
        let ordered = match e.params().get(match b {
            Builtin::IoCallback | Builtin::DebugPrint => "ordered",
            _ => "effect",
        }) {
            Some(Param::Str(s)) => &**s == "OrderedDebug",
            Some(Param::Bool(ordered)) => *ordered,
            _ => false,
        };
        let index = self.host_callbacks.len();
        self.host_callbacks.push(HostCallback {
            callback,
            token: ordered,
            print,
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
        let token = self.take_token(f);
        let operands: Vec<&Ssa> = std::iter::once(&token).chain(inputs).collect();
        let mut types = vec![super::TOKEN_TYPE.to_owned()];
        types.extend_from_slice(result_types);
        let mut outs = self.op(f, "stablehlo.custom_call", &operands, &attrs, &types);
        f.token = Some(outs.remove(0));
        Ok(outs)
    }
}
