"""Modelled latency of shape-family instances against the concrete trace of the same shape (trn2, timing only).

    python benchmarks/family_instances.py [--quick]
    python benchmarks/family_instances.py --attention   # only vit-attn's families (the last two tables)

For linear's fused kernels at ViT-B/16's widths (``mlp``, ``layernorm_mlp``, ``layernorm_qkv``, ``M x 768`` bf16):
each family of kernels/linear/kernel.toml that holds a sample row count, instantiated there, against the kernel
traced through its launcher for that shape (what ``trust_remote_code`` or a fixed specialisation runs). A family
instance masks its last token block where a concrete trace cuts it to its size, and past four blocks the LayerNorm
kernels loop (kernels/linear/token_blocks.py), so the two can differ; prints both and the ratio.

Then linear's and layernorm_linear's width families (kernels/linear/widths.py: M, K and N symbolic, one plain
schedule for every width) at widths nobody declared (ViT-L/16's 1024 / 4096, and others), bf16, against the
concrete trace of the same shape.

Then the row kernels' width families (softmax, rmsnorm, layernorm: ``widths.py`` in each package, the row length W
symbolic, rmsnorm's and layernorm's epsilon a runtime scalar) and matmul's tiled family past 8192, against the
concrete trace of the same shape.

Then the fused kernels' width families (kernels/linear/fused_widths.py: M, K, H and N symbolic, one schedule per 128
tokens; the MLPs past the resident boxes streamed by hidden blocks, fused_streamed.py) at ViT-B/L/H's widths and
others, bf16, against the concrete trace of the same shape; and the streamed MLP schedule against the resident one
where both fit.

Last, vit-attn's ``attention`` families over B, H, S and D (on-chip tensors sized for D = 128: up to 512 tokens the
resident score strip of kernels/vit_attn/seq_strip.py, past that flash over key blocks of 512, seq_family.py),
bf16, against the concrete trace (resident strip or flash, tuned per shape), and its ``attention_qkv`` (B, S and
the width) and ``attention_split`` (one sequence's tokens) families (kernels/vit_attn/families.py) likewise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
import nki_dsl.language as nl  # noqa: E402
from kernels.linear import fused_widths, widths  # noqa: E402
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
    def __init__(self, spec, shape, dtype="bfloat16"):
        self.spec, self.shape, self.ndim = spec, shape, len(shape)
        self.dtype = nl.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)


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
    constants = {"epilogue": epilogue} | ({"epsilon": 1e-6} if entry != "linear" else {})
    (k0, k1), (n0, n1) = next(b for b in widths.width_boxes(2, entry != "linear")
                              if b[0][0] <= k <= b[0][1] and b[1][0] <= n <= b[1][1])  # fmt: skip
    ranges = {"M": (1, 65536), "K": (k0, k1), "N": (n0, n1)}
    specs = [nki.spec(s, "bfloat16", dims={d: ranges[d] for d in s}) for s in _width_shapes(entry, epilogue, *"MKN")]
    launch, args, kwargs = plan(*[_Arg(s, sh) for s, sh in zip(specs, nki.symbolic_shapes(*specs))], **constants)
    family = nki.trace(launch, *_specs(args), target="trn2", **kwargs)
    return family, plan, constants, f"{k0}..{k1}/{n0}..{n1}"


def _specs(args):
    """A family's arguments as specs: the arrays', then the runtime scalars' (epsilon, layernorm_qkv's scale), one
    element each; a bias left out stays None."""
    return [a.spec if isinstance(a, _Arg) else a if a is None else nki.spec(a.shape, str(a.dtype)) for a in args]


def widths_table(cases) -> None:
    print(f"\n{'kernel':17} {'epilogue':8} {'M x K x N':>16} {'family K/N':>18} {'family us':>10} {'concrete us':>12} "
          f"{'ratio':>6}")  # fmt: skip
    for entry, epilogue, m, k, n in cases:
        family, plan, constants, box = _width_family(entry, epilogue, k, n)
        shapes = _width_shapes(entry, epilogue, m, k, n)
        instance = family.instantiate(*shapes, *[(1,)] * (len(family.param_names) - len(shapes)), target="trn2")
        launch, args, kwargs = plan(*[np.zeros(s, nl.bfloat16) for s in shapes], **constants)
        concrete = nki.trace(launch, *[nki.spec(a.shape, "bfloat16") for a in args], target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        print(f"{entry:17} {epilogue:8} {f'{m}x{k}x{n}':>16} {box:>18} {fam:10.1f} {con:12.1f} {fam / con:6.3f}",
              flush=True)  # fmt: skip


# (package, dtype, N, W): ViT and LLM widths, ragged ones, each package's largest
ROWS_CASES = [("softmax", "float32", 256, 700), ("softmax", "bfloat16", 4096, 4096), ("softmax", "float32", 300, 8192),
              ("rmsnorm", "float32", 197, 768), ("rmsnorm", "bfloat16", 4096, 4096), ("rmsnorm", "float32", 300, 16384),
              ("layernorm", "bfloat16", 197, 768), ("layernorm", "bfloat16", 1576, 1280),
              ("layernorm", "float32", 4096, 1000), ("layernorm", "bfloat16", 300, 16384)]  # fmt: skip
# (dtype, K, M, N): matmul's tiled family past the old 8192 limit, at shapes the launcher tiles too (K above the
# blocked kernel's 4096, or M / N off its blocks); the last fills the blocks but has no blocked family (K = 640)
MATMUL_CASES = [("bfloat16", 8192, 1024, 12288), ("bfloat16", 12288, 640, 1536), ("float32", 384, 256, 1536),
                ("bfloat16", 640, 512, 1024)]


def rows_table(quick: bool) -> None:
    import importlib

    from kernels.matmul.kernel import matmul_tiled
    from kernels.matmul.launcher import MAX_DIM, plan_matmul

    print(f"\n{'kernel':10} {'dtype':9} {'N x W':>12} {'family W':>12} {'family us':>10} {'concrete us':>12} "
          f"{'ratio':>6}")  # fmt: skip
    for package, dtype, n, w in ROWS_CASES[::3] if quick else ROWS_CASES:
        launcher = importlib.import_module(f"kernels.{package}.launcher")
        widths = importlib.import_module(f"kernels.{package}.widths")
        top = launcher.max_columns(dtype) if hasattr(launcher, "max_columns") else launcher.MAX_COLUMNS
        lo, hi = next(b for b in widths.width_boxes(dtype, top) if b[0] <= w <= b[1])
        names = {"softmax": [("N", "W")], "rmsnorm": [("N", "W"), ("W",)]}.get(package, [("N", "W"), ("W",), ("W",)])
        ranges = {"N": (1, 65536), "W": (lo, hi)}
        specs = [nki.spec(s, dtype, dims={d: ranges[d] for d in s}) for s in names]
        plan = getattr(launcher, f"plan_{package}")
        launch, args, kwargs = plan(*[_Arg(s, sh, dtype) for s, sh in zip(specs, nki.symbolic_shapes(*specs))])
        args = [a.spec if isinstance(a, _Arg) else nki.spec(a.shape, str(a.dtype)) for a in args]
        family = nki.trace(launch, *args, target="trn2", **kwargs)
        shapes = [tuple({"N": n, "W": w}[d] for d in s) for s in names]
        instance = family.instantiate(*shapes, *[(1,)] * (len(args) - len(shapes)), target="trn2")
        launch, args, kwargs = plan(*[nki.spec(s, dtype) for s in shapes])
        concrete = nki.trace(launch, *args, target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        print(f"{package:10} {dtype:9} {f'{n}x{w}':>12} {f'{lo}..{hi}':>12} {fam:10.1f} {con:12.1f} {fam / con:6.3f}",
              flush=True)  # fmt: skip
    print(f"\n{'matmul':10} {'dtype':9} {'K x M x N':>16} {'family us':>10} {'concrete us':>12} {'ratio':>6}")
    for dtype, k, m, n in MATMUL_CASES[:1] if quick else MATMUL_CASES:
        ranges = {"K": (128, MAX_DIM, 128), "M": (128, MAX_DIM, 128), "N": (512, MAX_DIM, 512)}
        family = nki.trace(matmul_tiled, *[nki.spec(s, dtype, dims={d: ranges[d] for d in s}) for s in
                                           (("K", "M"), ("K", "N"))], target="trn2")  # fmt: skip
        instance = family.instantiate((k, m), (k, n), target="trn2")
        launch, args, kwargs = plan_matmul(nki.spec((k, m), dtype), nki.spec((k, n), dtype))
        concrete = nki.trace(launch, *args, target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        print(f"{'tiled':10} {dtype:9} {f'{k}x{m}x{n}':>16} {fam:10.1f} {con:12.1f} {fam / con:6.3f}", flush=True)
# vit-attn's attention over any (B, H, S, D) (kernels/vit_attn/seq_family.py), bf16: ViT-B/16 and DINOv2-L/14
# shapes (which the models' own families run in a bundle) and lengths no model has
ATTENTION = [(1, 12, 197, 64), (8, 12, 197, 64), (1, 16, 1370, 64), (1, 16, 300, 64), (1, 16, 640, 80),
             (1, 8, 4096, 64), (1, 2, 129, 64)]  # fmt: skip
QUICK_ATTENTION = ATTENTION[:1] + ATTENTION[3:4]


def attention_table(cases) -> None:
    import re

    from kernels.vit_attn.launcher import plan_attention

    toml = (Path(__file__).resolve().parents[1] / "kernels" / "vit_attn" / "kernel.toml").read_text()
    boxes = [dict(re.findall(r'(\w) = "(\d+\.\.\d+)"', dims)) for dims in
             re.findall(r'args = \["B x H x S x D:bfloat16".*?dims = \{ (.*?) \}', toml)]  # fmt: skip
    print(f"\n{'attention B x H x S x D':24} {'family S':>12} {'family us':>10} {'concrete us':>12} {'ratio':>6}")
    for shape in cases:
        box = next(b for b in boxes if int(b["S"].split("..")[0]) <= shape[2] <= int(b["S"].split("..")[1]))
        dims = {k: tuple(map(int, v.split(".."))) for k, v in box.items()}
        spec = nki.spec(("B", "H", "S", "D"), "bfloat16", dims=dims)
        launch, args, kwargs = plan_attention(*[_Arg(spec, nki.symbolic_shapes(spec)[0])] * 3)
        family = nki.trace(launch, *[spec] * 3, target="trn2", **kwargs)
        instance = family.instantiate(shape, shape, shape, target="trn2")
        launch, args, kwargs = plan_attention(*[np.zeros(shape, nl.bfloat16)] * 3)
        concrete = nki.trace(launch, *[nki.spec(shape, "bfloat16")] * 3, target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        print(f"{'x'.join(map(str, shape)):24} {box['S']:>12} {fam:10.1f} {con:12.1f} {fam / con:6.3f}", flush=True)


# vit-attn's attention_qkv (B, S, heads, head_dim) and attention_split (tokens of one sequence, heads, head_dim) over
# any sequence length (kernels/vit_attn/families.py), bf16, against the concrete trace of the same shape
ATTENTION_QKV = [(1, 197, 12, 64), (8, 197, 12, 64), (1, 300, 16, 64), (1, 640, 16, 80), (1, 4096, 8, 64)]
ATTENTION_SPLIT = [(197, 12, 64), (300, 12, 64), (577, 16, 64)]
QUICK_QKV, QUICK_SPLIT = ATTENTION_QKV[2:3], ATTENTION_SPLIT[1:2]


def attention_layouts_table(qkv_cases, split_cases) -> None:
    from kernels.vit_attn import families
    from kernels.vit_attn.launcher import plan_attention_qkv, plan_attention_split

    print(f"\n{'attention_qkv B x S x H x D':28} {'family S':>10} {'family us':>10} {'concrete us':>12} {'ratio':>6}")
    for b, seq, h, d in qkv_cases:
        _, s_range, b_top, h_top = next(f for f in families.families()
                                        if f[0] == "bfloat16" and f[1][0] <= seq <= f[1][1])  # fmt: skip
        dims = {"B": (1, b_top), "S": s_range, "H": (1, h_top), "D": (1, 128)}
        spec = nki.spec(("B", "S", 3, "H", "D"), "bfloat16", dims=dims)  # the per-head view (head_views.py)
        shape = nki.symbolic_shapes(spec)[0]
        launch, _, kwargs = plan_attention_qkv(_Arg(spec, shape), shape[3])
        instance = nki.trace(launch, spec, target="trn2", **kwargs).instantiate((b, seq, 3, h, d), target="trn2")
        launch, args, kwargs = plan_attention_qkv(np.zeros((b, seq, 3 * h * d), nl.bfloat16), h)
        concrete = nki.trace(launch, nki.spec((b, seq, 3 * h * d), "bfloat16"), target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        name = f"{b}x{seq}x{h}x{d}"
        print(f"{name:28} {f'{s_range[0]}..{s_range[1]}':>10} {fam:10.1f} {con:12.1f} {fam / con:6.3f}", flush=True)
    print(f"\n{'attention_split T x H x D':28} {'family T':>10} {'family us':>10} {'concrete us':>12} {'ratio':>6}")
    for tokens, h, d in split_cases:
        _, s_range, b_top, h_top = next(f for f in families.families()
                                        if f[0] == "bfloat16" and f[1][0] <= tokens <= f[1][1])  # fmt: skip
        dims = {"B": (1, b_top), "S": s_range, "H": (1, h_top), "D": (1, 128)}
        specs = [nki.spec((2, "H", "D", "B", "S"), "bfloat16", dims=dims),
                 nki.spec(("B", "S", "H", "D"), "bfloat16", dims=dims)]  # fmt: skip
        shapes = nki.symbolic_shapes(*specs)
        launch, _, kwargs = plan_attention_split(*[_Arg(s, sh) for s, sh in zip(specs, shapes)], shapes[0][1],
                                                 seq=shapes[0][4], batch=shapes[0][3])  # fmt: skip
        instance = nki.trace(launch, *specs, target="trn2", **kwargs).instantiate((2, h, d, 1, tokens),
                                                                                  (1, tokens, h, d), target="trn2")
        flat = [(2 * h * d, tokens), (tokens, h * d)]
        launch, args, kwargs = plan_attention_split(*[np.zeros(s, nl.bfloat16) for s in flat], h, batch=1)
        concrete = nki.trace(launch, *[nki.spec(s, "bfloat16") for s in flat], target="trn2", **kwargs)
        fam, con = instance.profile("trn2").latency_us, concrete.profile("trn2").latency_us
        name = f"{tokens}x{h}x{d}"
        print(f"{name:28} {f'{s_range[0]}..{s_range[1]}':>10} {fam:10.1f} {con:12.1f} {fam / con:6.3f}", flush=True)


# (entry, M, K, H, N): ViT-B/16 and ViT-L/16 at batch 1 and 8, ViT-H/14's qkv and MLP (the MLP in a streamed
# family: its weights do not both fit SBUF), ragged ones
FUSED_WIDTHS = [("mlp", 197, 768, 3072, 768), ("mlp", 1576, 768, 3072, 768), ("mlp", 197, 1024, 4096, 1024),
                ("layernorm_mlp", 197, 768, 3072, 768), ("layernorm_mlp", 197, 1024, 4096, 1024),
                ("layernorm_mlp", 1576, 1024, 4096, 1024), ("layernorm_qkv", 197, 768, 0, 2304),
                ("layernorm_qkv", 1576, 1024, 0, 3072), ("layernorm_qkv", 197, 1280, 0, 3840),
                ("mlp", 197, 1280, 5120, 1280), ("mlp", 1576, 1280, 5120, 1280),
                ("layernorm_mlp", 197, 1280, 5120, 1280),
                ("mlp", 300, 200, 700, 300), ("layernorm_mlp", 300, 700, 600, 700)]  # fmt: skip
QUICK_FUSED = FUSED_WIDTHS[:1] + FUSED_WIDTHS[3:4] + FUSED_WIDTHS[6:7] + FUSED_WIDTHS[9:10]
FUSED_PLANS = {"mlp": (plan_mlp, {}), "layernorm_mlp": (plan_layernorm_mlp, {"epsilon": 1e-6}),
               "layernorm_qkv": (plan_layernorm_qkv, {"scale": 0.125, "epsilon": 1e-6})}  # fmt: skip


_fused_shapes = fused_widths.arg_shapes


def fused_widths_table(cases) -> None:
    print(f"\n{'kernel':14} {'M x K x H x N':>22} {'family box':>24} {'family us':>10} {'concrete us':>12} "
          f"{'ratio':>6}")  # fmt: skip
    for entry, m, k, h, n in cases:
        plan, constants = FUSED_PLANS[entry]
        box = fused_widths.box_of(entry, 2, k, n, h)
        if box in fused_widths.streamed_boxes(entry, 2):  # a streamed family declares its schedule
            constants = constants | {"schedule": "streamed"}
        names = {"mlp": "KHN", "layernorm_mlp": "KH", "layernorm_qkv": "KN"}[entry]
        step = fused_widths.QKV_STEP if entry == "layernorm_qkv" else 1
        ranges = {"M": (1, 65536)} | {d: (*r, step if d == "N" else 1) for d, r in zip(names, box)}
        specs = [nki.spec(s, "bfloat16", dims={d: ranges[d] for d in s if isinstance(d, str)})
                 for s in _fused_shapes(entry, "M", "K", "H", "N")]  # fmt: skip
        launch, args, kwargs = plan(*[_Arg(s, sh) for s, sh in zip(specs, nki.symbolic_shapes(*specs))], **constants)
        family = nki.trace(launch, *_specs(args), target="trn2", **kwargs)
        shapes = _fused_shapes(entry, m, k, h, n)
        instance = family.instantiate(*shapes, *[(1,)] * (len(family.param_names) - len(shapes)), target="trn2")
        launch, args, kwargs = plan(*[np.zeros(s, nl.bfloat16) for s in shapes], **constants)
        fam = instance.profile("trn2").latency_us
        try:
            concrete = nki.trace(launch, *[nki.spec(a.shape, "bfloat16") for a in args], target="trn2", **kwargs)
            con = f"{concrete.profile('trn2').latency_us:12.1f}"
            ratio = f"{fam / concrete.profile('trn2').latency_us:6.3f}"
        except nki.NkiVerificationError:  # the concrete kernel's token blocks of 512 do not fit SBUF there
            con, ratio = f"{'no SBUF':>12}", f"{'-':>6}"
        label = "/".join(f"{lo}..{hi}" for lo, hi in box)
        print(f"{entry:14} {f'{m}x{k}x{h}x{n}':>22} {label:>24} {fam:10.1f} {con} {ratio}", flush=True)


# (entry, M, K, H, N): shapes where both weights fit SBUF, so both MLP schedules run: ViT-B/16 and ViT-L/16 at
# batch 1 and 8
STREAMED = [("mlp", 197, 768, 3072, 768), ("mlp", 1576, 768, 3072, 768), ("mlp", 197, 1024, 4096, 1024),
            ("mlp", 1576, 1024, 4096, 1024), ("layernorm_mlp", 197, 1024, 4096, 1024),
            ("layernorm_mlp", 1576, 1024, 4096, 1024)]  # fmt: skip


def streamed_table(cases) -> None:
    """The concrete MLP kernels with the weights streamed by hidden blocks (kernels/linear/fused_streamed.py, what the
    launchers run where the weights do not both fit) against the resident schedule, where both fit."""
    print(f"\n{'kernel':14} {'M x K x H x N':>22} {'streamed us':>12} {'resident us':>12} {'ratio':>6}")
    for entry, m, k, h, n in cases:
        plan, constants = FUSED_PLANS[entry]
        shapes = _fused_shapes(entry, m, k, h, n)
        us = []
        for schedule in ("streamed", "resident"):
            launch, args, kwargs = plan(*[np.zeros(s, nl.bfloat16) for s in shapes], **constants, schedule=schedule)
            traced = nki.trace(launch, *[nki.spec(a.shape, "bfloat16") for a in args], target="trn2", **kwargs)
            us.append(traced.profile("trn2").latency_us)
        print(f"{entry:14} {f'{m}x{k}x{h}x{n}':>22} {us[0]:12.1f} {us[1]:12.1f} {us[0] / us[1]:6.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help=f"row counts {QUICK} only, and fewer widths")
    ap.add_argument("--attention", action="store_true", help="only vit-attn's families against the concrete traces")
    opts = ap.parse_args()
    quick = opts.quick
    if opts.attention:
        attention_table(QUICK_ATTENTION if quick else ATTENTION)
        attention_layouts_table(QUICK_QKV if quick else ATTENTION_QKV, QUICK_SPLIT if quick else ATTENTION_SPLIT)
        return
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
    rows_table(quick)
    fused_widths_table(QUICK_FUSED if quick else FUSED_WIDTHS)
    streamed_table(STREAMED[:1] if quick else STREAMED)
    attention_table(QUICK_ATTENTION if quick else ATTENTION)
    attention_layouts_table(QUICK_QKV if quick else ATTENTION_QKV, QUICK_SPLIT if quick else ATTENTION_SPLIT)


if __name__ == "__main__":
    main()
