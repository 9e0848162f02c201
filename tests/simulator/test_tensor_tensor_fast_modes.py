"""§2.3 tensor_tensor on two bf16 SBUF inputs: add, multiply and subtract read once per element (max(MIN_II, N)),
every other operator twice (max(MIN_II, 2N)), as fp32 SBUF inputs do. Compared with each other, not pinned to
numbers, so a documented change of the model's constants keeps them."""

import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.simulator.support import simulate

N = 512  # elements per partition: well above MIN_II, so no instruction sits at the issue floor


@nki.jit
def sbuf_tensor_tensor(x, fn, dtype):
    out = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x, dtype=getattr(nl, dtype))
    b = nl.load(x, dtype=getattr(nl, dtype))
    r = nisa.tensor_tensor(a, b, op=getattr(nl, fn), dtype=getattr(nl, dtype))
    nl.store(out, value=nl.copy(r, dtype=nl.float32))
    return out


def _tensor_tensor_ns(fn, dtype, target="trn2"):
    prof = simulate(sbuf_tensor_tensor, nki.spec((128, N), "float32"), fn=fn, dtype=dtype, target=target)[1]
    return next(t for t in prof.schedule.templates if t.opcode == "nisa.tensor_tensor").duration_ns


@pytest.mark.parametrize("fn", ["add", "multiply", "subtract"])
def test_a_bf16_sbuf_add_multiply_or_subtract_reads_once_per_element(fn):
    assert _tensor_tensor_ns(fn, "bfloat16") == pytest.approx(_tensor_tensor_ns(fn, "float32") / 2)


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_other_bf16_sbuf_operators_read_twice_per_element(fn):
    assert _tensor_tensor_ns(fn, "bfloat16") == pytest.approx(_tensor_tensor_ns(fn, "float32"))
    assert _tensor_tensor_ns(fn, "bfloat16") == pytest.approx(2 * _tensor_tensor_ns("add", "bfloat16"))
