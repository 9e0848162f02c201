import numpy as np

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl


@nki.jit
def mismatched_contraction(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    y = nl.load(b)
    r = nl.matmul(x, y, transpose_x=True)
    nl.store(out, value=nl.copy(r))
    return out


def test_golden(golden, rejected):
    error = rejected(mismatched_contraction, np.zeros((128, 128), np.float32), np.zeros((64, 512), np.float32))
    golden("matmul-shape", error)


@nki.jit
def product(a, b, transpose_x):
    out = nl.ndarray((a.shape[1] if transpose_x else a.shape[0], b.shape[1]), dtype=nl.float32,
                     buffer=nl.shared_hbm)
    r = nl.matmul(nl.load(a), nl.load(b), transpose_x=transpose_x)
    nl.store(out, value=nl.copy(r))
    return out


def _messages(rejected, a_shape, b_shape, transpose_x):
    error = rejected(product, np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32), transpose_x)
    return [d.message for d in error.diagnostics if d.rule == "matmul-shape"]


def test_limits_name_stationary_and_moving(rejected):
    (msg,) = _messages(rejected, (128, 256), (128, 512), True)
    assert msg.startswith("stationary tile [128, 256] exceeds the stationary free-size limit of 128")
    (msg,) = _messages(rejected, (128, 128), (128, 1024), True)
    assert msg.startswith("moving tile [128, 1024] exceeds the moving free-size limit of 512")
    # Without transpose_x, x is [M, K] and the stationary tile is its transpose.
    (msg,) = _messages(rejected, (128, 64), (128, 512), False)
    assert msg.startswith("contraction sizes differ: stationary tile [64, 128] (operand 'x' %1[128, 64] in 'sbuf', "
                          "transposed) has K=64, moving tile [128, 512]")


def test_valid_untransposed_matmul(traced):
    traced(product, np.zeros((64, 128), np.float32), np.zeros((128, 512), np.float32), False)


def test_isa_operand_names(rejected):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nisa.nc_matmul(nl.load(a), nl.load(b))
        nl.store(out, value=nl.copy(r))
        return out

    error = rejected(kernel, np.zeros((128, 256), np.float32), np.zeros((128, 512), np.float32))
    (diag,) = error.diagnostics
    assert (diag.rule, diag.op) == ("matmul-shape", "nisa.nc_matmul")
    assert diag.message.startswith("stationary tile [128, 256] exceeds the stationary free-size limit of 128 "
                                   "(operand 'stationary' %1[128, 256] in 'sbuf')")


def test_a_3d_matmul_operand_is_reported_by_the_shape_rule_alone(reverified):
    # Parsed IR can hand nl.matmul a 3-D x: the Tensor engine's [K, M] roles mean nothing for it, so matmul-shape
    # leaves it to the shape rule's 2-D error rather than reading K and M off its first two dimensions.
    from nki_dsl.ir.parser import parse_kernel

    text = nki.trace(product, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32), True).text
    (diag,) = reverified(parse_kernel(text.replace("f32[128, 128]", "f32[64, 2, 128]"))).diagnostics
    assert (diag.rule, diag.op) == ("shape", "nl.matmul")
    assert diag.message == "operands 'x' [64, 2, 128] and 'y' [128, 512] must be 2-D tiles"
