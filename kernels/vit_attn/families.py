"""kernel.toml's ``attention_qkv`` and ``attention_split`` families over the sequence length (``python -m
kernels.vit_attn.families`` prints their lines; tests/kernels/test_vit_attn_families.py checks kernel.toml lists
exactly these).

A call is ``attention_qkv(qkv, num_heads=H)`` with ``qkv`` (B, S, 3 * H * D): the manifest matches ``num_heads`` as
a constant, so each family fixes H and declares the width ``W`` as the multiples of 3 * H up to D = 128
(``W in 3H..384H step 3H``, so ``D = W // (3 * H)`` is exact for the whole family). The sequence-length boxes are
``attention``'s (``seq_family.py``): the same schedule per (batch element, head), so the same op executions per
(batch element, head) at a box's top, and the batch cap is ``attention``'s B x H product there over H, within
the budget's largest tensor (qkv is 3 * H * D wide) and all-HBM limits too.

The boxes are nested (each from S = 1; a call runs in the first, smallest one holding it) so that the instances
the bundle builder runs on NumPy at a family's lowest point are one token long, not 513 to 8193.

``attention_split(qkT, v, num_heads=H, batch=1)`` (the tokens are one sequence) takes qkT (2 * H * D, T) and v
(T, H * D). The manifest cannot tie qkT's rows to twice v's columns, nor can an affine index hold batch element b's
first token ``b * S`` for a symbolic S, so these families fix H and D (the head configurations the models' own
split families publish) and the batch (1, as the constant ``batch``: a call giving ``seq`` matches the models'
families only), and declare T up to the top of the longest box that holds one sequence of H heads.
"""

from __future__ import annotations

import re
from pathlib import Path

from nki_dsl import IRBudget

from .launcher import MAX_HEAD_DIM

BUDGET = IRBudget()  # the untrusted-IR budget a loader verifies instances within (its defaults)

TOML = Path(__file__).with_name("kernel.toml")
DTYPES = (("bfloat16", 2), ("float32", 4))
MAX_BATCH = 256  # attention's families' largest batch
# Head counts with a family: every count to 16 (ViT-Ti/S/B/L/H, SigLIP, DINOv2-L), then DINOv2-g's 24 and 32
# (one family per head count and box: each unrolls its heads, so every count costs publish time)
HEADS = (*range(1, 17), 24, 32)


def attention_boxes(dtype: str = "bfloat16") -> list[tuple[tuple[int, int], int]]:
    """``attention``'s families over S in kernel.toml: ((S range), B x H at the top of the box)."""
    out = []
    for line in re.findall(rf'args = \["B x H x S x D:{dtype}".*?dims = \{{ (.*?) \}}', TOML.read_text()):
        dims = {k: tuple(map(int, v.split(".."))) for k, v in re.findall(r'(\w) = "(\d+\.\.\d+)"', line)}
        out.append((dims["S"], dims["B"][1] * dims["H"][1]))
    return out


def batch_cap(heads: int, seq_top: int, units: int, itemsize: int) -> int:
    """The largest B of a family with ``heads`` heads up to ``seq_top`` tokens: ``units`` (batch element, head)
    pairs of op executions, qkv within the largest tensor the budget allows, qkv and out within its HBM."""
    width = 3 * heads * MAX_HEAD_DIM
    per_batch = seq_top * width * itemsize
    return min(MAX_BATCH, units // heads, BUDGET.max_tensor_bytes // per_batch,
               BUDGET.max_hbm_bytes // (per_batch * 4 // 3))  # fmt: skip


def qkv_families() -> list[tuple[str, tuple[int, int], int, int]]:
    """(dtype, S range, B top, H) of every family, in kernel.toml's order: per dtype, per box, per head count."""
    out = []
    for dtype, itemsize in DTYPES:
        for seq, units in attention_boxes(dtype):
            for h in HEADS:
                b = batch_cap(h, seq[1], units, itemsize)
                if b >= 1:
                    out.append((dtype, seq, b, h))
    return out


def qkv_line(dtype: str, seq: tuple[int, int], batch: int, heads: int) -> str:
    w = 3 * heads
    return (f'    {{ args = ["B x S x W:{dtype}"], dims = {{ B = "1..{batch}", S = "{seq[0]}..{seq[1]}", '
            f'W = "{w}..{w * MAX_HEAD_DIM} step {w}" }}, constants = {{ num_heads = {heads} }} }},  '
            f'# any sequence length and head_dim (seq_family.py)')  # fmt: skip


def split_configs() -> list[tuple[int, int]]:
    """(heads, head_dim) of the models' own ``attention_split`` families in kernel.toml, in order of first listing."""
    out = []
    for rows, heads in re.findall(r'args = \["(\d+) x T:\w+".*?num_heads = (\d+), seq = \d+', TOML.read_text()):
        config = (int(heads), int(rows) // (2 * int(heads)))
        if config not in out:
            out.append(config)
    return out


def split_families() -> list[tuple[str, tuple[int, int], int, int]]:
    """(dtype, T range, heads, head_dim) of every one-sequence family, in kernel.toml's order: per dtype and head
    configuration one family, T up to the top of the longest box that holds one sequence of all the heads."""
    out = []
    for dtype, itemsize in DTYPES:
        boxes = attention_boxes(dtype)
        for h, d in split_configs():
            top = max(seq[1] for seq, units in boxes if batch_cap(h, seq[1], units, itemsize) >= 1)
            out.append((dtype, (1, top), h, d))
    return out


def split_line(dtype: str, seq: tuple[int, int], heads: int, d: int) -> str:
    hd = heads * d
    return (f'    {{ args = ["{2 * hd} x T:{dtype}", "T x {hd}:{dtype}"], dims = {{ T = "{seq[0]}..{seq[1]}" }}, '
            f'constants = {{ num_heads = {heads}, batch = 1 }} }},  '
            f'# one sequence of any length (seq_family.py)')  # fmt: skip


if __name__ == "__main__":
    print("\n".join(qkv_line(*f) for f in qkv_families()))
    print("\n".join(split_line(*f) for f in split_families()))
