"""The fused kernels' shape families (``mlp``, ``layernorm_mlp``, ``layernorm_qkv``; ``kernels/linear/token_blocks``):
traced through the launchers with a symbolic row count, proved for the declared range, and instantiated at row
counts nobody declared. An instance is not the concrete trace's IR (its last token block is masked instead of cut
to its size, and past four blocks the LayerNorm kernels run loops of four blocks masked to the rows below M), so
each is run against the concrete trace of the same shape: the same numbers, bit for bit, on NumPy (and on the
simulator for some), and against the float64 reference. Narrow weights (K 128, H 256) keep the runs fast; the
ranges are the ones kernel.toml declares for ViT-B/16's widths, which split where the kernels' Python decides."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.linear import reference, token_blocks
from kernels.linear.launcher import plan_layernorm_mlp, plan_layernorm_qkv, plan_mlp
from tests.language.support import assert_ulps

BF16 = nl.bfloat16
K, H = 128, 256  # model width, hidden width (layernorm_qkv: hd = 128, w is K x 384)


# This directory runs every test on each backend (conftest.py); here the JAX side compiles a fresh XLA program per
# instance and per concrete trace, 10-70 s a test on 2 cores, so it runs with the slow tests.
@pytest.fixture(params=["numpy", pytest.param("jax", marks=pytest.mark.slow)])
def kernel_backend(request):
    return request.param


class _Arg:
    """What a launcher sees of a family's argument at publish time (hub_client/bundle.py does the same)."""

    def __init__(self, spec, shape):
        self.spec, self.shape, self.ndim = spec, shape, len(shape)
        self.dtype = BF16


