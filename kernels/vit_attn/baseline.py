"""The eager baseline the bundle's modelled figures are compared with (``[benchmarks] baseline`` in kernel.toml;
used when publishing from this repository, not shipped in the bundle).

Eager PyTorch attention as timm writes it, one kernel per framework op from ``kernels/eager``, every
intermediate in HBM: for ``attention_qkv`` split heads, scale q, q @ k^T, softmax, @ v, merge heads (six
launches; the same for ``attention_split``, whose input is the projection's output that eager keeps token-major);
for ``attention`` (q, k, v already (B, H, S, D)) scale q, q @ k^T, softmax, @ v (four launches).
The figure is the sum of the launches' modelled latencies in microseconds.
"""

import nki_dsl as nki
from kernels.eager import compose
from kernels.eager.vit import eager_attention_bhsd_steps, eager_attention_steps


def eager_attention(entry: str, specs, constants: dict, target: str) -> float:
    """Eager timm attention (one kernel per framework op, intermediates in HBM): summed modelled latency (us)."""
    if entry == "attention_qkv":
        (qkv,) = specs
        batch, seq, width = qkv.shape
        heads = int(constants["num_heads"])
        steps, values = eager_attention_steps(batch, seq, heads, width // (3 * heads)), {"qkv": qkv}
    elif entry == "attention_split":  # eager has the projection's output token-major: the attention_qkv composition
        _, v = specs
        seq, heads = int(constants["seq"]), int(constants["num_heads"])
        batch, hd = v.shape[0] // seq, v.shape[1]
        qkv = nki.spec((batch, seq, 3 * hd), str(v.dtype))
        steps, values = eager_attention_steps(batch, seq, heads, hd // heads), {"qkv": qkv}
    else:
        q, k, v = specs
        batch, heads, seq, d = q.shape
        steps, values = eager_attention_bhsd_steps(batch, seq, heads, d), {"q": q, "k": k, "v": v}
    return sum(p.latency_us for _, p in compose.profile(steps, values, target))
