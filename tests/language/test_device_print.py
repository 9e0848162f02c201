"""``nl.device_print(prefix, x)``: the backend running the kernel prints the tensor's values at that point, after
the prefix (reference/nki.md §2.7 device_print); an SBUF or HBM tensor, not PSUM."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent


def test_device_print_shows_sbuf_and_hbm_values_in_program_order(capsys):
    @nki.jit
    def kernel(x):
        t = nl.load(x)
        nl.device_print("loaded:", t)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(t, 1.0))
        nl.device_print("stored:", out)
        return out

    x = np.array([[1.5, -2.0]], dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), x + 1)
    assert " ".join(capsys.readouterr().out.split()) == "loaded: [[ 1.5 -2. ]] stored: [[ 2.5 -1. ]]"


@backend_independent
def test_device_print_refuses_psum_tiles():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        p = nl.matmul(t, t, transpose_x=True)
        nl.device_print("p", p)
        nl.store(out, p)
        return out

    with pytest.raises(nki.NkiError, match="device_print.*psum"):
        kernel(np.zeros((64, 64), np.float32))
