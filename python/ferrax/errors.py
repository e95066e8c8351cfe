"""The exceptions ferrax raises. All of them subclass :class:`FerraxError`.

The IR's errors are defined in the compiled module ``ferrax._ir`` (where Rust raises them)
and re-exported here; the errors only the Python front end raises are defined here.
"""

from ferrax._ir import (
    BuilderError,
    FerraxError,
    LoweringError,
    ParseError,
    PassError,
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


class ConcretizationError(FerraxError, TypeError):
    """A concrete value was needed where only an abstract (traced) one is known.

    For example ``int(x)`` or ``np.asarray(x)`` on a value being traced by ``jit``. Like
    JAX's ``ConcretizationTypeError`` it is also a ``TypeError``.
    """


class TracerBoolConversionError(ConcretizationError):
    """Python control flow (``if``, ``while``, ``and``/``or``) on a traced value.

    The value is not known while tracing; use ``ferrax.lax.cond`` (or ``while_loop``,
    ``select_n``) instead, or mark the argument static.
    """
