"""vit-attn's families over S <= 512 run the resident score strip (``kernels/vit_attn/seq_strip.py``): the schedule
the plans choose, its label, its numbers against the NumPy reference at head counts that leave a group partly empty,
its transfer count (a group of heads per DMA) and its modelled time against the concrete kernel."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.vit_attn import reference, seq_strip
from kernels.vit_attn.launcher import plan_attention
from tests.kernels.family_args import FamilyArg as _Arg

TOLERANCE = {"float32": (1e-5, 1e-5), "bfloat16": (2e-2, 2e-2)}
CAST = {"float32": np.float32, "bfloat16": nl.bfloat16}


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the tests name their backends.)"""
    return None


_FAMILIES: dict = {}


def _family(dtype, s_top=512, h_top=32):
    key = (dtype, s_top, h_top)
    if key not in _FAMILIES:
        spec = nki.spec(("B", "H", "S", "D"), dtype, dims={"B": (1, 4), "H": (1, h_top), "S": (1, s_top),
                                                           "D": (1, 128)})  # fmt: skip
        launch, args, kwargs = plan_attention(*[_Arg(spec, nki.symbolic_shapes(spec)[0], dtype)] * 3)
        _FAMILIES[key] = nki.trace(launch, *[spec] * 3, target="trn2", **kwargs)
    return _FAMILIES[key]


def _arrays(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32).astype(CAST[dtype]) for _ in range(3)]


def test_the_plans_choose_the_strip_where_every_s_fits_one_psum_bank_and_flash_past_it():
    assert seq_strip.fits(512) and not seq_strip.fits(513)
    assert 'const "strategy" = "resident"' in _family("float32").text
    assert 'const "strategy" = "flash"' in _family("float32", s_top=513).text
    assert seq_strip.schedule(300, "flash") == "flash" and seq_strip.schedule(300) == "resident"
    with pytest.raises(ValueError, match="runs the flash schedule"):
        seq_strip.schedule(513, "resident")


def test_the_group_keeps_a_loop_over_the_heads():
    """Where no head count of the family passes the group, it halves: a loop of one trip is no loop over H, and the
    loader could not run more heads than the family's range in parts."""
    assert seq_strip.group_size(32) == seq_strip.GROUP
    assert seq_strip.group_size(3) == 2 and seq_strip.group_size(1) == 1


# head counts that fill a group, leave the last one partly empty, or fall below one; S ragged and whole tiles
CASES = [("float32", 1, 9, 197, 64), ("float32", 2, 3, 1, 128), ("float32", 1, 8, 512, 80),
         ("bfloat16", 1, 13, 129, 64), ("bfloat16", 2, 1, 300, 33)]  # fmt: skip


@pytest.mark.parametrize("dtype, b, h, seq, d", CASES)
def test_strip_instances_match_the_reference(dtype, b, h, seq, d):
    q, k, v = _arrays(dtype, (b, h, seq, d), seq + h)
    family = _family(dtype)
    got = family.instantiate(q, k, v, target="trn2").compile("numpy").run(dict(zip(family.param_names, (q, k, v))))
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), reference.attention(q, k, v).astype(np.float64),
                               rtol=rtol, atol=atol)  # fmt: skip


def _transfers(profile) -> int:
    sch = profile.schedule
    return sum(1 for i in range(len(sch)) if sch.units[sch.unit[i]].startswith("dma"))


def test_every_transfer_moves_a_group_of_heads():
    """Per batch element and group: q^T, k^T and V in one transfer each and one store per query tile, so 12 heads of
    197 tokens take 2 groups x (3 + 2) transfers (one transfer per head and tile made 72)."""
    shape = (1, 12, 197, 64)
    instance = _family("bfloat16").instantiate(shape, shape, shape, target="trn2")
    groups = -(-12 // seq_strip.GROUP)
    assert _transfers(instance.profile("trn2")) == groups * (3 + 2)


@pytest.mark.parametrize("shape, bound", [((1, 2, 129, 64), 1.6), ((1, 12, 197, 64), 1.6), ((1, 16, 300, 64), 1.6)])
def test_a_strip_instance_is_close_to_the_concrete_kernel(shape, bound):
    """Modelled trn2 bf16 (benchmarks/family_instances.py --attention prints these): the family instance within
    ``bound`` of the concrete kernel traced for the shape (a flash family ran 7.5x at ViT-B/16's 1x12x197x64)."""
    fam = _family("bfloat16").instantiate(shape, shape, shape, target="trn2").profile("trn2").latency_us
    launch, args, kwargs = plan_attention(*[np.zeros(shape, nl.bfloat16)] * 3)
    concrete = nki.trace(launch, *[nki.spec(shape, "bfloat16")] * 3, target="trn2", **kwargs)
    assert fam <= bound * concrete.profile("trn2").latency_us


def test_flash_moves_an_iterations_query_tiles_in_one_transfer():
    """Past 512 tokens (flash, seq_family.py): per head and pair of query tiles their q^T in one transfer and their
    outputs in one, and per key block its k^T and V in one each: 513 tokens are 3 pairs x (2 + 2 blocks x 2)."""
    shape = (1, 1, 513, 64)
    instance = _family("bfloat16", s_top=2048).instantiate(shape, shape, shape, target="trn2")
    assert _transfers(instance.profile("trn2")) == 3 * (2 + 2 * 2)
