"""Every current-API instruction returns an ``NkiInstruction`` (reference/nki.md §2.7 "Common rules"), whose
``depends_on(*producers)`` orders it after them: values follow program order on every backend, the simulator's
schedule does not add the edge, and the first use in a kernel says so (nki_dsl/current/isa/instruction.py)."""

import re
import warnings

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.errors import NkiApiError

X = np.linspace(-2, 2, 128 * 64, dtype=np.float32).reshape(128, 64)
FILE = "test_instruction_handles.py"


def ordered(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    load = nisa.dma_copy(dst=t, src=x)
    fill = nisa.memset(dst=u, value=1.0)
    act = nisa.activation(dst=t, op=nl.exp, data=t)
    act.depends_on(load, fill)
    add = nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
    add.depends_on(act)
    store = nisa.dma_copy(dst=out, src=t)
    assert all(isinstance(i, nisa.NkiInstruction) for i in (load, fill, act, add, store))
    assert act.api == "nisa.activation" and re.search(rf"{FILE}:\d+", str(act.loc))
    return out


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_depends_on_keeps_the_values_and_says_once_what_the_simulator_does_not_model(backend):
    kernel = nki.jit(ordered)  # traced afresh for each backend
    with pytest.warns(UserWarning, match="does not add the semaphore edge") as record:
        out = nki.simulate(kernel)(X) if backend == "simulator" else kernel(X, backend=backend)
    np.testing.assert_allclose(out, np.exp(X) + 1, rtol=1e-5)
    assert sum("semaphore edge" in str(w.message) for w in record) == 1  # once per trace, not per instruction


def test_a_producer_that_is_not_an_instruction_is_refused_at_the_kernel_line():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x).depends_on(t)
        return x

    with pytest.raises(NkiApiError, match=rf"{FILE}:\d+: nisa.dma_copy\(\.\.\.\)\.depends_on: depends_on takes "
                                          r"instructions \(what nisa calls return\), got NkiTensor"):
        k(X)


def test_a_misspelled_keyword_of_a_wrapped_instruction_still_names_the_kernel_line():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dts=t, src=x)
        return x

    with pytest.raises(NkiApiError) as info:
        k(X)
    assert re.fullmatch(rf".*{FILE}:\d+: nisa.dma_copy: unexpected keyword argument 'dts'; did you mean 'dst'\?",
                        str(info.value))  # fmt: skip


def test_an_error_inside_an_instruction_is_not_mistaken_for_a_wrong_call():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=t, data=x, op0=nl.multiply, operand0=2.0)  # HBM data: the op's own refusal
        return x

    with warnings.catch_warnings(), pytest.raises(nki.NkiError, match="tensor_scalar") as info:
        k(X)
    assert "unexpected keyword" not in str(info.value)
