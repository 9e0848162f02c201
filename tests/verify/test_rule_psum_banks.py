import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def nine_accumulators(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum, name=f"acc{k}") for k in range(9)]
    total = nl.copy(accs[0])
    for acc in accs[1:]:
        total = nl.add(total, acc)
    nl.store(out, value=total)
    return out


def test_golden(golden, rejected):
    golden("psum-banks", rejected(nine_accumulators, A))


def test_tiles_made_in_a_loop_count_once(traced):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(6)]
        for k in nl.affine_range(16):
            x = nl.load(a[k * 128:(k + 1) * 128, :])
            y = nl.load(b[k * 128:(k + 1) * 128, :])
            for acc in accs:
                acc += nl.matmul(x, y, transpose_x=True)  # each product: one bank, dead after the +=
        total = nl.copy(accs[0])
        for acc in accs[1:]:
            total = nl.add(total, acc)
        nl.store(out, value=total)
        return out

    traced(kernel, np.zeros((2048, 128), np.float32), np.zeros((2048, 512), np.float32))


def test_a_psum_tile_used_in_a_loop_stays_live_through_it(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        held = [nl.zeros((128, 512), nl.float32, buffer=nl.psum, name=f"held{k}") for k in range(4)]
        for i in nl.affine_range(4):
            ts = [nl.zeros((128, 512), nl.float32, buffer=nl.psum) for _ in range(5)]  # the ninth while held lives
            s = nl.copy(ts[0])
            for t in ts[1:] + held:
                s = nl.add(s, t)
            nl.store(out[:, i * 128:(i + 1) * 128], value=s[:, 0:128])
        return out

    (diag,) = rejected(kernel, A).diagnostics
    assert diag.rule == "psum-banks" and diag.message.startswith("9 PSUM banks are in use here")
    assert "%held0 f32[128, 512] in 'psum' (1 bank" in diag.message
