import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 1024), np.float32)


@nki.jit
def wide_psum(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum, name="acc")
    nl.store(out, value=nl.copy(acc))
    return out


def test_golden(golden, rejected):
    golden("psum-tile-size", rejected(wide_psum, A))


def test_bf16_bank_and_blocks(traced, rejected):
    @nki.jit
    def fits(a):
        out = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.zeros((128, 1024), nl.bfloat16, buffer=nl.psum)  # 2 KiB: one bank
        b = nl.zeros((2, nl.par_dim(128), 512), nl.float32, buffer=nl.psum)  # one bank per block
        nl.store(out[:, 0:512], value=nl.copy(b[0]))
        nl.store(out, value=nl.copy(t))
        return out

    traced(fits, A)

    @nki.jit
    def block_too_wide(a):
        out = nl.ndarray((128, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
        b = nl.zeros((2, nl.par_dim(128), 1024), nl.float32, buffer=nl.psum)
        nl.store(out, value=nl.copy(b[0]))
        return out

    (diag,) = rejected(block_too_wide, A).diagnostics
    assert diag.message.startswith("each block of PSUM tensor %1 f32[2, 128, 1024] in 'psum' needs 4096 bytes")
