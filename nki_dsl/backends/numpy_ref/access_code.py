"""Python source for reading and writing an IR access on NumPy arrays.

Accesses whose index maps are plain strided boxes become basic slicing (views, no copies); anything else (an axis
used in two dimensions, negative strides, diagonal patterns) becomes integer-array indexing with index arrays
precomputed at compile time. Extents may be source expressions, for ops restricted to a mask's bounding box.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nki_dsl.ir.affine import Affine, var_kind, var_number
from nki_dsl.ir.source_safe import NkiCodegenError, py_int, py_var

# a mask box's start: the emitter's _lo<k> (OpContext.box), _rlo<k> (a reduction's reduce_mask box), or 0
_BOX_OFFSET = re.compile(r"_r?lo[0-9]+|0")


def affine_code(e: Affine) -> str:
    """An affine expression over loop indices, program ids and box offsets as Python source."""
    parts = []
    for v, c in e.terms:  # names and ints checked: IR that skipped the verifier cannot smuggle source in here
        v = v if _BOX_OFFSET.fullmatch(v) else py_var(v)  # _lo<k>, _rlo<k>: the emitter's own mask-box offsets
        parts.append(v if c == 1 else f"{py_int(c)}*{v}")
    if e.const or not parts:
        parts.append(py_int(e.const))
    return " + ".join(parts).replace("+ -", "- ")


def _split(e: Affine) -> tuple[dict[int, int], Affine]:
    """Axis coefficients ``{axis: coef}`` and the rest (loop indices, program ids, constants)."""
    axes = {var_number(v): c for v, c in e.terms if _is_axis(v)}
    rest = Affine(tuple((v, c) for v, c in e.terms if not _is_axis(v)), e.const)
    return axes, rest


def _is_axis(v: str) -> bool:
    try:
        return var_kind(v) == "axis"
    except ValueError:
        return False


@dataclass
class AccessCode:
    """``read`` evaluates to an array of the access shape; ``write(value)`` is a statement storing into it."""

    target: str  # the subscripted expression, e.g. t_a[128*i0:128*i0 + 128, 0:512]
    perm: tuple[int, ...] | None  # axis order of the subscript result relative to the access axes
    missing: tuple[int, ...]  # access axes no dimension depends on (broadcast when read)
    shape: tuple[str, ...]
    whole: bool = False  # the access is the whole array: read the name itself, write through [...]
    # A clipped gather's index arrays (access_code(clip=True)); under a mask, write through ``write_kept``.
    indices: tuple[str, ...] | None = None

    @property
    def read(self) -> str:
        expr = self.target
        if self.indices is not None:  # index arrays broadcast to size 1 along axes no dimension depends on
            return f"np.broadcast_to({expr}, ({', '.join(self.shape)},))"
        if self.perm is not None:
            expr = f"{expr}.transpose({self.perm})"
        if self.missing:
            expr = f"np.broadcast_to(np.expand_dims({expr}, {self.missing}), ({', '.join(self.shape)},))"
        return expr

    def write(self, value: str) -> str:
        if self.whole:
            return f"{self.target}[...] = {value}"  # in place: other names may alias the array
        if self.missing:
            if any(self.shape[a] != "1" for a in self.missing):
                # the verifier's shape rule refuses these; IR that skipped it gets an NkiError, not a crash
                raise NkiCodegenError("a write whose index ignores an axis writes one element several times")
            # Size-1 axes no dimension depends on (``t[ip, k] = x`` with x [P, 1]): drop them from the value.
            kept = [s for a, s in enumerate(self.shape) if a not in self.missing]
            value = f"np.broadcast_to({value}, ({', '.join(self.shape)},)).reshape(({''.join(f'{k}, ' for k in kept)}))"
        if self.perm is not None:
            inverse = tuple(int(k) for k in np.argsort(self.perm))
            value = f"np.transpose({value}, {inverse})"
        return f"{self.target} = {value}"

    def write_kept(self, value: str, keep: str, array: str) -> str:
        """A statement storing ``value`` into the elements of a clipped gather that ``keep`` (a boolean array
        broadcasting to the access shape) keeps: only those, so clipped masked-off indices write nothing."""
        assert self.indices is not None
        dims = f"({', '.join(self.shape)},)"
        picked = ", ".join(f"np.broadcast_to({i}, {dims})[_keep]" for i in self.indices)
        return (f"_keep = np.broadcast_to({keep}, {dims}); "
                f"{array}[{picked}{',' if len(self.indices) == 1 else ''}] = np.broadcast_to({value}, {dims})[_keep]")


def access_code(
    array: str, index: tuple[Affine, ...], shape: tuple[str, ...], consts, clip: bool = False
) -> AccessCode:
    """Code for ``array[index]`` with access axes of extents ``shape`` (ints or source expressions).

    ``consts`` registers compile-time arrays in the generated module's namespace and returns their names.
    ``clip``: an access under a mask over several axes, whose masked-off elements may lie outside the array (the
    verifier bounds only the kept ones): always integer-array indexing, each index clipped into its dimension so a
    read never fails (the mask then drops what the clipped lanes read), and written through ``write_kept``.
    """
    split = [_split(e) for e in index]
    if clip:
        return _gathered(array, split, shape, consts, clip=True)
    if _is_box(split):
        return _sliced(array, split, shape)
    return _gathered(array, split, shape, consts)


def _is_box(split) -> bool:
    seen = set()
    for axes, _ in split:
        if len(axes) > 1:
            return False
        for a, c in axes.items():
            if c <= 0 or a in seen:
                return False
            seen.add(a)
    return True


def _sliced(array, split, shape) -> AccessCode:
    subs, order = [], []
    for axes, rest in split:
        start = affine_code(rest)
        if not axes:
            subs.append(start)
            continue
        (a, c), = axes.items()
        n = shape[a]
        if rest.is_const and str(n).isdigit():
            stop = rest.const + c * (int(n) - 1) + 1
        else:
            stop = f"{start} + {c}*({n} - 1) + 1" if c != 1 else f"{start} + {n}"
        if start == "0":
            start = ""
        subs.append(f"{start}:{stop}" + (f":{c}" if c != 1 else ""))
        order.append(a)
    target = f"{array}[{', '.join(subs)}]" if subs else array
    perm = None if order == sorted(order) else tuple(int(k) for k in np.argsort(order))
    missing = tuple(a for a in range(len(shape)) if a not in order)
    return AccessCode(target, perm, missing, tuple(str(s) for s in shape))


def _gathered(array, split, shape, consts, clip: bool = False) -> AccessCode:
    ndim = len(shape)
    subs = []
    for dim, (axes, rest) in enumerate(split):
        if not axes:
            subs.append(affine_code(rest))
            continue
        terms = []
        for a, c in axes.items():
            view_shape = tuple(-1 if k == a else 1 for k in range(ndim))
            if str(shape[a]).isdigit():
                terms.append(consts(np.arange(int(shape[a])).reshape(view_shape) * c))
            else:
                terms.append(f"(np.arange({shape[a]}).reshape({view_shape}) * {c})")
        if not rest.is_const or rest.const:
            terms.append(f"({affine_code(rest)})")
        sub = " + ".join(terms)
        subs.append(f"np.clip({sub}, 0, {array}.shape[{dim}] - 1)" if clip else sub)
    used = set().union(*(axes.keys() for axes, _ in split))
    target = f"{array}[{', '.join(subs)}]"
    dims = tuple(str(s) for s in shape)
    if clip:
        return AccessCode(target, None, (), dims, indices=tuple(subs))
    if len(used) < ndim:
        # Index arrays broadcast to size 1 along axes nothing depends on: a read repeats along them.
        return AccessCode(f"np.broadcast_to({target}, ({', '.join(dims)},))", None, (), dims)
    return AccessCode(target, None, (), dims)
