"""Vector-engine elementwise instructions: ALU operators on tiles and per-partition scalars, scans, copies
(plain and predicated), reciprocal and memset. Several may run on another engine via ``engine=``; arithmetic is fp32."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir.ops.isa import ACCUMULATE_OPS, ALU_OPS
from nki_dsl.isa.arguments import engine_name, flag, fn_name, ints, number, shape_of
from nki_dsl.isa.enums import Engine
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op


def _two_stages(name: str, op0, op1, reverse0, reverse1) -> dict:
    """The attributes of an instruction computing ``(a op0 b) op1 c``, each stage's operands swappable."""
    return {
        "op0": fn_name(name, "op0", op0, ALU_OPS),
        "op1": fn_name(name, "op1", op1, ALU_OPS),
        "reverse0": flag(name, "reverse0", reverse0),
        "reverse1": flag(name, "reverse1", reverse1),
    }


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=Engine.unknown):
    """``op(data1, data2)`` elementwise (NumPy broadcasting) on the Vector engine, or GpSimd with
    ``engine=nisa.gpsimd_engine``. ``op`` is an ALU operator (``np.add``, ``nl.maximum``, ``"subtract"``, ...);
    comparisons give 1/0 in the result dtype, which defaults to the promotion of the inputs."""
    name = "nisa.tensor_tensor"
    attrs = {"op": fn_name(name, "op", op, ALU_OPS), "engine": engine_name(name, engine)}
    return build_op(name, {"data1": data1, "data2": data2}, attrs, dtype=dtype, mask=mask)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=Engine.unknown):  # fmt: skip
    """``(data op0 operand0) op1 operand1`` elementwise, where each operand is a number or a ``[P, 1]`` tile
    broadcast along the free axes. ``reverse0`` computes ``operand0 op0 data`` instead (likewise ``reverse1``
    for the second stage); ``op1``/``operand1`` are optional. Runs on Vector (default), Scalar or GpSimd. The
    result dtype defaults to ``data``'s."""
    name = "nisa.tensor_scalar"
    op1_name = fn_name(name, "op1", op1, ALU_OPS, optional=True)
    if (op1_name == "none") != (operand1 is None):
        raise NkiApiError("op1 and operand1 are given together (or neither)", caller_loc(), name)
    attrs = {
        "op0": fn_name(name, "op0", op0, ALU_OPS),
        "reverse0": flag(name, "reverse0", reverse0),
        "op1": op1_name,
        "reverse1": flag(name, "reverse1", reverse1),
        "engine": engine_name(name, engine),
    }
    return build_op(name, {"data": data, "operand0": operand0, "operand1": operand1}, attrs, dtype=dtype, mask=mask)


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None):
    """``data op0 operand0`` (``operand0`` a number or ``[P, 1]`` tile; ``reverse0`` swaps the operands), and
    its fp32 reduction along the free axes with ``reduce_op`` (add, max, min, multiply) into ``reduce_res``
    (a ``[P, 1]`` tile). Returns the elementwise result."""
    name = "nisa.tensor_scalar_reduce"
    attrs = {
        "op0": fn_name(name, "op0", op0, ALU_OPS),
        "reverse0": flag(name, "reverse0", reverse0),
        "reduce_op": fn_name(name, "reduce_op", reduce_op, ACCUMULATE_OPS),
    }
    operands = {"data": data, "operand0": operand0, "reduce_res": reduce_res}
    return build_op(name, operands, attrs, dtype=dtype, mask=mask)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None):  # fmt: skip
    """``(data op0 operand0) op1 operand1``: ``operand0`` is a number or a ``[P, 1]`` tile, ``operand1`` a tile
    of ``data``'s shape. ``reverse0``/``reverse1`` swap the operands of ``op0``/``op1``."""
    name = "nisa.scalar_tensor_tensor"
    attrs = _two_stages(name, op0, op1, reverse0, reverse1)
    return build_op(name, {"data": data, "operand0": operand0, "operand1": operand1}, attrs, dtype=dtype, mask=mask)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None):
    """A scan along the free axes (flattened, row-major) of each partition::

        r[:, 0] = (data0[:, 0] op0 initial) op1 data1[:, 0]
        r[:, j] = (data0[:, j] op0 r[:, j-1]) op1 data1[:, j]

    ``initial`` is a number or a ``[P, 1]`` tile. ``reverse0`` computes ``r[:, j-1] op0 data0[:, j]`` instead
    (``reverse1``: ``data1[:, j] op1 (...)``). The carried value is fp32; only the output is rounded to the
    result dtype. Under a mask, the scan runs over the selected columns, starting from ``initial``.
    With ``op0=multiply, op1=add`` it is the linear recurrence ``r[j] = a[j] * r[j-1] + b[j]``.
    """
    name = "nisa.tensor_tensor_scan"
    attrs = _two_stages(name, op0, op1, reverse0, reverse1)
    operands = {"data0": data0, "data1": data1, "initial": number(initial)}
    return build_op(name, operands, attrs, dtype=dtype, mask=mask)


def tensor_copy(src, *, mask=None, dtype=None, engine=Engine.unknown):
    """A new SBUF tile with the values of ``src`` (SBUF or PSUM), on Vector (default), Scalar or GpSimd;
    ``dtype`` converts (rounding to nearest even)."""
    name = "nisa.tensor_copy"
    return build_op(name, {"src": src}, {"engine": engine_name(name, engine)}, dtype=dtype, mask=mask)


def reciprocal(data, *, dtype=None, mask=None):
    """``1 / data`` elementwise on the Vector engine (exact fp32 division, then rounded to the result dtype)."""
    return build_op("nisa.reciprocal", {"data": data}, dtype=dtype, mask=mask)


def memset(shape, value, dtype, *, mask=None, engine=Engine.unknown):
    """A new SBUF tile of ``shape`` and ``dtype`` filled with the number ``value`` (on Vector, or GpSimd)."""
    name = "nisa.memset"
    attrs = {"shape": ints(name, "shape", shape), "engine": engine_name(name, engine)}
    return build_op(name, {"value": value}, attrs, dtype=dtype, mask=mask)


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None):
    """Copy ``src`` into ``dst`` where ``predicate`` is nonzero (where it is zero with ``reverse_pred``) on the
    Vector engine; the other elements of ``dst`` keep their values. ``src``, ``dst`` and ``predicate`` are tiles
    of one shape. Returns None (``dst`` is written in place), as ``nl.where`` lowers to it."""
    name = "nisa.tensor_copy_predicated"
    shapes = {n: shape_of(v) for n, v in (("dst", dst), ("src", src), ("predicate", predicate))}
    for n in ("src", "predicate"):
        if shapes[n] is not None and shapes["dst"] is not None and shapes[n] != shapes["dst"]:
            raise NkiTraceError(f"'{n}' {list(shapes[n])} and 'dst' {list(shapes['dst'])} differ in shape",
                                caller_loc(), name)  # fmt: skip
    attrs = {"reverse_pred": flag(name, "reverse_pred", reverse_pred)}
    build_op(name, {"dst": dst, "src": src, "predicate": predicate}, attrs, mask=mask)
