"""The jaxpr IR: abstract values, jaxprs and their views, the builder, the passes.

Everything here is implemented in Rust (the ``ferrax-ir`` crate) and exposed through the
compiled module ``ferrax._ir``; this module is its public face.
"""

from ferrax._core import Primitive
from ferrax._ir import (
    ClosedJaxpr,
    ExtensionPrimitive,
    Jaxpr,
    JaxprBuilder,
    JaxprEqn,
    Literal,
    ShapedArray,
    Var,
    dce,
    parse_jaxpr,
    toposort,
    typecheck,
)

__all__ = [
    "ClosedJaxpr",
    "ExtensionPrimitive",
    "Jaxpr",
    "JaxprBuilder",
    "JaxprEqn",
    "Literal",
    "Primitive",
    "ShapedArray",
    "Var",
    "dce",
    "parse_jaxpr",
    "toposort",
    "typecheck",
]
