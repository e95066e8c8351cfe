"""ferrax: trace, transform and lower numerical Python programs through a typed IR.

The IR itself (jaxprs, builders, passes) is in :mod:`ferrax.core`.
"""

from ferrax import lax, numpy, random, sharding, tree, tree_util
from ferrax._devices import (
    device_count,
    devices,
    local_device_count,
    local_devices,
    make_mesh,
    process_count,
    process_index,
)
from ferrax._array import Array
from ferrax._autodiff import grad, jvp, linearize, value_and_grad, vjp
from ferrax._custom_derivatives import checkpoint, custom_jvp, custom_vjp, remat
from ferrax._config import config, enable_x64
from ferrax._cost import cost_analysis
from ferrax._jacobians import hessian, jacfwd, jacrev
from ferrax._jit import eval_jaxpr, jit
from ferrax._callback import pure_callback
from ferrax._runtime import block_until_ready, device_get, device_put
from ferrax._eval_shape import ShapeDtypeStruct, eval_shape
from ferrax._shard_map import pmap, shard_map
from ferrax._multihost import make_array_from_process_local_data, make_array_from_single_device_arrays
from ferrax import distributed
from ferrax import debug, nn, rewrite, scipy
from ferrax._staging import make_jaxpr
from ferrax._vmap import vmap
from ferrax import export
from ferrax import interop  # imports jax only when its functions are called
from ferrax.sharding import NamedSharding, PartitionSpec
from ferrax.sharding import PartitionSpec as P
from ferrax.errors import (
    BuilderError,
    ConcretizationError,
    FerraxError,
    LoweringError,
    ParseError,
    PassError,
    ShapeError,
    ShardingError,
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
    "NamedSharding",
    "P",
    "PartitionSpec",
    "ShapeDtypeStruct",
    "ShapeError",
    "ShardingError",
    "TracerBoolConversionError",
    "TypeCheckError",
    "UnexpectedTracerError",
    "block_until_ready",
    "config",
    "checkpoint",
    "cost_analysis",
    "custom_jvp",
    "custom_vjp",
    "debug",
    "enable_x64",
    "device_count",
    "device_get",
    "device_put",
    "devices",
    "distributed",
    "local_device_count",
    "local_devices",
    "make_mesh",
    "process_count",
    "process_index",
    "sharding",
    "eval_jaxpr",
    "eval_shape",
    "export",
    "grad",
    "hessian",
    "interop",
    "jacfwd",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "lax",
    "make_array_from_process_local_data",
    "make_array_from_single_device_arrays",
    "make_jaxpr",
    "nn",
    "numpy",
    "pmap",
    "pure_callback",
    "random",
    "remat",
    "scipy",
    "shard_map",
    "tree",
    "tree_util",
    "value_and_grad",
    "vjp",
    "vmap",
]
