"""``jax.numpy``'s remaining type names, dtype queries, printing and I/O (issue 12 item
3): the scalar type aliases (``bool``, ``double``, ``single``, ``float_``, ``int_``,
``uint``), NumPy's abstract type hierarchy (``generic``, ``number``, ``integer``, ...,
``complexfloating``), ``dtype``, ``can_cast``, ``isdtype``, ``iscomplex``/``isreal``/
``iscomplexobj``/``isrealobj`` (ferrax has no complex dtypes: every array is real),
``array_equiv``, NumPy's ``array_repr``/``array_str``/print options, and ``load``,
``save``, ``savez``, ``frombuffer``, ``fromstring``, ``fromiter``, ``fromfile``,
``from_dlpack`` (NumPy's functions, then an array, as JAX's).
"""

from __future__ import annotations

import builtins
from typing import Any

import ml_dtypes
import numpy as np

import ferrax.numpy as fnp
from ferrax import lax
from ferrax._array import Array
from ferrax._core import user_location
from ferrax.numpy._promotion import ArrayLike, DTypeLike, as_array, convert
from ferrax.numpy._scalar_types import bool_, float32, float64, int64, uint64

__all__ = [
    "array_equiv", "array_repr", "array_str", "bool", "can_cast", "character", "complexfloating",
    "double", "dtype", "flexible", "float_", "floating", "from_dlpack", "frombuffer", "fromfile",
    "fromiter", "fromstring", "generic", "get_printoptions", "inexact", "int_", "integer",
    "iscomplex", "iscomplexobj", "isdtype", "isreal", "isrealobj", "iterable", "load", "number",
    "printoptions", "save", "savez", "set_printoptions", "signedinteger", "single", "uint",
    "unsignedinteger",
]

# Scalar type aliases: ferrax's scalar types (casts that are also dtypes), as JAX's are its own.
bool = bool_  # noqa: A001 - jax.numpy's name
"""The boolean scalar type (``bool_``)."""
double = float64
"""An alias of ``float64``."""
single = float32
"""An alias of ``float32``."""
float_ = float64
"""An alias of ``float64``."""
int_ = int64
"""An alias of ``int64`` (int32 values unless x64 is on, as every 64-bit request)."""
uint = uint64
"""An alias of ``uint64``."""

# NumPy's abstract scalar types, which jax.numpy re-exports (for issubdtype and isinstance).
generic = np.generic
number = np.number
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
character = np.character
flexible = np.flexible
dtype = np.dtype
can_cast = np.can_cast
array_repr = np.array_repr
array_str = np.array_str


def iterable(y: Any) -> builtins.bool:
    """Whether ``y`` can be iterated over (NumPy's ``iterable``, which JAX re-exports)."""
    return builtins.bool(np.iterable(y))

