import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl

A = np.zeros((128, 512), np.float32)


@nki.jit
def exp_of_hbm(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.exp(a)
    nl.store(out, value=t)
    return out


def test_golden(golden, rejected):
    golden("operand-buffer", rejected(exp_of_hbm, A))


def test_each_wrong_buffer_names_its_fix(rejected):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        again = nl.load(t)  # load from SBUF
        nl.store(t, value=again)  # store into SBUF
        out[...] = t  # assign into HBM
        p = nl.matmul(t[:, 0:128], t[:, 0:128], transpose_x=True)
        q = nl.matmul(p, t[:, 0:128], transpose_x=True)  # matmul reads PSUM
        nl.store(out[:, 0:128], value=q)
        return out

    messages = [d.message for d in rejected(kernel, A).diagnostics]
    assert len(messages) == 4, messages
    assert "operand 'src' %1[128, 512] is in 'sbuf'; expected HBM" in messages[0]
    assert "copy on-chip tiles with nl.copy" in messages[0]
    assert "operand 'dst' %1[128, 512] is in 'sbuf'" in messages[1] and "t[...] = value" in messages[1]
    assert "operand 'dst' %0[128, 512] is in 'shared_hbm'" in messages[2] and "nl.store" in messages[2]
    assert "operand 'x' %3[128, 128] is in 'psum'; expected 'sbuf'" in messages[3]


def test_result_buffer_must_match_the_op(traced, reverified):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
        nl.store(out, value=nl.copy(p))
        return out

    ir = traced(kernel, np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32))
    matmul = next(s for s, _ in ir.walk() if getattr(s, "name", "") == "nl.matmul")
    matmul.result.type = nki_type(matmul.result.type, buffer="sbuf")
    (diag,) = reverified(ir).diagnostics
    assert diag.rule == "operand-buffer"
    assert diag.message == "result %3 f32[128, 512] is declared in 'sbuf'; nl.matmul produces a tile in 'psum'"


def nki_type(t, **changes):
    from dataclasses import replace

    from nki_dsl.ir.types import Buffer

    if "buffer" in changes:
        changes["buffer"] = Buffer(changes["buffer"])
    return replace(t, **changes)


ON_CHIP_PARAMETER = """\
kernel k(%a: f32[128, 512] sbuf) -> (%0) {
  grid ()
  source "k.py"
  %0 = alloc() : f32[128, 512] shared_hbm loc(3)
  nl.store(dst=%0[d0, d1 ; 128x512], value=%a[d0, d1 ; 128x512]) loc(4)
}
"""


def test_a_parameter_declared_on_chip_in_parsed_ir_is_refused_at_the_kernel(reverified):
    # A caller passes HBM arrays; IR text from a Hub bundle may still declare a parameter in SBUF.
    from nki_dsl.ir.parser import parse_kernel

    (diag,) = reverified(parse_kernel(ON_CHIP_PARAMETER)).diagnostics
    assert (diag.rule, diag.op, diag.loc.line) == ("operand-buffer", "kernel", 0)
    assert diag.message == "parameter %a f32[128, 512] in 'sbuf' must live in HBM"
