"""Rule ``indirect-dma``: an indirect DMA's index tile holds 32-bit integers, one per partition, and the HBM side
carries the placeholder row index (ir/indirect.py); accepted counterparts beside each refusal."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.errors import NkiRuntimeError
from nki_dsl.ir import indirect

DATA = np.zeros((300, 64), np.float32)


def _gather(index_dtype):
    @nki.jit
    def kernel(data, idx):
        out = nl.ndarray((128, 64), data.dtype, buffer=nl.shared_hbm)
        ix = nl.load(idx, dtype=index_dtype)
        nl.store(out, value=nl.load(data[ix, :]))
        return out

    return kernel


def test_golden(golden, rejected):
    golden("indirect-dma", rejected(_gather(nl.float32), DATA, np.zeros((128, 1), np.int32)))


def test_int32_and_uint32_index_tiles_are_accepted():
    for dt in (nl.int32, nl.uint32):
        nki.trace(_gather(dt), DATA, np.zeros((128, 1), np.int32))


def _lowered_gather(ir):
    return next(s for s, _ in ir.walk() if getattr(s, "name", "") == "nl.load" and "indices" in s.operands)


def test_parsed_ir_without_the_dimension_or_with_another_row_index_is_refused(traced, reverified):
    ir = traced(_gather(nl.int32), DATA, np.zeros((128, 1), np.int32))
    op = _lowered_gather(ir)
    del op.attrs[indirect.DIM]
    assert "both operand 'indices' and attribute 'indirect_dim'" in str(reverified(ir))
    ir = traced(_gather(nl.int32), DATA, np.zeros((128, 1), np.int32))
    op = _lowered_gather(ir)
    op.attrs[indirect.DIM] = 1  # the placeholder d0 is in dimension 0
    assert "must index dimension 1 with the placeholder d0" in str(reverified(ir))


@nki.jit
def _gather_rows(table, idx):
    out = nl.ndarray((128, 64), dtype=table.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(64)[None, :]
    nl.store(out, value=nl.load(table[nl.load(idx), i_f]))
    return out


def test_a_shape_family_gathering_rows_is_proved_and_its_rows_are_checked_at_run_time():
    # The indexed dimension is widened in the family proof as in the rules: its index is a placeholder (d0 over the
    # index tile's 128 partitions), not the rows, so "d0 may reach N" for N < 128 was a false refusal.
    table = nki.spec(("N", 64), "float32", dims={"N": (1, 4096)})
    family = nki.trace(_gather_rows, table, nki.spec((128, 1), "int32"))
    assert family.ir.symbols
    data = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)  # an instance with 5 rows
    idx = (np.arange(128, dtype=np.int32) % 5).reshape(128, 1)
    np.testing.assert_array_equal(_gather_rows(data, idx), data[idx[:, 0]])
    with pytest.raises(NkiRuntimeError, match="outside dimension 0 of %table"):
        _gather_rows(data, idx + 1)  # row 5 of 5
