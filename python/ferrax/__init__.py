"""ferrax: trace, transform and lower numerical Python programs through a typed IR.

The IR itself (jaxprs, builders, passes) is in :mod:`ferrax.core`.
"""

from ferrax.errors import (
    BuilderError,
    ConcretizationError,
    FerraxError,
    LoweringError,
    ParseError,
    PassError,
    TracerBoolConversionError,
    TypeCheckError,
)

__all__ = [
    "BuilderError",
    "ConcretizationError",
    "FerraxError",
    "LoweringError",
    "ParseError",
    "PassError",
    "TracerBoolConversionError",
    "TypeCheckError",
]
