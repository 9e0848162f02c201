"""How fast the engine simulator runs in timing-only mode, in instructions per second.

    python benchmarks/simulator_speed.py [--small]

Simulates a blocked bf16 matmul of [4096, 8192] x [8192, 8192] (lhsT [8192, 4096], rhs [8192, 8192]) from shapes
only (nki.spec) on trn2 and prints the instruction count, wall time (trace excluded, then end to end), modelled
latency and Tensor-engine utilisation. Targets (issue 3): >= 100,000 instructions/s and < 30 s in total.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
import nki_dsl.language as nl  # noqa: E402
from nki_dsl.backends.simulator import profile  # noqa: E402


@nki.jit
def matmul_blocked(lhsT, rhs, BM=4, BN=2):
    """Each [K, BM*128] strip of lhsT is loaded once and reused for every N block; each [K, BN*512] strip of rhs
    is reused by the BM stationary tiles of an M block."""
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // 128
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (128 * BM)):
        lhs = nl.ndarray((BM, KT, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(BM):
            for k in nl.affine_range(KT):
                lhs[bm, k] = nl.load(lhsT[k * 128:(k + 1) * 128, (m * BM + bm) * 128:(m * BM + bm + 1) * 128])
        for n in nl.affine_range(N // (512 * BN)):
            rhs_t = nl.ndarray((BN, KT, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(BN):
                for k in nl.affine_range(KT):
                    rhs_t[bn, k] = nl.load(rhs[k * 128:(k + 1) * 128, (n * BN + bn) * 512:(n * BN + bn + 1) * 512])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(KT):
                        acc += nl.matmul(lhs[bm, k], rhs_t[bn, k], transpose_x=True)
                    nl.store(out[(m * BM + bm) * 128:(m * BM + bm + 1) * 128,
                                 (n * BN + bn) * 512:(n * BN + bn + 1) * 512], value=nl.copy(acc, dtype=out.dtype))
    return out


def run(M: int, K: int, N: int, target: str = "trn2"):
    start = time.perf_counter()
    ir = nki.trace(matmul_blocked, nki.spec((K, M), "bfloat16"), nki.spec((K, N), "bfloat16"), target=target).ir
    traced = time.perf_counter()
    prof = profile(ir, target)
    done = time.perf_counter()
    return prof, done - traced, done - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="[1024, 2048] x [2048, 2048] instead")
    args = parser.parse_args()
    M, K, N = (1024, 2048, 2048) if args.small else (4096, 8192, 8192)
    prof, sim_s, total_s = run(M, K, N)
    print(f"blocked bf16 matmul [{M}, {K}] x [{K}, {N}] on trn2, timing only")
    print(f"instructions: {prof.instructions:,}")
    print(f"simulate: {sim_s:.2f} s  ({prof.instructions / sim_s:,.0f} instructions/s); end to end {total_s:.2f} s")
    print(f"modelled latency {prof.latency_us:,.1f} us, Tensor-engine utilisation "
          f"{100 * prof.tensor_engine_utilisation:.1f} %, bound by {prof.bottleneck}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
