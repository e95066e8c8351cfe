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
    RewriteError,
    TypeCheckError,
)

__all__ = [
    "CompilationCacheWarning",
    "DecompileError",
    "DifferentiationError",
    "ReverseModeError",
    "BuilderError",
    "ConcretizationError",
    "FerraxError",
    "LoweringError",
    "NonConcreteBooleanIndexError",
    "ParseError",
    "PassError",
    "RewriteError",
    "ShapeError",
    "ShardingError",
    "TracerBoolConversionError",
    "TypeCheckError",
    "UnexpectedTracerError",
]

# A type error found while tracing is a ``TypeError`` too, as JAX's are (``except
# TypeError`` code written for JAX keeps working). The class is made by the compiled
# module with one base; adding ``TypeError`` here reaches every instance Rust raises.
if not issubclass(TypeCheckError, TypeError):
    TypeCheckError.__bases__ = (FerraxError, TypeError)


class CompilationCacheWarning(UserWarning):
    """An entry of the persistent compilation cache (``jax_compilation_cache_dir``)
    could not be read, loaded or written: the program is compiled as without the cache.
    A warning, not an error: the cache never makes a program fail."""


class DecompileError(FerraxError):
    """A jaxpr cannot be written as Python that traces back to it
    (``ferrax.core.to_python``), or what was given is not a jaxpr."""


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


class NonConcreteBooleanIndexError(FerraxError, IndexError):
    """A boolean mask index whose value is not known while tracing.

    ``x[mask]`` has as many elements as ``mask`` has true entries, so under ``jit`` the
    mask must be concrete. Like JAX's error of the same name it is also an ``IndexError``.
    """


class ShapeError(TypeCheckError, ValueError):
    """Shapes that NumPy's rules need to agree do not (arrays that do not broadcast
    together, ``stack`` of different shapes) in ``ferrax.numpy``.

    A :class:`TypeCheckError`, and also the ``ValueError`` JAX raises for these.
    """


class DifferentiationError(FerraxError, NotImplementedError):
    """A primitive was differentiated that has no differentiation rule (JAX raises
    ``NotImplementedError`` for these)."""


class ReverseModeError(FerraxError, ValueError):
    """Reverse-mode differentiation met a computation it cannot transpose (a
    ``while_loop``: JAX raises ``ValueError``); the message says what to use instead."""


class UnexpectedTracerError(FerraxError, TypeError):
    """A traced value was used after the tracing that made it had ended: it escaped
    the function being traced (stored in a global, a list, an attribute) instead of being
    returned. Like JAX's ``UnexpectedTracerError``, also a ``TypeError``.
    """


def escaped_tracer_message(aval: str, where: str) -> str:
    """The message of an :class:`UnexpectedTracerError` for a value of type ``aval``
    used at ``where``."""
    return (
        f"a traced value ({aval}) is used after the tracing that made it ended, at {where}. "
        "It escaped the function being traced (a global, a list or an attribute kept it): "
        "return it from the function instead."
    )


class ShardingError(FerraxError, ValueError):
    """A layout over devices that cannot hold the array: a dimension a sharding splits
    into parts that do not divide it, a mesh axis the mesh lacks or used twice, a spec
    longer than the array's rank, arrays of one call on different devices. Like the
    errors JAX raises for these, it is also a ``ValueError``."""
