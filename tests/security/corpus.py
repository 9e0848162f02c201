"""Real kernels' IR text, the seeds of the payload tests and the fuzzer: the tutorials' and the kernel library's
kernels as traced, and each lowered by the pass pipeline (engine instructions, ``zero_first`` attributes), each
with inputs for its parameters and its outputs on the NumPy reference (the expected values of any run).

Shapes are small so one run costs milliseconds.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import numpy as np

import nki_dsl as nki
from nki_dsl import dtypes
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes.pipeline import run_pipeline


@dataclass(frozen=True)
class Seed:
    name: str
    text: str
    arrays: dict  # parameter name -> input array
    expected: tuple  # the outputs of the text's kernel on the NumPy reference


def _tutorial(module: str, name: str):
    return getattr(importlib.import_module(f"tutorials.{module}"), name)


def _traced() -> list[tuple[str, object]]:
    from kernels.matmul import matmul_tiled
    from kernels.rmsnorm.kernel import rmsnorm_kernel
    from kernels.softmax.kernel import softmax_kernel

    rng = np.random.default_rng(7)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return [
        ("tensor_add", nki.trace(_tutorial("01_tensor_add", "add_kernel")[2, 1], f32(256, 512), f32(256, 512))),
        ("tiled_matmul", nki.trace(matmul_tiled, f32(256, 128), f32(256, 512))),
        ("softmax_rows", nki.trace(softmax_kernel, f32(256, 512))),
        ("softmax_masked", nki.trace(softmax_kernel, f32(300, 512))),
        ("rmsnorm", nki.trace(rmsnorm_kernel, f32(128, 512), f32(512), epsilon=1e-6)),
    ]


def _arrays(traced: nki.TracedKernel, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for p in traced.ir.params:
        d = dtypes.get(p.type.dtype)
        values = rng.standard_normal(p.type.shape) if d.is_float else rng.integers(-8, 8, p.type.shape)
        out[p.name] = values.astype(d.np_dtype)
    return out


def _outputs(result) -> tuple:
    return tuple(result) if isinstance(result, tuple) else (result,)


@functools.cache
def seeds() -> tuple[Seed, ...]:
    found = []
    for k, (name, traced) in enumerate(_traced()):
        lowered = run_pipeline(traced.ir, nki.get_target("trn2"))
        for label, kernel in ((name, traced.ir), (f"{name}/lowered", lowered)):
            text = print_kernel(kernel)
            parsed = nki.parse_ir(text)
            arrays = _arrays(parsed, k)
            found.append(Seed(label, text, arrays, _outputs(parsed.compile("numpy").run(arrays))))
    return tuple(found)


# Backends whose fp32 results are XLA's: exp, tanh, erf, ... and sums in another order than NumPy's, a few ulps
# from the reference; everything else (integers, NaN positions, shapes) must agree exactly.
XLA_BACKENDS = ("jax",)


def close_to_reference(g, e, backend: str) -> bool:
    g, e = np.asarray(g), np.asarray(e)
    if backend not in XLA_BACKENDS or g.dtype.kind != "f" or g.shape != e.shape:
        return np.shape(g) == np.shape(e) and np.array_equal(g, e, equal_nan=True)
    g64, e64 = g.astype(np.float64), e.astype(np.float64)
    finite = np.isfinite(e64)
    # Where the reference gives NaN (a value computed from poisoned, never-written memory) XLA may give anything:
    # its fused CPU code clamps NaN inputs (jax 0.10.2: exp(NaN) inside a fusion is -87.8, a wide max-reduce of
    # NaN rows is -inf). The reference's NaN is what shows the read; the lanes' values are undefined either way.
    defined = ~np.isnan(e64)
    scale = float(np.max(np.abs(e64[finite]), initial=0.0))  # cancellation makes ulps of the largest value matter
    return bool(np.array_equal(np.isfinite(g64[defined]), finite[defined])
                and np.array_equal(g64[defined & ~finite], e64[defined & ~finite])
                and np.allclose(g64[finite], e64[finite], rtol=1e-5, atol=1e-5 * scale))  # fmt: skip


def same_outputs(got, expected: tuple, backend: str = "numpy") -> bool:
    got = _outputs(got)
    return len(got) == len(expected) and all(close_to_reference(g, e, backend) for g, e in zip(got, expected))
