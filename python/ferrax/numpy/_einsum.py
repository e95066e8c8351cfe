"""``einsum`` and ``einsum_path``: Einstein summation lowered to ``dot_general``,
reductions and transposes, as ``jax.numpy`` lowers it.

The contraction order is a path of pairwise contractions chosen before tracing (JAX asks
opt_einsum, which ferrax does not depend on): ``optimize='auto'`` searches every order
for up to four operands ('optimal': the fewest flops, counted as opt_einsum counts
them) and contracts greedily beyond ('greedy': at each step the pair whose result is
smallest relative to its operands); ``False`` contracts left to right; an explicit list
of index tuples is used as given. Each step sums the indices only one operand has,
takes diagonals of repeated indices, and contracts the pair with one ``dot_general``
(shared kept indices as batch dimensions), then transposes to the step's index order.
Operands keep their dtypes: ``dot_general`` accumulates in the result type (JAX's
``result_type``, weakly typed when every operand is weak, or
``preferred_element_type``), sums convert an operand that the result type widens.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ferrax import dtypes, lax
from ferrax._array import Array
from ferrax._core import aval_of, user_location
from ferrax.numpy._promotion import ArrayLike, DTypeLike, as_array, convert, operand_aval

__all__ = ["einsum", "einsum_path"]

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

# A step: (operand positions in the current list, indices summed away, "ab,bc->ac").
Step = tuple[tuple[int, ...], frozenset[str], str]


# ----------------------------------------------------------------------------- parsing


def _interleaved(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """``einsum(x, [0, 1], y, [1, 2], [0, 2])``: the subscripts string and operands."""
    output = args[-1] if len(args) % 2 == 1 else None
    pairs = args[:-1] if output is not None else args
    operands, specs = list(pairs[0::2]), list(pairs[1::2])

    def letters(spec: Sequence[Any]) -> str:
        out = ""
        for s in spec:
            if s is Ellipsis:
                out += "..."
            else:
                i = operator.index(s)
                if not 0 <= i < len(_LETTERS):
                    raise ValueError(f"einsum: subscript {i} is out of range [0, 52), at {user_location()}")
                out += _LETTERS[i]
        return out

    text = ",".join(letters(s) for s in specs)
    if output is not None:
        text += "->" + letters(output)
    return text, operands


def _parse(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Each operand's indices and the output's, ellipses replaced by unused letters
    (aligned from the right, as NumPy broadcasts)."""
    text = subscripts.replace(" ", "")
    if "->" in text:
        inputs_text, output_text = text.split("->", 1)
        explicit = True
    else:
        inputs_text, output_text, explicit = text, "", False
    inputs = inputs_text.split(",")
    if len(inputs) != len(shapes):
        raise ValueError(
            f"einsum: {len(inputs)} operand subscripts for {len(shapes)} operands, at {user_location()}"
        )
    for part in [*inputs, output_text]:
        # Any character but the syntax's is a label (as opt_einsum reads them).
        bad = [c for c in part.replace("...", "") if c in ".->"]
        if bad:
            raise ValueError(f"einsum: invalid subscript {bad[0]!r} in {subscripts!r}, at {user_location()}")
    used = set(text)
    spare = [c for c in _LETTERS if c not in used]
    ellipsis_rank = 0
    for part, shape in zip(inputs, shapes):
        if "..." in part:
            ellipsis_rank = max(ellipsis_rank, len(shape) - (len(part) - 3))
    ell = "".join(spare[:ellipsis_rank])
    parsed = []
    for part, shape in zip(inputs, shapes):
        if "..." in part:
            rank = len(shape) - (len(part) - 3)
            if rank < 0:
                raise ValueError(f"einsum: operand of shape {list(shape)} has too few axes for {part!r}, at {user_location()}")
            part = part.replace("...", ell[ellipsis_rank - rank :] if rank else "")
        if len(part) != len(shape):
            raise ValueError(
                f"einsum: operand subscripts {part!r} do not match an operand of {len(shape)} "
                f"dimensions (shape {list(shape)}), at {user_location()}"
            )
        parsed.append(part)
    if explicit:
        # Without "..." in the output, the broadcast axes are summed.
        output_text = output_text.replace("...", ell)
        for c in output_text:
            if output_text.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once, at {user_location()}")
            if not any(c in p for p in parsed):
                raise ValueError(f"einsum: output subscript {c!r} does not appear in the operands, at {user_location()}")
        output = output_text
    else:
        counts = Counter("".join(parsed))
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return parsed, output


