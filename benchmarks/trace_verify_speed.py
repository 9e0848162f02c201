"""Trace + verify time of the largest kernels against sequence length, phase by phase (issue 11: a flash-attention
backward at seqlen 8192 in under 2 s, and a verifier whose cost does not grow with trip counts).

    python benchmarks/trace_verify_speed.py [--seqlens 512 1024 2048 4096 8192] [--repeat 3] [--target trn2]

Kernels, from shapes alone (``nki.spec``, bf16):

* ``flash_attn_bwd``: tests/kernels/legacy/flash_bwd.py, in the style of AWS's (GQA with 4 query heads on 2 KV
  heads, d = 128, causal, 512-key score tiles, a nested trace-mode helper, two-loop-variable tile masks);
* ``flash_bwd+wsd``: the same with a sliding window of 1024, attention sinks (and their gradient) and dropout
  (a per-tile ``nl.random_seed`` and two ``nl.dropout`` draws);
* ``flash_fwd``: tests/kernels/nki_style/attention.py, AWS's flash forward (online softmax, 512-key blocks);
* ``vit attention``: the library's ViT attention (kernels/vit_attn, 12 heads of 64), whose query tiles are
  unrolled in Python (software pipelining), so its IR grows with the sequence: the contrast case;
* ``matmul blocked``: the library's blocked matmul on [S, S] x [S, S].

Each row is the best of ``--repeat`` fresh traces (``nki.phase_times``: no cache) of one size: trace, the verifier
(its program walk and every rule), the pass pipeline with the verification after each pass, allocation, their
total, and the number of IR lines. Then, per kernel, the phases at the largest size that takes longest, and the
growth of the total and of the verifier from the smallest to the largest size. A kernel whose loops stay symbolic
keeps the same IR at every size, so its times should not grow; the figures are wall-clock on this machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from kernels.matmul import matmul_blocked  # noqa: E402
from kernels.vit_attn.kernel import attention_kernel as vit_attention  # noqa: E402
from tests.kernels.legacy.flash_bwd import FlashConfig, flash_attn_bwd  # noqa: E402
from tests.kernels.nki_style.attention import flash_fwd  # noqa: E402

HEADS, KV_HEADS, D = 4, 2, 128


def _bf16(*shape):
    return nki.spec(shape, "bfloat16")


def flash_bwd_call(seq: int):
    q = _bf16(1, HEADS, D, seq)
    kv = _bf16(1, KV_HEADS, D, seq)
    lse = nki.spec((1, HEADS, 128, seq // 128), "float32")
    return flash_attn_bwd[1, KV_HEADS], (q, kv, kv, q, q, lse)


def flash_bwd_features_call(seq: int):
    kernel, args = flash_bwd_call(seq)
    seed, sinks = nki.spec((1,), "int32"), nki.spec((HEADS,), "float32")
    # seed, sinks, config, softmax_scale, dropout_p, sliding_window
    return kernel, (*args, seed, sinks, FlashConfig(), None, 0.1, 1024)


def flash_fwd_call(seq: int):
    return flash_fwd[1, KV_HEADS], (_bf16(1, KV_HEADS, D, seq), _bf16(1, KV_HEADS, D, seq), _bf16(1, KV_HEADS, seq, D))


def vit_call(seq: int):
    return vit_attention, (_bf16(1, 12, seq, 64),) * 3 + (0.125,)


def matmul_call(seq: int):
    return matmul_blocked, (_bf16(seq, seq), _bf16(seq, seq))


# name -> (call builder, the sizes it runs at: the ViT kernel's SBUF holds a whole sequence of K and V; the blocked
# matmul's blocks are 512 x 1024 rows and columns)
CASES = {
    "flash_attn_bwd": (flash_bwd_call, range(0, 1 << 20)),
    "flash_bwd+wsd": (flash_bwd_features_call, range(0, 1 << 20)),
    "flash_fwd": (flash_fwd_call, range(0, 1 << 20)),
    "vit attention": (vit_call, range(0, 2049)),
    "matmul blocked": (matmul_call, range(2048, 1 << 20)),
}


def best_phases(kernel, args, target: str, repeat: int) -> dict[str, float]:
    runs = [nki.phase_times(kernel, *args, target=target) for _ in range(repeat)]
    return min(runs, key=lambda r: sum(r.values()))


def _groups(phases: dict[str, float]) -> dict[str, float]:
    verify = sum(v for k, v in phases.items() if k.startswith("verify ") and not k.startswith("verify after"))
    passes = sum(v for k, v in phases.items() if k.startswith("pass ") or k.startswith("verify after"))
    return {"trace": phases["trace"], "verify": verify, "passes": passes, "allocate": phases["allocate"],
            "total": sum(phases.values())}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--target", default="trn2")
    parser.add_argument("--kernels", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    print(f"{'kernel':16} {'seqlen':>6} {'trace s':>8} {'verify s':>9} {'passes s':>9} {'alloc s':>8} "
          f"{'total s':>8} {'IR lines':>9}")  # fmt: skip
    for name in args.kernels:
        build, allowed = CASES[name]
        sizes = [s for s in args.seqlens if s in allowed]
        rows = {}
        for seq in sizes:
            kernel, kargs = build(seq)
            phases = best_phases(kernel, kargs, args.target, args.repeat)
            lines = len(nki.trace(kernel, *kargs, target=args.target).text.splitlines())
            g = rows[seq] = _groups(phases) | {"phases": phases}
            print(f"{name:16} {seq:6} {g['trace']:8.3f} {g['verify']:9.3f} {g['passes']:9.3f} {g['allocate']:8.3f} "
                  f"{g['total']:8.3f} {lines:9,}")  # fmt: skip
        if not rows:
            continue
        top = max(rows, key=lambda s: rows[s]["total"])
        slowest = sorted(rows[top]["phases"].items(), key=lambda kv: -kv[1])[:6]
        print(f"  {name} at seqlen {top}, slowest phases: " + ", ".join(f"{k} {v:.3f} s" for k, v in slowest))
        lo, hi = min(rows), max(rows)
        print(f"  {name} growth seqlen {lo} -> {hi} ({hi // lo}x): total {rows[lo]['total']:.3f} -> "
              f"{rows[hi]['total']:.3f} s ({rows[hi]['total'] / rows[lo]['total']:.2f}x), verifier "
              f"{rows[lo]['verify']:.3f} -> {rows[hi]['verify']:.3f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
