"""Lowering a stitched pair (``stitch.py`` plans them): the joined op's operands laid end to end from both groups'
values (or read straight from a producer pair, or once from before the run), and its outputs cut back into each
group's (the ragged group's box padded with poison, as ``trim`` pads a box)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from nki_dsl.backends.jax import access as acc
from nki_dsl.backends.jax import batch_plan as bp
from nki_dsl.backends.jax import runtime
from nki_dsl.backends.jax.stitch import Stitch


def _lay(a, b, axis_a, axis_b, joined, lanes):
    """Operand values of groups a and b (stacked over lanes, or shared) laid end to end along ``joined``."""
    if axis_a is None:
        a = jnp.broadcast_to(a, (lanes, *a.shape))
    if axis_b is None:
        b = jnp.broadcast_to(b, (lanes, *b.shape))
    return jnp.concatenate([a, b.astype(a.dtype)], axis=joined + 1)


def inputs(s: Stitch, va, xa, vb, xb, lanes: int, joined_outs: dict, read_whole=None):
    """The joined op's stacked operands from each group's (``va``/``xa``: values and vmap axes of ``a``), the
    joined outputs of the pairs run before (``joined_outs``: (a, b) -> outputs) and, for the operands read in one
    piece (``Stitch.whole``), ``read_whole(name) -> (value, vmap axis)``."""
    values, axes = [], []
    for j, joined in enumerate(s.joined):
        if s.whole and s.whole[j]:
            value, axis = read_whole(s.template.probe.reads[j])
            values.append(value)
            axes.append(axis)
        elif s.direct[j] is not None:
            pair, k, maps = s.direct[j]
            out = joined_outs[pair][k]
            shape = list(s.template.read_access(s.template.probe.reads[j]).shape)
            values.append(acc.read(out, bp.affine_plan(maps, (lanes, *shape), out.shape), {}))
            axes.append(0)
        elif joined is None:
            values.append(va[j])
            axes.append(xa[j])
        else:
            values.append(_lay(va[j], vb[j], xa[j], xb[j], joined, lanes))
            axes.append(0)
    return values, axes


class _Cut:
    """One group's stacked outputs cut from the joined op's (``side`` 0: a's, 1: b's box padded with poison),
    each made when first indexed: most are read only through the joined outputs (``Stitch.direct``)."""

    def __init__(self, s: Stitch, res: list, side: int, zero_poison: bool):
        self.s, self.res, self.side, self.zero_poison = s, res, side, zero_poison
        self.made: dict = {}

    def __len__(self) -> int:
        return len(self.res)

    def __getitem__(self, k: int):
        if k not in self.made:
            self.made[k] = self._cut(k)
        return self.made[k]

    def _cut(self, k: int):
        s, value = self.s, self.res[k]
        axis, full, lo, dtype = s.outputs[k]
        ax = axis + 1
        if self.side == 0:
            return lax.slice_in_dim(value, 0, s.n_a, axis=ax)
        box = lax.slice_in_dim(value, s.n_a, s.n_a + s.extent, axis=ax)
        pads = [(0, 0, 0)] * box.ndim
        pads[ax] = (lo, full - lo - s.extent, 0)
        poison = jnp.asarray(runtime.poison(dtype, self.zero_poison), box.dtype)
        return lax.pad(box, poison, pads)


def outputs(s: Stitch, res: list, zero_poison: bool) -> tuple:
    """The joined op's stacked outputs cut back into group a's and group b's (b's box padded with poison), as
    sequences indexed by output."""
    return _Cut(s, res, 0, zero_poison), _Cut(s, res, 1, zero_poison)
