"""Lesson 6: the project's main job: a vision-transformer attention kernel, fetched from a Hub by version, checked
against NumPy, with its modelled speed-up over eager PyTorch and a timeline of one head.

``kernels/vit_attn`` is the library's fused bidirectional attention (see its README.md card). Here we publish it to
a local registry, load it back with ``kernels.get_kernel("acme/vit-attn", version=1)`` exactly as a user of the
Hub would, run ViT-B/16's attention (197 tokens, 12 heads of 64) from the QKV projection's output, compare with a
float64 NumPy formula, read the modelled comparison with eager attention that the release carries, and save a
Perfetto trace of one head.
Run it: ``python tutorials/06_vit_attention.py`` (a few seconds; no internet needed). The full table over six
models and three targets is ``python benchmarks/vit.py``.
"""

import json
import os
import pathlib
import shutil
import tempfile

import numpy as np

import kernels
import nki_dsl as nki
import nki_dsl.language as nl
from hub_client.cli import main as kernels_cli  # the `kernels` command line, called in-process
from hub_client.fetch import fetch
from hub_client.server import serve
from hub_client.settings import HubSettings

PACKAGE = pathlib.Path(__file__).parents[1] / "kernels" / "vit_attn"
TRACE = pathlib.Path(tempfile.gettempdir()) / "vit_attn_one_head.json"  # open in https://ui.perfetto.dev
SEQ, HEADS, HEAD_DIM = 197, 12, 64  # ViT-B/16 at 224x224: 14 x 14 patches + the class token


def attention_reference(qkv, num_heads):
    """softmax(q k^T / sqrt(d)) v in float64, from (batch, seq, 3 * heads * d) to (batch, seq, heads * d)."""
    b, s, width = qkv.shape
    d = width // (3 * num_heads)
    q, k, v = np.asarray(qkv, np.float64).reshape(b, s, 3, num_heads, d).transpose(2, 0, 3, 1, 4)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return ((p / p.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, s, num_heads * d)


def lesson_package(work: pathlib.Path) -> pathlib.Path:
    """A copy of kernels/vit_attn that declares only the shape this lesson runs (ViT-B/16, batch 1, bf16) and the
    fp32 shape that carries test vectors. The full kernel.toml declares the whole table at batch 1 and 8 in two
    dtypes: tracing and modelling all of it on three targets takes minutes, not seconds."""
    root = work / "vit_attn"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    lines = (root / "kernel.toml").read_text().splitlines()
    keep = [ln for ln in lines if "args = [" not in ln or "test vectors" in ln
            or ("ViT-B/16 batch 1" in ln and "bfloat16" in ln and "x2304:" in ln)]  # fmt: skip
    (root / "kernel.toml").write_text("\n".join(keep) + "\n")
    return root


def lesson(work: pathlib.Path):
    with serve(work / "registry", tokens=["tutorial-token"]) as registry:
        os.environ.update(HF_ENDPOINT=registry.url, HF_HUB_CACHE=str(work / "cache"), HF_TOKEN="tutorial-token")

        # 1. Publish: trace + verify each declared shape, check the test vectors against the NumPy reference, model
        #    the kernel and the eager baseline on trn1/trn2/trn3 (timing only), one commit on branch v1, tag v1.0.0.
        assert kernels_cli(["publish", str(lesson_package(work)), "--repo", "acme/vit-attn"]) == 0

        # 2. Fetch by major version, as from the Hugging Face Hub: only verified IR runs (no downloaded Python).
        vit = kernels.get_kernel("acme/vit-attn", version=1)
        print(vit.info)

        # 3. ViT-B/16 attention, straight from the fused QKV projection's output (no permute kernel).
        qkv = np.random.default_rng(0).standard_normal((1, SEQ, 3 * HEADS * HEAD_DIM)).astype(nl.bfloat16)
        out = vit.attention_qkv(qkv, num_heads=HEADS)
        err = np.abs(out.astype(np.float64) - attention_reference(qkv, HEADS)).max()
        print(f"attention_qkv{tuple(qkv.shape)} bf16 -> {tuple(out.shape)}: max |error| vs float64 NumPy {err:.1e}")
        assert out.shape == (1, SEQ, HEADS * HEAD_DIM) and err < 1.5e-2  # bf16 tolerance (the card says why)

        # 4. The modelled comparison the release carries (benchmarks/comparison.json, digest-checked like every
        #    file): this kernel against eager attention, one kernel per framework op, on three targets.
        settings = HubSettings.from_env()
        got = fetch(settings, "acme/vit-attn", vit.info.commit, lambda m: ["benchmarks/comparison.json"],
                    local_only=False)  # fmt: skip
        figures = json.loads((got.snapshot / "benchmarks/comparison.json").read_text())
        # keyed by entry point and specialisation id; ``route`` says which specialisation the call above ran
        how, spec, _ = vit.attention_qkv.route(qkv, num_heads=HEADS)
        key = f"attention_qkv/{spec.id}"
        assert how == "ir" and key in figures  # the model's own published shape, not a family
        for target, f in figures[key].items():
            print(f"  {target}: vit-attn {f['latency_us']:.1f} us vs eager {f['baseline_us']:.1f} us: "
                  f"{f['speedup']:.2f}x faster (bound by the {f['binding_engine']} engine, "
                  f"{f['binding_busy']:.0%} busy)")  # fmt: skip
        assert figures[key]["trn2"]["speedup"] > 1

    # 5. A timeline of one head on trn2 (timing only, from shapes): which engine works when.
    from kernels.vit_attn import plan_attention_qkv

    kernel, args, consts = plan_attention_qkv(nki.spec((1, SEQ, 3 * HEAD_DIM), "bfloat16"), 1)
    prof = nki.benchmark(kernel, *args, target="trn2", **consts)
    prof.save_trace(TRACE)
    print(f"one head: {prof.latency_us:.2f} us modelled, bound by {prof.bottleneck}; Perfetto trace: {TRACE}")


def main():
    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as work:
            lesson(pathlib.Path(work))
    finally:  # the lesson also runs inside the test suite: leave the environment as it was
        os.environ.clear()
        os.environ.update(saved)


if __name__ == "__main__":
    main()
