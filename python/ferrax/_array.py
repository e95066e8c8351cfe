"""``ferrax.Array``: the type of every array value ferrax gives back.

Eager results, traced values (tracers) and, later, device arrays are all ``Array``s.
Every operator is declared here, once, and implemented by :mod:`ferrax.numpy`, so
``x + 1`` means ``ferrax.numpy.add(x, 1)`` whichever kind of array ``x`` is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from ferrax import numpy as _fnp
else:
    # ferrax.numpy implements the operators; it binds itself here when imported (it
    # imports this module, so this one cannot import it).
    _fnp = None

__all__ = ["Array"]


class Array:
    """An n-dimensional array: eager, traced or on a device."""

    __slots__ = ()
    __array_priority__: ClassVar[int] = 100
    # Comparisons return arrays, so arrays are not hashable (as in NumPy and JAX).
    __hash__: ClassVar[None]  # type: ignore[assignment]

    @property
    def shape(self) -> tuple[int, ...]:
        """The dimensions."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type."""
        raise NotImplementedError

    @property
    def weak_type(self) -> bool:
        """Whether the dtype is weak (came from a Python scalar)."""
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    # Conversions to Python and NumPy values (concretization errors for traced arrays).
    def __bool__(self) -> bool:
        raise NotImplementedError

    def __int__(self) -> int:
        raise NotImplementedError

    def __float__(self) -> float:
        raise NotImplementedError

    def __index__(self) -> int:
        raise NotImplementedError

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        raise NotImplementedError

    def tolist(self) -> Any:
        """The value as nested Python lists (a Python scalar for a 0-d array)."""
        raise NotImplementedError

    def item(self) -> Any:
        """The value of a one-element array as a Python scalar."""
        raise NotImplementedError

    # Arithmetic.
    def __add__(self, other: Any) -> Array:
        return _fnp.add(self, other)

    def __radd__(self, other: Any) -> Array:
        return _fnp.add(other, self)

    def __sub__(self, other: Any) -> Array:
        return _fnp.subtract(self, other)

    def __rsub__(self, other: Any) -> Array:
        return _fnp.subtract(other, self)

    def __mul__(self, other: Any) -> Array:
        return _fnp.multiply(self, other)

    def __rmul__(self, other: Any) -> Array:
        return _fnp.multiply(other, self)

    def __truediv__(self, other: Any) -> Array:
        return _fnp.true_divide(self, other)

    def __rtruediv__(self, other: Any) -> Array:
        return _fnp.true_divide(other, self)

    def __floordiv__(self, other: Any) -> Array:
        return _fnp.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Array:
        return _fnp.floor_divide(other, self)

    def __mod__(self, other: Any) -> Array:
        return _fnp.remainder(self, other)

    def __rmod__(self, other: Any) -> Array:
        return _fnp.remainder(other, self)

    def __pow__(self, other: Any) -> Array:
        return _fnp.power(self, other)

    def __rpow__(self, other: Any) -> Array:
        return _fnp.power(other, self)

    def __matmul__(self, other: Any) -> Array:
        return _fnp.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Array:
        return _fnp.matmul(other, self)

    def __neg__(self) -> Array:
        return _fnp.negative(self)

    def __pos__(self) -> Array:
        return self

    def __abs__(self) -> Array:
        return _fnp.abs(self)

    # Bitwise (logical for bools), as in NumPy: ``~5`` is -6.
    def __and__(self, other: Any) -> Array:
        return _fnp.bitwise_and(self, other)

    def __rand__(self, other: Any) -> Array:
        return _fnp.bitwise_and(other, self)

    def __or__(self, other: Any) -> Array:
        return _fnp.bitwise_or(self, other)

    def __ror__(self, other: Any) -> Array:
        return _fnp.bitwise_or(other, self)

    def __invert__(self) -> Array:
        return _fnp.invert(self)

    # Comparisons.
    def __lt__(self, other: Any) -> Array:
        return _fnp.less(self, other)

    def __le__(self, other: Any) -> Array:
        return _fnp.less_equal(self, other)

    def __gt__(self, other: Any) -> Array:
        return _fnp.greater(self, other)

    def __ge__(self, other: Any) -> Array:
        return _fnp.greater_equal(self, other)

    def __eq__(self, other: Any) -> Array:  # type: ignore[override]
        return _fnp.equal(self, other)

    def __ne__(self, other: Any) -> Array:  # type: ignore[override]
        return _fnp.not_equal(self, other)

    # Indexing.
    def __getitem__(self, index: Any) -> Array:
        return _fnp.getitem(self, index)

    @property
    def at(self) -> _IndexUpdateHelper:
        """Functional updates: ``x.at[i].set(v)``, ``x.at[i].add(v)``."""
        return _IndexUpdateHelper(self)

    # Methods.
    @property
    def T(self) -> Array:
        """The transpose (axes reversed)."""
        return _fnp.transpose(self)

    def astype(self, dtype: Any) -> Array:
        """The array converted to ``dtype``."""
        return _fnp.astype(self, dtype)

    def reshape(self, *shape: Any) -> Array:
        """The array with a new shape (one -1 is inferred)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            return _fnp.reshape(self, tuple(shape[0]))
        return _fnp.reshape(self, shape)

    def transpose(self, *axes: int) -> Array:
        """The array with permuted axes (reversed if none are given)."""
        return _fnp.transpose(self, axes or None)

    def squeeze(self, axis: int | tuple[int, ...] | None = None) -> Array:
        """The array without (the given) size-1 axes."""
        return _fnp.squeeze(self, axis)

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
        """Sum over ``axis`` (all axes by default)."""
        return _fnp.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
        """Mean over ``axis`` (all axes by default)."""
        return _fnp.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
        """Maximum over ``axis`` (all axes by default)."""
        return _fnp.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
        """Minimum over ``axis`` (all axes by default)."""
        return _fnp.min(self, axis=axis, keepdims=keepdims)

    def prod(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
        """Product over ``axis`` (all axes by default)."""
        return _fnp.prod(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: int | None = None) -> Array:
        """Index of the maximum (over the flattened array by default)."""
        return _fnp.argmax(self, axis=axis)

    def dot(self, other: Any) -> Array:
        """``ferrax.numpy.dot(self, other)``."""
        return _fnp.dot(self, other)


class _IndexUpdateHelper:
    """``x.at``: indexing it gives the functional-update view ``x.at[index]``."""

    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self._array, index)

    def __repr__(self) -> str:
        return "x.at (index it: x.at[index].set(value), .add(value), .get(), ...)"


class _IndexUpdateRef:
    """``x.at[index]``: each method returns a new array, ``x`` is unchanged.

    ``mode`` says what an index out of range does: updates are dropped by default
    (``"fill"``/``"drop"``) or clamped (``"clip"``); ``get`` clamps by default or gives
    ``fill_value`` with ``mode="fill"``. ``indices_are_sorted`` and ``unique_indices``
    are promises about ``index`` (not checked).
    """

    __slots__ = ("_array", "_index")

    def __init__(self, array: Array, index: Any) -> None:
        self._array = array
        self._index = index

    def __repr__(self) -> str:
        return f"x.at[{self._index!r}]"

    def get(
        self,
        *,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
        mode: Any = None,
        fill_value: Any = None,
    ) -> Array:
        """``x[index]``, with ``mode`` and ``fill_value`` for indices out of range."""
        return _fnp.getitem(
            self._array,
            self._index,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
            fill_value=fill_value,
        )

    def _update(self, op: str, values: Any, indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Array:
        return _fnp.index_update(
            self._array,
            self._index,
            values,
            op,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
        )

    def set(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] = values``."""
        return self._update("set", values, indices_are_sorted, unique_indices, mode)

    def add(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] += values`` (repeated indices add up)."""
        return self._update("add", values, indices_are_sorted, unique_indices, mode)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] -= values``."""
        return self._update("subtract", values, indices_are_sorted, unique_indices, mode)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] *= values``."""
        return self._update("multiply", values, indices_are_sorted, unique_indices, mode)

    mul = multiply

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] /= values`` (as ``ferrax.numpy.divide``: integers give floats)."""
        divisor = _fnp.index_update(
            _fnp.ones_like(self._array),
            self._index,
            values,
            "multiply",
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
        )
        return _fnp.divide(self._array, divisor)

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] **= values``."""
        exponent = _fnp.index_update(
            _fnp.ones_like(self._array),
            self._index,
            values,
            "multiply",
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
        )
        return _fnp.power(self._array, exponent)

    def min(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] = minimum(x[index], values)``."""
        return self._update("min", values, indices_are_sorted, unique_indices, mode)

    def max(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] = maximum(x[index], values)``."""
        return self._update("max", values, indices_are_sorted, unique_indices, mode)

    def apply(self, func: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Array:
        """``x`` with ``x[index] = func(x[index])``: ``func`` gets the array of indexed
        values, so it should be elementwise, and is applied once per element."""
        return _fnp.index_apply(
            self._array,
            self._index,
            func,
            indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices,
            mode=mode,
        )
