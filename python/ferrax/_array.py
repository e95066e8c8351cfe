"""``ferrax.Array``: the type of every array value ferrax gives back.

Eager results, jit results (arrays on the device) and traced values (tracers) are all
``Array``s: ``isinstance(x, ferrax.Array)`` holds for each, and messages name them
``ferrax.Array`` whatever class implements them. Every operator and method is declared
here, once, and implemented by :mod:`ferrax.numpy`, so ``x + 1`` means
``ferrax.numpy.add(x, 1)`` whichever kind of array ``x`` is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np

if TYPE_CHECKING:
    from ferrax import numpy as _fnp
    from ferrax._runtime import Shard
    from ferrax.sharding import Sharding
else:
    # ferrax.numpy implements the operators; it binds itself here when imported (it
    # imports this module, so this one cannot import it).
    _fnp = None

__all__ = ["Array", "type_name"]

_Axis = int | tuple[int, ...] | None


def type_name(x: object) -> str:
    """The name of ``x``'s type for messages: ``ferrax.Array`` for every array class."""
    return "ferrax.Array" if isinstance(x, Array) else type(x).__name__


def _at_user_line() -> str:
    """``", at file:line: source"`` of the user's code, for messages."""
    from ferrax._core import user_location

    return f", at {user_location()}"


def _no_out(name: str, out: object) -> None:
    # NumPy's functions pass ``out=None`` to the methods they dispatch to; arrays are
    # immutable, so any other ``out`` is refused (as JAX refuses it).
    if out is not None:
        raise NotImplementedError(
            f"The 'out' argument to {name} is not supported (ferrax arrays are immutable){_at_user_line()}"
        )


def _index_text(index: Any) -> str:
    """``index`` as it would be written between brackets (for messages)."""
    items = index if isinstance(index, tuple) else (index,)
    parts = []
    for item in items:
        if isinstance(item, slice):
            text = ":".join("" if v is None else str(v) for v in (item.start, item.stop, item.step))
            parts.append(text[:-1] if item.step is None else text)
        elif item is Ellipsis:
            parts.append("...")
        elif isinstance(item, (bool, int, float)) or item is None:
            parts.append(repr(item))
        else:
            parts.append("idx")
    return ", ".join(parts) if parts else "()"


def _reconstruct(value: np.ndarray[Any, Any], weak_type: bool) -> Array:
    """Unpickles an array (the inverse of :meth:`Array.__reduce__`)."""
    from ferrax._core import ConcreteArray

    return ConcreteArray(value, weak_type)


def array_repr(value: np.ndarray[Any, Any], weak_type: bool) -> str:
    """JAX's ``repr`` of an array with this value: ``Array([[1., 2.], [3., 4.]],
    dtype=float32)`` with each row on its line, aligned under the first, and
    ``weak_type=True`` when weak."""
    prefix = "Array("
    dtype_text = f"dtype={value.dtype.name}" + (", weak_type=True" if weak_type else "")
    if value.size == 0:
        body = f"[], shape={value.shape}"
        return f"{prefix}{body}, {dtype_text})"
    width = int(np.get_printoptions()["linewidth"])
    body = np.array2string(value, prefix=prefix, suffix=",", separator=", ", max_line_width=width)
    # Put the dtype on the last line if it fits there, else aligned under the rows.
    last_line = len(body) - body.rfind("\n") + 1
    sep = " " if last_line + len(dtype_text) + 2 <= width else " " * len(prefix)
    return f"{prefix}{body},{sep}{dtype_text})"


