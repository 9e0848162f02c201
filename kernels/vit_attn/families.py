"""kernel.toml's ``attention_qkv`` and ``attention_split`` families over the head count, head dim, sequence length
and batch (``python -m kernels.vit_attn.families`` prints their lines; tests/kernels/test_vit_attn_families.py
checks kernel.toml lists exactly these).

Both view their arrays per head (``head_views.py``): ``attention_qkv(qkv, num_heads=H)`` with ``qkv`` (B, S, 3 * H
* D) is published as ``B x S x (3 x H x D)`` (the loader reshapes the caller's array; ``keywords = { num_heads =
"H" }`` binds H, the width gives D; ``returns = ["B x S x (H x D)"]`` merges the output back), and
``attention_split(qkT, v, num_heads=H, seq=S)`` (or ``batch=B``, or both) as ``(2 x H x D) x (B x S)`` and ``(B x S)
x (H x D)``. So one family per sequence-length box and dtype holds every head count and head dim: 8 families per
entry point where one per head count (unrolled heads) made 140 for ``attention_qkv`` alone.

The sequence-length boxes are ``attention``'s (``seq_family.py``): the same schedule per (batch element, head), so
the same op executions per (batch element, head) at a box's top, and the head range is ``attention``'s there; the
batch cap is ``attention``'s B x H product over that head count, within the budget's largest tensor (qkv is 3 * H
* D wide) and all-HBM limits too. Calls with more batch elements or heads than the caps run as instances over
slices (the kernels are independent along B and H: ``hub_client/chunks.py``), so the caps bound one instance, not
what a caller may ask.

The boxes are nested (each from S = 1; a call runs in the first, smallest one holding it) so that the instances
the bundle builder runs on NumPy at a family's lowest point are one token long, not 513 to 8193.
"""

from __future__ import annotations

import re
from pathlib import Path

from nki_dsl import IRBudget

from .launcher import MAX_HEAD_DIM
from .seq_family import BLOCK, COPY_ENGINES

BUDGET = IRBudget()  # the untrusted-IR budget a loader verifies instances within (its defaults)

TOML = Path(__file__).with_name("kernel.toml")
DTYPES = (("bfloat16", 2), ("float32", 4))
MAX_BATCH = 256  # attention's families' largest batch


def attention_boxes(dtype: str = "bfloat16") -> list[tuple[tuple[int, int], int, int]]:
    """``attention``'s families over S in kernel.toml: ((S range), B top, H top) of each box (their runtime-scale
    twins have the same)."""
    out = []
    lines = [ln for ln in TOML.read_text().split("\n") if "scalars" not in ln]  # (not the runtime-scale twins)
    for line in re.findall(rf'args = \["B x H x S x D:{dtype}".*?dims = \{{ (.*?) \}}', "\n".join(lines)):
        dims = {k: tuple(map(int, v.split(".."))) for k, v in re.findall(r'(\w) = "(\d+\.\.\d+)"', line)}
        out.append((dims["S"], dims["B"][1], dims["H"][1]))
    return out


def batch_cap(heads: int, seq_top: int, units: int, itemsize: int) -> int:
    """The largest B of a family with ``heads`` heads up to ``seq_top`` tokens: ``units`` (batch element, head)
    pairs of op executions, qkv within the largest tensor the budget allows, qkv and out within its HBM."""
    width = 3 * heads * MAX_HEAD_DIM
    per_batch = seq_top * width * itemsize
    return min(MAX_BATCH, units // heads, BUDGET.max_tensor_bytes // per_batch,
               BUDGET.max_hbm_bytes // (per_batch * 4 // 3))  # fmt: skip


def families() -> list[tuple[str, tuple[int, int], int, int]]:
    """(dtype, S range, B top, H top) of every family of either entry point, in kernel.toml's order: per dtype, per
    box. (attention_split's arrays are smaller than qkv, 2 + 1 of its 3 parts, so qkv's caps hold for it too.)"""
    out = []
    for dtype, itemsize in DTYPES:
        for seq, b_top, h_top in attention_boxes(dtype):
            out.append((dtype, seq, batch_cap(h_top, seq[1], b_top * h_top, itemsize), h_top))
    return out


def strategy(seq: tuple[int, int]) -> str:
    """The schedule a family over ``seq`` runs, as the values of ``strategy=`` that get it: the resident score strip
    where every S of the box is at most 512 keys (seq_strip.py), flash over key blocks of 512 past that
    (seq_family.py). The bundle builder checks the plan makes one kernel call for both values; the plans refuse
    "resident" where there is no strip and trace "flash" as flash, so a call with ``strategy="flash"`` at a short
    sequence runs in the next box, by the flash schedule it asked for."""
    return f'strategy = ["auto", "{"resident" if seq[1] <= BLOCK else "flash"}"]'


# and its one PSUM-copy engine: ``evict="auto"`` or the engines it copies P^T by (seq_family.COPY_ENGINES; the
# launcher refuses others over a symbolic S, so the builder refuses a family listing them)
EVICT = "evict = [\"auto\", [" + ", ".join(f'"{e}"' for e in COPY_ENGINES) + "]]"
# The scale: a call without ``scale=`` gets 1 / sqrt(D) computed on chip (the families above); one with it matches
# the twins after them, which take it at run time (``scalars``: required, the plan's default being None; the
# builder checks them at ``sample``), so a call with a scale runs where one without does, by the same schedule.
SCALE = 'scalars = { scale = { dtype = "float32", sample = 0.1 } }'


def _dims(seq: tuple[int, int], batch: int, heads: int) -> str:
    return (f'dims = {{ B = "1..{batch}", S = "{seq[0]}..{seq[1]}", H = "1..{heads}", D = "1..{MAX_HEAD_DIM}" }}')


def qkv_line(dtype: str, seq: tuple[int, int], batch: int, heads: int, scale: bool = False) -> str:
    return (f'    {{ args = ["B x S x (3 x H x D):{dtype}"], {_dims(seq, batch, heads)}, '
            f'constants = {{ {strategy(seq)}, {EVICT} }}, {SCALE + ", " if scale else ""}'
            f'keywords = {{ num_heads = "H" }}, '
            f'returns = ["B x S x (H x D)"] }},  # any head count, head_dim, sequence length'
            f'{", scale" if scale else ""} (head_views.py)')  # fmt: skip


def split_line(dtype: str, seq: tuple[int, int], batch: int, heads: int) -> str:
    return (f'    {{ args = ["(2 x H x D) x (B x S):{dtype}", "(B x S) x (H x D):{dtype}"], '
            f'{_dims(seq, batch, heads)}, constants = {{ {strategy(seq)}, {EVICT} }}, '
            f'keywords = {{ num_heads = "H", seq = "S", batch = "B" }}, '
            f'returns = ["(B x S) x (H x D)"] }},  '
            f'# any head count, head_dim, sequence length (head_views.py)')  # fmt: skip


def qkv_lines() -> list[str]:
    """``attention_qkv``'s per-head families, then their runtime-scale twins (after them: a call without ``scale=``
    matches the first, and one with it only the twins)."""
    return [qkv_line(*f) for f in families()] + [qkv_line(*f, scale=True) for f in families()]


def split_lines() -> list[str]:
    """``attention_split``'s (the scale is already in k: no twins)."""
    return [split_line(*f) for f in families()]


if __name__ == "__main__":
    print("\n".join(qkv_lines() + split_lines()))
