"""The benchmark kernels and the tutorials' kernels, lowered to engine instructions, compute bit for bit what
their traced IR computes on the NumPy reference (all float32 except tutorial 1, fp16, also exact: every engine
rounds on write exactly where the nl op did)."""

import runpy
from pathlib import Path

import numpy as np
import pytest

from benchmarks import reference_cases
from kernels.matmul import matmul_tiled
from kernels.softmax.kernel import softmax_kernel
from tests.passes.lowering import lowered_matches

ROOT = Path(__file__).parents[2]
CASES = reference_cases.cases(np.random.default_rng(0))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_benchmark_kernel_lowers_exactly(case):
    _, kernel, _, args = case
    lowered_matches(kernel, *args)


def _lesson(name):
    return runpy.run_path(str(ROOT / "tutorials" / name), run_name="lesson")


def test_tutorial_tensor_add_lowers_exactly():
    rng = np.random.default_rng(1)
    a, b = (rng.random((256, 1024)).astype(np.float16) for _ in range(2))
    lowered_matches(_lesson("01_tensor_add.py")["add_kernel"][2, 2], a, b)


def test_library_tiled_matmul_lowers_exactly():  # the kernel of lesson 2
    rng = np.random.default_rng(2)
    lhsT, rhs = rng.standard_normal((512, 256)).astype(np.float32), rng.standard_normal((512, 1024)).astype(np.float32)
    lowered_matches(matmul_tiled, lhsT, rhs)


def test_library_softmax_lowers_exactly():  # the kernel lesson 3 reads
    x = np.random.default_rng(3).standard_normal((384, 256)).astype(np.float32)
    lowered_matches(softmax_kernel, x)


def test_matmul_accumulation_is_one_tensor_engine_instruction_per_step():
    _, kernel, _, args = CASES[0]
    low = lowered_matches(kernel, *args)
    from nki_dsl.ir.printer import print_kernel

    text = print_kernel(low)
    # the accumulator's nl.zeros is folded into the first matmul of its k loop (no memset)
    assert text.count("nisa.nc_matmul") == 1 and 'assign(dst=%1, src=%4) {accumulate = add, zero_first = "i2"}' in text
    assert "nisa.memset" not in text
    assert "nl." not in text
