"""Instructions on ``nl.par_dim`` block tensors are priced by their partition axis, not their first axis: a
[8, par_dim(128), 512] tensor is 128 partitions of 8*512 elements each (reference/nki.md §1.2, §3.3)."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from tests.simulator.support import simulate


@nki.jit
def zero_blocks(x):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    blocks = nl.zeros((8, nl.par_dim(128), 512), nl.float32, buffer=nl.sbuf)
    blocks[3] = nl.load(x)
    nl.store(out, value=nl.copy(blocks[3]))
    return out


def test_block_tensor_instructions_span_the_partition_axis():
    x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    outputs, prof = simulate(zero_blocks, x)
    np.testing.assert_array_equal(outputs, x)
    memsets = [t for t in prof.schedule.templates if t.opcode == "nisa.memset"]
    assert memsets and all((t.P, t.N) == (128, 8 * 512) for t in memsets)


def test_profile_repr_is_one_line():
    _, prof = simulate(zero_blocks, np.zeros((128, 512), np.float32))
    text = repr(prof)
    assert "\n" not in text and text.startswith("<Profile zero_blocks on trn2: ") and "bound by" in text
