"""vit-attn, as Hugging Face ``kernels`` loads it on a Trainium machine (build variant ``torch-neuron``).

    kernel = kernels.get_kernel("ORG/vit-attn", version=1)   # HF kernels, with torch-neuronx and nki installed
    out = kernel.attention(q, k, v)                           # (batch, heads, seq, head_dim) tensors on the device
    out = kernel.attention_qkv(qkv, num_heads=12)             # (batch, seq, 3 * heads * head_dim) -> (batch, seq, .)

Written against AWS's current ``nki`` package; not imported by the ``kernels.vit_attn`` package (nki_dsl),
published unchanged as ``build/torch-neuron/``.
"""

from .attention import MAX_HEAD_DIM, MAX_SEQ, attention, attention_kernel, attention_qkv, attention_qkv_kernel

__all__ = ["attention", "attention_qkv", "attention_kernel", "attention_qkv_kernel", "MAX_HEAD_DIM", "MAX_SEQ"]
