import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.ir.parser import parse_kernel

A = np.zeros((128, 512), np.float32)


@nki.jit
def store_half_the_partitions(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:64, :])
    nl.store(out, value=x)  # 64 partitions into 128 rows
    return out


def test_golden_stored_tile_does_not_cover_the_destination(golden, rejected):
    golden("partition-mismatch", rejected(store_half_the_partitions, A))


def test_a_one_partition_tile_broadcasts_across_partitions(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        row = nl.load(a[0:1, :])
        nl.store(out, value=nl.add(x, row))
        return out

    traced(kernel, A)


ADD_64_TO_128 = """\
kernel k(%a: f32[128, 512] hbm) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  %1 = nl.load(src=%a) : f32[128, 512] sbuf loc(4)
  %2 = nl.load(src=%a[d0, d1 ; 64x512]) : f32[64, 512] sbuf loc(5)
  %3 = nl.add(x=%1, y=%2) : f32[128, 512] sbuf loc(6)
  nl.store(dst=%0, value=%3) loc(7)
}
"""


def test_elementwise_operands_with_different_partitions_in_parsed_ir(reverified):
    # The tracer cannot build this add (its shapes do not broadcast); IR text from a Hub bundle can say it.
    (diag,) = reverified(parse_kernel(ADD_64_TO_128)).diagnostics
    assert str(diag) == (
        "k.py:6: nl.add: number of partitions (dimension 0 of a tile) differs between operand 'x' %1[128, 512] in "
        "'sbuf' and operand 'y' %2[64, 512] in 'sbuf': 128 vs 64; only a tile with one partition is broadcast "
        "across partitions"
    )
    assert diag.rule == "partition-mismatch"
