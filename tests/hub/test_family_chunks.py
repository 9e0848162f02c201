"""Calls above a family's range, fetched without trust: run as instances over slices of the dimensions the
family's kernel is proved independent along (``ShapeFamily.independence`` from the verified IR,
``hub_client/chunks.py``), or refused naming the dimension, the range and why. The packages are vit-attn's own,
cut down to one family whose batch and head ranges are shrunk so that a call past them stays small."""

import re

import numpy as np
import pytest

import kernels
from hub_client import chunks
from hub_client.bundle import build_bundle
from hub_client.publish import publish
from kernels.vit_attn.reference import attention as attention_reference
from tests.hub.conftest import settings
from tests.hub.library_packages import families_only


def _close(out, expected):
    np.testing.assert_allclose(np.asarray(out, np.float64), np.asarray(expected, np.float64), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def attention_bundle(tmp_path_factory):
    """``attention``'s family over B, H, S and D (S 1..512, fp32) with B in 1..2 and H in 1..3."""
    root = families_only("vit_attn", tmp_path_factory.mktemp("chunks"), {"attention"},
                         lambda ln: "B x H x S x D:float32" in ln and 'S = "1..512"' in ln
                         and "scalars" not in ln)  # fmt: skip
    toml = root / "kernel.toml"
    text = re.sub(r'B = "1\.\.\d+", H = "1\.\.\d+"', 'B = "1..2", H = "1..3"', toml.read_text())
    assert 'B = "1..2", H = "1..3"' in text
    toml.write_text(text)
    return build_bundle(root, benchmarks=False)


def test_a_call_above_the_batch_and_head_ranges_runs_in_parts(registry, attention_bundle):
    publish(attention_bundle, "acme/vit-attn", settings())
    k = kernels.get_kernel("acme/vit-attn", version=1)
    assert k.info.trusted is False
    rng = np.random.default_rng(3)
    for shape in [(5, 2, 130, 16), (2, 7, 40, 8), (3, 4, 1, 4)]:  # B above 2; H above 3 (axis 1); both
        q, kk, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
        out = k.attention(q, kk, v, backend="numpy")
        assert out.shape == shape
        _close(out, attention_reference(q, kk, v))
    # the parts are instances within the range: B 2 (the top, reused) and 1, H 3 and 1 for (2, 7, ...)
    shapes = {tuple(sorted(key[1])) for key in k.attention._parsed if len(key) == 3}
    assert all(dict(v)["B"] <= 2 and dict(v)["H"] <= 3 for v in shapes)


def test_sizes_cut_into_parts_within_the_range():
    assert chunks.sizes(1000, 1, 256, 1) == [256, 256, 256, 232]
    assert chunks.sizes(512, 1, 256, 1) == [256, 256]
    assert chunks.sizes(260, 8, 256, 4) == [252, 8]  # a rest below the range's bottom borrows from the chunk before
    assert all(8 <= c <= 256 and c % 4 == 0 for c in chunks.sizes(260, 8, 256, 4))
    with pytest.raises(ValueError, match="cannot be cut"):
        chunks.sizes(13, 10, 12, 1)


@pytest.fixture(scope="module")
def fixed_seq_bundle(tmp_path_factory):
    """``attention_qkv``'s DeiT-S/16 family (``B x 197 x 1152``, fp32: the tuned concrete schedule over B) with B in
    1..2."""
    root = families_only("vit_attn", tmp_path_factory.mktemp("fixed"), {"attention_qkv"},
                         lambda ln: '"B x 197 x 1152:float32"' in ln)  # fmt: skip
    toml = root / "kernel.toml"
    toml.write_text(toml.read_text().replace('B = "1..256"', 'B = "1..2"'))
    return build_bundle(root, benchmarks=False)


def test_a_models_batch_above_its_family_runs_in_parts_of_the_tuned_schedule(registry, fixed_seq_bundle):
    from kernels.vit_attn.reference import attention_qkv

    publish(fixed_seq_bundle, "acme/vit-attn", settings())
    k = kernels.get_kernel("acme/vit-attn", version=1)
    qkv = np.random.default_rng(5).standard_normal((5, 197, 1152)).astype(np.float32)
    how, spec, (_, over, _) = k.attention_qkv.route(qkv, num_heads=6)
    assert how == "parts" and spec.args[0].shape == ("B", 197, 1152) and over == {"B": 5}
    out = k.attention_qkv(qkv, num_heads=6, backend="numpy")
    np.testing.assert_allclose(out, attention_qkv(qkv, 6), rtol=2e-5, atol=2e-5)
    # evict: the family lists "auto" and the engines choose_evict gives at S = 197, which the builder checked
    # the plan makes the same kernel call for; another round robin is another IR (with trust only)
    from kernels.vit_attn.kernel import DEFAULT_EVICT, choose_evict

    assert choose_evict(197, "resident") == DEFAULT_EVICT
    assert k.attention_qkv.route(qkv, num_heads=6, evict=list(DEFAULT_EVICT))[:2] == ("parts", spec)
    # strategy: the model's shape lists "auto" and "resident" (choose_strategy's "auto" at S = 197 is the strip)
    assert k.attention_qkv.route(qkv, num_heads=6, strategy="resident")[:2] == ("parts", spec)
    with pytest.raises(kernels.NoSpecialisationError, match=r"strategy='flash': .*published: 'auto', 'resident'"):
        k.attention_qkv.route(qkv, num_heads=6, strategy="flash")  # (the families over S run it; none here)
    with pytest.raises(kernels.NoSpecialisationError, match="evict in"):
        k.attention_qkv.route(qkv, num_heads=6, evict=("scalar",))
    with pytest.raises(kernels.NoSpecialisationError, match=r"\(B x 197 x 1152:float32, .*num_heads=6.*\) with B"):
        k.attention_qkv(qkv[:, :100], num_heads=6)  # no family holds S = 100 here: refused, listing what exists


@pytest.mark.slow  # XLA compiles each instance
def test_jax_arrays_in_parts_are_joined_as_jax_arrays(registry, attention_bundle):
    import jax.numpy as jnp

    publish(attention_bundle, "acme/vit-attn", settings())
    k = kernels.get_kernel("acme/vit-attn", version=1)
    q, kk, v = (np.random.default_rng(i).standard_normal((3, 2, 5, 4)).astype(np.float32) for i in range(3))
    out = k.attention(jnp.asarray(q), jnp.asarray(kk), jnp.asarray(v), backend="jax")
    assert isinstance(out, type(jnp.asarray(q))) and out.shape == (3, 2, 5, 4)
    _close(out, attention_reference(q, kk, v))


def test_sizes_of_a_kernel_in_blocks_are_multiples_of_the_block_but_the_last():
    assert chunks.sizes(700, 1, 256, 1, 128) == [256, 256, 188]
    assert chunks.sizes(70000, 1, 65536, 1, 128) == [65536, 4464]
    assert chunks.sizes(500, 1, 200, 1, 128) == [128, 128, 128, 116]  # the top rounded down to the block
    assert chunks.sizes(260, 10, 256, 1, 128) == [128, 132]  # the borrow rounded up to the block
    assert chunks.sizes(260, 10, 256, 4, 6) == [240, 20]  # a step and a block: the top and the borrow multiples of both
    with pytest.raises(ValueError, match="start at multiples of 128"):
        chunks.sizes(300, 129, 256, 1, 128)  # 256 + 44: 44 would take 128 from 256, leaving 128, below 129
    with pytest.raises(ValueError, match="no part in 1..100 is a multiple of 128"):
        chunks.sizes(300, 1, 100, 1, 128)


def _softmax_rows(tmp_path_factory, top: int):
    """softmax's ``N x 512:float32`` family (row tiles of 128, the ragged last one masked) with N in 1..top."""
    root = families_only("softmax", tmp_path_factory.mktemp(f"rows{top}"), {"softmax"},
                         lambda ln: '"N x 512:float32"' in ln)  # fmt: skip
    toml = root / "kernel.toml"
    toml.write_text(toml.read_text().replace('N = "1..65536"', f'N = "1..{top}"'))
    return build_bundle(root, benchmarks=False)


@pytest.fixture(scope="module")
def softmax_rows_bundles(tmp_path_factory):
    return _softmax_rows(tmp_path_factory, 300), _softmax_rows(tmp_path_factory, 1024)


def test_rows_above_a_row_kernels_range_run_in_parts_of_whole_row_tiles_bit_for_bit(registry, softmax_rows_bundles):
    """N = 700 over a family N in 1..300 runs as instances of 256, 256 and 188 rows (the top rounded down to the
    kernel's 128-row tile, so that each slice starts at a multiple of it), giving the numbers of the one instance
    a family N in 1..1024 runs, bit for bit."""
    from kernels.softmax.reference import softmax

    small, big = softmax_rows_bundles
    publish(small, "acme/softmax-small", settings())
    publish(big, "acme/softmax-big", settings())
    in_parts = kernels.get_kernel("acme/softmax-small", version=1)
    whole = kernels.get_kernel("acme/softmax-big", version=1)
    assert in_parts.info.trusted is False and whole.info.trusted is False
    x = np.random.default_rng(7).standard_normal((700, 512)).astype(np.float32) * 4
    how, _, (_, over, proved) = in_parts.softmax.route(x)
    assert how == "parts" and over == {"N": 700} and proved["N"].block == 128
    assert whole.softmax.route(x)[0] == "family"
    out = in_parts.softmax(x, backend="numpy")
    np.testing.assert_array_equal(out, whole.softmax(x, backend="numpy"))
    np.testing.assert_allclose(out, softmax(x), rtol=1e-5, atol=1e-7)
    assert sorted(dict(key[1])["N"] for key in in_parts.softmax._parsed if len(key) == 3) == [188, 256]
