//! Host callbacks (`debug_callback`, `pure_callback`): a `stablehlo.custom_call` of
//! jaxlib's CPU callback target, as JAX 0.10 lowers them. The call names its callback by
//! an index into the list of host callbacks the module is compiled with
//! (`mhlo.backend_config = {index = K : ui64}`); the lowering collects the callbacks'
//! opaque params in index order (see [`lower_jaxpr_full`](super::lower_jaxpr_full)).

use super::text::Ssa;
use super::{FuncState, LowerError, Module};
use crate::jaxpr::Eqn;
use crate::params::Param;
use crate::primitive::Builtin;

/// jaxlib's custom-call target that calls a Python function on the host (CPU).
const CPU_CALLBACK_TARGET: &str = "xla_ffi_python_cpu_callback";

impl Module {
    /// A host callback: the custom call with the next callback index, side-effecting
    /// for `debug_callback` (never removed or merged by XLA), pure for `pure_callback`.
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
        let index = self.host_callbacks.len();
        self.host_callbacks.push(callback.clone());
        let side_effect = if b == Builtin::DebugCallback {
            "has_side_effect = true, "
        } else {
            ""
        };
        let attrs = format!(
            "call_target_name = \"{CPU_CALLBACK_TARGET}\", {side_effect}backend_config = \"\", \
             mhlo.backend_config = {{index = {index} : ui64}}"
        );
        let operands: Vec<&Ssa> = inputs.iter().collect();
        Ok(self.op(f, "stablehlo.custom_call", &operands, &attrs, result_types))
    }
}
