"""``t.reshape(shape)`` of a view: the same elements in row-major order, as another view of the same storage.

A view is an affine map from its axes to the storage's indices, so each view axis ``k`` moves the storage index
by a fixed step vector ``step_k`` (the coefficient of ``d<k>`` in each storage index) and the rest is a fixed
origin. A reshape is again such a map exactly when it is NumPy's reshape without a copy: the old and new axes
fall into groups of equal size products (``[P, 4, 16]`` -> ``[P, 64]``: ``{4, 16} -> {64}``), and inside a
group the old axes are contiguous one in the other, ``step_k == size_{k+1} * step_{k+1}`` as vectors. Then the
new axes of the group step by the group's innermost step times the sizes inside them. Splitting an axis always
satisfies this; merging axes satisfies it when they are consecutive in storage (a whole tensor or a slice along
the outer axis), not when a slice or a step cut them apart (``t[:, :, 0:8]`` of ``[P, 4, 16]`` merged) or a
permutation reordered them. Size-1 axes take part in no group.

Merging two storage axes is never affine in the storage's own indices (``i // 16`` and ``i % 16``), so a merge
needs the merged axes to lie on one storage axis: the current API stores every on-chip tensor as ``[P, free]``
(``nki_dsl/current/language/creation.py``), and an HBM view falls back to the tensor viewed flat (an
``hbm.reshape`` to one axis). On chip the partition axis stays axis 0 of every view (reference/nki.md §1.1: the
partition dimension is the first; instructions address partitions only through it).
"""

from __future__ import annotations

from math import prod

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access
from nki_dsl.trace.builder import caller_loc

API = "reshape"
RULE = ("a reshape is a view of the same storage: it may split any axis, and merge only axes that are "
        "consecutive in storage (not axes a strided slice or a permute cut apart; copy such a view into a tile "
        "first)")  # fmt: skip


class NotContiguous(Exception):  # noqa: N818 - an internal signal carrying the axes that cannot merge
    def __init__(self, outer: int, inner: int):
        super().__init__(outer, inner)
        self.outer, self.inner = outer, inner


def new_shape(shape) -> tuple[int, ...]:
    return tuple(int(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))


def reshaped(view: Access, shape: tuple[int, ...], keep_partition: bool) -> Access:
    """``view`` reshaped to ``shape``; raises ``NotContiguous`` naming the view axes that cannot merge, or
    NkiApiError for a count mismatch or a moved partition axis."""
    old = tuple(view.shape)
    if prod(old) != prod(shape) or not shape:
        raise NkiApiError(f"cannot reshape {described(view)} to {list(shape)}: {prod(old)} vs {prod(shape)} "
                          f"elements", caller_loc(), API)  # fmt: skip
    rank = len(view.index)
    steps = [tuple(e.coef(f"d{k}") for e in view.index) for k in range(len(old))]
    origin = [Affine(tuple((v, c) for v, c in e.terms if not _is_axis(v)), e.const) for e in view.index]
    if keep_partition:
        if shape[0] != old[0]:
            raise NkiApiError(f"cannot reshape {described(view)} to {list(shape)}: the partition axis "
                              f"(axis 0, size {old[0]}) stays axis 0 of the view", caller_loc(), API)  # fmt: skip
        new_steps = [steps[0], *_group_steps(old[1:], steps[1:], shape[1:], rank, first=1)]
    else:
        new_steps = _group_steps(old, steps, shape, rank, first=0)
    index = []
    for t in range(rank):
        e = origin[t]
        for j, step in enumerate(new_steps):
            e = e + Affine.var(f"d{j}", step[t])
        index.append(e)
    return Access(view.tensor, tuple(index), shape)


def _is_axis(name: str) -> bool:
    return name.startswith("d") and name[1:].isdigit()


