import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def tall_buffer(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    big = nl.zeros((256, 512), nl.float32, buffer=nl.sbuf, name="big")
    nl.store(out, value=big[0:128, :])
    return out


def test_golden(golden, rejected):
    golden("partition-limit", rejected(tall_buffer, A))


def test_tall_load_is_reported_once_at_the_load(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, value=nl.exp(t))  # uses of the tall tile are not reported again
        return out

    (diag,) = rejected(kernel, np.zeros((256, 512), np.float32)).diagnostics
    assert diag.op == "nl.load"
    assert "result %1 f32[256, 512] in 'sbuf' has 256 partitions" in diag.message


def test_block_dimensions_do_not_count_as_partitions(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        blocks = nl.zeros((4, nl.par_dim(128), 512), nl.float32, buffer=nl.sbuf)
        nl.store(out, value=blocks[1])
        return out

    traced(kernel, A)
