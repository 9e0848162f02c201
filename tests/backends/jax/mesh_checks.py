"""Mesh runs on 8 host devices, checked in a fresh interpreter (``test_mesh.py`` runs this module): XLA_FLAGS must be
set before JAX creates its CPU client, which an earlier test in the same process would already have done.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m tests.backends.jax.mesh_checks

Each check compares the mesh run with the same kernel on one device (the JAX backend: equal bits, since each device
runs the same programs on the same tiles) and with the NumPy reference (within the kernel tests' tolerances).
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path

import jax
import numpy as np

import nki_dsl as nki
import nki_dsl.jax as nki_jax
import nki_dsl.language as nl
from tests.kernels import formulas as ref
from tests.kernels.nki_style import attention

ROOT = Path(__file__).resolve().parents[3]


@nki.jit
def matmul_grid(lhsT, rhs):
    """result = lhsT.T @ rhs, one [128, 512] result tile per program of a 2-D grid."""
    K, M = lhsT.shape
    _, N = rhs.shape
    m, n = nl.program_id(0), nl.program_id(1)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    i_k, i_m = nl.mgrid[0:128, 0:128]
    i_kn, i_n = nl.mgrid[0:128, 0:512]
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        a = nl.load(lhsT[k * 128 + i_k, m * 128 + i_m])
        b = nl.load(rhs[k * 128 + i_kn, n * 512 + i_n])
        acc += nl.matmul(a, b, transpose_x=True)
    i_p, i_f = nl.mgrid[0:128, 0:512]
    nl.store(result[m * 128 + i_p, n * 512 + i_f], value=nl.copy(acc, dtype=result.dtype))
    return result


@nki.jit
def strided_rows(x):
    """Program p writes rows p, p + grid, p + 2 grid, ...: not blocks, so it cannot be split over devices."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:2, 0:64]
    p = nl.program_id(0)
    nl.store(out[i_p * 8 + p, i_f], value=nl.load(x[i_p * 8 + p, i_f]))
    return out


def _same(mesh_out, one_device, numpy_out, rtol, atol):
    assert isinstance(mesh_out, jax.Array) and len(mesh_out.sharding.device_set) > 1, mesh_out.sharding
    np.testing.assert_array_equal(np.asarray(mesh_out), np.asarray(one_device))
    ref.assert_close(np.asarray(mesh_out), numpy_out, rtol, atol)


def check_tutorial_tensor_add():
    add = runpy.run_path(str(ROOT / "tutorials" / "01_tensor_add.py"))["add_kernel"]
    rng = np.random.default_rng(0)
    a = rng.random((1024, 2048)).astype(np.float16)
    b = rng.random((1024, 2048)).astype(np.float16)
    launch = add[8, 4]
    for mesh, axes in ((jax.make_mesh((8,), ("x",)), {0: "x"}), (jax.make_mesh((2, 4), ("x", "y")), {0: "x", 1: "y"}),
                       (jax.make_mesh((4, 2), ("x", "y")), {1: "x"})):  # fmt: skip
        run = nki_jax.on_mesh(launch, mesh, axes)
        out = run(a, b)
        _same(out, launch(a, b, backend="jax"), launch(a, b), 0, 0)
        exe, _ = run.executable(a, b)
        assert out.sharding.spec == exe.spec("a_input"), (out.sharding.spec, exe.spec("a_input"))


def check_tiled_matmul_over_a_2d_grid():
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((256, 512)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    launch = matmul_grid[4, 2]
    run = nki_jax.on_mesh(launch, jax.make_mesh((4, 2), ("x", "y")), {0: "x", 1: "y"})
    exe, _ = run.executable(lhsT, rhs)
    assert tuple(exe.spec("lhsT")) == (None, "x") and tuple(exe.spec("rhs")) == (None, "y")  # from the accesses
    _same(run(lhsT, rhs), launch(lhsT, rhs, backend="jax"), launch(lhsT, rhs), 1e-5, 1e-5)


def check_flash_attention_over_batch_and_heads():
    rng = np.random.default_rng(2)
    b, h, d, s = 2, 4, 64, 256
    q, k = rng.standard_normal((b, h, d, s)).astype(np.float32), rng.standard_normal((b, h, d, s)).astype(np.float32)
    v = rng.standard_normal((b, h, s, d)).astype(np.float32)
    launch = attention.flash_fwd[b, h]
    kwargs = dict(use_causal_mask=True, mixed_precision=False, k_block=128)
    run = nki_jax.on_mesh(launch, jax.make_mesh((2, 4), ("batch", "heads")), {0: "batch", 1: "heads"})
    _same(run(q, k, v, **kwargs), launch(q, k, v, backend="jax", **kwargs), launch(q, k, v, **kwargs), 1e-4, 1e-5)


def check_a_kernel_call_on_the_mesh_inside_jit():
    rng = np.random.default_rng(3)
    lhsT = rng.standard_normal((128, 512)).astype(np.float32)
    rhs = rng.standard_normal((128, 512)).astype(np.float32)
    run = nki_jax.on_mesh(matmul_grid[4, 1], jax.make_mesh((4,), ("x",)))
    got = jax.jit(lambda a, b: run(a * 2.0, b).sum(axis=1))(lhsT, rhs)
    np.testing.assert_allclose(np.asarray(got), (2 * lhsT.T @ rhs).sum(axis=1), rtol=1e-4, atol=1e-3)


def check_a_write_pattern_devices_cannot_split_is_refused():
    x = np.ones((16, 64), np.float32)
    try:
        nki_jax.on_mesh(strided_rows[8], jax.make_mesh((8,), ("x",)))(x)
    except nki.NkiError as e:
        assert "program_id(0)" in str(e) and "mesh axis 'x'" in str(e), e
    else:
        raise AssertionError("a strided write pattern ran over the mesh")
    try:
        nki_jax.on_mesh(matmul_grid[4, 2], jax.make_mesh((8,), ("x",)), {0: "x"})(np.ones((128, 512), np.float32),
                                                                                  np.ones((128, 1024), np.float32))
    except nki.NkiError as e:
        assert "not a multiple of the 8 devices" in str(e), e
    else:
        raise AssertionError("4 programs ran on 8 devices")


CHECKS = [name for name in dir() if name.startswith("check_")]


def main() -> int:
    assert len(jax.devices()) == 8, f"XLA_FLAGS={os.environ.get('XLA_FLAGS')!r} gave {jax.devices()}"
    failed = 0
    for name in CHECKS:
        try:
            globals()[name]()
            print(f"PASS {name}")
        except Exception:  # report every check, then fail
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