def _group_steps(old, steps, new, rank: int, first: int) -> list[tuple[int, ...]]:
    """The step vector of each ``new`` axis (NumPy's no-copy reshape over step vectors); ``first`` is the view
    axis number of ``old[0]`` (for the error)."""
    zero = (0,) * rank
    out = [zero] * len(new)
    olds = [k for k, s in enumerate(old) if s != 1]
    news = [j for j, s in enumerate(new) if s != 1]
    oi = ni = 0
    while oi < len(olds) and ni < len(news):
        oj, nj = oi + 1, ni + 1
        o_size, n_size = old[olds[oi]], new[news[ni]]
        while o_size != n_size:
            if n_size < o_size:
                n_size *= new[news[nj]]
                nj += 1
            else:
                o_size *= old[olds[oj]]
                oj += 1
        for a, b in zip(olds[oi:oj - 1], olds[oi + 1:oj]):
            if steps[a] != tuple(old[b] * s for s in steps[b]):
                raise NotContiguous(a + first, b + first)
        out[news[nj - 1]] = steps[olds[oj - 1]]
        for m in range(nj - 1, ni, -1):
            out[news[m - 1]] = tuple(new[news[m]] * s for s in out[news[m]])
        oi, ni = oj, nj
    return out


def refusal(view: Access, shape: tuple[int, ...], err: NotContiguous, storage_hint: str = "") -> NkiApiError:
    """The error for a reshape that would merge view axes ``err.outer`` and ``err.inner`` of ``view``."""
    outer, inner = ([e.coef(f"d{k}") for e in view.index] for k in (err.outer, err.inner))
    needed = [view.shape[err.inner] * s for s in inner]
    return NkiApiError(
        f"cannot reshape {described(view)} to {list(shape)}: its axes {err.outer} and {err.inner} are not "
        f"consecutive in storage (axis {err.outer} steps {outer} storage elements, a merge needs "
        f"{view.shape[err.inner]} x axis {err.inner}'s step = {needed}); {RULE}{storage_hint}",
        caller_loc(),
        API,
    )


def described(view: Access) -> str:
    """``the [128, 4, 8] view of %t f32[128, 64] in 'sbuf'`` (the IR's names, as the verifier's messages)."""
    t = view.tensor
    return (f"the {list(view.shape)} view of %{t.name} {dtypes.get(t.type.dtype).short}{list(t.type.shape)} in "
            f"'{t.type.buffer.value}'")


def on_chip(view: Access, shape) -> Access:
    """``t.reshape(shape)`` of an on-chip tensor or view."""
    new = new_shape(shape)
    try:
        return reshaped(view, new, keep_partition=True)
    except NotContiguous as err:
        storage = view.tensor.type.shape
        hint = ""
        if len(storage) > 2:
            hint = (f"; '{view.tensor.name}' is stored {list(storage)}, one storage axis per free axis (a tile an "
                    f"op returned, or a legacy allocation): the current API's nl.ndarray stores an on-chip tensor "
                    f"as [P, free], whose free axes merge")  # fmt: skip
        raise refusal(view, new, err, hint) from None


def hbm_view(view: Access, shape, flatten) -> Access:
    """``t.reshape(shape)`` of a view of an HBM tensor: in the tensor's own indices if that is affine, otherwise
    in the tensor viewed flat (``flatten(tensor)``: an ``hbm.reshape`` to one axis), where every merge of axes
    consecutive in memory is."""
    new = new_shape(shape)
    dims = view.tensor.type.shape
    if any(not isinstance(s, int) for s in (*dims, *view.shape)):
        raise NkiApiError(f"cannot reshape {described(view)} to {list(new)}: a view of a tensor of symbolic shape "
                          f"{list(dims)} has no concrete strides; reshape the whole tensor", caller_loc(),
                          API)  # fmt: skip
    try:
        return reshaped(view, new, keep_partition=False)
    except NotContiguous as err:
        if len(dims) == 1:
            raise refusal(view, new, err) from None
    flat, stride = Affine(), 1
    for e, size in zip(reversed(view.index), reversed(dims)):
        flat = flat + e * stride
        stride *= size
    flat_view = Access(flatten(view.tensor), (flat,), tuple(view.shape))
    try:
        return reshaped(flat_view, new, keep_partition=False)
    except NotContiguous as err:
        raise refusal(view, new, err) from None
