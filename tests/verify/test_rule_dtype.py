from dataclasses import replace

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def invert_floats(a):
    out = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    x = nl.load(a)
    nl.store(out, value=nl.invert(x))  # a bitwise op on float32
    return out


def test_golden_bitwise_op_on_floats(golden, rejected):
    golden("dtype", rejected(invert_floats, A))


def test_bitwise_op_on_integers_is_accepted(traced):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.invert(nl.load(a)))
        return out

    traced(kernel, np.zeros((128, 512), np.int32))


def test_matmul_of_integer_tiles_is_rejected(rejected):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        nl.store(out, value=nl.copy(p))
        return out

    diags = rejected(kernel, np.zeros((128, 128), np.int32), np.zeros((128, 512), np.float32)).diagnostics
    assert [(d.rule, d.op) for d in diags] == [("dtype", "nl.matmul")]
    assert diags[0].message == (
        "operand 'x' %1[128, 128] in 'sbuf' has dtype int32; nl.matmul takes float tiles only (the Tensor engine "
        "multiplies fp8, bf16, fp16 or fp32 tiles; convert with dtype= on the nl.load or nl.copy that makes it)"
    )


def test_matmul_of_bfloat16_tiles_is_accepted(traced):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.matmul(nl.load(a, dtype=nl.bfloat16), nl.load(b, dtype=nl.bfloat16), transpose_x=True)
        nl.store(out, value=nl.copy(p))
        return out

    traced(kernel, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32))


def test_a_matmul_result_declared_bfloat16_is_rejected(traced, reverified):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        nl.store(out, value=nl.copy(p))
        return out

    ir = traced(kernel, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32))
    matmul = next(s for s, _ in ir.walk() if getattr(s, "name", "") == "nl.matmul")
    matmul.result.type = replace(matmul.result.type, dtype="bfloat16")  # as IR text from a Hub bundle could say
    (diag,) = reverified(ir).diagnostics
    assert diag.rule == "dtype"
    assert diag.message == (
        "result %3 bf16[128, 512] in 'psum' has dtype bfloat16; the Tensor engine writes float32 into PSUM "
        "(convert when copying out, e.g. nl.copy(..., dtype=nl.bfloat16))"
    )


def test_an_operand_of_a_dtype_its_op_does_not_list_is_refused_naming_the_operand_and_the_dtypes(rejected):
    import nki_dsl.isa as nisa  # (imported here: the golden above names line numbers of this file)

    @nki.jit
    def quantize_fp32(x):
        scale = nl.ndarray((x.shape[0] // 8, x.shape[1] // 4), dtype=nl.uint8, buffer=nl.sbuf)
        q = nisa.quantize_mx(nl.load(x), scale)  # MX quantisation reads bf16 or fp16 only
        out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
        nl.store(out, q)
        return out

    (diag,) = rejected(quantize_fp32, np.zeros((32, 8), np.float32), target="trn3").diagnostics
    assert (diag.rule, diag.op) == ("dtype", "nisa.quantize_mx")
    assert diag.message == ("operand 'src' %1[32, 8] in 'sbuf' has dtype float32; nisa.quantize_mx takes bfloat16 "
                            "or float16")
