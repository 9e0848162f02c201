"""Verify + compile time of one kernel for the simulator, on the two paths that reach it (issue 14: the kernel is
lowered once per (kernel, target), by the verifier, and compiling reuses that lowering, the placing rules' live
ranges and fits, and verifies nothing more unless asked to).

    python benchmarks/verify_compile.py [--seq 197] [--repeat 5] [--target trn2]

The library's ViT attention (kernels/vit_attn, 12 heads of 64, bf16):

* ``trace``: traced from shapes as a first call does (``nki.phase_times``, wall seconds): ``verify`` is the
  verifier (its rules and the lowering its placing rules read), ``compile`` the pass pipeline and allocation
  (a call's: the test suite also verifies each pass's output, ``passes/pipeline.CHECK_EACH_PASS``, which costs
  about one more verification);
* ``hub load``: its IR text parsed and verified as untrusted input (``nki.parse_ir``, what the Hub loader runs:
  ``verify``), then a first simulator profile (``compile`` = that profile's CPU seconds minus a second one's, which
  reuses the compiled program and only simulates).

Prints the best of ``--repeat`` runs (on a shared machine the load only adds time) and the sum. The trace itself
is not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from kernels.vit_attn.kernel import attention_kernel  # noqa: E402


def _trace_path(args, target) -> tuple[float, float]:
    times = nki.phase_times(attention_kernel, *args, target=target)
    verify = sum(s for k, s in times.items() if k.startswith("verify ") and not k.startswith("verify after "))
    return verify, sum(s for k, s in times.items() if k != "trace") - verify


def _hub_path(text: str, target) -> tuple[float, float]:
    start = time.process_time()
    traced = nki.parse_ir(text, target=target)
    parsed = time.process_time()
    traced.profile(target)
    first = time.process_time()
    traced.profile(target)
    return parsed - start, (first - parsed) - (time.process_time() - first)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=197)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--target", default="trn2")
    opts = ap.parse_args()
    target = nki.get_target(opts.target)
    args = (*(nki.spec((1, 12, opts.seq, 64), "bfloat16"),) * 3, 0.125)
    text = nki.trace(attention_kernel, *args, target=target).text
    print(f"ViT attention 1x12x{opts.seq}x64 bf16 on {target.name}, best of {opts.repeat} (seconds)")
    print(f"{'path':10} {'verify':>8} {'compile':>8} {'total':>8}")
    for name, run in (("trace", lambda: _trace_path(args, target)), ("hub load", lambda: _hub_path(text, target))):
        runs = [run() for _ in range(opts.repeat)]
        v, c = min(r[0] for r in runs), min(r[1] for r in runs)
        print(f"{name:10} {v:8.3f} {c:8.3f} {v + c:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
