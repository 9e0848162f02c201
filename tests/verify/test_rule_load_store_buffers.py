"""Load not from HBM and store not to HBM: the operand-buffer rule, with a golden message for each."""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def load_from_sbuf(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(x)  # x is already on chip
    nl.store(out, value=y)
    return out


@nki.jit
def store_to_sbuf(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    staging = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    x = nl.load(a)
    nl.store(staging, value=x)  # a store writes HBM
    nl.store(out, value=staging)
    return out


def test_golden_load_not_from_hbm(golden, rejected):
    golden("operand-buffer", rejected(load_from_sbuf, A), "load")


def test_golden_store_not_to_hbm(golden, rejected):
    golden("operand-buffer", rejected(store_to_sbuf, A), "store")


def test_load_from_and_store_to_every_hbm_kind_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        scratch = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.private_hbm)
        nl.store(scratch, value=nl.load(a))
        nl.store(out, value=nl.load(scratch))
        return out

    traced(kernel, A)
