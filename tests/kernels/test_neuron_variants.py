"""The HF kernels variants (``kernels/<name>/neuron/``, written against AWS's current ``nki``) run with ``nki``
resolved to nki-dsl's current-API front end (``nki_dsl.compat``), and give the NumPy references' numbers.

Each is imported from its file as HF kernels imports ``build/torch-neuron/__init__.py`` (a module of its own with
the variant directory as its package), never through ``kernels.<name>``.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.backend_fixture import slow_on_jax

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nki_dsl.compat") is None,
    reason="needs nki_dsl.compat.install() (the current-API front end that makes `import nki` resolve to nki-dsl), "
    "which is not on main yet",
)
KERNELS = Path(__file__).parents[2] / "kernels"


@pytest.fixture(scope="module")
def variant():
    import nki_dsl.compat

    nki_dsl.compat.install()

    def load(package: str):
        name = f"_test_neuron_variant_{package}"
        spec = importlib.util.spec_from_file_location(name, KERNELS / package / "neuron" / "__init__.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load


def _close(actual, expected, rtol, atol):
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


rng = np.random.default_rng(7)


def test_softmax(variant):
    from kernels.softmax.reference import softmax

    x = rng.standard_normal((300, 512)).astype(np.float32)  # a ragged last row tile
    _close(variant("softmax").softmax(x), softmax(x), 1e-5, 1e-7)


def test_rmsnorm(variant):
    from kernels.rmsnorm.reference import rmsnorm

    x, g = rng.standard_normal((300, 1024)).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    _close(variant("rmsnorm").rmsnorm(x, g, 1e-6), rmsnorm(x, g, 1e-6), 1e-5, 1e-5)


def test_layernorm(variant):
    from kernels.layernorm.reference import layernorm

    x = rng.standard_normal((130, 768)).astype(np.float32)  # two bn_stats chunks, a ragged row tile
    g, b = rng.standard_normal(768).astype(np.float32), rng.standard_normal(768).astype(np.float32)
    _close(variant("layernorm").layernorm(x, g, b, 1e-6), layernorm(x, g, b, 1e-6), 1e-5, 1e-5)


@pytest.mark.parametrize("epilogue", ["none", "bias", "gelu", "residual"])
def test_linear(variant, epilogue):
    from kernels.linear.reference import linear

    x, w = rng.standard_normal((130, 256)).astype(np.float32), rng.standard_normal((256, 600)).astype(np.float32)
    b, r = rng.standard_normal(600).astype(np.float32), rng.standard_normal((130, 600)).astype(np.float32)
    got = variant("linear").linear(x, w, None if epilogue == "none" else b, r if epilogue == "residual" else None,
                                   epilogue=epilogue)  # fmt: skip
    _close(got, linear(x, w, b, r, epilogue), 1e-5, 2e-4)


@slow_on_jax
def test_vit_attention_both_layouts(variant):
    from kernels.vit_attn.reference import attention, attention_qkv

    q, k, v = (rng.standard_normal((1, 2, 197, 64)).astype(np.float32) for _ in range(3))
    _close(variant("vit_attn").attention(q, k, v), attention(q, k, v), 2e-5, 2e-5)
    qkv = rng.standard_normal((1, 197, 3 * 2 * 64)).astype(np.float32)
    _close(variant("vit_attn").attention_qkv(qkv, 2), attention_qkv(qkv, 2), 2e-5, 2e-5)


def test_matmul(variant):
    from kernels.matmul.reference import matmul

    lhsT, rhs = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((256, 1024)).astype(np.float32)
    _close(variant("matmul").matmul(lhsT, rhs), matmul(lhsT, rhs), 1e-5, 1e-4)


def _refusals():
    """Calls the linear launchers refuse before any kernel runs, with the arrays' shapes and dtypes: (entry, arrays,
    keywords). Sizes past the launchers' limits, an integer dtype, mixed dtypes, mismatched shapes."""
    import nki_dsl.language as nl

    f32, bf16, i32 = np.float32, nl.bfloat16, np.int32

    def arrays(*spec):
        return [np.zeros(shape, dtype) for shape, dtype in spec]

    return [
        ("linear", arrays(((4, 8193), f32), ((8193, 16), f32)), {}),  # K past 8192
        ("linear", arrays(((4, 16), f32), ((16, 8193), f32), ((8193,), f32)), {"epilogue": "bias"}),  # N past 8192
        ("linear", arrays(((4, 16), i32), ((16, 32), i32)), {}),  # an integer dtype
        ("linear", arrays(((4, 16), f32), ((16, 32), bf16), ((32,), f32)), {"epilogue": "bias"}),  # mixed dtypes
        ("linear", arrays(((4, 16), f32), ((16, 32), f32), ((31,), f32)), {"epilogue": "gelu"}),  # the bias's shape
        ("linear", arrays(((4, 16), f32), ((16, 32), f32)), {"epilogue": "relu"}),
        ("mlp", arrays(((4, 16), f32), ((16, 32), f32), ((32,), f32), ((32, 16), f32), ((16,), f32), ((4, 16), f32)),
         {}),  # float32: the fused kernel's x^T is a DMA transpose
        ("mlp", arrays(((4, 16), bf16), ((16, 32), bf16), ((32,), f32), ((32, 16), bf16), ((16,), bf16),
                       ((4, 16), bf16)), {}),  # mixed dtypes
        ("mlp", arrays(((4, 8193), bf16), ((8193, 32), bf16), ((32,), bf16), ((32, 16), bf16), ((16,), bf16),
                       ((4, 16), bf16)), {}),  # K past 8192
        ("mlp", arrays(((4, 16), bf16), ((16, 32), bf16), ((32,), bf16), ((33, 16), bf16), ((16,), bf16),
                       ((4, 16), bf16)), {}),  # w2's rows are not H
    ]  # fmt: skip


def test_the_linear_variant_refuses_what_the_launchers_refuse(variant):
    """The HF variant (Python that imports only ``nki``) carries the launchers' shape, size and dtype checks: every
    call ``kernels/linear/launcher.py`` refuses before tracing, the variant refuses with the same message."""
    from kernels.linear import launcher

    neuron = variant("linear")
    for entry, arrays, keywords in _refusals():
        with pytest.raises(ValueError) as want:
            getattr(launcher, f"plan_{entry}")(*arrays, **keywords)
        with pytest.raises(ValueError) as got:
            getattr(neuron, entry)(*arrays, **keywords)
        assert str(got.value) == str(want.value), (entry, [a.shape for a in arrays])