def _family(plan, shapes, dims, constants):
    specs = [nki.spec(s, "bfloat16", dims={"M": dims} if "M" in s else None) for s in shapes]
    stand_ins = [_Arg(s, shape) for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = plan(*stand_ins, **constants)
    return nki.trace(launch, *[a.spec for a in args], target="trn2", **kwargs)


def _inputs(name, m, rng):
    x = (2 * rng.standard_normal((m, K)) + 0.5).astype(np.float32).astype(BF16)
    vec = lambda n, s=1.0: (s * rng.standard_normal(n)).astype(np.float32).astype(BF16)  # noqa: E731
    mat = lambda a, b: (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32).astype(BF16)  # noqa: E731
    gamma, beta = (1 + vec(K, 0.1)).astype(BF16), vec(K)
    if name == "mlp":
        return {"x": x, "w1": mat(K, H), "b1": vec(H), "w2": mat(H, K), "b2": vec(K), "residual": vec((m, K))}
    if name == "layernorm_mlp":
        return {"x": x, "gamma": gamma, "beta": beta, "w1": mat(K, H), "b1": vec(H), "w2": mat(H, K), "b2": vec(K)}
    return {"x": x, "gamma": gamma, "beta": beta, "w": mat(K, 3 * K), "b": vec(3 * K)}


KERNELS = {
    "mlp": (plan_mlp, [("M", K), (K, H), (H,), (H, K), (K,), ("M", K)], {}, reference.mlp),
    "layernorm_mlp": (plan_layernorm_mlp, [("M", K), (K,), (K,), (K, H), (H,), (H, K), (K,)], {"epsilon": 1e-6},
                      reference.layernorm_mlp),
    "layernorm_qkv": (plan_layernorm_qkv, [("M", K), (K,), (K,), (K, 3 * K), (3 * K,)], {"scale": 0.125,
                      "epsilon": 1e-6}, reference.layernorm_qkv),
}  # fmt: skip

# (kernel, declared range, row counts to run): every decision the ranges fix (row tiles of the one block; one
# block or more; the LayerNorm kernels' 2..4 blocks in static code, or runs of 4, leftover single blocks and the
# masked last one), at ragged sizes (197 * 3, 197 * 5 + 1, primes) and a multiple of 512 (the last block whole,
# its mask keeping every row)
CASES = [
    ("mlp", (1, 128), (1, 97)),
    ("mlp", (257, 384), (263,)),
    ("mlp", (513, 65536), (591, 986, 1024, 1031)),
    ("layernorm_mlp", (129, 256), (197,)),
    ("layernorm_mlp", (513, 1024), (591, 986)),
    ("layernorm_mlp", (2049, 65536), (2053,)),  # 2 runs of 4 blocks, the last with 1 block of 5 rows
    ("layernorm_qkv", (385, 512), (389,)),
    ("layernorm_qkv", (1537, 2048), (1601,)),
    ("layernorm_qkv", (2049, 65536), (2053,)),  # 2 iterations, the pipeline carried from the first to the second
]
SLOW_CASES = [  # 2-3 s each on NumPy
    ("layernorm_mlp", (2049, 65536), (3547,)),  # the last run with 3 blocks
    ("layernorm_qkv", (2049, 65536), (3547, 4097)),  # the last iteration: 3 blocks; 1 block of one row
]
CASES += [pytest.param(*case, marks=pytest.mark.slow) for case in SLOW_CASES]


def _outputs(out):
    return [np.asarray(o, np.float64) for o in (out if isinstance(out, tuple) else (out,))]


def _check_reference(name, got, arrays):
    ref = KERNELS[name][3](*[np.asarray(a, np.float64) for a in arrays.values()], **KERNELS[name][2])
    for g, r in zip(got, _outputs(ref)):
        np.testing.assert_allclose(g, r, rtol=2e-2, atol=8e-2)  # bf16 (tests/kernels/test_linear_layernorm.py)


def _id(case):
    name, (lo, hi), rows = case.values if hasattr(case, "values") else case
    return f"{name}-{lo}..{hi}-{'-'.join(map(str, rows))}"


@pytest.mark.parametrize("name, dims, rows", CASES, ids=[_id(c) for c in CASES])
def test_family_instances_compute_what_the_concrete_trace_computes(name, dims, rows, kernel_backend):
    """On NumPy and on JAX (``kernel_backend``), the instance against the concrete trace on the same backend."""
    plan, shapes, constants, _ = KERNELS[name]
    family = _family(plan, shapes, dims, constants)
    rng = np.random.default_rng(11)
    for m in rows:
        arrays = _inputs(name, m, rng)
        got = _outputs(family.instantiate(*arrays.values(), target="trn2").compile(kernel_backend).run(arrays))
        launch, args, kwargs = plan(*arrays.values(), **constants)
        concrete = nki.trace(launch, *args, target="trn2", **kwargs)
        want = _outputs(concrete.compile(kernel_backend).run(arrays))
        for g, w, axis in zip(got, want, ROW_AXES.get(name, (0,))):
            if kernel_backend == "numpy":
                np.testing.assert_array_equal(g, w)
            else:
                _equal_but_the_last_block_within_one_bf16_step(g, w, m, axis)
        _check_reference(name, got, arrays)


ROW_AXES = {"layernorm_qkv": (1, 0)}  # each output's token axis (layernorm_qkv's first is q|k transposed); else 0


def _equal_but_the_last_block_within_one_bf16_step(got, want, m, axis):
    """On JAX an instance's last token block may differ from the concrete trace's by one bf16 step, nowhere else.
    The instance computes that block masked at the full 512 tokens (``token_blocks.BLOCK``) where the concrete trace
    cuts it to its size (3547 rows: 475), so its matmuls have another moving width (128x512 against 128x475) and
    XLA CPU's dot (jax 0.10) chooses its blocking by the shape, summing the same K = 128 products in another order
    at some widths (measured on 128x128 @ 128xW against the first W columns of W = 512: 384, 448 and 504..511 alike,
    456..496 not, 475 not): nearly every fp32 sum of the block differs by roundings (within ~2 fp32 eps of the sum
    of |a*b|, both of them as close to the float64 sum), which through the rest (layernorm_mlp: the GELU and a
    second matmul) and the round to bf16 turns a value at a rounding boundary one bf16 step off (at 3547 rows:
    layernorm_mlp 2 of 454,016 values, layernorm_qkv 9 of 908,032 in q|k^T). NumPy's matmul takes both widths
    alike: bit for bit there. Blocks before the last have one width in both and stay bit for bit."""
    last = (m - 1) // token_blocks.BLOCK * token_blocks.BLOCK
    got, want = np.moveaxis(got, axis, 0), np.moveaxis(want, axis, 0)
    assert got.shape[0] == m
    np.testing.assert_array_equal(got[:last], want[:last])
    assert_ulps(got[last:], np.asarray(want[last:], np.float64), BF16, ulps=1, what="the last token block")


@pytest.mark.parametrize("name, dims, m", [("mlp", (513, 65536), 591), ("layernorm_mlp", (2049, 65536), 2053),
                                           ("layernorm_qkv", (513, 1024), 986)])  # fmt: skip
def test_family_instances_on_the_simulator(name, dims, m, kernel_backend):
    """The simulator's numbers of an instance are NumPy's, bit for bit (JAX's within bf16 rounding: XLA may round
    the fp32 sums differently)."""
    plan, shapes, constants, _ = KERNELS[name]
    family = _family(plan, shapes, dims, constants)
    arrays = _inputs(name, m, np.random.default_rng(5))
    instance = family.instantiate(*arrays.values(), target="trn2")
    got = _outputs(instance.compile("simulator").run(arrays))
    want = _outputs(instance.compile(kernel_backend).run(arrays))
    for g, w in zip(got, want):
        if kernel_backend == "numpy":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-2)
    _check_reference(name, got, arrays)


def test_an_mlp_range_across_the_one_block_decision_is_refused_naming_the_dimension(kernel_backend):
    """``M in 1..1024`` holds one token block for some sizes and two for others, and the fused MLP's Python decides
    on that (the first block alone before the weights, then a loop), so the family cannot be traced; the publisher
    splits the range (kernel.toml). (The LayerNorm kernels trace any range: where it does not fix the block count
    they take the runs-and-leftovers form, ``token_blocks.pipeline``.)"""
    plan, shapes, constants, _ = KERNELS["mlp"]
    with pytest.raises(nki.InconclusiveDimensionError, match=r"dimension M is symbolic \(M in 1\.\.1024\)") as e:
        _family(plan, shapes, (1, 1024), constants)
    assert "token_blocks.py" in str(e.value)


def test_a_layernorm_range_that_leaves_the_block_count_open_computes_the_same(kernel_backend):
    """layernorm_mlp over ``M in 1..1024``: one masked block at 100 rows, a whole block and a masked one at 700."""
    plan, shapes, constants, _ = KERNELS["layernorm_mlp"]
    family = _family(plan, shapes, (1, 1024), constants)
    rng = np.random.default_rng(3)
    for m in (100, 700):
        arrays = _inputs("layernorm_mlp", m, rng)
        got = _outputs(family.instantiate(*arrays.values(), target="trn2").compile(kernel_backend).run(arrays))
        _check_reference("layernorm_mlp", got, arrays)
