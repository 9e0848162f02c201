"""The user-facing vit-attn calls: check the shapes against the kernel's limits (refusing with the limit's name),
choose the strategy by shape, and run.

``plan_attention`` / ``plan_attention_qkv`` / ``plan_attention_split`` are what the Hub bundle builder traces for
each declared specialisation: they pass the caller's arrays to the kernel unchanged and in order, and everything
else (scale, strategy, eviction engines, num_heads) as compile-time constants, but for a family's given scale (a
runtime scalar after the arrays). The qkv and split plans also take
their arrays viewed per head (``qkv`` (B, S, 3, H, D); ``qkT`` (2, H, D, B, S) with ``v`` (B, S, H, D), outputs
(B, S, H, D)): the form kernel.toml's families over the head count publish (``head_views.py``), which a loader
makes from the caller's arrays by a reshape.

What runs without trust (a Hub kernel fetched without ``trust_remote_code``): every shape these launchers accept
(head_dim 1..128, seq 1..16384, float32 and bfloat16, any batch and head count; kernels/vit_attn/README.md), by
the models' published shapes and families, the families over the sequence length and, past a family's batch or
head range, instances over slices (``hub_client/chunks.py``); ``scale=`` (the families' runtime-scale twins: a
given scale over a symbolic shape is passed as a one-element float32 array, ``_family_scale``) and
``strategy=`` (the families over S publish ``strategy = ["auto", "resident"]`` up to 512 tokens, the score strip of
``seq_strip.py``, and ``["auto", "flash"]`` past that: over a symbolic S the plans make one schedule for both values
of a family, "flash" always flash, and refuse "resident" past 512, ``_family_strategy``; ``"resident"`` also at the
models' shapes, their ``strategy = ["auto", "resident"]``); ``evict="auto"``
or the engines a specialisation's schedule copies PSUM by (kernel.toml's ``evict`` listings: ``choose_evict``'s at
a model's shape, the Scalar engine over a symbolic S, ``_family_evict``).
tests/kernels/test_vit_attn_families.py enumerates the shape classes with those keywords.
"""

from __future__ import annotations

import math

import numpy as np

from . import seq_strip
from .kernel import EVICT_ENGINES, PMAX, RESIDENT_MAX_SEQ, _static, attention_kernel, attention_qkv_kernel, choose_evict
from .seq_family import COPY_ENGINES

MAX_HEAD_DIM = PMAX  # head_dim sits on the partitions of q^T and k^T (reference/nki.md §1.2 TC#1)
MAX_SEQ = 16384  # K^T, V and one probability strip per head stay in SBUF: 16384 keys of bf16 use ~100 KiB/partition
STRATEGIES = ("auto", "resident", "flash")
DTYPES = ("float32", "bfloat16")


class VitAttnShapeError(ValueError):
    """A shape or dtype outside what the kernel supports; the message names the limit."""


