"""Ops computed on their mask's bounding box only (the NumPy reference's way, ``numpy_ref/emitter.py``).

A ragged tile (197 rows = 128 + 69) carries ``mask=(row < n)`` on every op; computed over the whole 128-row
iteration space and selected afterwards, 59 of its 128 rows are work nobody reads (a tile's mask is the set of
elements the op writes: outside it a fresh result keeps its poison, a written operand its old elements). When the
mask is known at trace time, its single-axis conditions bound a box (each condition is a half-line of one axis, so
their intersection along an axis is one interval): the op then reads its operands cut to the box along the
iteration axes they correspond to, computes on the box, and its result is the box padded with poison (a written
operand gets the box, under the same write mask as before). Inside the box only the conditions over several axes
(``residual``) still select. The values written are those the whole-space computation writes: every element
written is computed from the same operand elements by the same primitives (the correspondence of operand axes to
iteration axes, ``axes``, is what each handler declares; an axis not cut is read whole).

Only ops whose handler declares how each operand it reads or writes maps onto the iteration axes (``ctx.read(name,
axes=...)``, as the NumPy reference's handlers do) are trimmed: ``trimmable``. Index patterns and random draws
over the iteration space (iota, affine_select, rng, dropout), reductions under a ``reduce_mask``, scans, MX ops,
indirect DMAs and bit-casts are computed whole as before.

``axes``: ``"aligned"`` (operand axes right-aligned with the iteration axes, as broadcasting aligns them) or a dict
``{iteration axis: operand axis}``; an operand axis whose extent differs from its iteration axis's (a broadcast
axis of 1) is not cut.
"""

from __future__ import annotations

import os

import numpy as np

from nki_dsl.ir.affine import Affine
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.nodes import Access, Op

ENABLED = True  # (tests compare with it off; ``NKI_JAX_TRIM=0`` turns it off too, read at each lowering)

PARTITION = {0: 0}  # operands that share only the partition axis with the iteration space ([P, 1] columns)
TRANSPOSED = {0: 1, 1: 0}  # result axis -> operand axis of a 2-D transpose
ALIGNED = "aligned"


def _reduction(op: Op, operand: str):
    """A reduction's data operand: without keepdims, result axis j is the j-th kept input axis."""
    if op.attrs["keepdims"]:
        return ALIGNED
    axis = tuple(op.attrs["axis"])
    return dict(enumerate(k for k in range(len(op.operands[operand].shape)) if k not in axis))


def _matmul(op: Op, operand: str):
    # out[m, n] = sum_k stationary[k, m] * moving[k, n]: result axis 0 is stationary's axis 1, axis 1 moving's
    # (with perf_mode double_row, [k, r, m] and [k, r, n]); K is never cut
    last = 2 if op.attrs.get("perf_mode") == "double_row" else 1
    return {0: last} if operand == "stationary" else {1: last}


def _nl_matmul(op: Op, operand: str):
    # result [M, N]: M is x's axis 1 when x is given as [K, M] (transpose_x), else its axis 0; N is y's axis 1
    return {0: 1 if op.attrs["transpose_x"] else 0} if operand == "x" else {1: 1}


_PER_PARTITION = {"scale", "bias", "operand0", "reduce_res"}  # [P, 1] operands of the engine instructions

# op name (or "family:<name>") -> operand axes per operand name: a mapping, or a function (op, operand) -> axes.
# Every operand these handlers read or write is listed; any other is ALIGNED.
_AXES = {
    "nisa.nc_matmul": {"stationary": _matmul, "moving": _matmul},
    "nisa.nc_transpose": {"data": TRANSPOSED},
    "nisa.activation": {n: PARTITION for n in _PER_PARTITION},
    "nisa.activation_reduce": {n: PARTITION for n in _PER_PARTITION},
    "nisa.tensor_tensor": {},
    "nisa.tensor_scalar": {"operand0": PARTITION, "operand1": PARTITION},
    "nisa.tensor_scalar_reduce": {n: PARTITION for n in _PER_PARTITION},
    "nisa.scalar_tensor_tensor": {"operand0": PARTITION},  # (operand1 is a tile like data)
    "nisa.tensor_copy": {},
    "nisa.tensor_copy_predicated": {},
    "nisa.reciprocal": {},
    "nisa.memset": {},
    "nisa.tensor_reduce": {"data": _reduction},
    "nisa.dma_copy": {},
    "nisa.dma_transpose": {"src": lambda op, _: dict(enumerate(op.attrs["axes"]))},  # result axis a: src perm[a]
    "family:load": {},
    "family:load_transpose2d": {"src": TRANSPOSED},
    "family:store": {},
    "family:assign": {},
    "family:copy": {},
    "family:transpose": {"x": TRANSPOSED},
    "family:broadcast_to": {},
    "family:unary": {},
    "family:binary": {},
    "family:reduce": {"x": _reduction},
    "family:matmul": {"x": _nl_matmul, "y": _nl_matmul},
    "family:select": {},
}


