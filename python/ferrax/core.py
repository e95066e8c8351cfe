"""The jaxpr IR: abstract values, jaxprs and their views, the builder, the passes.

Everything here is implemented in Rust (the ``ferrax-ir`` crate) and exposed through the
compiled module ``ferrax._ir``; this module is its public face.
"""

from ferrax._core import Primitive
from ferrax._decompile import DecompileError, bind, literal, raw_keys, to_python, trace_jaxpr
from ferrax._ir import (
    ClosedJaxpr,
    ExtensionPrimitive,
    Jaxpr,
    JaxprBuilder,
    JaxprEqn,
    Literal,
    Params,
    ShapedArray,
    Var,
    dce,
    parse_jaxpr,
    toposort,
    typecheck,
)

__all__ = [
    "ClosedJaxpr",
    "DecompileError",
    "ExtensionPrimitive",
    "Jaxpr",
    "JaxprBuilder",
    "JaxprEqn",
    "Literal",
    "Params",
    "Primitive",
    "ShapedArray",
    "Var",
    "bind",
    "dce",
    "literal",
    "parse_jaxpr",
    "raw_keys",
    "to_python",
    "toposort",
    "trace_jaxpr",
    "typecheck",
]
