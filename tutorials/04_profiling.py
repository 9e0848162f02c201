"""Lesson 4: profiling a matmul on the modelled NeuronCore, from a naive tiled kernel to a blocked one.

``nki.simulate(kernel, *arrays, target="trn2")`` runs a kernel on the engine simulator and returns its outputs
(equal to the NumPy reference) and a Profile: modelled latency, how busy each engine was, FLOPs, bytes moved and
the fraction of Tensor-engine peak reached. ``nki.benchmark(kernel, nki.spec(shape, dtype), ...)`` does the timing
alone from shapes and dtypes, so it works for sizes far too large to compute on a CPU.

Each step below changes one thing and asks the simulator what it bought. The kernels compute
``lhsT.T @ rhs`` with ``lhsT`` [K, M] and ``rhs`` [K, N] (the contraction runs along the partitions of both).
Run it: ``python tutorials/04_profiling.py``; the same figures come from the command line with
``nki profile kernels/matmul/kernel.py:matmul_blocked --arg lhsT=4096x2048:bfloat16 --arg rhs=4096x4096:bfloat16
--timing-only --trace matmul.json`` (open the trace in https://ui.perfetto.dev).

How far to trust a modelled number. The simulator is a cost model built only from what reference/nki.md documents
(every constant in ``nki_dsl/targets.py`` cites its section; ``python benchmarks/fidelity.py`` prints the
documented micro-behaviours next to the model's values). Use it to compare versions of a kernel and to see which
engine or queue limits it; treat an absolute latency as an estimate, good to tens of percent at best. What it
does not model, in plain words:

* DMA. A transfer is priced as one descriptor per contiguous row run (each costing as much as streaming 256 B)
  and a fixed ~1.3 us that the DMA engines pay one transfer at a time, hidden only behind a transfer that streams
  longer (from about 2.7 KiB per partition on trn1, 3.7 KiB on trn2). So a core finishes at most ~770,000
  transfers a second, and a kernel of small tiles is bound by how many transfers it issues, not by its bytes:
  the naive and hoisted steps below are. docs/dma_model.md says why the documentation is read this way. How the
  real compiler assigns transfers to queues is not documented: the model deals them to the 16 queues in turn.
  HBM itself (pages, banks, refresh) and the other cores of the chip competing for it are not modelled.
* The compiler. The model runs the instructions it is given, in program order per engine, with the buffers the
  allocator gave them (up to three rotating copies per tile). The real compiler may reorder, fuse, unroll, split
  or insert spills; none of that is simulated.
* Engines. Per-instruction costs are the documented formulas (MIN_II, the Tensor engine's max(N, 64) interval,
  the 1/4 fp32 rate, static and access overheads for tiny or dependent instructions, stride penalties, NC-v2's
  shared SBUF/PSUM ports). Pipeline effects inside an engine beyond those, instruction fetch, semaphore latency
  between engines and clock or power throttling are not modelled.
* Where the documentation is only for one generation (most overheads are quoted for NC-v2), the same figure is
  used for the others.

Every Profile also says *why* each engine and DMA queue was busy: ``prof.busy_split`` splits its time into useful
work, fixed overheads, contention for the DMA engines, and waiting on dependencies (the summary table and the
Perfetto trace show the same split).
"""

import numpy as np

import nki_dsl as nki
from kernels.matmul import matmul_block_free, matmul_blocked, matmul_hoisted, matmul_tiled

# The four kernels are the kernel library's (kernels/matmul/kernel.py); each changes one thing:
#
# -- step 1: naive tiled (matmul_tiled) --------------------------------------------------------------------------------
# Every (m, n) output tile reloads its K strip of both operands: lhsT is read N / 512 times, rhs M / 128 times,
# and each lhsT load is a [128, 128] tile, only 256 bytes per partition for bf16 (DMA transfers that small are
# dominated by their fixed cost, reference/nki.md §3.4).
# -- step 2: hoist the lhsT loads out of the n loop (matmul_hoisted) ---------------------------------------------------
# The K strip of lhsT for one m is loaded once into a block tensor (K / 128 tiles of [128, 128], the partition
# axis marked with nl.par_dim) and reused by every n: lhsT traffic drops by a factor N / 512.
# -- step 3: block the free dimensions (matmul_block_free) -------------------------------------------------------------
# A block of BM x BN output tiles shares its loaded strips: each lhsT byte now feeds BN matmuls per load and each
# rhs byte BM, so the rhs traffic (the larger one) drops by BM.
# -- step 4: blocked, with wide loads (matmul_blocked) -----------------------------------------------------------------
# Every DMA now moves a whole block row: lhsT blocks of [128, BM * 128] and rhs blocks of [128, BN * 512] land in
# par_dim block tensors in one transfer each (KiBs per partition instead of 256 bytes, so the fixed cost per
# transfer is amortised), and the blocks are larger, so each loaded byte feeds more matmuls. The matmuls read
# their [128, 128] and [128, 512] tiles as slices of the blocks.
# K is not blocked: a block's whole K strips must fit SBUF, which at K = 8192 (192 KiB per partition) no longer
# fits a trn1 core. NKI's fully optimised tutorial kernel blocks K as well and accumulates the partial products
# of each K block into SBUF-resident result tiles, trading Vector-engine additions for a bounded working set.