def enabled() -> bool:
    return ENABLED and os.environ.get("NKI_JAX_TRIM", "1") != "0"


def _table(op: Op, family: str):
    return _AXES.get(op.name, _AXES.get(f"family:{family}"))


def trimmable(op: Op, family: str) -> bool:
    """Does ``op`` compute on a box (its handler reads every operand through ``ctx.read``, whose axes ``_AXES``
    lists)?"""
    if _table(op, family) is None:
        return False
    attrs = op.attrs
    if "reduce_mask" in attrs or attrs.get("view_bytes") or attrs.get("zero_first"):
        return False
    return "indices" not in op.operands and hbm_operand(op) is None


def axes(op: Op, family: str, operand: str):
    """How operand ``operand``'s axes map onto the iteration axes (``ALIGNED`` or ``{iteration axis: operand
    axis}``)."""
    entry = _table(op, family).get(operand, ALIGNED)
    return entry(op, operand) if callable(entry) else entry


def box_of(single: dict, guard, shape: tuple):
    """``{axis: (start, extent)}`` of the box a static mask's single-axis conditions (``single``: axis -> 1-D bool
    array) bound, for the axes it cuts; None when it cuts none, or when the mask is off everywhere (that op
    writes nothing: computed whole, all its result is poison)."""
    if not bool(np.all(guard)):
        return None
    box = {}
    for a, cond in single.items():
        hit = np.flatnonzero(cond)
        if hit.size == 0:
            return None
        lo, n = int(hit[0]), int(hit[-1]) - int(hit[0]) + 1
        if n < shape[a]:
            box[a] = (lo, n)
    return box or None


def operand_cut(box: dict, shape: tuple, operand_shape: tuple, axes) -> dict:
    """``{operand axis: (start, extent)}``: where the box cuts an operand of ``operand_shape`` whose axes map onto
    the iteration axes (``shape``) as ``axes`` says."""
    if axes == "aligned":
        offset = len(shape) - len(operand_shape)
        axes = {a: a - offset for a in range(len(shape)) if a - offset >= 0}
    cut = {}
    for a, (lo, n) in box.items():
        k = axes.get(a)
        if k is not None and 0 <= k < len(operand_shape) and operand_shape[k] == shape[a]:
            cut[k] = (lo, n)
    return cut


def slices(cut: dict, ndim: int) -> tuple:
    return tuple(slice(cut[k][0], cut[k][0] + cut[k][1]) if k in cut else slice(None) for k in range(ndim))


def pads(cut: dict, full: tuple) -> list:
    """``lax.pad`` configuration putting a cut value back at its place in ``full``."""
    return [(cut[k][0], full[k] - cut[k][0] - cut[k][1], 0) if k in cut else (0, 0, 0) for k in range(len(full))]


def inside(cut: dict, full: tuple) -> np.ndarray:
    """The box as a boolean array over ``full`` (True inside)."""
    m = np.zeros(full, bool)
    m[slices(cut, len(full))] = True
    return m


def cut_access(access: Access, cut: dict, cache: dict) -> Access:
    """``access`` restricted to ``cut`` (operand axis -> (start, extent)): its axis ``d<k>`` starts at the cut's
    start. One object per (access, cut) for the kernel's lifetime (``cache``): plans are keyed by access
    identity, and batching matches a lane's reads by it."""
    key = ("cut", access, tuple(sorted(cut.items())))  # the access itself (hashed by identity, kept alive)
    got = cache.get(key)
    if got is None:
        env = {f"d{k}": Affine.var(f"d{k}") + lo for k, (lo, _) in cut.items() if lo}
        index = tuple(e.substitute(env) for e in access.index) if env else access.index
        shape = tuple(cut[k][1] if k in cut else n for k, n in enumerate(access.shape))
        got = cache[key] = Access(access.tensor, index, shape)
    return got


def rectangle(mask: np.ndarray):
    """The box a static boolean mask keeps, when it keeps exactly a box: ``{axis: (start, extent)}`` for the
    axes it cuts (``{}``: it keeps everything); None otherwise (or when it keeps nothing)."""
    if mask.all():
        return {}
    box = {}
    for a in range(mask.ndim):
        hit = np.flatnonzero(mask.any(axis=tuple(k for k in range(mask.ndim) if k != a)))
        if hit.size == 0:
            return None
        lo, n = int(hit[0]), int(hit[-1]) - int(hit[0]) + 1
        if n < mask.shape[a]:
            box[a] = (lo, n)
    if int(mask.sum()) != int(np.prod([box[a][1] if a in box else n for a, n in enumerate(mask.shape)])):
        return None  # (the box's corners hold every True: it is the mask only if it holds as many)
    return box
