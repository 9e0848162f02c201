"""Modelled ViT figures (timing-only simulation from shapes; no data is computed):

1. attention, per model row of issue 9 x batch (1, 8) x target (trn1, trn2, trn3): the fused ``vit-attn``
   kernel (``attention_qkv`` from the QKV projection's output) against the eager composition of timm's attention
   (split heads, scale q, q @ k^T, softmax, @ v, merge heads: six launches through HBM), with the speed-up, the
   fused kernel's binding engine and how busy it is, and its Tensor-engine utilisation;
2. a whole ViT-B/16 encoder forward, batch 1 and 8, bf16, trn2: eager total against the library's kernels, and
   the per-op breakdown;
3. ``--ideas``: what the kernel's design choices buy on ViT-B/16 batch 8 (PSUM-copy engines, layout, resident
   strip vs flash, the split layout of the fused projection), and on long sequences (strategy and PSUM-copy
   engines for SigLIP, DINOv2 and 2048 keys).

    python benchmarks/vit.py              # everything (a few minutes on 2 cores)
    python benchmarks/vit.py --quick      # one row: ViT-B/16, batch 8, bf16, trn2
    python benchmarks/vit.py --json out.json

Every figure comes from the simulator's cost model (reference/nki.md constants); nothing here is tuned to a bar.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nki_dsl as nki  # noqa: E402
from kernels.eager import compose  # noqa: E402
from kernels.eager.vit import (  # noqa: E402
    VIT_B16,
    eager_attention_steps,
    encoder_steps,
    fused_attention_steps,
    weight_shapes,  # noqa: E402
)
from kernels.vit_attn import plan_attention, plan_attention_qkv, plan_attention_split  # noqa: E402
from kernels.vit_attn.kernel import DEFAULT_EVICT, FLASH_EVICT, LONG_EVICT  # noqa: E402

# (model, seq, heads, head_dim): the shape table of issue 9.
MODELS = [
    ("DeiT-S/16 @224", 197, 6, 64),
    ("ViT-B/16 @224", 197, 12, 64),
    ("ViT-L/16 @224", 197, 16, 64),
    ("ViT-H/14 @224", 257, 16, 80),
    ("SigLIP So400m/14 @384", 729, 16, 72),
    ("DINOv2-L/14 @518", 1370, 16, 64),
]
BATCHES = (1, 8)
TARGETS = ("trn1", "trn2", "trn3")


def attention_row(model, seq, heads, d, batch, target, dtype="bfloat16") -> dict:
    """Fused vs eager attention for one shape on one target."""
    qkv = {"qkv": nki.spec((batch, seq, 3 * heads * d), dtype)}
    fused = compose.profile(fused_attention_steps(batch, seq, heads, d), dict(qkv), target)
    eager = compose.profile(eager_attention_steps(batch, seq, heads, d), dict(qkv), target)
    prof = fused[0][1]
    fused_us = prof.latency_us
    eager_us = sum(p.latency_us for _, p in eager)
    busy = prof.engine_busy
    return {
        "model": model, "batch": batch, "seq": seq, "heads": heads, "head_dim": d, "dtype": dtype,
        "target": target, "fused_us": round(fused_us, 2), "eager_us": round(eager_us, 2),
        "speedup": round(eager_us / fused_us, 3), "binding_engine": prof.bottleneck,
        "binding_busy": round(busy[prof.bottleneck], 3), "tensor_engine_utilisation":
        round(prof.tensor_engine_utilisation, 4),
        "eager_steps_us": {s.op: round(p.latency_us, 2) for s, p in eager},
    }  # fmt: skip


def attention_table(rows_of, dtype="bfloat16") -> list[dict]:
    out = []
    for model, seq, heads, d in rows_of:
        for batch in BATCHES:
            for target in TARGETS:
                out.append(attention_row(model, seq, heads, d, batch, target, dtype))
    return out


def encoder(batch: int, target: str = "trn2", dtype: str = "bfloat16") -> dict:
    cfg = VIT_B16
    values = {k: nki.spec(s, dtype) for k, s in weight_shapes(cfg).items()}
    values["patches"] = nki.spec((batch * cfg.patches, cfg.patch_dim), dtype)
    out = {"model": cfg.name, "batch": batch, "target": target, "dtype": dtype}
    for mode in ("eager", "fused"):
        prof = compose.profile(encoder_steps(cfg, batch, mode), dict(values), target)
        out[mode] = {k: round(v, 1) for k, v in compose.breakdown(prof).items()}
        out[f"{mode}_us"] = round(sum(p.latency_us for _, p in prof), 1)
        out[f"{mode}_launches"] = len(prof)
    out["speedup"] = round(out["eager_us"] / out["fused_us"], 3)
    return out


def ideas(batch: int = 8, target: str = "trn2") -> list[tuple[str, float, str]]:
    """(variant, latency us, binding engine and busy fraction) for ViT-B/16 attention."""
    seq, heads, d = 197, 12, 64
    qkv = nki.spec((batch, seq, 3 * heads * d), "bfloat16")
    q = nki.spec((batch, heads, seq, d), "bfloat16")
    variants = [(f"qkv layout, PSUM copies on {'+'.join(ev)}", plan_attention_qkv, (qkv, heads), {"evict": ev})
                for ev in (("vector",), ("scalar",), ("vector", "scalar"), ("scalar", "scalar", "vector", "scalar"))]
    variants += [("qkv layout, flash online softmax (forced)", plan_attention_qkv, (qkv, heads),
                  {"strategy": "flash", "evict": ("scalar", "scalar", "vector", "scalar")}),
                 ("(B, H, S, D) layout (q^T, k^T by DMA transpose)", plan_attention, (q, q, q),
                  {"evict": ("scalar", "scalar", "vector", "scalar")})]  # fmt: skip
    hd = heads * d
    variants.append(("split layout (q^T, k^T written by the fused LN + QKV projection)", plan_attention_split,
                     (nki.spec((2 * hd, batch * seq), "bfloat16"), nki.spec((batch * seq, hd), "bfloat16"), heads,
                      seq), {}))  # fmt: skip
    return _measure(variants, target)


def _measure(variants, target):
    out = []
    for name, plan, args, kw in variants:
        kern, a, consts = plan(*args, **kw)
        p = nki.benchmark(kern, *a, target=target, **consts)
        out.append((name, p.latency_us, f"{p.bottleneck} {p.engine_busy[p.bottleneck]:.0%}"))
    return out


def long_ideas(target: str = "trn2") -> list[tuple[str, float, str]]:
    """The long-sequence choices, batch 1 bf16: PSUM-copy engines of the resident strip and of the flash loop
    (``choose_evict``), and the flash loop against the resident strip, for SigLIP (729), DINOv2 (1370) and a
    2048-key sequence (flash only: beyond the resident limit)."""
    variants = []
    for name, seq, heads, d in (("SigLIP", 729, 16, 72), ("DINOv2", 1370, 16, 64), ("seq 2048", 2048, 16, 64)):
        qkv = (nki.spec((1, seq, 3 * heads * d), "bfloat16"), heads)
        strategies = ("resident", "flash") if seq <= 1536 else ("flash",)
        for strategy in strategies:
            for ev in (DEFAULT_EVICT, LONG_EVICT, FLASH_EVICT):
                variants.append((f"{name}, {strategy}, copies on {'+'.join(ev)}", plan_attention_qkv, qkv,
                                 {"strategy": strategy, "evict": ev}))  # fmt: skip
    return _measure(variants, target)


def _print_attention(rows):
    print(f"{'model':<22} {'b':>2} {'target':<6} {'fused us':>9} {'eager us':>9} {'speedup':>8} "
          f"{'binds (busy)':>15} {'TE util':>8}")  # fmt: skip
    for r in rows:
        print(f"{r['model']:<22} {r['batch']:>2} {r['target']:<6} {r['fused_us']:>9.1f} {r['eager_us']:>9.1f} "
              f"{r['speedup']:>7.2f}x {r['binding_engine'] + ' ' + format(r['binding_busy'], '.0%'):>15} "
              f"{r['tensor_engine_utilisation']:>8.1%}")  # fmt: skip


def _print_encoder(e):
    print(f"\n{e['model']} encoder forward, batch {e['batch']}, {e['dtype']}, {e['target']}: eager "
          f"{e['eager_us']:.0f} us ({e['eager_launches']} launches) vs library {e['fused_us']:.0f} us "
          f"({e['fused_launches']} launches): {e['speedup']:.2f}x")  # fmt: skip
    for mode in ("eager", "fused"):
        print(f"  {mode:<6} " + ", ".join(f"{k} {v:.0f}" for k, v in e[mode].items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one row: ViT-B/16, batch 8, bf16, trn2 attention")
    ap.add_argument("--ideas", action="store_true", help="also measure the kernel's design choices")
    ap.add_argument("--json", type=Path, help="write every figure as JSON here")
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.quick:
        rows = [attention_row("ViT-B/16 @224", 197, 12, 64, 8, "trn2")]
        _print_attention(rows)
        result = {"attention": rows}
    else:
        rows = attention_table(MODELS)
        _print_attention(rows)
        encoders = [encoder(b) for b in BATCHES]
        for e in encoders:
            _print_encoder(e)
        result = {"attention": rows, "encoder": encoders}
    if args.ideas or not args.quick:
        print("\nViT-B/16 attention, batch 8, bf16, trn2: design choices")
        result["ideas"] = [{"variant": n, "latency_us": round(us, 2), "binds": b} for n, us, b in ideas()]
        for r in result["ideas"]:
            print(f"  {r['variant']:<66} {r['latency_us']:>8.1f} us  binds {r['binds']}")
        print("\nLong sequences, batch 1, bf16, trn2: the strategy and PSUM-copy choices")
        result["long_ideas"] = [{"variant": n, "latency_us": round(us, 2), "binds": b} for n, us, b in long_ideas()]
        for r in result["long_ideas"]:
            print(f"  {r['variant']:<66} {r['latency_us']:>8.1f} us  binds {r['binds']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