STEPS = [
    ("1 naive tiled", matmul_tiled),
    ("2 hoisted lhsT loads", matmul_hoisted),
    ("3 blocked free dimensions", matmul_block_free),
    ("4 blocked, wide loads", matmul_blocked),
]


def check_numbers():
    """Numbers and timing on a small fp32 problem: every step computes lhsT.T @ rhs."""
    rng = np.random.default_rng(0)
    K, M, N = 256, 512, 1024
    lhsT = rng.standard_normal((K, M)).astype(np.float32)
    rhs = rng.standard_normal((K, N)).astype(np.float32)
    expected = lhsT.T.astype(np.float64) @ rhs.astype(np.float64)
    for name, kernel in STEPS:
        out, prof = nki.simulate(kernel, lhsT, rhs, target="trn2")
        assert np.allclose(out, expected, rtol=1e-4, atol=1e-3), name
    print(f"all four steps match NumPy on [{M}, {K}] @ [{K}, {N}] fp32 (nki.simulate: outputs and a Profile)")


def profile_large():
    """Timing only on a bf16 problem too large to compute here: 4096 x 2048 x 4096 is 69 GFLOP."""
    K, M, N = 4096, 2048, 4096
    specs = (nki.spec((K, M), "bfloat16"), nki.spec((K, N), "bfloat16"))
    print(f"\n[{M}, {K}] @ [{K}, {N}] bf16 on trn2 (nki.benchmark, timing only):")
    print(f"  {'step':<30} {'latency':>11} {'bound by':>9} {'Tensor engine':>14}")
    first = previous = None
    for name, kernel in STEPS:
        prof = nki.benchmark(kernel, *specs, target="trn2")
        print(f"  {name:<30} {prof.latency_us:>8.1f} us {prof.bottleneck:>9} {prof.tensor_engine_utilisation:>13.1%}")
        # The lesson's claim, checked: each change makes the modelled kernel faster.
        assert previous is None or prof.latency_us < previous.latency_us, f"step {name} is not faster"
        first, previous = first or prof, prof
    print(f"  speed-up from step 1 to step 4: {first.latency_us / previous.latency_us:.1f}x")
    return previous


def explain(prof):
    """Why each engine and DMA queue was busy: useful work, fixed overheads, waiting on dependencies."""
    print(f"\n  where the time of '{prof.kernel}' went (us):")
    print(f"  {'unit':<8} {'useful':>10} {'overhead':>10} {'contention':>11} {'waiting':>10}")
    for unit, part in prof.busy_split.items():
        if unit.startswith("dma") and unit != "dma0":
            continue  # the 16 queues look alike here: show the first
        print(f"  {unit:<8} {part['useful'] / 1e3:>10.1f} {part['overhead'] / 1e3:>10.1f} "
              f"{part['contention'] / 1e3:>11.1f} {part['waiting'] / 1e3:>10.1f}")
    # The Tensor engine's idle time is waiting on dependencies (its operands' loads, PSUM freed by the copy out);
    # a DMA queue's overhead is the fixed cost per transfer and the per-descriptor cost of its rows.
    assert prof.busy_split["tensor"]["useful"] <= prof.unit_busy_ns["tensor"] + 1e-6


def main():
    check_numbers()
    best = profile_large()
    explain(best)
    # The rich summary: per-engine busy time and its split, FLOPs and bytes, roofline position, critical path.
    best.summary()


if __name__ == "__main__":
    main()
