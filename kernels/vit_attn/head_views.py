"""``attention_qkv`` and ``attention_split`` over their arrays viewed per head: the form the Hub's families over the
head count publish (kernel.toml's ``B x S x (3 x H x D)`` and ``(2 x H x D) x (B x S)`` lines).

The fused projection's ``qkv`` (B, S, 3 * H * D) puts head h's q columns at ``h * D``: with H and D both symbolic
that offset is a product of two dimensions, not affine, so no family over the width can loop over the heads
(``seq_family.attention_qkv_any_seq`` unrolls them, one family per head count). The same bytes viewed as (B, S, 3,
H, D) (row-major: a reshape, no copy) index every axis on its own: ``qkv[b, s, 0, h, c]``, affine in every loop
index and dimension. The manifest declares that view (``args = ["B x S x (3 x H x D):bfloat16"]``, ``keywords = {
num_heads = "H" }``, ``returns = ["B x S x (H x D)"]``): a loader reshapes the caller's array to it, binds H from
``num_heads`` and D from the width, and merges the output's last two axes back, so one family holds every head
count and head dim. The split layout's ``qkT`` (2 * H * D, B * S) and ``v`` (B * S, H * D) likewise, as (2, H, D,
B, S) and (B, S, H, D): batch element b's tokens start at axis 3's index b, not at ``b * S``, and qkT's rows are
tied to v's columns by sharing H and D.

Per (batch element, head) both run the schedule of ``attention``'s families (``seq_strip.strip_heads`` up to 512
tokens, ``seq_family._flash_heads`` past that), so they give its numbers bit for bit; the batch and head loops
are ``affine_range`` loops indexing only their own axes, so a loader may run a call above the family's B or H range
as instances over slices (``hub_client/chunks.py``).
"""

from __future__ import annotations

import nki_dsl as nki
import nki_dsl.language as nl

from . import seq_strip
from .seq_family import BLOCK, SPAN, _by_rows, _by_transpose, _flash_heads, scale_column


@nki.jit
def attention_qkv_heads_kernel(qkv, scale=None, strategy="auto"):
    """``qkv`` (B, S, 3, H, D) -> out (B, S, H, D); ``scale`` None: 1 / sqrt(D), computed on chip; a [1] fp32 array:
    the scale at run time (``seq_family.scale_column``). ``strategy``: ``seq_strip.schedule``'s (the score strip
    where every S of the family is at most 512, else flash)."""
    batch, seq, _, heads, d = qkv.shape
    out = nl.ndarray((batch, seq, heads, d), dtype=qkv.dtype, buffer=nl.shared_hbm)

    def part(j):
        return lambda b, h, r, c: qkv[b, r, j, h, c]

    if seq_strip.schedule(seq, strategy) == "resident":
        seq_strip.strip_heads(batch, heads, seq, d, qkv.dtype, scale_column(scale, d),
                              seq_strip.by_transpose(part(0), seq, d, heads),
                              seq_strip.by_transpose(part(1), seq, d, heads), part(2),
                              lambda b, h, r, c: out[b, r, h, c])  # fmt: skip
        return out
    _flash_heads(batch, lambda: nl.affine_range(heads), seq, d, qkv.dtype, scale_column(scale, d),
                 _by_transpose(part(0), seq, d, SPAN), _by_transpose(part(1), seq, d, BLOCK), part(2),
                 lambda b, h, r, c: out[b, r, h, c])  # fmt: skip
    return out


@nki.jit
def attention_split_heads_kernel(qkT, v, strategy="auto"):
    """``qkT`` (2, H, D, B, S) holding q^T and (scale * k)^T, ``v`` (B, S, H, D) -> out (B, S, H, D); the scale is
    already in k. ``strategy`` as ``attention_qkv_heads_kernel``'s."""
    _, heads, d, batch, seq = qkT.shape
    out = nl.ndarray((batch, seq, heads, d), dtype=v.dtype, buffer=nl.shared_hbm)

    def features(j):
        return lambda b, h, r, c: qkT[j, h, r, b, c]

    if seq_strip.schedule(seq, strategy) == "resident":
        seq_strip.strip_heads(batch, heads, seq, d, v.dtype, 1.0, seq_strip.by_rows(features(0), seq, d, heads),
                              seq_strip.by_rows(features(1), seq, d, heads), lambda b, h, r, c: v[b, r, h, c],
                              lambda b, h, r, c: out[b, r, h, c])  # fmt: skip
        return out
    _flash_heads(batch, lambda: nl.affine_range(heads), seq, d, v.dtype, 1.0, _by_rows(features(0), seq, d, SPAN),
                 _by_rows(features(1), seq, d, BLOCK), lambda b, h, r, c: v[b, r, h, c],
                 lambda b, h, r, c: out[b, r, h, c])  # fmt: skip
    return out
