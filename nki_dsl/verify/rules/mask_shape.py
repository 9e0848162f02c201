"""Rule ``mask-shape``: a mask was built for the axes it lands on. The tracer aligns a mask of lower rank than its
op as NumPy broadcasts (its axes are the op's last ones, reference/nki.md §1.3's "broadcast into 2-D" indexing),
so on every axis of the op's iteration space (a reduction's input, when the mask is written over it) the index the
mask was built from must have the op's extent or 1. Anything else broadcasts a predicate onto an axis it was not
built for: ``q0 + nl.arange(128)[:, None] < seq`` on a ``[128, pair, d]`` op lands on the pair axis, where
``d1 < seq - q0`` with a 1-row tile keeps only the first of the pair (a kernel returned NaN that way), and reads
in the IR exactly like a deliberate mask on that axis. ``nisa.affine_select``'s predicate is held to the same
(``isa/arguments.predicate``); this is the ``mask=`` of every op.

The IR's mask is constraints over axis names only; the extents come from the tracer (``Op.mask_shape``). Parsed
IR has none (its mask means exactly what its text says: there is no index it was built from), and neither do ops
whose mask is inherited from the op that computed their value (that op is checked); the rule skips them."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Access, Kernel, Op
from nki_dsl.ir.ops import OPS, REDUCE_MASK
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import iteration_shape
from nki_dsl.verify.program import program

RULE = "mask-shape"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op = site.op
        if op.mask_shape is None:
            continue
        space = _space(op)
        if space is None:
            continue
        shape, owner = space
        msg = _problem(op, tuple(op.mask_shape.extents), shape, owner)
        if msg:
            found.append(d.diagnostic(op, RULE, msg))
    return found


def _space(op: Op) -> tuple[tuple[int, ...], str] | None:
    """The axes the mask ranges over and whose they are, in the diagnostics' words."""
    over = op.mask_shape.over
    if over is not None:
        a = op.operands.get(over)
        if not isinstance(a, Access):
            return None
        return tuple(a.shape), f"the axes of {d.operand(over, a)}, which it reduces"
    spec = OPS[op.name]
    shape = iteration_shape(op, spec)
    if shape is None:
        return None
    if op.result is not None:
        return shape, f"the op's iteration space (its result {d.tensor(op.result)})"
    name = next(o.name for o in spec.writes if isinstance(op.operands.get(o.name), Access))
    return shape, f"the op's iteration space ({d.operand(name, op.operands[name])}, which it writes)"


def _problem(op: Op, extents: tuple[int, ...], shape: tuple[int, ...], owner: str) -> str | None:
    mask = op.attrs.get(REDUCE_MASK.name) if op.mask_shape.over is not None else None
    mask = mask if mask is not None else op.mask
    what = f"mask[{mask}]" if mask is not None and mask.constraints else "the mask"
    built = tuple(op.mask_shape.built) or extents
    if len(extents) != len(shape):
        return (f"{what}, built from an index of shape {d.dims(built)}, ranges over {owner}, {d.dims(shape)}: "
                f"{len(extents)} axes against {len(shape)}")  # fmt: skip
    bad = [k for k, (e, s) in enumerate(zip(extents, shape)) if isinstance(s, int) and e not in (1, s)]
    if not bad:
        return None
    aligned = "" if built == extents else f", aligned to the op's last axes as {d.dims(extents)}"
    lands = ", ".join(f"extent {extents[k]} on axis d{k} of extent {shape[k]}" for k in bad)
    msg = (f"{what}, built from an index of shape {d.dims(built)}{aligned}, ranges over {owner}, "
           f"{d.dims(shape)}: it puts its {lands}, an axis it was not built for. A mask's index has the op's "
           f"extent or 1 on every axis (NumPy broadcasting)")  # fmt: skip
    hint = built + (1,) * (len(shape) - len(built))
    if hint != extents and all(not isinstance(s, int) or e in (1, s) for e, s in zip(hint, shape)):
        msg += f"; build it at the op's rank, as {d.dims(hint)} for its leading axes"
    return msg