class Array:
    """An n-dimensional array: eager, traced or on a device.

    Arrays are immutable: update them with ``x.at[index].set(value)``.
    """

    __slots__ = ()
    __array_priority__: ClassVar[int] = 100
    # Comparisons return arrays, so arrays are not hashable (as in NumPy and JAX).
    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Python's own messages name an object's type by ``__name__`` ("unhashable
        # type: ...", "... object is not callable"): every implementation class (eager,
        # device, each tracer) answers to the public name there. ``__qualname__`` stays,
        # so ``repr(type(x))`` still shows the real class when debugging.
        cls.__name__ = "ferrax.Array"
        _refuse_setting(cls)

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

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return int(self.dtype.itemsize)

    @property
    def nbytes(self) -> int:
        """Bytes of all the elements."""
        return self.size * self.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of unsized object (a 0-d ferrax.Array){_at_user_line()}")
        return self.shape[0]

    def __iter__(self) -> Iterator[Array]:
        if not self.shape:
            raise TypeError(f"iteration over a 0-d array{_at_user_line()}")
        from ferrax._core import Tracer

        if isinstance(self, Tracer):
            # As JAX's tracers: one `index_in_dim` per row (a slice with unit strides,
            # then a squeeze).
            from ferrax._lax.convenience import index_in_dim

            return (index_in_dim(self, i, 0, keepdims=False) for i in range(self.shape[0]))
        return (self[i] for i in range(self.shape[0]))

    if not TYPE_CHECKING:
        # Run time only: declared to mypy, they would hide misspelled attributes and
        # allow ``x[i] = v``.

        def __getattr__(self, name: str) -> NoReturn:
            # Only reached for attributes no class defines: say which type the user
            # holds, never the implementation class (ConcreteArray, DeviceArray, a tracer).
            raise AttributeError(f"ferrax.Array has no attribute '{name}'")

        def __setitem__(self, index: Any, value: Any) -> NoReturn:
            from ferrax._core import user_location

            idx = _index_text(index)
            val = repr(value) if isinstance(value, (bool, int, float)) else "y"
            raise TypeError(
                "ferrax arrays are immutable and do not support in-place item assignment: "
                f"instead of x[{idx}] = {val}, use x = x.at[{idx}].set({val}) (or another "
                f".at[] method: add, multiply, min, max, ...), at {user_location()}"
            )

        def __delitem__(self, index: Any) -> NoReturn:
            from ferrax._core import user_location

            raise TypeError(
                "ferrax arrays are immutable and do not support item deletion "
                f"(ferrax.numpy.delete is not available), at {user_location()}"
            )

    # Conversions to Python and NumPy values (concretization errors for traced arrays).
    def __bool__(self) -> bool:
        raise NotImplementedError

    def __int__(self) -> int:
        raise NotImplementedError

    def __float__(self) -> float:
        raise NotImplementedError

    def __index__(self) -> int:
        raise NotImplementedError

    def __complex__(self) -> complex:
        return complex(self.__float__())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        raise NotImplementedError

    def __format__(self, format_spec: str) -> str:
        if not format_spec:
            return str(self)
        # As NumPy (and JAX) do: a 0-d array formats as its scalar (a concretization
        # error for traced values).
        value = np.asarray(self)
        return format(value[()] if value.ndim == 0 else value, format_spec)

    def __reduce__(self) -> tuple[Any, tuple[np.ndarray[Any, Any], bool]]:
        # Pickling goes through host memory; unpickling gives an eager array.
        return (_reconstruct, (np.array(self, copy=True), self.weak_type))

    def __copy__(self) -> Array:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> Array:
        return self.copy()

    def tolist(self) -> Any:
        """The value as nested Python lists (a Python scalar for a 0-d array)."""
        raise NotImplementedError

    def item(self, *args: int) -> Any:
        """The value of a one-element array (or of one element) as a Python scalar."""
        raise NotImplementedError

    def copy(self) -> Array:
        """A copy of the array (the ``copy`` primitive when traced, as JAX stages it)."""
        from ferrax._lax.structural import copy

        return copy(self)

    def block_until_ready(self) -> Array:
        """Waits until the value is computed (at once for eager arrays); returns it."""
        return self

    # Layout over devices (arrays on the device override these; eager host values live
    # on the default device, as if put there).
    @property
    def sharding(self) -> Sharding:
        """How the array is laid out over devices."""
        from ferrax._runtime import backend
        from ferrax.sharding import SingleDeviceSharding

        return SingleDeviceSharding(backend().device)

    @property
    def committed(self) -> bool:
        """Whether the array was placed on its devices on purpose."""
        return False

    @property
    def is_fully_replicated(self) -> bool:
        """Whether every device holding the array holds all of it."""
        return self.sharding.is_fully_replicated_for(self.ndim)

    @property
    def addressable_shards(self) -> list[Shard]:
        """This process's parts of the array, one per device."""
        from ferrax._runtime import device_put

        return device_put(self, self.sharding).addressable_shards

    def devices(self) -> set[Any]:
        """The devices holding the array."""
        return self.sharding.device_set

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

    def __divmod__(self, other: Any) -> tuple[Array, Array]:
        return _fnp.divmod(self, other)

    def __rdivmod__(self, other: Any) -> tuple[Array, Array]:
        return _fnp.divmod(other, self)

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

    def __round__(self, ndigits: int | None = None) -> Array:
        # As for a Python float, round(x) is an integer (int32 here), round(x, n) a float.
        out = _fnp.round(self, ndigits or 0)
        return out.astype(int) if ndigits is None else out

    # Bitwise (logical for bools), as in NumPy: ``~5`` is -6.
    def __and__(self, other: Any) -> Array:
        return _fnp.bitwise_and(self, other)

    def __rand__(self, other: Any) -> Array:
        return _fnp.bitwise_and(other, self)

    def __or__(self, other: Any) -> Array:
        return _fnp.bitwise_or(self, other)

    def __ror__(self, other: Any) -> Array:
        return _fnp.bitwise_or(other, self)

    def __xor__(self, other: Any) -> Array:
        return _fnp.bitwise_xor(self, other)

    def __rxor__(self, other: Any) -> Array:
        return _fnp.bitwise_xor(other, self)

    def __lshift__(self, other: Any) -> Array:
        return _fnp.left_shift(self, other)

    def __rlshift__(self, other: Any) -> Array:
        return _fnp.left_shift(other, self)

    def __rshift__(self, other: Any) -> Array:
        return _fnp.right_shift(self, other)

    def __rrshift__(self, other: Any) -> Array:
        return _fnp.right_shift(other, self)

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

    # Methods: NumPy's, with JAX's signatures (``out`` is accepted and must be None, as
    # NumPy's functions pass it: ``np.sum(x)`` calls ``x.sum(axis=None, dtype=None,
    # out=None)``).
    @property
    def T(self) -> Array:
        """The transpose (axes reversed)."""
        return _fnp.transpose(self)

    def astype(self, dtype: Any) -> Array:
        """The array converted to ``dtype``."""
        return _fnp.astype(self, dtype)

    def reshape(self, *shape: Any, order: str = "C", copy: bool | None = None) -> Array:
        """The array with a new shape (one -1 is inferred); ``x.reshape(2, 3)`` and
        ``x.reshape((2, 3))`` alike; ``order="F"`` reads and writes column-major."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            return _fnp.reshape(self, tuple(shape[0]), order)
        return _fnp.reshape(self, shape, order)

    def flatten(self, order: str = "C") -> Array:
        """The array as one dimension (row-major; column-major for ``order="F"``)."""
        return _fnp.ravel(self, order)

    def ravel(self, order: str = "C") -> Array:
        """The array as one dimension (row-major; column-major for ``order="F"``)."""
        return _fnp.ravel(self, order)

    def transpose(self, *axes: Any) -> Array:
        """The array with permuted axes (reversed if none are given):
        ``x.transpose(2, 0, 1)`` and ``x.transpose((2, 0, 1))`` alike."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            return _fnp.transpose(self, None if axes[0] is None else tuple(axes[0]))
        return _fnp.transpose(self, axes or None)

    def swapaxes(self, axis1: int, axis2: int) -> Array:
        """The array with two axes exchanged."""
        return _fnp.swapaxes(self, axis1, axis2)

    def squeeze(self, axis: _Axis = None) -> Array:
        """The array without (the given) size-1 axes."""
        return _fnp.squeeze(self, axis)

    def repeat(self, repeats: Any, axis: int | None = None, *, total_repeat_length: int | None = None) -> Array:
        """Each element repeated ``repeats`` times along ``axis`` (of the flattened
        array by default)."""
        return _fnp.repeat(self, repeats, axis, total_repeat_length=total_repeat_length)

    def take(
        self,
        indices: Any,
        axis: int | None = None,
        out: None = None,
        mode: str | None = None,
        unique_indices: bool = False,
        indices_are_sorted: bool = False,
        fill_value: Any = None,
    ) -> Array:
        """Elements at ``indices`` along ``axis`` (of the flattened array by default):
        ``ferrax.numpy.take``."""
        _no_out("take", out)
        # Only the options given, as JAX's method forwards them.
        options: dict[str, Any] = {"axis": axis}
        if mode is not None:
            options["mode"] = mode
        if unique_indices:
            options["unique_indices"] = True
        if indices_are_sorted:
            options["indices_are_sorted"] = True
        if fill_value is not None:
            options["fill_value"] = fill_value
        return _fnp.take(self, indices, **options)

    def clip(self, min: Any = None, max: Any = None, out: None = None) -> Array:
        """The array limited to ``[min, max]`` (either may be None)."""
        _no_out("clip", out)
        return _fnp.clip(self, min, max)

    def round(self, decimals: int = 0, out: None = None) -> Array:
        """The array rounded to ``decimals`` decimals (halves to even)."""
        _no_out("round", out)
        return _fnp.round(self, decimals)

    def sum(
        self,
        axis: _Axis = None,
        dtype: Any = None,
        out: None = None,
        keepdims: bool = False,
        initial: Any = None,
        where: Any = None,
    ) -> Array:
        """Sum over ``axis`` (all axes by default)."""
        _no_out("sum", out)
        return _fnp.sum(self, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def prod(
        self,
        axis: _Axis = None,
        dtype: Any = None,
        out: None = None,
        keepdims: bool = False,
        initial: Any = None,
        where: Any = None,
    ) -> Array:
        """Product over ``axis`` (all axes by default)."""
        _no_out("prod", out)
        return _fnp.prod(self, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def mean(
        self, axis: _Axis = None, dtype: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None
    ) -> Array:
        """Mean over ``axis`` (all axes by default)."""
        _no_out("mean", out)
        return _fnp.mean(self, axis=axis, dtype=dtype, keepdims=keepdims, where=where)

    def var(
        self,
        axis: _Axis = None,
        dtype: Any = None,
        out: None = None,
        ddof: int = 0,
        keepdims: bool = False,
        *,
        where: Any = None,
        correction: int | float | None = None,
    ) -> Array:
        """Variance over ``axis`` (all axes by default), ``ddof`` degrees of freedom off."""
        _no_out("var", out)
        return _fnp.var(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, correction=correction)

    def std(
        self,
        axis: _Axis = None,
        dtype: Any = None,
        out: None = None,
        ddof: int = 0,
        keepdims: bool = False,
        *,
        where: Any = None,
        correction: int | float | None = None,
    ) -> Array:
        """Standard deviation over ``axis`` (all axes by default)."""
        _no_out("std", out)
        return _fnp.std(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, correction=correction)

    def max(
        self, axis: _Axis = None, out: None = None, keepdims: bool = False, initial: Any = None, where: Any = None
    ) -> Array:
        """Maximum over ``axis`` (all axes by default), at least ``initial`` if given."""
        _no_out("max", out)
        return _fnp.max(self, axis=axis, keepdims=keepdims, initial=initial, where=where)

    def min(
        self, axis: _Axis = None, out: None = None, keepdims: bool = False, initial: Any = None, where: Any = None
    ) -> Array:
        """Minimum over ``axis`` (all axes by default), at most ``initial`` if given."""
        _no_out("min", out)
        return _fnp.min(self, axis=axis, keepdims=keepdims, initial=initial, where=where)

    def any(self, axis: _Axis = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Array:
        """Whether any element over ``axis`` is true (nonzero)."""
        _no_out("any", out)
        return _fnp.any(self, axis=axis, keepdims=keepdims, where=where)

    def all(self, axis: _Axis = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Array:
        """Whether every element over ``axis`` is true (nonzero)."""
        _no_out("all", out)
        return _fnp.all(self, axis=axis, keepdims=keepdims, where=where)

    def argmax(self, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Array:
        """Index of the maximum (over the flattened array by default)."""
        _no_out("argmax", out)
        return _fnp.argmax(self, axis=axis, keepdims=bool(keepdims))

    def argmin(self, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Array:
        """Index of the minimum (over the flattened array by default)."""
        _no_out("argmin", out)
        return _fnp.argmin(self, axis=axis, keepdims=bool(keepdims))

    def cumsum(self, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
        """Cumulative sum along ``axis`` (of the flattened array by default)."""
        _no_out("cumsum", out)
        cumsum = getattr(_fnp, "cumsum", None)
        if cumsum is None:
            raise NotImplementedError(
                f"ferrax.numpy has no cumsum yet (it needs a cumulative-sum primitive){_at_user_line()}"
            )
        result: Array = cumsum(self, axis=axis, dtype=dtype)
        return result

    def dot(self, other: Any) -> Array:
        """``ferrax.numpy.dot(self, other)``."""
        return _fnp.dot(self, other)


_SETTING_HINTS = {"shape": " (use x = x.reshape(...))", "dtype": " (use x = x.astype(...))"}


def _refuse_setting(cls: type) -> None:
    """Gives the public properties of ``cls`` a setter that says arrays are immutable
    (Python's own message would name the implementation class)."""
    for name, attr in list(vars(cls).items()):
        if isinstance(attr, property) and attr.fset is None and not name.startswith("_"):

            def refuse(self: Array, value: Any, name: str = name) -> NoReturn:
                raise AttributeError(
                    f"ferrax.Array is immutable: its {name} cannot be set{_SETTING_HINTS.get(name, '')}"
                    f"{_at_user_line()}"
                )

            setattr(cls, name, attr.setter(refuse))


_refuse_setting(Array)


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
