"""The library's matmul package (kernels/matmul): every kernel against float64 NumPy, the launcher's choice and
refusals, which kernel each published specialisation is, and the NKI tutorial kernels that trace to its steps."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
from hub_client.bundle import build_bundle
from kernels.matmul import (
    matmul,
    matmul_block_free,
    matmul_blocked,
    matmul_hoisted,
    matmul_reference,
    matmul_tiled,
    plan_matmul,
)
from tests.backend_fixture import backend_independent
from tests.kernels.nki_style import matmul as nki_style

PACKAGE = Path(__file__).parents[2] / "kernels" / "matmul"
RNG = np.random.default_rng(11)


def _operands(k, m, n, dtype=np.float32):
    return RNG.standard_normal((k, m)).astype(dtype), RNG.standard_normal((k, n)).astype(dtype)


@pytest.mark.parametrize("kernel", [matmul_tiled, matmul_hoisted, matmul_block_free, matmul_blocked])
def test_every_kernel_computes_lhsT_transposed_times_rhs(kernel):
    lhsT, rhs = _operands(256, 512, 1024)
    np.testing.assert_allclose(kernel(lhsT, rhs), matmul_reference(lhsT, rhs), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(("shape", "chosen"), [((256, 128, 512), matmul_tiled), ((256, 512, 1024), matmul_blocked),
                                               ((8192, 512, 1024), matmul_tiled)])  # fmt: skip
@backend_independent
def test_the_launcher_blocks_only_what_fills_the_blocks(shape, chosen):
    k, m, n = shape
    lhsT, rhs = nki.spec((k, m), "float32"), nki.spec((k, n), "float32")
    kernel, args, kwargs = plan_matmul(lhsT, rhs)
    assert kernel is chosen and args == (lhsT, rhs) and kwargs == {}


def test_the_launcher_runs_and_matches_the_reference():
    lhsT, rhs = _operands(128, 256, 512, np.float16)
    out = matmul(lhsT, rhs)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), matmul_reference(lhsT, rhs).astype(np.float64),
                               rtol=1e-2, atol=5e-2)  # fmt: skip


@pytest.mark.parametrize(("lhsT", "rhs", "message"), [
    ((256, 128), (128, 512), "lhsT \\(K, M\\) and rhs \\(K, N\\)"),
    ((256, 100), (256, 512), "multiples of 128, 128 and 512"),
    ((256, 128), (256, 500), "multiples"),
])  # fmt: skip
@backend_independent
def test_the_launcher_refuses_shapes_it_cannot_tile(lhsT, rhs, message):
    with pytest.raises(ValueError, match=message):
        plan_matmul(np.zeros(lhsT, np.float32), np.zeros(rhs, np.float32))


@backend_independent
def test_the_manifest_publishes_both_kernels():
    # the bundle's test vectors are checked with the other packages' in tests/hub/test_bundle.py
    bundle = build_bundle(PACKAGE, benchmarks=False)
    heads = [bundle.files[s.ir].decode().split("(")[0] for s in bundle.manifest.entry_points["matmul"].specialisations]
    assert heads == ["kernel matmul_blocked"] * 9 + ["kernel matmul_tiled"] * 3  # blocked families first (kernel.toml)


def _body(traced) -> str:
    """IR text without the header, the source path, constants and source lines: what the kernel computes."""
    lines = re.sub(r" loc\(\d+\)", "", traced.text).splitlines()[1:]
    return "\n".join(ln for ln in lines if not ln.strip().startswith(("source", "const")))


TUTORIAL_TWINS = [(nki_style.nki_matmul_hoist_load_, matmul_hoisted),
                  (nki_style.nki_matmul_block_free_dimension_, matmul_block_free)]  # fmt: skip


@pytest.mark.parametrize(("aws", "library"), TUTORIAL_TWINS)
@backend_independent
def test_the_nki_tutorial_kernels_trace_to_the_library_kernels(aws, library):
    """The NKI-style conformance kernels are AWS's tutorial code (mgrid ``.p/.x`` indexing, named block constants);
    written that way they must trace to exactly the IR of the library's step they correspond to."""
    specs = (nki.spec((512, 512), "bfloat16"), nki.spec((512, 2048), "bfloat16"))
    assert _body(nki.trace(aws, *specs)) == _body(nki.trace(library, *specs))
