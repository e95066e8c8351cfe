"""Scalar types (``float32``, ``int8``, ``bool_``, ...): casts that are also dtypes.

As ``jax.numpy``'s, each is a class whose call is a cast returning a
:class:`ferrax.Array` (``float32(x)`` is ``asarray(x, dtype=float32)``, so it works on
traced values under ``jit``), while everything that takes a dtype takes it too:
``zeros(3, float32)``, ``x.astype(int8)``, ``np.dtype(float32)``, ``float32.dtype``,
``x.dtype == float32``. ``isinstance(v, float32)`` asks about NumPy's scalar type (an
array is not an instance), and the class compares and hashes equal to NumPy's type, so
tables keyed by NumPy types find it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ferrax import dtypes
from ferrax._array import Array

__all__ = [
    "ScalarType",
    "bfloat16",
    "bool_",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]


class ScalarType(type):
    """The type of ``ferrax.numpy``'s scalar types: calling one casts to its dtype."""

    dtype: np.dtype[Any]

    @property
    def __numpy_dtype__(cls) -> np.dtype[Any]:
        # NumPy's protocol (2.4+) for objects that name a dtype; older NumPy reads .dtype.
        return cls.dtype

    def __call__(cls, x: Any) -> Array:
        from ferrax.numpy._creation import asarray

        return asarray(x, dtype=cls.dtype)

    def __eq__(cls, other: object) -> bool:
        return cls is other or bool(cls.dtype.type == other)

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'ferrax.numpy.{cls.__name__}'>"


def _scalar_type(name: str, dtype: np.dtype[Any]) -> ScalarType:
    cls = ScalarType(name, (), {"dtype": dtype, "__slots__": ()})
    cls.__module__ = "ferrax.numpy"
    cls.__doc__ = (
        f"The {name} scalar type: ``{name}(x)`` is ``x`` cast to an array of dtype {name}; "
        f"usable wherever a dtype is."
    )
    return cls


bool_ = _scalar_type("bool_", np.dtype(np.bool_))
int8 = _scalar_type("int8", np.dtype(np.int8))
int16 = _scalar_type("int16", np.dtype(np.int16))
int32 = _scalar_type("int32", np.dtype(np.int32))
int64 = _scalar_type("int64", np.dtype(np.int64))
uint8 = _scalar_type("uint8", np.dtype(np.uint8))
uint16 = _scalar_type("uint16", np.dtype(np.uint16))
uint32 = _scalar_type("uint32", np.dtype(np.uint32))
uint64 = _scalar_type("uint64", np.dtype(np.uint64))
float16 = _scalar_type("float16", np.dtype(np.float16))
float32 = _scalar_type("float32", np.dtype(np.float32))
float64 = _scalar_type("float64", np.dtype(np.float64))
bfloat16 = _scalar_type("bfloat16", dtypes.bfloat16)
