"""A token-generation (decode) attention over a KV cache in the style of a production kernel library: per
sequence of the batch, a ``nl.dynamic_range`` over the KV tiles whose trip count is the sequence's filled length,
read at run time from an HBM tensor into a register (``runtime_kernels.decode_attention``). Against the float64
formula on the NumPy reference, the JAX backend and the simulator, for batches whose sequences run different
numbers of iterations."""

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
from nki_dsl.errors import NkiRuntimeError

from .runtime_kernels import TOKENS, decode_attention, decode_attention_formula

B, D, H, S_MAX = 3, 64, 8, 512
RNG = np.random.default_rng(7)
Q = RNG.standard_normal((B, D, H)).astype(np.float32)
K = RNG.standard_normal((B, D, S_MAX)).astype(np.float32)
V = RNG.standard_normal((B, S_MAX, D)).astype(np.float32)


def lens(*n) -> np.ndarray:
    return np.array(n, np.int32).reshape(-1, 1)


# JAX compiles the kernel in 2-4 s (the default run has JAX runtime loops in test_runtime_loops.py): slow here
@pytest.mark.parametrize("backend", ["numpy", pytest.param("jax", marks=pytest.mark.slow), "simulator"])
@pytest.mark.parametrize("seq_lens", [(128, 512, 256), (512, 512, 512), (384, 128, 128)])
def test_decode_attention_reads_each_sequence_length_at_run_time(backend, seq_lens):
    args = (Q, K, V, lens(*seq_lens))
    out = nki.simulate(decode_attention)(*args) if backend == "simulator" else decode_attention(*args,
                                                                                                backend=backend)
    np.testing.assert_allclose(np.asarray(out), decode_attention_formula(*args), rtol=2e-5, atol=2e-6)


def test_one_trace_serves_every_length_and_the_bound_comes_from_the_cache():
    text = nki_dsl.trace(decode_attention, Q, K, V, lens(128, 128, 128)).text
    assert nki_dsl.trace(decode_attention, Q, K, V, lens(512, 256, 384)).text == text
    assert f"dynamic i1 = range(0, {S_MAX // TOKENS}, 1) reads %" in text  # inside the batch's affine loop i0


def test_a_length_past_the_cache_is_refused_when_the_kernel_runs():
    with pytest.raises(NkiRuntimeError, match=r"nl.dynamic_range loop i1 read stop 5 from its register, "
                                                     r"past its declared bound 4"):
        decode_attention(Q, K, V, lens(128, 640, 128))


def test_simulated_time_grows_with_the_tiles_the_batch_reads():
    """Each sequence's loop runs its own trip count in the simulator (recorded per entry by the reference run)."""
    def latency(*n):
        return nki.simulate(decode_attention, Q, K, V, lens(*n))[1].latency_ns

    short, mixed, long = latency(128, 128, 128), latency(128, 256, 512), latency(512, 512, 512)
    assert short < mixed < long
    assert latency(512, 256, 128) == pytest.approx(mixed, rel=0.05)  # the same 7 tiles in another order
