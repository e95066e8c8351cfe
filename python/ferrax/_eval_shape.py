"""``eval_shape`` and ``ShapeDtypeStruct``: the shapes and dtypes a function returns,
found by tracing it (nothing is computed or compiled), as ``jax.eval_shape``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ferrax import _ir, dtypes
from ferrax._core import Tracer, aval_of, user_location
from ferrax._staging import trace_to_jaxpr
from ferrax.sharding import Sharding
from ferrax.tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["ShapeDtypeStruct", "eval_shape"]


class ShapeDtypeStruct:
    """The shape, dtype, weak type and (optionally) sharding of an array, without its
    values: what :func:`eval_shape` returns, and an argument it accepts in place of an
    array. Immutable, hashable and comparable."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    shape: tuple[int, ...]
    dtype: Any  # a NumPy dtype, or ferrax.random's key dtype
    sharding: Sharding | None
    weak_type: bool

    def __init__(
        self, shape: Sequence[int], dtype: Any, *, sharding: Sharding | None = None, weak_type: bool = False
    ) -> None:
        object.__setattr__(self, "shape", tuple(shape))
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        object.__setattr__(self, "dtype", dtype if dtypes.is_key(dtype) else np.dtype(dtype))
        if sharding is not None and not isinstance(sharding, Sharding):
            raise ValueError(
                f"sharding should be an instance of `ferrax.sharding.Sharding`. Got {sharding} of "
                f"type {type(sharding)}."
            )
        object.__setattr__(self, "sharding", sharding)
        object.__setattr__(self, "weak_type", weak_type)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, name, object()) == value:
            return
        raise RuntimeError(f"Cannot reassign attributes ({name}) of immutable ShapeDtypeStruct objects")

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @classmethod
    def like(cls, x: Any) -> ShapeDtypeStruct:
        """The struct of an array-like (its sharding if it is committed to one)."""
        aval = _aval(x, 0)
        sharding = getattr(x, "sharding", None) if getattr(x, "committed", False) else None
        return cls(aval.shape, aval.dtype, sharding=sharding, weak_type=aval.weak_type)

    def update(self, **kwargs: Any) -> ShapeDtypeStruct:
        """A copy with some of ``shape``, ``dtype``, ``sharding``, ``weak_type`` replaced."""
        fields = {"shape": self.shape, "dtype": self.dtype, "sharding": self.sharding, "weak_type": self.weak_type}
        unknown = set(kwargs) - set(fields)
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update got unexpected keyword arguments {sorted(unknown)}")
        fields.update(kwargs)
        shape, dtype = fields.pop("shape"), fields.pop("dtype")
        return ShapeDtypeStruct(shape, dtype, **fields)

    def __len__(self) -> int:
        try:
            return self.shape[0]
        except IndexError:
            raise TypeError("len() of unsized object") from None

    def __repr__(self) -> str:
        sharding = f", sharding={self.sharding}" if self.sharding is not None else ""
        weak = f", weak_type={self.weak_type}" if self.weak_type else ""
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype.name}{sharding}{weak})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShapeDtypeStruct):
            return False
        return (self.shape, self.dtype, self.sharding, self.weak_type) == (
            other.shape,
            other.dtype,
            other.sharding,
            other.weak_type,
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))


def _key_data_struct(x: Any) -> Any:
    """A struct of typed keys as a key array around it (what functions taking keys see)."""
    from ferrax.random._keys import KeyArray

    if isinstance(x, ShapeDtypeStruct) and dtypes.is_key(x.dtype):
        return KeyArray._wrap(x)
    return x


def _key_struct(x: Any) -> Any:
    """A key array around a struct as the struct of typed keys."""
    from ferrax.random._keys import KeyArray

    if isinstance(x, KeyArray) and isinstance(x._keys, ShapeDtypeStruct):
        return x._keys
    return x


def _aval(x: Any, index: int) -> _ir.ShapedArray:
    if isinstance(x, ShapeDtypeStruct) or (hasattr(x, "dtype") and dtypes.is_key(x.dtype)):
        if dtypes.is_key(x.dtype):
            return _ir.ShapedArray(tuple(x.shape), dtypes.key_fry, False)
        return _ir.ShapedArray(x.shape, dtypes.canonical(x.dtype), bool(x.weak_type))
    if not isinstance(x, Tracer) and not isinstance(x, (np.ndarray, np.generic)) and hasattr(x, "shape") and hasattr(x, "dtype"):
        # Any other object with a shape and a dtype (jax.ShapeDtypeStruct, ...).
        return _ir.ShapedArray(tuple(x.shape), dtypes.canonical(np.dtype(x.dtype)), bool(getattr(x, "weak_type", False)))
    try:
        return aval_of(x)
    except TypeError:
        raise TypeError(
            f"eval_shape: argument leaf {index}, {x!r:.60} of type {type(x).__name__}, is not an array "
            f"or a ShapeDtypeStruct, at {user_location()}"
        ) from None


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes, dtypes and weak types of ``fun(*args, **kwargs)`` as a pytree of
    :class:`ShapeDtypeStruct`, found by tracing ``fun`` (no computation, no
    compilation). The leaves of ``args`` and ``kwargs`` are arrays, Python scalars or
    :class:`ShapeDtypeStruct`s."""
    from ferrax.random._keys import KeyArray

    is_key = lambda x: isinstance(x, (KeyArray, ShapeDtypeStruct))  # noqa: E731
    flat, in_tree = tree_flatten(tree_map(_key_data_struct, (args, kwargs), is_leaf=is_key))
    avals = [_aval(x, i) for i, x in enumerate(flat)]

    def call(a: tuple[Any, ...], k: dict[str, Any]) -> Any:
        return fun(*a, **k)

    closed, out_tree = trace_to_jaxpr(call, avals, in_tree)
    outs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
    return tree_map(_key_struct, tree_unflatten(out_tree, outs), is_leaf=is_key)
