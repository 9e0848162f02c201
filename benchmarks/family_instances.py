"""Modelled latency of shape-family instances against the concrete trace of the same shape (trn2, timing only).

    python benchmarks/family_instances.py [--quick]

For linear's fused kernels at ViT-B/16's widths (``mlp``, ``layernorm_mlp``, ``layernorm_qkv``, ``M x 768`` bf16):
each family of kernels/linear/kernel.toml that holds a sample row count, instantiated there, against the kernel
traced through its launcher for that shape (what ``trust_remote_code`` or a fixed specialisation runs). A family
instance masks its last token block where a concrete trace cuts it to its size, and past four blocks the LayerNorm
kernels loop (kernels/linear/token_blocks.py), so the two can differ; prints both and the ratio.

Then linear's and layernorm_linear's width families (kernels/linear/widths.py: M, K and N symbolic, one plain
schedule for every width) at widths nobody declared (ViT-L/16's 1024 / 4096, and others), bf16, against the
concrete trace of the same shape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
import nki_dsl.language as nl  # noqa: E402
from kernels.linear import widths  # noqa: E402
from kernels.linear.launcher import (  # noqa: E402
    plan_layernorm_linear,
    plan_layernorm_mlp,
    plan_layernorm_qkv,
    plan_linear,
    plan_mlp,
)

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


# (entry, epilogue, M, K, N): ViT-L/16's qkv, proj, fc1 and fc2 at batch 1 and 8, and other widths
WIDTHS = [("linear", "bias", 197, 1024, 3072), ("linear", "residual", 197, 1024, 1024),
          ("linear", "gelu", 197, 1024, 4096), ("linear", "residual", 197, 4096, 1024),
          ("linear", "bias", 1576, 1024, 3072), ("linear", "gelu", 1576, 1024, 4096),
          ("linear", "residual", 1576, 4096, 1024), ("linear", "bias", 197, 384, 1152),
          ("linear", "none", 300, 8192, 512), ("linear", "bias", 1000, 1000, 1100),
          ("layernorm_linear", "bias", 197, 1024, 3072), ("layernorm_linear", "gelu", 1576, 1024, 4096),
          ("layernorm_linear", "bias", 197, 384, 1152)]  # fmt: skip
QUICK_WIDTHS = WIDTHS[:3] + WIDTHS[-3:-2]


def _width_shapes(entry, epilogue, m, k, n):
    if entry == "linear":
        return [(m, k), (k, n)] + [(n,)] * (epilogue != "none") + [(m, n)] * (epilogue == "residual")
    return [(m, k), (k,), (k,), (k, n)] + [(n,)] * (epilogue != "none")


def _width_family(entry, epilogue, k, n):
    plan = plan_linear if entry == "linear" else plan_layernorm_linear
    constants = {"epilogue": epilogue} | ({"epsilon": widths.EPSILON} if entry != "linear" else {})
    (k0, k1), (n0, n1) = next(b for b in widths.width_boxes(2, entry != "linear")
                              if b[0][0] <= k <= b[0][1] and b[1][0] <= n <= b[1][1])  # fmt: skip
    ranges = {"M": (1, 65536), "K": (k0, k1), "N": (n0, n1)}
    specs = [nki.spec(s, "bfloat16", dims={d: ranges[d] for d in s}) for s in _width_shapes(entry, epilogue, *"MKN")]
    launch, args, kwargs = plan(*[_Arg(s, sh) for s, sh in zip(specs, nki.symbolic_shapes(*specs))], **constants)
    family = nki.trace(launch, *[a.spec for a in args], target="trn2", **kwargs)
    return family, plan, constants, f"{k0}..{k1}/{n0}..{n1}"


def widths_table(cases) -> None:
    print(f"\n{'kernel':17} {'epilogue':8} {'M x K x N':>16} {'family K/N':>18} {'family us':>10} {'concrete us':>12} "
          f"{'ratio':>6}")  # fmt: skip
    for entry, epilogue, m, k, n in cases:
        family, plan, constants, box = _width_family(entry, epilogue, k, n)
        shapes = _width_shapes(entry, epilogue, m, k, n)
        instance = family.instantiate(*shapes, target="trn2")
        launch, args, kwargs = plan(*[np.zeros(s, nl.bfloat16) for s in shapes], **constants)
        concrete = nki.trace(launch, *[nki.spec(a.shape, "bfloat16") for a in args], target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        print(f"{entry:17} {epilogue:8} {f'{m}x{k}x{n}':>16} {box:>18} {fam:10.1f} {con:12.1f} {fam / con:6.3f}",
              flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help=f"row counts {QUICK} only, and fewer widths")
    quick = ap.parse_args().quick
    rows = QUICK if quick else ROWS
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
    widths_table(QUICK_WIDTHS if quick else WIDTHS)


if __name__ == "__main__":
    main()
