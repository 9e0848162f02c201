"""Misuse of the Python API gets an NKI error naming the kernel line and the op, not a bare TypeError."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiApiError

A = np.zeros((128, 512), np.float32)
FILE = "test_api_misuse.py"


def line_of(text: str) -> int:
    """The line of this file that contains ``text`` (once), so the expected locations follow edits."""
    with open(__file__) as f:
        found = [n for n, line in enumerate(f, 1) if text in line]
    assert len(found) == 2, found  # the kernel line and the test that looks it up
    return found[0]


def test_an_nl_op_outside_a_kernel():
    with pytest.raises(NkiApiError) as info:
        nl.exp(A)  # outside-kernel-call
    assert str(info.value) == (
        f"{FILE}:{line_of('outside-kernel-call')}: nl.exp was called outside an NKI kernel; call it inside a function "
        "decorated with @nki.jit and launch that kernel (kernel(...) or kernel[grid](...))"
    )


def plain_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)  # plain-kernel-first-op
    nl.store(out, value=nl.load(a))
    return out


@pytest.mark.parametrize("entry", [nki.trace, nki.simulate_kernel, nki.emit])
def test_launching_a_function_without_nki_jit(entry):
    with pytest.raises(NkiApiError) as info:
        entry(plain_kernel, A)
    assert str(info.value) == "'plain_kernel' is not an NKI kernel: decorate it with @nki.jit"


def test_calling_an_undecorated_kernel_directly():
    with pytest.raises(NkiApiError) as info:
        plain_kernel(A)
    # Named as called (nl.ndarray), not as the IR op it would build (alloc).
    assert str(info.value).startswith(
        f"{FILE}:{line_of('plain-kernel-first-op')}: nl.ndarray was called outside an NKI kernel; "
    )


@nki.jit
def misspelled_dtype(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a, dtpye=nl.float32))
    return out


@nki.jit
def misspelled_transpose(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nl.matmul(nl.load(a), nl.load(b), tranpose_x=True)
    nl.store(out, value=nl.copy(p))
    return out


@nki.jit
def misspelled_isa_keyword(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p = nisa.nc_matmul(nl.load(a), nl.load(b), is_tranpose=False)
    nl.store(out, value=nl.copy(p))
    return out


def test_a_misspelled_keyword_suggests_the_right_one():
    with pytest.raises(NkiApiError) as info:
        nki.trace(misspelled_dtype, A)
    line = line_of("value=nl.load(a, dtpye=nl.float32)")
    assert str(info.value) == f"{FILE}:{line}: nl.load: unexpected keyword argument 'dtpye'; did you mean 'dtype'?"
    assert info.value.op == "nl.load"


def test_a_misspelled_matmul_keyword_when_the_kernel_runs():
    with pytest.raises(NkiApiError) as info:
        misspelled_transpose(np.zeros((128, 128), np.float32), A)
    line = line_of("p = nl.matmul(nl.load(a), nl.load(b), tranpose_x=True)")
    assert str(info.value) == (
        f"{FILE}:{line}: nl.matmul: unexpected keyword argument 'tranpose_x'; did you mean 'transpose_x'?"
    )


def test_isa_instructions_get_the_same_check():
    with pytest.raises(NkiApiError) as info:
        nki.trace(misspelled_isa_keyword, np.zeros((128, 128), np.float32), A)
    line = line_of("p = nisa.nc_matmul(nl.load(a), nl.load(b), is_tranpose=False)")
    assert str(info.value) == (
        f"{FILE}:{line}: nisa.nc_matmul: unexpected keyword argument 'is_tranpose'; did you mean 'is_transpose'?"
    )


def test_a_keyword_like_no_other_lists_the_signature():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.exp(nl.load(a), fast=True))
        return out

    with pytest.raises(NkiApiError) as info:
        nki.trace(kernel, A)
    assert info.value.bare_message == (
        "unexpected keyword argument 'fast'; the signature is nl.exp(x, *, dtype=None, mask=None)"
    )


def test_too_many_positional_arguments_list_the_signature():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a), nl.load(a))
        return out

    with pytest.raises(NkiApiError) as info:
        nki.trace(kernel, A)
    assert info.value.op == "nl.store"
    assert info.value.bare_message == (
        "takes 2 positional arguments but 3 were given; the signature is nl.store(dst, value, *, mask=None)"
    )


def test_a_users_own_helper_keeps_pythons_error():
    def scaled(x, *, factor):
        return nl.multiply(x, factor)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=scaled(nl.load(a), factr=2.0))
        return out

    with pytest.raises(TypeError) as info:
        nki.trace(kernel, A)
    assert not isinstance(info.value, NkiApiError)
    assert "got an unexpected keyword argument 'factr'" in str(info.value)


def test_a_misspelled_kernel_argument_suggests_the_parameter():
    @nki.jit
    def add_bias(a, bias):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(bias)))
        return out

    with pytest.raises(NkiApiError) as info:
        add_bias(A, bais=A)
    assert str(info.value) == "kernel add_bias: unexpected keyword argument 'bais'; did you mean 'bias'?"
