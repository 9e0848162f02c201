import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((256, 512), np.float32)


@nki.jit
def scratch_per_tile(a):
    out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        scratch = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)  # one per iteration: not top level
        nl.store(scratch, value=nl.load(a[i * 128:(i + 1) * 128, :]))
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(scratch))
    return out


def test_golden(golden, rejected):
    golden("shared-hbm-scope", rejected(scratch_per_tile, A))


def test_shared_hbm_made_before_the_loop_and_private_scratch_in_it_are_accepted():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        staged = nl.ndarray((256, 512), dtype=a.dtype, buffer=nl.shared_hbm)  # top level, indexed by the loop
        for i in nl.affine_range(2):
            scratch = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.hbm)  # private scratch may live in the loop
            nl.store(scratch, value=nl.load(a[i * 128:(i + 1) * 128, :]))
            nl.store(staged[i * 128:(i + 1) * 128, :], value=nl.load(scratch))
            nl.store(out[i * 128:(i + 1) * 128, :], value=nl.load(staged[i * 128:(i + 1) * 128, :]))
        return out

    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x), x)
