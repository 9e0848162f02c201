"""Verify + compile time of one kernel for the simulator, on the two paths that reach it (issue 14: the kernel is
lowered once per (kernel, target), by the verifier, and compiling reuses that lowering).

    python benchmarks/verify_compile.py [--seq 197] [--repeat 5] [--target trn2]

* ``trace``: the library's ViT attention (kernels/vit_attn, 12 heads of 64, bf16) traced from shapes, then
  verified and compiled for the simulator (the pass pipeline with its verification, then allocation), as a
  first ``nki.simulate`` call does;
* ``hub load``: the same kernel's IR text parsed and verified as untrusted input (``nki.parse_ir``, what the Hub
  loader runs), then compiled the same way.

Prints the median CPU seconds (``time.process_time``: wall time floats on a shared machine) of verify (with the
parse on the hub path) and of compile, and their sum. The trace itself is not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from kernels.vit_attn.kernel import attention_kernel  # noqa: E402
from nki_dsl.passes import compile_for_target  # noqa: E402
from nki_dsl.passes.verifier import check  # noqa: E402


def _median(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def _trace_path(seq: int, target) -> tuple[float, float]:
    from nki_dsl.trace.jit import bind

    args = (nki.spec((1, 12, seq, 64), "bfloat16"),) * 3 + (0.125,)
    bound, _ = bind(attention_kernel.fn, args, {})
    ir = attention_kernel._trace(bound, (), target)[0]  # a fresh trace, outside the jit cache
    return _verify_compile(lambda: check(ir, target), target)


def _hub_path(text: str, target) -> tuple[float, float]:
    return _verify_compile(lambda: nki.parse_ir(text, target=target).ir, target)


def _verify_compile(verify, target) -> tuple[float, float]:
    start = time.process_time()
    kernel = verify()
    verified = time.process_time()
    compile_for_target(kernel, target)
    return verified - start, time.process_time() - verified


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=197)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", default="trn2")
    args = ap.parse_args()
    target = nki.get_target(args.target)
    text = nki.trace(attention_kernel, *(nki.spec((1, 12, args.seq, 64), "bfloat16"),) * 3, 0.125,
                     target=target).text  # fmt: skip
    print(f"ViT attention 1x12x{args.seq}x64 bf16 on {target.name}, median of {args.repeat} (CPU seconds)")
    print(f"{'path':10} {'verify':>8} {'compile':>8} {'total':>8}")
    for name, run in (("trace", lambda: _trace_path(args.seq, target)), ("hub load", lambda: _hub_path(text, target))):
        v, c = _median([run() for _ in range(args.repeat)])
        print(f"{name:10} {v:8.3f} {c:8.3f} {v + c:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
