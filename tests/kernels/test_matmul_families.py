"""matmul's shape families (kernels/matmul/kernel.toml) over the launcher's whole range, every dimension up to
``launcher.MAX_DIM``: instances at each range's ends and at shapes nobody declared, bit for bit against the
concrete trace of the same shape (the launcher's choice: the blocked kernel where the shape fills its blocks) and
close to float64; the tops held by the untrusted-IR budget, which refuses the next doubling."""

import re
from pathlib import Path

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.matmul import launcher, matmul_reference
from kernels.matmul.kernel import matmul_blocked, matmul_tiled

TOML = Path(launcher.__file__).with_name("kernel.toml")
DTYPES = {"float32": np.float32, "bfloat16": nl.bfloat16, "float16": np.float16}
TOLERANCE = {"float32": (1e-4, 1e-3), "bfloat16": (2e-2, 1e-1), "float16": (1e-2, 5e-2)}


@pytest.fixture
def kernel_backend():
    """(Overrides the directory's every-backend fixture: the instance tests name their backends themselves.)"""
    return None


def _families():
    """kernel.toml's families: (kernel, dtype, {dim: (lo, hi, step)}, concrete K or None)."""
    out = []
    for ln in TOML.read_text().splitlines():
        m = re.match(r'\s*\{ args = \["(\w+) x M:(\w+)".*dims = \{ (.*) \} \},', ln)
        if m:
            dims = {d: tuple(map(int, (lo, hi, st))) for d, lo, hi, st in
                    re.findall(r'(\w) = "(\d+)\.\.(\d+) step (\d+)"', m.group(3))}  # fmt: skip
            k = None if m.group(1) == "K" else int(m.group(1))
            out.append((matmul_tiled if k is None else matmul_blocked, m.group(2), dims, k))
    return out


def _holding(dtype, k, m, n):
    """The first family (as the loader picks) holding the shape."""
    for kernel, dt, dims, fixed in _families():
        values = {"K": k, "M": m, "N": n}
        if dt == dtype and (fixed is None or fixed == k) and all(
            lo <= values[d] <= hi and values[d] % st == 0 for d, (lo, hi, st) in dims.items()
        ):
            return kernel, dims, fixed
    raise AssertionError(f"no family holds {dtype} {k} x {m} x {n}")


def _trace(dtype, k, m, n):
    kernel, dims, fixed = _holding(dtype, k, m, n)
    kk = fixed if fixed is not None else "K"
    specs = [nki.spec((kk, "M"), dtype, dims={d: dims[d] for d in (kk, "M") if d in dims}),
             nki.spec((kk, "N"), dtype, dims={d: dims[d] for d in (kk, "N") if d in dims})]  # fmt: skip
    return kernel, nki.trace(kernel, *specs, target="trn2")


# (dtype, (K, M, N)): each range's bottom and top (one dimension at a time: 16384 in all three is 4.4 TFLOP), ragged
# multiples, the blocked families (float16's new), a blocked-size shape whose K has no blocked family
CASES = [("float32", (128, 128, 512)), ("float32", (384, 256, 1536)), ("bfloat16", (16384, 128, 512)),
         ("float32", (128, 128, 16384)), ("float16", (1024, 512, 2048)), ("bfloat16", (2048, 1024, 1024)),
         ("float32", (640, 512, 1024))]  # fmt: skip
RUNS = [(*c, "numpy") for c in CASES] + [(*CASES[1], "simulator")]
RUNS += [pytest.param("float16", (128, 16384, 512), "numpy", marks=pytest.mark.slow)]  # M at the top: ~3 s
RUNS += [pytest.param(*c, "jax", marks=pytest.mark.slow) for c in CASES[:2] + CASES[4:5]]


@pytest.mark.parametrize("dtype, kmn, backend", RUNS, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple)
                         else str(v))  # fmt: skip
def test_instances_compute_what_the_concrete_trace_computes(dtype, kmn, backend):
    k, m, n = kmn
    _, family = _trace(dtype, k, m, n)
    rng = np.random.default_rng(12)
    lhsT, rhs = ((rng.standard_normal(s) / np.sqrt(np.sqrt(k))).astype(np.float32).astype(DTYPES[dtype])
                 for s in ((k, m), (k, n)))  # fmt: skip
    got = family.instantiate(lhsT, rhs, target="trn2").compile(backend).run({"lhsT": lhsT, "rhs": rhs})
    launch, args, kwargs = launcher.plan_matmul(lhsT, rhs)
    want = nki.trace(launch, *args, target="trn2", **kwargs).compile(backend).run({"lhsT": lhsT, "rhs": rhs})
    rtol, atol = TOLERANCE[dtype]
    if backend == "jax":
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    ref = matmul_reference(lhsT.astype(np.float64), rhs.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol, atol=atol)


def test_the_families_cover_the_launchers_range_in_every_dtype():
    for dtype in launcher.DTYPES:
        tiled = [dims for kernel, dt, dims, _ in _families() if dt == dtype and kernel is matmul_tiled]
        assert tiled == [{"K": (128, launcher.MAX_DIM, 128), "M": (128, launcher.MAX_DIM, 128),
                          "N": (512, launcher.MAX_DIM, 512)}]  # fmt: skip
        blocked = sorted(k for kernel, dt, _, k in _families() if dt == dtype and kernel is matmul_blocked)
        assert blocked == [1024, 2048, 4096]  # the launcher's blocked K <= 4096: these run what it runs


def test_the_top_holds_the_budget_and_the_next_doubling_does_not():
    """Published families are proved within the untrusted-IR budget at their tops (``nki.trace`` proves them); a
    family reaching 32768 would run 16.8 million op executions and is refused at publish, so the launcher stops at
    16384 and says so."""
    for dtype in launcher.DTYPES:
        _trace(dtype, launcher.MAX_DIM, launcher.MAX_DIM, launcher.MAX_DIM)
    top = 2 * launcher.MAX_DIM
    specs = [nki.spec(("K", "M"), "float32", dims={"K": (128, top, 128), "M": (128, top, 128)}),
             nki.spec(("K", "N"), "float32", dims={"K": (128, top, 128), "N": (512, top, 512)})]  # fmt: skip
    with pytest.raises(nki.NkiVerificationError, match="budget max_iterations exceeded"):
        nki.trace(matmul_tiled, *specs, target="trn2")
    with pytest.raises(ValueError, match="at most 16384"):
        launcher.plan_matmul(np.zeros((128, 128), np.float32), np.zeros((128, 16896), np.float32))
    with pytest.raises(ValueError, match="must share a dtype"):
        launcher.plan_matmul(np.zeros((128, 128), np.int8), np.zeros((128, 512), np.int8))
