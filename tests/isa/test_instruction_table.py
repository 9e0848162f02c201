"""The nisa instructions together trace into IR the verifier accepts and that runs the same after a print/parse
round trip (that each has an API function, a NumPy lowering and a test is tests/ir/test_op_table.py's). Misplaced
operands are reported with the op, the operand and the buffer."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.backends.numpy_ref import compile_kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel
from nki_dsl.passes.verifier import verify_kernel
from tests.backend_fixture import backend_independent
from tests.isa.support import BF16, rand

TRN2 = nki.get_target("trn2")

# The NC-v4-only MX instructions cannot run on trn2; their trace/verify/round trip is in test_mx.py.
NC_V4_ONLY = {"nisa.nc_matmul_mx", "nisa.quantize_mx", "nisa.rand2"}
# The instructions between the cores of an LNC=2 launch run only in one (kernel[2]); test_collectives.py round-trips
# them.
LNC2_ONLY = {"nisa.sendrecv", "nisa.core_barrier"}
NISA_OPS = {name for name in OPS if name.startswith("nisa.")} - NC_V4_ONLY - LNC2_ONLY


def _every_instruction(a, s, m):
    """One kernel using each instruction once, on the buffers it is meant for."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.bfloat16)
    nisa.dma_copy(dst=x, src=a)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    idx = nisa.iota(i_p + i_f, dtype=nl.float32)
    mm = nisa.nc_matmul(nl.load(s), nl.load(m))  # [64, 64] in PSUM
    t = nisa.nc_transpose(nisa.tensor_copy(mm, dtype=nl.bfloat16))
    acc = nl.ndarray((128, 1), dtype=nl.float32)
    y = nisa.activation(np.exp, x, scale=0.5, reduce_op=np.add, reduce_res=acc)
    y = nisa.activation_reduce(np.tanh, y, reduce_op=np.maximum, reduce_res=acc, bias=acc)
    y = nisa.tensor_tensor(y, idx, np.add)
    nisa.set_rng_seed(nisa.memset((1, 1), 5, nl.uint32))
    y = nisa.tensor_tensor(y, nisa.rng((128, 64), nl.uint8), np.add)
    y = nisa.tensor_scalar(y, np.multiply, 0.5, op1=np.add, operand1=acc)
    y = nisa.tensor_scalar_reduce(data=y, op0=np.subtract, operand0=1.0, reduce_op=np.add, reduce_res=acc)
    y = nisa.scalar_tensor_tensor(data=y, op0=np.multiply, operand0=acc, op1=np.add, operand1=x)
    y = nisa.tensor_tensor_scan(y, x, 0.0, np.multiply, np.add)
    y = nisa.reciprocal(nisa.tensor_scalar(y, np.maximum, 1.0))
    ones = nisa.memset((128, 64), 1.0, nl.float32)
    mean_var = nisa.bn_aggr(nisa.bn_stats(y, dtype=nl.float32))
    col = nisa.tensor_reduce(np.max, y, axis=1, negate=True, keepdims=True)
    row = nisa.tensor_partition_reduce(np.add, y)
    z = nisa.affine_select(i_p >= i_f, nisa.tensor_tensor(y, ones, np.subtract), -1.0)
    nisa.tensor_copy_predicated(src=nisa.dropout(y, 0.25), dst=z, predicate=idx, reverse_pred=True)
    z = nisa.tensor_scalar(z, np.add, col, op1=np.add, operand1=mean_var[:, 0:1])
    z[0:1, :] = nisa.tensor_tensor(z[0:1, :], row, np.add)
    z[0:64, 0:64] = nisa.tensor_tensor(z[0:64, 0:64], nisa.dma_transpose(t), np.add)
    nl.store(out, z)
    return out


@backend_independent
def test_a_kernel_of_every_instruction_verifies_and_runs_the_same_after_a_round_trip():
    kernel = nki.jit(_every_instruction)
    args = (rand((128, 64), BF16, seed=1), rand((128, 64), seed=2), rand((128, 64), seed=3))
    traced = nki.trace(kernel, *args).ir
    assert {op.name for op in traced.body if op.name.startswith("nisa.")} == NISA_OPS
    assert verify_kernel(traced, TRN2) == []
    parsed = parse_kernel(print_kernel(traced))
    assert verify_kernel(parsed, TRN2) == []
    arrays = dict(zip(("a", "s", "m"), args))
    # NumPy on both sides: the kernel's dropout draws from NumPy's generator (the JAX backend draws other numbers)
    got, again = kernel(*args, backend="numpy"), compile_kernel(parsed).run(arrays)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(again, got)


def _diagnostic(body, *arrays):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, body(a))
        return out

    with pytest.raises(nki.NkiError) as info:
        kernel(*arrays)
    return str(info.value)


@pytest.mark.parametrize("op, body, operand, buffer", [
    ("nc_matmul", lambda a: nisa.nc_matmul(nisa.nc_matmul(nl.load(a), nl.load(a)), nl.load(a)[0:64, :]),
     "stationary", "psum"),
    ("nc_matmul", lambda a: nisa.nc_matmul(nl.load(a), a), "moving", "hbm"),
    ("tensor_copy", lambda a: nisa.tensor_copy(a[0:64, :]), "src", "hbm"),
    ("tensor_tensor", lambda a: nisa.tensor_tensor(nl.load(a[0:64, :]), a[0:64, :], np.add), "data2", "hbm"),
    ("tensor_reduce", lambda a: nisa.tensor_reduce(np.add, a, axis=1), "data", "hbm"),
    ("affine_select", lambda a: nisa.affine_select(nl.arange(64)[:, None] >= nl.arange(64)[None, :], a, 0.0),
     "on_true_tile", "hbm"),
])  # fmt: skip
@backend_independent
def test_an_operand_in_the_wrong_buffer_is_reported_with_op_operand_and_buffer(op, body, operand, buffer):
    message = _diagnostic(body, rand((64, 64)))
    assert "test_instruction_table.py:" in message  # the kernel source line that made the op
    assert f"nisa.{op}:" in message and f"'{operand}'" in message and buffer in message, message
