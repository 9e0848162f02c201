"""Scalar-engine instructions: activation functions with fused scale, bias and free-axis reduction."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.ir.ops.isa import ACCUMULATE_OPS, ACTIVATIONS
from nki_dsl.isa.arguments import enum_name, fn_name, number
from nki_dsl.isa.enums import ReduceCmd
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op


def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=ReduceCmd.idle,
               mask=None, dtype=None):  # fmt: skip
    """``op(data * scale + bias)`` elementwise on the Scalar engine, computed in fp32.

    ``op`` is an activation function (``nl.exp``, ``np.tanh``, ``"gelu"``, ...); ``scale`` a number or a
    ``[P, 1]`` tile and ``bias`` a ``[P, 1]`` tile, both broadcast along the free axes. With ``reduce_op``
    (add, max, min, multiply) and ``reduce_res`` (a ``[P, 1]`` tile), the fp32 activation output is also reduced
    along its free axes into the engine's accumulators, which ``reduce_res`` holds: ``reduce_cmd`` ``idle`` or
    ``reset_reduce`` writes this instruction's reduction, ``reduce`` combines it with the value already in
    ``reduce_res``, and ``reset`` writes the reduction's identity (0 for add, -inf for max, ...). Under a
    ``mask`` the reduction covers the elements the mask selects. The result dtype defaults to ``data``'s.
    """
    name = "nisa.activation"
    fn = fn_name(name, "op", op, ACTIVATIONS)
    reduce_fn = fn_name(name, "reduce_op", reduce_op, ACCUMULATE_OPS, optional=True)
    cmd = enum_name(name, "reduce_cmd", reduce_cmd, ReduceCmd)
    if (reduce_fn == "none") != (reduce_res is None):
        raise NkiApiError("reduce_op and reduce_res are given together (or neither)", caller_loc(), name)
    if reduce_fn == "none" and cmd != "idle":
        raise NkiApiError(f"reduce_cmd={cmd} needs reduce_op and reduce_res", caller_loc(), name)
    operands = {"data": data, "bias": bias, "scale": number(scale), "reduce_res": reduce_res}
    attrs = {"op": fn, "reduce_op": reduce_fn, "reduce_cmd": cmd}
    return build_op(name, operands, attrs, dtype=dtype, mask=mask)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None):
    """``activation`` and the reduction of its fp32 output along the free axes into ``reduce_res`` (a ``[P, 1]``
    tile), in one Scalar-engine instruction. Returns the activation output."""
    name = "nisa.activation_reduce"
    attrs = {"op": fn_name(name, "op", op, ACTIVATIONS), "reduce_op": fn_name(name, "reduce_op", reduce_op,
                                                                                    ACCUMULATE_OPS)}  # fmt: skip
    operands = {"data": data, "bias": bias, "scale": number(scale), "reduce_res": reduce_res}
    return build_op(name, operands, attrs, dtype=dtype, mask=mask)
