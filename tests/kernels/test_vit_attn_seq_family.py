"""vit-attn's ``attention`` families over B, H, S and D (``kernels/vit_attn/seq_family.py``, kernel.toml's last
``attention`` lines): traced through the launcher as the bundle builder does, proved for the declared ranges, and
instantiated at sequence lengths and head dims no model fixed. An instance runs another schedule than the
concrete trace (flash over key blocks of 512 for every S, on-chip tensors sized for D = 128), so it is checked
close to float64 and to the concrete trace, not bit for bit."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.vit_attn import reference
from kernels.vit_attn.launcher import plan_attention
from tests.kernels.family_args import FamilyArg as _Arg

TOML = Path(reference.__file__).with_name("kernel.toml")
BF16 = nl.bfloat16
TOLERANCE = {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 2e-2)}


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the tests name their backends.)"""
    return None



def _declared(dtype):
    """kernel.toml's (B, H, S, D) ranges of the families over the sequence length, for ``dtype`` (not their
    runtime-scale twins, which repeat them: test_vit_attn_families.py)."""
    text = "\n".join(ln for ln in TOML.read_text().split("\n") if "scalars" not in ln)
    out = []
    for line in re.findall(r'args = \["B x H x S x D:(\w+)".*?dims = \{ (.*?) \}', text):
        if line[0] == dtype:
            dims = dict(re.findall(r'(\w) = "(\d+\.\.\d+)"', line[1]))
            out.append({k: tuple(map(int, v.split(".."))) for k, v in dims.items()})
    return out


_FAMILIES: dict = {}


def _family(dtype, seq):
    ranges = next(r for r in _declared(dtype) if r["S"][0] <= seq <= r["S"][1])
    key = (dtype, ranges["S"])
    if key not in _FAMILIES:
        spec = nki.spec(("B", "H", "S", "D"), dtype, dims=ranges)
        shape = nki.symbolic_shapes(spec)[0]
        launch, args, kwargs = plan_attention(*[_Arg(spec, shape, dtype)] * 3)
        _FAMILIES[key] = nki.trace(launch, *[spec] * 3, target="trn2", **kwargs)
    return _FAMILIES[key]


def _run(dtype, b, h, seq, d, backend):
    cast = {"float32": np.float32, "bfloat16": BF16}[dtype]
    rng = np.random.default_rng(seq * 131 + d)
    q, k, v = (rng.standard_normal((b, h, seq, d)).astype(np.float32).astype(cast) for _ in range(3))
    family = _family(dtype, seq)
    got = family.instantiate(q, k, v, target="trn2").compile(backend).run(dict(zip(family.param_names, (q, k, v))))
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), reference.attention(q, k, v).astype(np.float64),
                               rtol=rtol, atol=atol)  # fmt: skip
    return q, k, v, got


CASES = [("float32", 1, 2, s, 64) for s in (1, 127, 128, 129, 197, 512, 513)]
CASES += [("float32", 1, 1, 300, d) for d in (1, 80, 128)] + [("bfloat16", 2, 3, 129, 72)]
SLOW = [("float32", 1, 1, 1370, 64), ("bfloat16", 1, 2, 2048, 128), ("float32", 1, 1, 8192, 64),
        ("bfloat16", 1, 1, 16384, 128)]  # fmt: skip


@pytest.mark.parametrize("dtype, b, h, seq, d", CASES)
def test_instances_compute_attention_at_any_sequence_length_and_head_dim(dtype, b, h, seq, d):
    _run(dtype, b, h, seq, d, "numpy")


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, h, seq, d", SLOW)
def test_instances_at_box_tops_and_the_launchers_limit(dtype, b, h, seq, d):
    _run(dtype, b, h, seq, d, "numpy")


@pytest.mark.parametrize("dtype, b, h, seq, d", [("float32", 1, 2, 129, 64), ("bfloat16", 1, 1, 513, 80)])
def test_on_the_simulator_the_instance_matches_the_concrete_trace(dtype, b, h, seq, d):
    q, k, v, got = _run(dtype, b, h, seq, d, "simulator")
    launch, args, kwargs = plan_attention(q, k, v)
    want = nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run(dict(zip("qkv", args)))
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, b, h, seq, d", [("float32", 1, 2, 129, 64), ("bfloat16", 2, 3, 197, 80)])
def test_on_jax(dtype, b, h, seq, d):
    _run(dtype, b, h, seq, d, "jax")


def test_the_families_cover_every_sequence_length_the_launcher_takes():
    """S from 1 to the launcher's 16384 in nested boxes (each from S = 1, so the builder's smallest instance of every
    family is one token, not thousands on NumPy; a call runs in the first box holding it, the one whose top B x H
    is the largest), growing tops, smaller B x H caps, for both dtypes, D 1..128 in each."""
    from kernels.vit_attn.launcher import MAX_HEAD_DIM, MAX_SEQ

    for dtype in ("float32", "bfloat16"):
        boxes = _declared(dtype)
        assert all(r["S"][0] == 1 for r in boxes) and boxes[-1]["S"][1] == MAX_SEQ
        assert all(p["S"][1] < n["S"][1] and p["B"][1] * p["H"][1] > n["B"][1] * n["H"][1]
                   for p, n in zip(boxes, boxes[1:]))  # fmt: skip
        assert all(r["D"] == (1, MAX_HEAD_DIM) for r in boxes)
