"""A ViT encoder forward as kernel launches, two ways, on the same weights:

* ``eager``: one kernel per framework op, as eager PyTorch runs timm's ``VisionTransformer`` on Neuron: per
  block ``norm1`` (layernorm), ``qkv`` (matmul, bias add), the attention ops of ``attention_ops`` (split heads,
  scale q, q @ k^T, softmax, @ v, merge heads), ``proj`` (matmul, bias add), residual add, ``norm2``, ``fc1``
  (matmul, bias add), GELU, ``fc2`` (matmul, bias add), residual add; every intermediate through HBM.
* ``fused``: the library's kernels: ``norm1`` and the QKV projection in one launch (``linear.layernorm_qkv``: the
  normalised rows never in HBM, q^T, (scale * k)^T and V written in the split layout vit-attn reads),
  ``vit_attn.attention_split`` from it, ``linear`` with the bias and the residual add fused after proj, and
  ``norm2`` plus the whole MLP in one launch (``linear.fused_mlp.layernorm_mlp``: layernorm, fc1, bias, GELU,
  fc2, bias and residual, the normalised rows and the hidden activations never in HBM).

Both start with the patch embedding as a linear over flattened patches ([batch * patches, 3 * 16 * 16] @ w, plus
bias; eager: matmul + bias add), then the class token and position embedding (``embed_tokens``, the same kernel
in both), and end with the final layernorm. Weights are stored input-major ([in, out]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels.eager import attention_ops, elementwise, softmax
from kernels.eager.compose import Step
from kernels.layernorm.kernel import layernorm_kernel
from kernels.linear.fused_mlp import layernorm_mlp_kernel
from kernels.linear.kernel import linear_kernel
from kernels.linear.qkv_split import layernorm_qkv_kernel
from kernels.linear.reference import gelu_tanh
from kernels.vit_attn.kernel import attention_qkv_kernel, choose_evict
from kernels.vit_attn.launcher import choose_strategy
from kernels.vit_attn.split_layout import attention_split_kernel

EPS = 1e-6  # timm's ViT LayerNorm epsilon


@dataclass(frozen=True)
class ViTConfig:
    name: str
    dim: int
    depth: int
    heads: int
    patch: int = 16
    image: int = 224
    channels: int = 3
    mlp_ratio: int = 4

    @property
    def patches(self) -> int:
        return (self.image // self.patch) ** 2

    @property
    def seq(self) -> int:
        return self.patches + 1

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def patch_dim(self) -> int:
        return self.channels * self.patch * self.patch


VIT_B16 = ViTConfig("ViT-B/16", dim=768, depth=12, heads=12)


def weights(cfg: ViTConfig, dtype, seed: int = 0) -> dict:
    """Random weights (normal, scaled by 1/sqrt(fan_in)), named as the graphs read them."""
    rng = np.random.default_rng(seed)

    def w(shape, fan_in=None):
        scale = 1.0 / np.sqrt(fan_in) if fan_in else 1.0
        return (scale * rng.standard_normal(shape)).astype(dtype)

    d, hidden = cfg.dim, cfg.mlp_ratio * cfg.dim
    out = {"patch_w": w((cfg.patch_dim, d), cfg.patch_dim), "patch_b": w((d,), 10), "cls": w((d,), 1),
           "pos": w((cfg.seq, d), 10), "norm_g": 1 + w((d,), 100), "norm_b": w((d,), 100)}  # fmt: skip
    for i in range(cfg.depth):
        p = f"b{i}."
        out.update({p + "n1_g": 1 + w((d,), 100), p + "n1_b": w((d,), 100), p + "qkv_w": w((d, 3 * d), d),
                    p + "qkv_b": w((3 * d,), 10), p + "proj_w": w((d, d), d), p + "proj_b": w((d,), 10),
                    p + "n2_g": 1 + w((d,), 100), p + "n2_b": w((d,), 100), p + "fc1_w": w((d, hidden), d),
                    p + "fc1_b": w((hidden,), 10), p + "fc2_w": w((hidden, d), hidden), p + "fc2_b": w((d,), 10)})
    return {k: v.astype(dtype) for k, v in out.items()}


def weight_shapes(cfg: ViTConfig) -> dict:
    d, hidden = cfg.dim, cfg.mlp_ratio * cfg.dim
    out = {"patch_w": (cfg.patch_dim, d), "patch_b": (d,), "cls": (d,), "pos": (cfg.seq, d), "norm_g": (d,),
           "norm_b": (d,)}  # fmt: skip
    for i in range(cfg.depth):
        p = f"b{i}."
        out.update({p + "n1_g": (d,), p + "n1_b": (d,), p + "qkv_w": (d, 3 * d), p + "qkv_b": (3 * d,),
                    p + "proj_w": (d, d), p + "proj_b": (d,), p + "n2_g": (d,), p + "n2_b": (d,),
                    p + "fc1_w": (d, hidden), p + "fc1_b": (hidden,), p + "fc2_w": (hidden, d), p + "fc2_b": (d,)})
    return out


def _mm(op, x, w, out):
    return Step(op, linear_kernel, (x, w), (out,), {"epilogue": "none"})


def _lin(op, x, w, b, out, epilogue="bias", residual=None):
    ins = (x, w, b) + ((residual,) if residual else ())
    return Step(op, linear_kernel, ins, (out,), {"epilogue": epilogue})


def eager_attention_steps(batch: int, seq: int, heads: int, head_dim: int, qkv="qkv", out="attn", p="") -> list:
    """timm's attention without a fused kernel: six launches from the QKV projection's output."""
    bhs = batch * heads * seq
    return [
        Step("split heads", attention_ops.split_heads_kernel, ((qkv, (batch, seq, 3 * heads * head_dim)),),
             (p + "q", p + "k", p + "v"), {"num_heads": heads}),
        Step("scale q", elementwise.scale_kernel, ((p + "q", (bhs, head_dim)),), (p + "qs",),
             {"scale": head_dim**-0.5}, ((batch, heads, seq, head_dim),)),
        Step("q @ k^T", attention_ops.bmm_qk_kernel, (p + "qs", p + "k"), (p + "s",)),
        Step("softmax", softmax.softmax_kernel, ((p + "s", (bhs, seq)),), (p + "pr",), {},
             ((batch, heads, seq, seq),)),
        Step("attn @ v", attention_ops.bmm_pv_kernel, (p + "pr", p + "v"), (p + "o",)),
        Step("merge heads", attention_ops.merge_heads_kernel, (p + "o",), (out,), {},
             ((batch * seq, heads * head_dim),)),
    ]  # fmt: skip


def eager_attention_bhsd_steps(batch: int, seq: int, heads: int, head_dim: int, q="q", k="k", v="v", out="o",
                               p="") -> list:
    """The same from q, k, v already in (batch, heads, seq, head_dim) (PyTorch SDPA's layout): four launches."""
    bhs = batch * heads * seq
    return [
        Step("scale q", elementwise.scale_kernel, ((q, (bhs, head_dim)),), (p + "qs",), {"scale": head_dim**-0.5},
             ((batch, heads, seq, head_dim),)),
        Step("q @ k^T", attention_ops.bmm_qk_kernel, (p + "qs", k), (p + "s",)),
        Step("softmax", softmax.softmax_kernel, ((p + "s", (bhs, seq)),), (p + "pr",), {},
             ((batch, heads, seq, seq),)),
        Step("attn @ v", attention_ops.bmm_pv_kernel, (p + "pr", v), (out,)),
    ]  # fmt: skip


def fused_attention_steps(batch: int, seq: int, heads: int, head_dim: int, qkv="qkv", out="attn") -> list:
    strategy = choose_strategy(seq)
    consts = {"num_heads": heads, "scale": head_dim**-0.5, "strategy": strategy, "evict": choose_evict(seq, strategy)}
    return [Step("attention (vit-attn)", attention_qkv_kernel, ((qkv, (batch, seq, 3 * heads * head_dim)),), (out,),
                 consts, ((batch * seq, heads * head_dim),))]  # fmt: skip


def fused_qkv_attention_steps(cfg: ViTConfig, batch: int, x: str, p: str = "") -> list:
    """norm1, the QKV projection and attention in two launches: ``linear.layernorm_qkv`` writes q^T, (scale * k)^T
    and V in the split layout ``vit_attn.attention_split`` reads (no Tensor-engine transposes of q and k)."""
    seq, strategy = cfg.seq, choose_strategy(cfg.seq)
    return [
        Step("layernorm + qkv", layernorm_qkv_kernel, (x, p + "n1_g", p + "n1_b", p + "qkv_w", p + "qkv_b"),
             (p + "qkT", p + "v"), {"scale": cfg.head_dim**-0.5, "epsilon": EPS}),
        Step("attention (vit-attn)", attention_split_kernel, (p + "qkT", p + "v"), (p + "a",),
             {"num_heads": cfg.heads, "seq": seq, "strategy": strategy, "evict": choose_evict(seq, strategy)}),
    ]  # fmt: skip


def encoder_steps(cfg: ViTConfig, batch: int, mode: str) -> list:
    """The encoder forward from ``patches`` [batch * patches, patch_dim] to ``out`` [batch * seq, dim]."""
    if mode not in ("eager", "fused"):
        raise ValueError(f"mode must be 'eager' or 'fused', got {mode!r}")
    eager = mode == "eager"
    steps = []
    if eager:
        steps += [_mm("matmul", "patches", "patch_w", "pe0"),
                  Step("bias add", elementwise.bias_add_kernel, ("pe0", "patch_b"), ("pe",))]
    else:
        steps += [_lin("linear", "patches", "patch_w", "patch_b", "pe")]
    steps.append(Step("embed tokens", attention_ops.embed_tokens_kernel, ("pe", "cls", "pos"), ("x0",)))
    x = "x0"
    for i in range(cfg.depth):
        p = f"b{i}."
        if eager:
            steps.append(Step("layernorm", layernorm_kernel, (x, p + "n1_g", p + "n1_b"), (p + "h1",),
                              {"epsilon": EPS}))  # fmt: skip
            steps += [_mm("matmul", p + "h1", p + "qkv_w", p + "qkv0"),
                      Step("bias add", elementwise.bias_add_kernel, (p + "qkv0", p + "qkv_b"), (p + "qkv",))]
            steps += eager_attention_steps(batch, cfg.seq, cfg.heads, cfg.head_dim, p + "qkv", p + "a", p)
            steps += [_mm("matmul", p + "a", p + "proj_w", p + "pr0"),
                      Step("bias add", elementwise.bias_add_kernel, (p + "pr0", p + "proj_b"), (p + "pr1",)),
                      Step("residual add", elementwise.add_kernel, (x, p + "pr1"), (p + "x1",))]
        else:
            steps += fused_qkv_attention_steps(cfg, batch, x, p)
            steps.append(_lin("linear", p + "a", p + "proj_w", p + "proj_b", p + "x1", "residual", x))
        if eager:
            steps += [Step("layernorm", layernorm_kernel, (p + "x1", p + "n2_g", p + "n2_b"), (p + "h2",),
                           {"epsilon": EPS}),
                      _mm("matmul", p + "h2", p + "fc1_w", p + "f0"),
                      Step("bias add", elementwise.bias_add_kernel, (p + "f0", p + "fc1_b"), (p + "f1",)),
                      Step("gelu", elementwise.gelu_kernel, (p + "f1",), (p + "f2",)),
                      _mm("matmul", p + "f2", p + "fc2_w", p + "f3"),
                      Step("bias add", elementwise.bias_add_kernel, (p + "f3", p + "fc2_b"), (p + "f4",)),
                      Step("residual add", elementwise.add_kernel, (p + "x1", p + "f4"), (p + "x2",))]
        else:
            steps.append(Step("layernorm + mlp", layernorm_mlp_kernel, (p + "x1", p + "n2_g", p + "n2_b", p + "fc1_w",
                                                                         p + "fc1_b", p + "fc2_w", p + "fc2_b"),
                              (p + "x2",), {"epsilon": EPS}))  # fmt: skip
        x = p + "x2"
    steps.append(Step("layernorm", layernorm_kernel, (x, "norm_g", "norm_b"), ("out",), {"epsilon": EPS}))
    return steps


def reference_forward(cfg: ViTConfig, w: dict, patches: np.ndarray) -> np.ndarray:
    """The same forward in float64 NumPy (timm's math, weights input-major)."""
    f = {k: np.asarray(v, np.float64) for k, v in w.items()}
    batch = patches.shape[0] // cfg.patches

    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + EPS) * g + b

    pe = np.asarray(patches, np.float64) @ f["patch_w"] + f["patch_b"]
    x = np.concatenate([np.broadcast_to(f["cls"], (batch, 1, cfg.dim)), pe.reshape(batch, cfg.patches, cfg.dim)], 1)
    x = (x + f["pos"]).reshape(batch * cfg.seq, cfg.dim)
    hd, h = cfg.head_dim, cfg.heads
    for i in range(cfg.depth):
        p = f"b{i}."
        qkv = ln(x, f[p + "n1_g"], f[p + "n1_b"]) @ f[p + "qkv_w"] + f[p + "qkv_b"]
        q, k, v = qkv.reshape(batch, cfg.seq, 3, h, hd).transpose(2, 0, 3, 1, 4)
        s = (q * hd**-0.5) @ k.transpose(0, 1, 3, 2)
        e = np.exp(s - s.max(-1, keepdims=True))
        a = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(batch * cfg.seq, cfg.dim)
        x = x + a @ f[p + "proj_w"] + f[p + "proj_b"]
        hmid = gelu_tanh(ln(x, f[p + "n2_g"], f[p + "n2_b"]) @ f[p + "fc1_w"] + f[p + "fc1_b"])
        x = x + hmid @ f[p + "fc2_w"] + f[p + "fc2_b"]
    return ln(x, f["norm_g"], f["norm_b"])
