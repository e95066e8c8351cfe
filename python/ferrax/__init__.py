"""ferrax: trace, transform and lower numerical Python programs through a typed IR.

The IR itself (jaxprs, builders, passes) is in :mod:`ferrax.core`.
"""

from ferrax import lax, numpy, tree_util
from ferrax._array import Array
from ferrax._autodiff import grad, jvp, linearize, value_and_grad, vjp
from ferrax._custom_derivatives import checkpoint, custom_jvp, custom_vjp, remat
from ferrax._config import config, enable_x64
from ferrax._cost import cost_analysis
from ferrax._jacobians import hessian, jacfwd, jacrev
from ferrax._jit import eval_jaxpr, jit
from ferrax._runtime import device_put
from ferrax._staging import make_jaxpr
from ferrax._vmap import vmap
from ferrax.errors import (
    BuilderError,
    ConcretizationError,
    FerraxError,
    LoweringError,
    ParseError,
    PassError,
    ShapeError,
    TracerBoolConversionError,
    TypeCheckError,
    UnexpectedTracerError,
)

__all__ = [
    "Array",
    "BuilderError",
    "ConcretizationError",
    "FerraxError",
    "LoweringError",
    "ParseError",
    "PassError",
    "ShapeError",
    "TracerBoolConversionError",
    "TypeCheckError",
    "UnexpectedTracerError",
    "config",
    "checkpoint",
    "cost_analysis",
    "custom_jvp",
    "custom_vjp",
    "enable_x64",
    "device_put",
    "eval_jaxpr",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "lax",
    "make_jaxpr",
    "numpy",
    "remat",
    "tree_util",
    "value_and_grad",
    "vjp",
    "vmap",
]