def choose_strategy(seq: int, strategy: str = "auto") -> str:
    """The resident score strip while a query tile's fp32 scores fit the PSUM banks set aside for them
    (``RESIDENT_MAX_SEQ`` keys); flash-style online softmax over key blocks beyond that."""
    if strategy not in STRATEGIES:
        raise VitAttnShapeError(f"vit-attn: strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy != "auto":
        return strategy
    return "resident" if seq <= RESIDENT_MAX_SEQ else "flash"


def _check(seq: int, d: int, dtype) -> None:
    if d > MAX_HEAD_DIM:
        raise VitAttnShapeError(f"vit-attn: head_dim {d} exceeds the limit of {MAX_HEAD_DIM} (head_dim is the "
                                f"contraction on the Tensor engine's {PMAX} partitions)")  # fmt: skip
    if d < 1 or seq < 1:
        raise VitAttnShapeError(f"vit-attn: empty operands (seq {seq}, head_dim {d})")
    if seq > MAX_SEQ:
        raise VitAttnShapeError(f"vit-attn: sequence length {seq} exceeds the limit of {MAX_SEQ} (K^T, V and a "
                                f"probability strip per head must fit SBUF)")  # fmt: skip
    if str(dtype) not in DTYPES:
        raise VitAttnShapeError(f"vit-attn: dtype {dtype} is not supported; use one of {', '.join(DTYPES)}")


def _scale(d: int, scale) -> float:
    return d**-0.5 if scale is None else float(scale)


def _family_strategy(seq, strategy: str, strip: bool = True) -> str:
    """The schedule a shape family over S runs, one for every S of it: the resident score strip where every S of the
    family is at most 512 keys (``seq_strip.py``; ``strip=False``: the unpublished traces over the width or token
    count, which have no strip), else flash over key blocks of 512 (``seq_family.py``). "auto" gets that schedule,
    "flash" always gets flash, "resident" is refused where the family has no strip; so a family publishing
    ``strategy = ["auto", "resident"]`` or ``["auto", "flash"]`` is what the bundle builder checks it is (the plan
    makes one kernel call for both) and a family listing the other is not."""
    if strategy not in STRATEGIES:
        raise VitAttnShapeError(f"vit-attn: strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if not strip:
        strategy = "flash" if strategy == "auto" else strategy
        if strategy == "resident":
            raise VitAttnShapeError("vit-attn: a trace over the width or the token count runs the flash schedule "
                                    "(seq_family.py), not the resident strip: trace it with strategy 'auto' or 'flash'")
        return strategy
    try:
        return seq_strip.schedule(seq, strategy)
    except ValueError as e:
        raise VitAttnShapeError(str(e)) from None


def _family_evict(evict) -> None:
    """A shape family over S copies each P^T block from PSUM by the Scalar engine (seq_family.COPY_ENGINES): "auto"
    and engines that round-robin to the same sequence (("scalar",), ("scalar", "scalar")) get that schedule; others
    are refused, so a family listing them in ``evict`` is refused by the bundle builder (a schedule it does not run)."""
    if evict == "auto":
        return
    engines = _engines(evict)
    n = math.lcm(len(engines), len(COPY_ENGINES))
    if engines * (n // len(engines)) != COPY_ENGINES * (n // len(COPY_ENGINES)):
        raise VitAttnShapeError(f"vit-attn: a shape family over the sequence length copies P^T from PSUM on the "
                                f"{', '.join(COPY_ENGINES)} engine (seq_family.py), not round robin over {engines}: "
                                f"trace it with evict 'auto' or {COPY_ENGINES}")  # fmt: skip


def _engines(evict) -> tuple:
    """``evict`` as a tuple of engine names, each one the kernel copies PSUM by (``kernel.EVICT_ENGINES``)."""
    engines = tuple(evict) if isinstance(evict, tuple | list) else None
    if not engines or not all(isinstance(e, str) and e in EVICT_ENGINES for e in engines):
        raise VitAttnShapeError(f"vit-attn: evict must be 'auto' or a non-empty sequence of engine names from "
                                f"{', '.join(EVICT_ENGINES)}, got {evict!r}")  # fmt: skip
    return engines


def _evict(seq: int, strategy: str, evict) -> tuple:
    """The PSUM-copy engines of a concrete shape (``choose_evict``), engine names checked here: a bad one is
    refused naming the engines, not by a KeyError deep in the kernel."""
    return choose_evict(seq, strategy, evict if evict == "auto" else _engines(evict))


def _family_scale(d, scale) -> tuple[tuple, dict]:
    """A family's scale: None over a symbolic head_dim is 1 / sqrt(D) computed on chip (seq_family._inv_sqrt), None
    over a concrete one d**-0.5 as a constant; a given scale is a runtime scalar (a one-element float32 array after
    the arrays, kernel.toml's ``scalars``), so one published IR serves every scale."""
    if scale is not None:
        return (np.full((1,), scale, np.float32),), {}
    return (), {"scale": None if _static(d) is None else d**-0.5}


def plan_attention(q, k, v, scale=None, strategy="auto", evict="auto"):
    if len(q.shape) != 4 or tuple(q.shape) != tuple(k.shape) or tuple(q.shape) != tuple(v.shape):
        raise VitAttnShapeError(f"vit-attn: attention takes q, k, v of one shape (batch, heads, seq, head_dim), "
                                f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")  # fmt: skip
    if not (q.dtype == k.dtype == v.dtype):
        raise VitAttnShapeError(f"vit-attn: q, k, v differ in dtype ({q.dtype}, {k.dtype}, {v.dtype})")
    _, _, seq, d = q.shape
    _check(seq, d, q.dtype)
    if _static(seq) is None or _static(d) is None:  # a shape family over S (and D): one schedule, seq_family.py
        schedule = _family_strategy(seq, strategy)
        _family_evict(evict)
        runtime, consts = _family_scale(d, scale)
        return attention_kernel, (q, k, v, *runtime), consts | {"strategy": schedule}
    strategy = choose_strategy(seq, strategy)
    consts = {"scale": _scale(d, scale), "strategy": strategy, "evict": _evict(seq, strategy, evict)}
    return attention_kernel, (q, k, v), consts


def _heads_view(kind: str, shapes: list, want: list, num_heads) -> None:
    """The per-head views (``head_views.py``) a Hub family traces: shapes that agree with each other and num_heads."""
    if any(len(s) != len(w) or any(a != b for a, b in zip(s, w)) for s, w in zip(shapes, want)) or (
        num_heads is not None and num_heads != want[-1][2]
    ):
        raise VitAttnShapeError(f"vit-attn: {kind} viewed per head takes {' and '.join(map(str, want))} with "
                                f"num_heads = H, got {', '.join(map(str, shapes))}, num_heads {num_heads}")  # fmt: skip


def plan_attention_qkv(qkv, num_heads, scale=None, strategy="auto", evict="auto"):
    if len(qkv.shape) == 5:  # (B, S, 3, H, D): the fused projection viewed per head, as the Hub's families take it
        from .head_views import attention_qkv_heads_kernel

        b, seq, _, h, d = qkv.shape
        _heads_view("attention_qkv", [tuple(qkv.shape), (b, seq, h, d)], [(b, seq, 3, h, d), (b, seq, h, d)],
                    num_heads)  # fmt: skip
        _check(seq, d, qkv.dtype)
        schedule = _family_strategy(seq, strategy)
        _family_evict(evict)
        runtime, _ = _family_scale(d, scale)  # (D is symbolic here: None is computed on chip)
        return attention_qkv_heads_kernel, (qkv, *runtime), {"strategy": schedule}
    if len(qkv.shape) != 3:
        raise VitAttnShapeError(f"vit-attn: attention_qkv takes qkv (batch, seq, 3 * heads * head_dim), "
                                f"got shape {tuple(qkv.shape)}")  # fmt: skip
    num_heads = int(num_heads)
    _, seq, width = qkv.shape
    if num_heads < 1 or width % (3 * num_heads):
        raise VitAttnShapeError(f"vit-attn: the last axis ({width}) is not 3 * num_heads ({num_heads}) * head_dim")
    d = width // (3 * num_heads)
    _check(seq, d, qkv.dtype)
    if _static(seq) is None or _static(width) is None:  # a shape family over S (and the width): seq_family.py
        # (not published: kernel.toml's qkv families are the per-head views above; the heads are unrolled here, the
        # scale a constant, and None over a symbolic head_dim 1 / sqrt(D) from a mask, as plan_attention's)
        _family_strategy(seq, strategy, strip=False)
        _family_evict(evict)
        on_chip = scale is None and _static(d) is None
        return attention_qkv_kernel, (qkv,), {"num_heads": num_heads, "scale": None if on_chip else _scale(d, scale)}
    strategy = choose_strategy(seq, strategy)
    consts = {"num_heads": num_heads, "scale": _scale(d, scale), "strategy": strategy,
              "evict": _evict(seq, strategy, evict)}  # fmt: skip
    return attention_qkv_kernel, (qkv,), consts


def plan_attention_split(qkT, v, num_heads, seq=None, strategy="auto", evict="auto", batch=None):
    """Attention from the split layout (``split_layout``): ``qkT`` (2 * heads * head_dim, batch * seq) holding q^T
    and (scale * k)^T, ``v`` (batch * seq, heads * head_dim); out (batch * seq, heads * head_dim). Give ``seq``, or
    ``batch`` (``batch=1``: the tokens are one sequence, the form the families over the token count publish,
    seq_family.py), or both."""
    from .split_layout import attention_split_kernel

    if len(qkT.shape) == 5:  # (2, H, D, B, S) and (B, S, H, D): the split layout viewed per head (the Hub's families)
        from .head_views import attention_split_heads_kernel

        _, h, d, b, s = qkT.shape
        _heads_view("attention_split", [tuple(qkT.shape), tuple(v.shape)], [(2, h, d, b, s), (b, s, h, d)],
                    num_heads)  # fmt: skip
        for name, given, have in (("seq", seq, s), ("batch", batch, b)):
            if given is not None and given != have:
                raise VitAttnShapeError(f"vit-attn: {name} = {given}, but the arrays hold {have}")
        _check(s, d, v.dtype)
        schedule = _family_strategy(s, strategy)
        _family_evict(evict)
        return attention_split_heads_kernel, (qkT, v), {"strategy": schedule}
    if len(qkT.shape) != 2 or len(v.shape) != 2:
        raise VitAttnShapeError(f"vit-attn: attention_split takes qkT (2 * hd, tokens) and v (tokens, hd), got "
                                f"{tuple(qkT.shape)} and {tuple(v.shape)}")  # fmt: skip
    tokens, hd = v.shape
    if seq is None and batch is None:
        raise VitAttnShapeError("vit-attn: attention_split needs seq (tokens per sequence) or batch")
    num_heads, batch = int(num_heads), None if batch is None else int(batch)
    if batch is not None and batch < 1:
        raise VitAttnShapeError(f"vit-attn: batch must be >= 1, got {batch}")
    one_sequence = batch == 1 and seq is None
    seq = tokens if one_sequence else int(seq) if seq is not None else int(tokens) // batch
    if tuple(qkT.shape) != (2 * hd, tokens) or qkT.dtype != v.dtype:
        raise VitAttnShapeError(f"vit-attn: qkT must be (2 * {hd}, {tokens}) of v's dtype, got {tuple(qkT.shape)} "
                                f"{qkT.dtype}")  # fmt: skip
    mismatch = not one_sequence and (tokens % seq or (batch is not None and tokens != batch * seq))
    if num_heads < 1 or hd % num_heads or seq < 1 or mismatch:
        raise VitAttnShapeError(f"vit-attn: {hd} features are not num_heads ({num_heads}) * head_dim, or {tokens} "
                                f"tokens not batch{'' if batch is None else f' ({batch})'} * seq ({seq})")  # fmt: skip
    _check(seq, hd // num_heads, v.dtype)
    if _static(seq) is None:  # a family over the tokens of one sequence (seq_family.attention_split_any_seq)
        _family_strategy(seq, strategy, strip=False)
        _family_evict(evict)
        return attention_split_kernel, (qkT, v), {"num_heads": num_heads, "seq": None}
    strategy = choose_strategy(seq, strategy)
    consts = {"num_heads": num_heads, "seq": seq, "strategy": strategy, "evict": _evict(seq, strategy, evict)}
    return attention_split_kernel, (qkT, v), consts


def attention_split(qkT, v, num_heads, seq=None, *, batch=None, backend: str | None = None, strategy: str = "auto"):
    """Attention from the split layout a fused LayerNorm + QKV projection writes (``linear.layernorm_qkv``): give
    ``seq`` or ``batch`` (``batch=1``: the tokens are one sequence)."""
    launch, args, kwargs = plan_attention_split(qkT, v, num_heads, seq, strategy, batch=batch)
    return launch(*args, backend=backend, **kwargs)


def attention(q, k, v, scale=None, *, backend: str | None = None, strategy: str = "auto"):
    """Bidirectional attention over (batch, heads, seq, head_dim); returns the same shape."""
    launch, args, kwargs = plan_attention(q, k, v, scale, strategy)
    return launch(*args, backend=backend, **kwargs)


def attention_qkv(qkv, num_heads, scale=None, *, backend: str | None = None, strategy: str = "auto"):
    """Attention from the fused QKV projection (batch, seq, 3 * heads * head_dim) -> (batch, seq, heads * head_dim)."""
    launch, args, kwargs = plan_attention_qkv(qkv, num_heads, scale, strategy)
    return launch(*args, backend=backend, **kwargs)