_KINDS: dict[str, tuple[str, ...]] = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("bfloat16", "float16", "float32", "float64"),
    "complex floating": ("complex64", "complex128"),
    "numeric": (
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16",
        "float16", "float32", "float64", "complex64", "complex128",
    ),
}
# JAX counts ml_dtypes' narrow types too (ferrax computes with none of them).
_NARROW_INTS = ("int2", "int4")
_NARROW_UINTS = ("uint2", "uint4")
_NARROW_FLOATS = tuple(
    n for n in ("float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
                "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(ml_dtypes, n)
)


def _kind_dtypes(kind: str) -> set[np.dtype[Any]]:
    names = list(_KINDS[kind])
    if kind in ("signed integer", "integral", "numeric"):
        names += [n for n in _NARROW_INTS if hasattr(ml_dtypes, n)]
    if kind in ("unsigned integer", "integral", "numeric"):
        names += [n for n in _NARROW_UINTS if hasattr(ml_dtypes, n)]
    if kind in ("real floating", "numeric"):
        names += list(_NARROW_FLOATS)
    return {np.dtype(getattr(ml_dtypes, n) if hasattr(ml_dtypes, n) and not hasattr(np, n) else n) for n in names}


def isdtype(dtype: DTypeLike, kind: str | DTypeLike | tuple[str | DTypeLike, ...]) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the Array API's kind names
    ('bool', 'signed integer', 'unsigned integer', 'integral', 'real floating',
    'complex floating', 'numeric'), or a tuple of them."""
    the_dtype = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    options: set[np.dtype[Any]] = set()
    for k in kinds:
        if isinstance(k, str) and k in _KINDS:
            options |= _kind_dtypes(k)
            continue
        try:
            options.add(np.dtype(k))
        except TypeError as e:
            if isinstance(k, str):
                raise ValueError(
                    f"Unrecognized kind={k!r} expected one of {list(_KINDS)}, or a compatible input for jnp.dtype(), "
                    f"at {user_location()}"
                ) from None
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}, at {user_location()}") from e
    return the_dtype in options


def iscomplex(x: ArrayLike) -> Array:
    """Whether each element has a nonzero imaginary part: false everywhere (ferrax's
    arrays are real)."""
    arr = as_array(x, "iscomplex")
    # JAX compares the (weak) imaginary part with 0: a Python scalar gives a weak bool.
    return convert(lax.full_like(arr, False, dtype=np.bool_), np.dtype(np.bool_), builtins.bool(arr.weak_type))


def isreal(x: ArrayLike) -> Array:
    """Whether each element has a zero imaginary part: true everywhere (ferrax's arrays
    are real)."""
    arr = as_array(x, "isreal")
    return convert(lax.full_like(arr, True, dtype=np.bool_), np.dtype(np.bool_), builtins.bool(arr.weak_type))


def iscomplexobj(x: Any) -> builtins.bool:
    """Whether ``x`` is of a complex type (Python or NumPy complex values are)."""
    if isinstance(x, (complex, np.complexfloating)):
        return True
    if x is None or isinstance(x, (builtins.bool, int, float, str, np.generic)):
        return False
    try:
        kind = x.dtype.type
    except AttributeError:
        kind = np.asarray(x).dtype.type
    return builtins.bool(np.issubdtype(kind, np.complexfloating))


def isrealobj(x: Any) -> builtins.bool:
    """``not iscomplexobj(x)``."""
    return not iscomplexobj(x)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array:
    """Whether ``a1`` and ``a2`` are equal everywhere once broadcast together (a
    :class:`ferrax.ShapeError`, a TypeError, if they do not broadcast, as in JAX)."""
    x, y = fnp.asarray(a1), fnp.asarray(a2)
    # JAX 0.10.2 means to answer False for shapes that do not broadcast, but its equal
    # raises a TypeError there, which it lets through: so does ferrax (ShapeError is one).
    return fnp.all(fnp.equal(x, y))


def printoptions(*args: Any, **kwargs: Any) -> Any:
    """NumPy's ``printoptions`` context manager (ferrax's arrays print with them)."""
    return np.printoptions(*args, **kwargs)


def get_printoptions() -> dict[str, Any]:
    """NumPy's print options."""
    return dict(np.get_printoptions())


def set_printoptions(*args: Any, **kwargs: Any) -> None:
    """Set NumPy's print options (ferrax's arrays print with them)."""
    np.set_printoptions(*args, **kwargs)


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """NumPy's ``load``; an array read (bfloat16 ones too, which NumPy saves as 2-byte
    voids) becomes a ferrax array, other results are NumPy's."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(ml_dtypes.bfloat16)
        try:
            return fnp.asarray(out)
        except (TypeError, ValueError):  # a dtype ferrax has no use for: NumPy's array
            return out
    return out


save = np.save
"""NumPy's ``save`` (``np.asarray`` of a ferrax array is its value)."""
savez = np.savez
"""NumPy's ``savez``."""


def frombuffer(buffer: Any, dtype: DTypeLike = float, count: int = -1, offset: int = 0) -> Array:
    """An array of the values in ``buffer`` (NumPy's ``frombuffer``)."""
    return fnp.asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: DTypeLike = float, count: int = -1, *, sep: str) -> Array:
    """An array of the values in the text ``string`` separated by ``sep``."""
    return fnp.asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(*args: Any, **kwargs: Any) -> Array:
    """Not implemented, as in JAX: consuming an iterator is a side effect; use
    ``asarray(np.fromiter(...))``."""
    raise NotImplementedError(
        "jnp.fromiter() is not implemented because it may be non-pure and thus unsafe for use with JIT and other "
        f"transformations. Consider using jnp.asarray(np.fromiter(...)) instead, at {user_location()}"
    )


def fromfile(*args: Any, **kwargs: Any) -> Array:
    """Not implemented, as in JAX: reading a file is a side effect; use
    ``asarray(np.fromfile(...))``."""
    raise NotImplementedError(
        "jnp.fromfile() is not implemented because it may be non-pure and thus unsafe for use with JIT and other "
        f"transformations. Consider using jnp.asarray(np.fromfile(...)) instead, at {user_location()}"
    )


def from_dlpack(x: Any, /, *, device: Any = None, copy: builtins.bool | None = None) -> Array:
    """An array from any object with ``__dlpack__`` (through NumPy's ``from_dlpack``)."""
    if device is not None:
        raise NotImplementedError(f"from_dlpack: device= is not supported, at {user_location()}")
    return fnp.asarray(np.from_dlpack(x, copy=copy))

