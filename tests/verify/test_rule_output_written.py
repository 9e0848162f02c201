import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def forgets_to_store(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.exp(nl.load(a))  # computed, never stored
    return out


def test_golden_output_never_written(golden, rejected):
    golden("output-written", rejected(forgets_to_store, A))


def test_a_write_through_a_reshaped_view_counts(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out.reshape((128, 512)), value=nl.load(a))
        return out

    traced(kernel, A)


def test_each_unwritten_output_is_reported(rejected):
    @nki.jit
    def kernel(a):
        first = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        second = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        third = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(second, value=nl.load(a))
        return first, second, third

    diags = rejected(kernel, A).diagnostics
    assert [(d.rule, d.message.split(" is ")[0]) for d in diags] == [
        ("output-written", "output %0 f32[128, 512] in 'shared_hbm'"),
        ("output-written", "output %2 f32[128, 512] in 'shared_hbm'"),
    ]