def _sizes(inputs: list[str], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for names, shape in zip(inputs, shapes):
        for c, d in zip(names, shape):
            prev = sizes.get(c, 1)
            if prev != 1 and d != 1 and prev != d:
                raise ValueError(
                    f"einsum: size of label {c!r} for an operand ({d}) does not match earlier "
                    f"operands ({prev}), at {user_location()}"
                )
            sizes[c] = max(prev, d) if d != 1 else prev
    return sizes


# ------------------------------------------------------------------------------- paths


def _size(names: frozenset[str] | str, sizes: dict[str, int]) -> int:
    return math.prod(sizes[c] for c in names)


def _step_cost(
    operands: list[frozenset[str]], pair: tuple[int, ...], output: frozenset[str], sizes: dict[str, int]
) -> tuple[int, frozenset[str]]:
    """opt_einsum's flop count of contracting ``pair``, and the result's indices."""
    involved = frozenset().union(*(operands[i] for i in pair))
    rest = frozenset().union(*(operands[i] for i in range(len(operands)) if i not in pair), output)
    kept = involved & rest
    inner = involved != kept
    factor = max(1, len(pair) - 1) + (1 if inner else 0)
    return _size(involved, sizes) * factor, kept


def _contract(operands: list[frozenset[str]], pair: tuple[int, ...], kept: frozenset[str]) -> list[frozenset[str]]:
    return [o for i, o in enumerate(operands) if i not in pair] + [kept]


def _optimal(operands: list[frozenset[str]], output: frozenset[str], sizes: dict[str, int]) -> list[tuple[int, ...]]:
    best: list[Any] = [math.inf, []]

    def search(current: list[frozenset[str]], cost: int, path: list[tuple[int, ...]]) -> None:
        if cost >= best[0]:
            return
        if len(current) == 1:
            best[0], best[1] = cost, path
            return
        for pair in itertools.combinations(range(len(current)), 2):
            step, kept = _step_cost(current, pair, output, sizes)
            search(_contract(current, pair, kept), cost + step, [*path, pair])

    # At most four operands: at most 18 orders, searched in full.
    search(operands, 0, [])
    path: list[tuple[int, ...]] = best[1]
    return path


def _greedy(operands: list[frozenset[str]], output: frozenset[str], sizes: dict[str, int]) -> list[tuple[int, ...]]:
    current = list(operands)
    path: list[tuple[int, ...]] = []
    while len(current) > 1:
        choice: tuple[int, tuple[int, ...]] | None = None
        for pair in itertools.combinations(range(len(current)), 2):
            a, b = current[pair[0]], current[pair[1]]
            if not a & b:
                continue
            _, kept = _step_cost(current, pair, output, sizes)
            removed = _size(kept, sizes) - _size(a, sizes) - _size(b, sizes)
            if choice is None or removed < choice[0]:
                choice = (removed, pair)
        step: tuple[int, ...]
        if choice is None:
            # Only outer products left: the two smallest operands first.
            order = sorted(range(len(current)), key=lambda i: (_size(current[i], sizes), i))
            step = tuple(sorted(order[:2]))
        else:
            step = choice[1]
        _, kept = _step_cost(current, step, output, sizes)
        current = _contract(current, step, kept)
        path.append(step)
    return path


def _find_path(
    inputs: list[str], output: str, sizes: dict[str, int], optimize: Any
) -> list[tuple[int, ...]]:
    operands = [frozenset(s) for s in inputs]
    out = frozenset(output)
    n = len(inputs)
    if n == 1:
        return [(0,)]
    if isinstance(optimize, (list, tuple)):
        steps = [tuple(operator.index(i) for i in step) for step in optimize if step != "einsum_path"]
        remaining = n
        for step in steps:
            if not step or any(not 0 <= i < remaining for i in step) or len(set(step)) != len(step):
                raise ValueError(f"einsum: invalid contraction {step} in the path, at {user_location()}")
            remaining -= len(step) - 1
        if remaining != 1:
            raise ValueError(f"einsum: the path {list(steps)} does not contract every operand, at {user_location()}")
        return steps
    if optimize is False or optimize is None:
        return [(0, 1)] * (n - 1)
    if optimize is True or optimize == "optimal" or (optimize == "auto" and n <= 4):
        return _optimal(operands, out, sizes)
    if optimize in ("auto", "greedy"):
        return _greedy(operands, out, sizes)
    raise ValueError(
        f"einsum: optimize must be a bool, 'auto', 'greedy', 'optimal' or a path, got {optimize!r}, "
        f"at {user_location()}"
    )


def _steps(inputs: list[str], output: str, sizes: dict[str, int], path: list[tuple[int, ...]]) -> list[Step]:
    """The path as steps with their index strings: an intermediate's indices are in the
    order they first appear in its operands' (the positions taken from the right), the
    last step's are the output's (opt_einsum's convention, which JAX follows)."""
    current = list(inputs)
    steps: list[Step] = []
    for k, pair in enumerate(path):
        chosen = tuple(sorted(pair, reverse=True))
        taken = [current[i] for i in chosen]
        for i in chosen:
            current.pop(i)
        involved = set("".join(taken))
        rest = set("".join(current)) | set(output)
        if k == len(path) - 1:
            result = output
        else:
            joined = "".join(taken)
            result = "".join(sorted((c for c in involved if c in rest), key=joined.find))
        removed = frozenset(c for c in involved if c not in rest)
        steps.append((chosen, removed, ",".join(taken) + "->" + result))
        current.append(result)
    return steps


# ---------------------------------------------------------------------------- lowering


def _reduce_sum(x: Array, axes: Sequence[int], dtype: np.dtype[Any]) -> Array:
    """The sum over ``axes``, in ``dtype`` when promotion with it widens ``x``'s dtype
    (as JAX's einsum sums)."""
    promoted, _ = dtypes.promote([(x.dtype, aval_of(x).weak_type), (dtype, False)])
    if promoted != x.dtype:
        x = convert(x, dtype, False)
    if x.dtype == np.bool_:
        return lax.reduce_or(x, tuple(axes))
    return lax.reduce_sum(x, tuple(axes))


def _remove(names: str, drop: str | Sequence[str]) -> str:
    return "".join(c for c in names if c not in drop)


def _sum_unique(x: Array, names: str, uniques: Sequence[str], dtype: np.dtype[Any]) -> tuple[Array, str]:
    if not uniques:
        return x, names
    return _reduce_sum(x, [names.index(c) for c in uniques], dtype), _remove(names, uniques)


def _sum_repeats(x: Array, names: str, keep: str, dtype: np.dtype[Any]) -> tuple[Array, str]:
    """Diagonals of indices repeated in one operand: masked to where their positions
    agree, then summed away (all of them, or all but one if ``keep`` has the index)."""
    for c, count in Counter(names).items():
        if count < 2:
            continue
        axes = [i for i, n in enumerate(names) if n == c]
        # The diagonal mask over the repeated axes only, broadcast to the operand.
        base = tuple(x.shape[i] for i in axes)
        iotas = [lax.broadcasted_iota(np.uint32, base, i) for i in range(len(base))]
        eyes = [lax.eq(p, q) for p, q in zip(iotas[:-1], iotas[1:])]
        mask = eyes[0]
        for eye in eyes[1:]:
            mask = lax.bitwise_and(mask, eye)
        mask = lax.broadcast_in_dim(mask, x.shape, tuple(axes))
        x = lax.select_n(mask, lax.broadcast_in_dim(convert(0, x.dtype), x.shape, ()), x)
        if c in keep:
            x = _reduce_sum(x, axes[:-1], dtype)
            names = "".join(n for i, n in enumerate(names) if i not in axes[:-1])
        else:
            x = _reduce_sum(x, axes, dtype)
            names = _remove(names, c)
    return x, names


def _squeeze_broadcast(x: Array, names: str, other_shape: tuple[int, ...], other: str) -> tuple[Array, str]:
    """Size-1 axes that the other operand has at a larger size (ellipsis broadcasting)
    are squeezed out."""
    drop = [i for i, c in enumerate(names) if x.shape[i] == 1 and c in other and other_shape[other.index(c)] != 1]
    if not drop:
        return x, names
    return lax.squeeze(x, drop), "".join(c for i, c in enumerate(names) if i not in drop)


def _run_steps(operands: list[Array], steps: list[Step], dtype: np.dtype[Any]) -> Array:
    ops = list(operands)
    for positions, removed_set, spec in steps:
        removed = sorted(removed_set)
        input_text, result = spec.split("->")
        names_in = input_text.split(",")
        if len(positions) == 1:
            x = ops.pop(positions[0])
            (names,) = names_in
            counts = Counter(names)
            x, names = _sum_unique(x, names, [c for c in removed if counts[c] == 1], dtype)
            x, names = _sum_repeats(x, names, result, dtype)
        elif len(positions) == 2:
            lhs, rhs = (ops.pop(i) for i in positions)
            ln, rn = names_in
            lhs, ln = _squeeze_broadcast(lhs, ln, rhs.shape, rn)
            rhs, rn = _squeeze_broadcast(rhs, rn, lhs.shape, ln)
            lc, rc = Counter(ln), Counter(rn)
            lhs, ln = _sum_unique(lhs, ln, [c for c in removed if lc[c] == 1 and rc[c] == 0], dtype)
            rhs, rn = _sum_unique(rhs, rn, [c for c in removed if rc[c] == 1 and lc[c] == 0], dtype)
            lhs, ln = _sum_repeats(lhs, ln, result + rn, dtype)
            rhs, rn = _sum_repeats(rhs, rn, result + ln, dtype)
            contracted = [c for c in removed if c in ln and c in rn]
            batch = [c for c in result if c in ln and c in rn]
            gone = "".join(batch) + "".join(contracted)
            lhs_free, rhs_free = _remove(ln, gone), _remove(rn, gone)
            l_con, r_con = tuple(ln.index(c) for c in contracted), tuple(rn.index(c) for c in contracted)
            l_bat, r_bat = tuple(ln.index(c) for c in batch), tuple(rn.index(c) for c in batch)
            names = "".join(batch) + rhs_free + lhs_free
            if names == result:
                x = lax.dot_general(rhs, lhs, ((r_con, l_con), (r_bat, l_bat)), preferred_element_type=dtype)
            else:
                names = "".join(batch) + lhs_free + rhs_free
                x = lax.dot_general(lhs, rhs, ((l_con, r_con), (l_bat, r_bat)), preferred_element_type=dtype)
        else:
            raise NotImplementedError(
                f"einsum contracts two operands at a time; the path step {positions} has "
                f"{len(positions)}, at {user_location()}"
            )
        if names != result:
            x = lax.transpose(x, tuple(names.index(c) for c in result))
        ops.append(x)
    return ops[0]


# ------------------------------------------------------------------------------ public


def _prepare(subscripts: Any, operands: tuple[Any, ...]) -> tuple[str, list[Any]]:
    if isinstance(subscripts, str):
        return subscripts, list(operands)
    return _interleaved((subscripts, *operands))


def einsum(
    subscripts: Any,
    /,
    *operands: Any,
    out: None = None,
    optimize: str | bool | list[tuple[int, ...]] = "auto",
    precision: None = None,
    preferred_element_type: DTypeLike | None = None,
) -> Array:
    """Einstein summation: ``einsum("ij,jk->ik", a, b)`` is ``a @ b``; indices absent
    from the output (after ``->``, or the indices appearing once, sorted, when it is
    left out) are summed; ``...`` stands for broadcast axes. Also the interleaved form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    The contraction order comes from ``optimize`` (see the module doc); the result has
    the operands' promoted dtype (weak if all are weak) unless
    ``preferred_element_type`` is given.
    """
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to einsum is not supported, at {user_location()}")
    text, ops = _prepare(subscripts, operands)
    avals = [operand_aval("einsum", x, i) for i, x in enumerate(ops)]
    shapes = [a.shape for a in avals]
    inputs, output = _parse(text, shapes)
    sizes = _sizes(inputs, shapes)
    path = _find_path(inputs, output, sizes, optimize)
    steps = _steps(inputs, output, sizes, path)
    if preferred_element_type is None:
        dtype, weak = dtypes.result_type([(a.dtype, a.weak_type) for a in avals])
    else:
        dtype, weak = dtypes.canonicalize(preferred_element_type, "einsum"), False
    # As JAX: operands as they are; dot_general accumulates in the result dtype.
    arrays = [as_array(x, "einsum", i) for i, x in enumerate(ops)]
    result = _run_steps(arrays, steps, dtype)
    return convert(result, dtype, weak)


def einsum_path(
    subscripts: Any, /, *operands: Any, optimize: bool | str | list[tuple[int, ...]] = "auto"
) -> tuple[list[tuple[int, ...]], str]:
    """The contraction path :func:`einsum` takes for these operands (a list of index
    tuples into the shrinking operand list) and a printed summary of its steps."""
    text, ops = _prepare(subscripts, operands)
    shapes = [tuple(np.shape(x)) if not isinstance(x, Array) else x.shape for x in ops]
    inputs, output = _parse(text, shapes)
    sizes = _sizes(inputs, shapes)
    path = _find_path(inputs, output, sizes, "optimal" if optimize is True else optimize)
    steps = _steps(inputs, output, sizes, path)
    lines = [f"  Complete contraction:  {','.join(inputs)}->{output}"]
    for positions, removed, spec in steps:
        lines.append(f"  {positions}  summed {''.join(sorted(removed)) or '-'}  {spec}")
    return path, "\n".join(lines)
