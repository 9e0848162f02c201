"""vit-attn: a first-party Hub kernel package (``kernels publish kernels/vit_attn --repo ORG/vit-attn``)."""

from .launcher import (
    VitAttnShapeError,
    attention,
    attention_qkv,
    attention_split,
    choose_strategy,
    plan_attention,
    plan_attention_qkv,
    plan_attention_split,
)
from .reference import attention as attention_reference
from .reference import attention_qkv as attention_qkv_reference
from .reference import attention_split as attention_split_reference

__all__ = ["attention", "attention_qkv", "attention_split", "plan_attention", "plan_attention_qkv",
           "plan_attention_split", "choose_strategy", "VitAttnShapeError", "attention_reference",
           "attention_qkv_reference", "attention_split_reference"]  # fmt: skip
