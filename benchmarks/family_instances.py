"""Modelled latency of shape-family instances against the concrete trace of the same shape (trn2, timing only).

    python benchmarks/family_instances.py [--quick]

For linear's fused kernels at ViT-B/16's widths (``mlp``, ``layernorm_mlp``, ``layernorm_qkv``, ``M x 768`` bf16):
each family of kernels/linear/kernel.toml that holds a sample row count, instantiated there, against the kernel
traced through its launcher for that shape (what ``trust_remote_code`` or a fixed specialisation runs). A family
instance masks its last token block where a concrete trace cuts it to its size, and past four blocks the LayerNorm
kernels loop (kernels/linear/token_blocks.py), so the two can differ; prints both and the ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
import nki_dsl.language as nl  # noqa: E402
from kernels.linear.launcher import plan_layernorm_mlp, plan_layernorm_qkv, plan_mlp  # noqa: E402

D, H, QKV = 768, 3072, 2304
KERNELS = {
    "mlp": (plan_mlp, [("M", D), (D, H), (H,), (H, D), (D,), ("M", D)], {}),
    "layernorm_mlp": (plan_layernorm_mlp, [("M", D), (D,), (D,), (D, H), (H,), (H, D), (D,)], {"epsilon": 1e-6}),
    "layernorm_qkv": (plan_layernorm_qkv, [("M", D), (D,), (D,), (D, QKV), (QKV,)], {"scale": 0.125, "epsilon": 1e-6}),
}
# the ranges of kernel.toml: (lo, hi) per kernel
RANGES = {
    "mlp": [(1, 128), (129, 256), (257, 384), (385, 512), (513, 65536)],
    "layernorm_mlp": [(1, 128), (129, 256), (257, 384), (385, 512), (513, 1024), (1025, 1536), (1537, 2048),
                      (2049, 65536)],
}  # fmt: skip
RANGES["layernorm_qkv"] = RANGES["layernorm_mlp"]
# ViT token counts (197 per image: batch 1, 3, 8, 13, 18), a prime, one more than 5 images, whole blocks
ROWS = (197, 591, 986, 1576, 2048, 2053, 2561, 3546)
QUICK = (591, 1576, 2561)


class _Arg:
    def __init__(self, spec, shape):
        self.spec, self.shape, self.ndim = spec, shape, len(shape)
        self.dtype = nl.bfloat16


def _family(plan, shapes, lo, hi, constants):
    specs = [nki.spec(s, "bfloat16", dims={"M": (lo, hi)} if "M" in s else None) for s in shapes]
    launch, args, kwargs = plan(*[_Arg(s, sh) for s, sh in zip(specs, nki.symbolic_shapes(*specs))], **constants)
    return nki.trace(launch, *[a.spec for a in args], target="trn2", **kwargs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help=f"row counts {QUICK} only")
    rows = QUICK if ap.parse_args().quick else ROWS
    print(f"{'kernel':15} {'M':>5} {'family':>13} {'family us':>10} {'concrete us':>12} {'ratio':>6}")
    for name, (plan, shapes, constants) in KERNELS.items():
        families = {}
        for m in rows:
            lo, hi = next(r for r in RANGES[name] if r[0] <= m <= r[1])
            if (lo, hi) not in families:
                families[lo, hi] = _family(plan, shapes, lo, hi, constants)
            concrete_shapes = [tuple(m if d == "M" else d for d in s) for s in shapes]
            instance = families[lo, hi].instantiate(*concrete_shapes, target="trn2")
            launch, args, kwargs = plan(*[np.zeros(s, nl.bfloat16) for s in concrete_shapes], **constants)
            concrete = nki.trace(launch, *[nki.spec(a.shape, "bfloat16") for a in args], target="trn2", **kwargs)
            fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
            print(f"{name:15} {m:5d} {f'{lo}..{hi}':>13} {fam:10.1f} {con:12.1f} {fam / con:6.3f}", flush=True)


if __name__ == "__main__":
    main()
