"""A call above a shape family's range, run as instances of the family over slices of its arrays.

The untrusted-IR budget bounds one instance (``nki.IRBudget``: op executions, tensor and HBM bytes), so a family's
batch range stops where an instance at its top reaches the budget (``B in 1..256``). A call with ``B = 1000`` is
still safe to run when the kernel is independent along ``B``: four instances within the range, each over a slice
of the arrays, their outputs concatenated along ``B``. Whether it is independent is proved from the family's
verified IR by nki_dsl (``ShapeFamily.independence``, ``verify/independent.py``), never read from the manifest;
every instance is verified within the budget as any family instance is. A row kernel is independent along its rows
``N`` in blocks of 128 (one row tile per iteration, the ragged last one masked): its slices start at multiples of
128, so a call with ``N = 70000`` over a family ``N in 1..65536`` runs as instances of 65536 and 4464 rows. What it
costs: ``ceil(B / top)`` launches instead of one (each with its fixed per-launch cost), one copy of each output into
the joined array, and at most two instances (the top and the remainder; a few more when the rest, below a range's
bottom, borrows from several parts) to verify and cache per shape of the rest
(``benchmarks/row_parts.py``: 1.0035x the modelled trn2 latency of one instance at N = 70000).
"""

from __future__ import annotations

import math

import numpy as np

from hub_client.errors import NoSpecialisationError

# The most instances one call runs as (the product over the dimensions cut). The call's arrays are untrusted: a
# broadcast NumPy view of 2**40 rows costs no memory, yet would run as 16,777,216 instances of a 65536-row family,
# each a launch and a real output joined at the end. The budget bounds one instance (``nki.IRBudget``); this bounds
# how many, so a call costs at most MAX_PARTS times an instance's budget. What the launchers need: a row family's
# call above its top (65536 rows) takes a few parts (N = 70000: 2, ``benchmarks/row_parts.py``), but vit_attn's
# long-sequence family (B in 1..2, H in 1..10 at S up to 16384) runs the shapes its launchers take
# (tests/kernels/test_vit_attn_families.py: B up to 1000, H up to 64) as up to 500 x 7 = 3500 instances. 4096
# holds that; 2**40 rows are refused by arithmetic before anything runs.
MAX_PARTS = 4096


def count(n: int, lo: int, hi: int, step: int, block: int = 1) -> int:
    """``len(sizes(n, lo, hi, step, block))`` by arithmetic, without building the list (which for a hostile ``n``
    would be millions long); 0 when no part size exists. It does not check the rest can be cut (``sizes`` does):
    it is the count a bound is checked against before any work."""
    unit = math.lcm(step, block)
    top = hi // unit * unit
    if top < max(lo, 1):
        return 0
    full, rest = divmod(n, top)
    if rest and rest < lo and full and top + rest <= hi:  # the rest joins the last full part (as ``sizes`` does)
        return full
    return full + (1 if rest else 0)


def too_many(over: dict[str, tuple[int, int, int, int]], blocks: dict[str, int]) -> str | None:
    """Why a call whose dimensions ``over`` (name -> (value, lo, hi, step)) are cut into parts starting at
    multiples of ``blocks[name]`` (1 when absent: the fewest parts) needs more than ``MAX_PARTS`` instances; None
    when it does not. Arithmetic only: checked before a part (or the list of parts) exists."""
    total, shown = 1, []
    for name, (n, lo, hi, step) in over.items():
        c = count(n, lo, hi, step, blocks.get(name, 1))
        total *= max(c, 1)
        shown.append(f"{name} = {n} in {c:,} parts of at most {hi}")
    if total <= MAX_PARTS:
        return None
    return (f"{' x '.join(shown)} is {total:,} instances, more than the {MAX_PARTS} a call may run as "
            f"(hub_client.chunks.MAX_PARTS)")  # fmt: skip


def sizes(n: int, lo: int, hi: int, step: int, block: int = 1) -> list[int]:
    """Chunk sizes summing to ``n`` (a multiple of ``step``), each in ``lo..hi`` and a multiple of ``step``, every one
    but the last a multiple of ``block`` too (the kernel computes each block of ``block`` rows from that block
    alone, so a slice starts at a multiple of it): as many as fit at the top rounded down to a multiple of both
    (one instance reused for all of them), then the rest; a rest below ``lo`` takes what it lacks, rounded up to a
    multiple of both, from the chunks before it, the last first, each keeping at least ``lo`` (rounded up), or joins
    the chunk before it when the two fit in ``hi``."""
    unit = math.lcm(step, block)
    top = hi // unit * unit
    if top < max(lo, 1):
        raise ValueError(f"no part in {lo}..{hi} is a multiple of {unit}")
    if count(n, lo, hi, step, block) > MAX_PARTS:  # (never a list of millions; ``too_many`` says why first)
        raise ValueError(f"{n} would be {count(n, lo, hi, step, block):,} parts, more than MAX_PARTS = {MAX_PARTS}")
    full, rest = divmod(n, top)
    out = [top] * full
    if rest and rest < lo and out and top + rest <= hi:  # the last part need not be a multiple of the block
        out.pop()
        rest += top
    if rest and rest < lo:
        need = -(-(lo - rest) // unit) * unit
        floor = -(-lo // unit) * unit  # the least a chunk before the last keeps: a multiple of both
        for k in range(len(out) - 1, -1, -1):
            take = min(need, out[k] - floor)
            out[k], rest, need = out[k] - take, rest + take, need - take
            if not need:
                break
        if need or rest > hi:
            raise ValueError(f"{n} cannot be cut into parts in {lo}..{hi}" +
                             (f" that start at multiples of {block}" if block > 1 else ""))  # fmt: skip
    return out + ([rest] if rest else [])


def _part(a, axis: int, start: int, stop: int):
    return a[(slice(None),) * axis + (slice(start, stop),)]


def _join(parts: list, axis: int):
    """Concatenate outputs along ``axis`` in their own array library (NumPy's or JAX's ``concat``)."""
    xp = parts[0].__array_namespace__() if hasattr(parts[0], "__array_namespace__") else np
    return xp.concat(parts, axis=axis)


def run(run_one, args: tuple, over: dict[str, tuple[int, int, int, int]], axes: dict, label: str):
    """``run_one(args)``'s result for arrays whose dimensions ``over`` (name -> (value, lo, hi, step)) are above the
    family's range: cut along the first of them (``axes[name]``: an ``IndependentDim``, the axis per parameter and
    output and the block size the slices start at multiples of), the rest recursively, and the parts' outputs
    joined. ``args`` are the call's arrays, in parameter order."""
    if not over:
        return run_one(args)
    why = too_many(over, {n: axes[n].block for n in over})
    if why is not None:  # before any part runs, on every backend (the caller's arrays are untrusted)
        raise NoSpecialisationError(f"{label}: {why}")
    (name, (n, lo, hi, step)), rest = next(iter(over.items())), dict(list(over.items())[1:])
    where = axes[name]
    try:
        cuts = sizes(n, lo, hi, step, where.block)
    except ValueError as e:
        raise NoSpecialisationError(f"{label}: dimension {name} = {n}: {e}, so it cannot run as instances of the "
                                    f"family {name} in {lo}..{hi} step {step}") from None  # fmt: skip
    outs, start = [], 0
    for size in cuts:
        part = tuple(a if k is None else _part(a, k, start, start + size) for a, k in zip(args, where.params))
        outs.append(run(run_one, part, rest, axes, label))
        start += size
    if isinstance(outs[0], tuple):
        return tuple(_join([o[i] for o in outs], k) for i, k in enumerate(where.outputs))
    return _join(outs, where.outputs[0])
