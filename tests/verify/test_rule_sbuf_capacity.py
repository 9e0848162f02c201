import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def four_wide_tiles(a, width):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    ts = [nl.full((128, width), k, dtype=nl.float32, buffer=nl.sbuf) for k in range(4)]  # all live at the add
    s = nl.add(nl.add(ts[0], ts[1]), nl.add(ts[2], ts[3]))
    nl.store(out, value=s[:, 0:512])
    return out


def test_golden_sbuf_over_capacity(golden, rejected):
    golden("sbuf-capacity", rejected(four_wide_tiles, A, width=12288))  # 4 x 48 KiB + sums > 224 KiB on trn2


@pytest.mark.parametrize(("target", "fits"), [("trn1", False), ("trn2", True), ("trn3", True)])
def test_capacity_follows_the_target(target, fits, rejected):
    # Width 10240: five 40 KiB tiles are live at the second add, 200 KiB per partition: over trn1's 192 KiB,
    # within trn2's 224 KiB and trn3's 256 KiB.
    if fits:
        nki.trace(four_wide_tiles, A, width=10240, target=target)
    else:
        (diag,) = rejected(four_wide_tiles, A, width=10240, target=target).diagnostics
        assert diag.rule == "sbuf-capacity"
        assert diag.message.startswith("SBUF use reaches 200 KiB per partition here, more than the 192 KiB a trn1 ")


def test_a_tile_made_in_a_loop_body_counts_once(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((1024, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(8):  # 8 x 128 KiB if every iteration kept its own tile
            wide = nl.ndarray((128, 32768), dtype=nl.float32, buffer=nl.sbuf)
            wide[:, 0:512] = nl.load(a[0:128, :])
            nl.store(out[i * 128:(i + 1) * 128, :], value=wide[:, 0:512])
        return out

    traced(kernel, A)
