"""Speed work on the simulator (deps, scheduler, stream, dma_pool, profile) must not change what it models.

For a fixed set of kernels (the two ``benchmarks/simulator_speed.py`` matmuls, the reference-benchmark kernels,
tutorial 04's steps, the nki_style matmul variants, an SPMD grid and a masked kernel; on trn1, whose engine
pairs share SBUF/PSUM ports, as well as trn2) this pins, in timing-only mode, the Profile's latency, busy time
per unit, DMA-engine busy time, critical-path length, and a hash of the per-instruction (unit, start, end) and
(predecessor, template) arrays, to the values in ``speed_invariance.json``: every modelled number must stay
bit-identical.

The golden figures are those of the instruction-by-instruction schedule (``profile(..., steady=False)``). The same
test runs the default path, which advances loops whose schedule repeats by arithmetic (``steady.py``), and checks
it against that schedule: the same instructions, templates and units, every start and end time within 1e-9 of the
latency (floating-point rounding: the steady-state argument is exact in real arithmetic), and each predecessor
either the same instruction or one that ends at the same time (a tie broken differently by that rounding).

The golden file was generated once from the simulator before the speed work. Regenerate it only when a change
is MEANT to change modelled results (a cost-model or scheduling change), say why in the commit message, and
never to make a speed change pass:

    python -m tests.simulator.test_speed_invariance --regenerate
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.backends.simulator import profile
from nki_dsl.targets import get_target
from nki_dsl.trace.jit import as_launch

GOLDEN = Path(__file__).with_name("speed_invariance.json")


def _cases():
    """name -> (kernel, args, target)."""
    from benchmarks.simulator_speed import BLOCKED
    from kernels.layernorm import layernorm_rows
    from kernels.matmul import matmul_block_free, matmul_tiled
    from kernels.rmsnorm import rmsnorm_rows
    from kernels.softmax import softmax_rows
    from kernels.vit_attn.kernel import attention_kernel
    from tests.kernels.nki_style import matmul as nm
    from tests.kernels.nki_style import tensor_add as ta

    bf16, f32 = "bfloat16", "float32"
    big = (nki.spec((8192, 4096), bf16), nki.spec((8192, 8192), bf16))
    out = {
        "speed blocked 4096x8192x8192": (matmul_block_free, big + (BLOCKED["BM"], BLOCKED["BN"]), "trn2"),
        "speed naive 4096x8192x8192": (matmul_tiled, big, "trn2"),
        "ref matmul 512": (matmul_tiled, (nki.spec((512, 512), f32), nki.spec((512, 512), f32)), None),
        "ref softmax 4096x512": (softmax_rows, (nki.spec((4096, 512), f32),), None),
        "ref rmsnorm 4096x1024": (rmsnorm_rows, (nki.spec((4096, 1024), f32), nki.spec((1024,), f32)), None),
        "ref layernorm 4096x1024": (layernorm_rows, (nki.spec((4096, 1024), f32), nki.spec((1024,), f32),
                                                   nki.spec((1024,), f32)), None),  # fmt: skip
        "ref vit attention 12x197x64": (attention_kernel, (nki.spec((1, 12, 197, 64), f32),) * 3 + (0.125,), None),
    }
    tut = importlib.import_module("tutorials.04_profiling")
    for name, kernel in tut.STEPS:
        out[f"tutorial04 {name}"] = (kernel, (nki.spec((4096, 2048), bf16), nki.spec((4096, 4096), bf16)), "trn2")
    variants = [nm.nki_matmul_tiled_, nm.nki_matmul_hoist_load_, nm.nki_matmul_block_free_dimension_,
                nm.nki_matmul_fully_optimized_, nm.nki_matmul_fully_optimized_isa, nm.nki_matmul_ragged]  # fmt: skip
    for kernel in variants:
        for dtype in (f32, bf16):
            out[f"nki_style {kernel.__name__} {dtype}"] = (kernel, (nki.spec((512, 512), dtype),
                                                                    nki.spec((512, 1024), dtype)), None)  # fmt: skip
    out["nki_style nki_matmul_basic_"] = (nm.nki_matmul_basic_, (nki.spec((128, 64), f32),
                                                                 nki.spec((128, 512), f32)), None)  # fmt: skip
    no_transpose = (nki.spec((256, 512), f32), nki.spec((512, 1024), f32))
    out["nki_style nki_matmul_no_transpose"] = (nm.nki_matmul_no_transpose, no_transpose, None)
    out["nki_style tensor_add grid [4, 3]"] = (ta.nki_tensor_add_kernel_[4, 3], (nki.spec((512, 1536), f32),) * 2,
                                               None)  # fmt: skip
    out["nki_style tensor_add ragged 300x1100"] = (ta.nki_tensor_add_ragged, (nki.spec((300, 1100), f32),) * 2, None)
    cases = {}
    for name, (kernel, args, target) in out.items():
        for t in (target,) if target else ("trn1", "trn2"):
            cases[f"{name} {t}"] = (kernel, args, t)
    return cases


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.typecode.encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _ir(kernel, args, target):
    launch = as_launch(kernel)
    return launch.jit.specialize(launch.grid, args, {}, get_target(target))[0]


def figures(prof) -> dict:
    s = prof.schedule
    return {
        "instructions": prof.instructions,
        "latency_ns": prof.latency_ns,
        "unit_busy_ns": prof.unit_busy_ns,
        "dma_engine_busy_ns": prof.dma_engine_busy_ns,
        "critical_path": len(prof.critical_path),
        "critical_path_end_ns": prof.critical_path[-1].end_ns if prof.critical_path else 0.0,
        "schedule_sha256": _digest(s.unit, s.start, s.end),
        "pred_template_sha256": _digest(s.pred, s.template),
    }


CASES = _cases()


def same_schedule(fast, exact) -> None:
    """``fast`` (loops advanced by arithmetic) is ``exact`` (every instruction scheduled) up to rounding."""
    a, b = exact.schedule, fast.schedule
    assert fast.instructions == exact.instructions
    for name in ("template", "unit"):
        assert getattr(b, name) == getattr(a, name), name
    tol = 1e-9 * max(1.0, exact.latency_ns)
    for name in ("start", "end"):
        diff = np.abs(np.asarray(getattr(b, name)) - np.asarray(getattr(a, name)))
        assert diff.max(initial=0.0) <= tol, name
    # a predecessor may differ where rounding broke a tie the other way: it must still be one the scheduler could
    # have named, an instruction ending when this one starts, or a transfer holding the DMA engines before it ends.
    # How many differ is not bounded: a short generated loop whose every iteration has a tie differs in each one
    # (6 of 72 in a hypothesis example), and each of those is checked below to be a valid predecessor.
    pa, pb = np.asarray(a.pred), np.asarray(b.pred)
    other = np.nonzero(pa != pb)[0]
    starts, ends, units = np.asarray(a.start), np.asarray(a.end), np.asarray(a.unit)
    p = pb[other]
    assert (p >= 0).all() and (p < other).all()
    n_engines = len(a.units) - exact.target.dma_queues_per_engine
    explains = (np.abs(ends[p] - starts[other]) <= tol) | ((units[p] >= n_engines) & (ends[p] <= ends[other] + tol))
    assert explains.all()
    assert abs(fast.latency_ns - exact.latency_ns) <= tol
    assert abs(fast.dma_engine_busy_ns - exact.dma_engine_busy_ns) <= tol * exact.target.dma_engines
    for unit, busy in exact.unit_busy_ns.items():
        assert abs(fast.unit_busy_ns[unit] - busy) <= tol, unit
    assert fast.unit_split.keys() == exact.unit_split.keys()
    for unit, split in exact.unit_split.items():
        for part, ns in split.items():
            assert abs(fast.unit_split[unit][part] - ns) <= tol, (unit, part)
    assert abs(fast.critical_path[-1].end_ns - exact.critical_path[-1].end_ns) <= tol


@pytest.mark.parametrize("name", sorted(CASES))
def test_modelled_results_unchanged(name):
    golden = json.loads(GOLDEN.read_text())
    assert name in golden, f"{name} has no golden figures: see the module docstring"
    kernel, args, target = CASES[name]
    ir = _ir(kernel, args, target)
    exact = profile(ir, get_target(target), steady=False)
    assert exact.schedule.advanced == 0
    assert figures(exact) == golden[name]
    same_schedule(profile(ir, get_target(target)), exact)


def test_the_large_matmuls_are_mostly_advanced():
    """The speed cases do reach a steady state (so the comparison above is not vacuous)."""
    for name in ("speed blocked 4096x8192x8192 trn2", "speed naive 4096x8192x8192 trn2"):
        kernel, args, target = CASES[name]
        prof = profile(_ir(kernel, args, target), get_target(target))
        assert prof.schedule.advanced > 0.7 * prof.instructions, name


def _regenerate() -> None:
    out = {}
    for n, (kernel, args, target) in sorted(CASES.items()):
        out[n] = figures(profile(_ir(kernel, args, target), get_target(target), steady=False))
    GOLDEN.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit(__doc__)
    _regenerate()
