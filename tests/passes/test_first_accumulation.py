"""lower-language folds ``acc = nl.zeros(psum)`` into the first matmul of the accumulation loop that follows it
(``assign ... {zero_first = "i<k>"}``, no memset) exactly when that is provably the same computation, and keeps
the memset otherwise. Every case is checked bit for bit against the traced kernel on the NumPy reference, through
the printer, the parser and the verifier (``lowered_matches``)."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiVerificationError
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes import run_pipeline
from nki_dsl.passes.verifier import check
from tests.passes.lowering import lowered_matches, run, traced

RNG = np.random.default_rng(7)
A = RNG.standard_normal((384, 128)).astype(np.float32)
B = RNG.standard_normal((384, 512)).astype(np.float32)


@nki.jit
def accumulate(a, b, variant="plain"):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    fill = {"ones": 1.0, "negative_zero": -0.0}.get(variant, 0.0)
    acc = nl.full((128, 512), fill, nl.float32, buffer=nl.psum)
    if variant == "read_before":
        nl.store(out, value=nl.copy(acc))
    for k in nl.affine_range(a.shape[0] // 128 if variant != "empty" else 0):
        st = nl.load(a[k * 128:(k + 1) * 128, :])
        mv = nl.load(b[k * 128:(k + 1) * 128, :])
        if variant == "half":
            acc[:, 0:256] += nl.matmul(st, mv[:, 0:256], transpose_x=True)
        elif variant == "masked":
            i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
            acc[i_p, i_f] += nl.matmul(st, mv, transpose_x=True, mask=(i_f < 500))
        elif variant == "isa":
            acc += nisa.nc_matmul(st, mv)
        elif variant == "other_first":
            acc += nl.copy(mv)
            acc += nl.matmul(st, mv, transpose_x=True)
        else:
            acc += nl.matmul(st, mv, transpose_x=True)
    if variant != "read_before":
        nl.store(out, value=nl.copy(acc))
    return out


def _lowered(variant):
    return print_kernel(lowered_matches(accumulate, A, B, variant=variant))


@pytest.mark.parametrize("variant", ["plain", "isa"])
def test_zeros_fold_into_the_first_matmul(variant):
    text = _lowered(variant)
    assert 'zero_first = "i0"' in text and "nisa.memset" not in text


@pytest.mark.parametrize("variant", ["ones", "negative_zero", "read_before", "empty", "half", "masked",
                                     "other_first"])  # fmt: skip
def test_the_memset_stays_where_folding_is_not_provably_the_same(variant):
    text = _lowered(variant)
    assert "zero_first" not in text and "nisa.memset" in text


def test_the_verifier_rejects_zero_first_outside_its_loop():
    # Backends generate code from the name: parsed IR must name an enclosing loop's index, nothing else.
    text = _lowered("plain")
    for bad in ('"i7"', '"i0 + 1"', '"i0 == 0 or __import__(\'os\')"'):
        with pytest.raises(NkiVerificationError, match="zero_first"):
            check(parse_kernel(text.replace('"i0"', bad)), nki.get_target("trn2"))
    plain = text.replace("accumulate = add, ", "accumulate = none, ")
    with pytest.raises(NkiVerificationError, match="zero_first"):
        check(parse_kernel(plain), nki.get_target("trn2"))


@nki.jit
def per_block_accumulate(a, b):
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for o in nl.affine_range(2):
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(a.shape[0] // 128):
            st = nl.load(a[k * 128:(k + 1) * 128, :])
            mv = nl.load(b[k * 128:(k + 1) * 128, :])
            acc += nl.matmul(st, mv, transpose_x=True)
        nl.store(out[o * 128:(o + 1) * 128, :], value=nl.copy(acc))
    return out


def test_an_accumulation_that_already_names_a_zero_first_loop_keeps_it_and_the_memset():
    # IR text (a Hub bundle) may carry zero_first on an accumulation before lowering: here the outer loop's, which
    # zeroes the tile at every step of the outer loop's first iteration. Folding the zeros again would rename it to
    # the inner loop and change what the kernel computes; the lowering keeps the text's meaning instead.
    ir, arrays = traced(per_block_accumulate, A, B)
    text = print_kernel(ir).replace("{accumulate = add}", '{accumulate = add, zero_first = "i0"}')
    assert 'zero_first = "i0"' in text
    given = parse_kernel(text)
    target = nki.get_target("trn2")
    check(given, target)
    low = run_pipeline(given, target)
    lowered = print_kernel(low)
    assert 'zero_first = "i0"' in lowered and 'zero_first = "i1"' not in lowered and "nisa.memset" in lowered
    (want,), (got,) = run(given, arrays), run(parse_kernel(lowered), arrays)
    np.testing.assert_array_equal(got, want)
    # the first block holds the last step's matmul only (zeroed before each of its steps), the second the sum
    np.testing.assert_allclose(want[:128], A[256:].T @ B[256:], rtol=1e-5, atol=1e-5)
