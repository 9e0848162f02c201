"""Rule ``dtype``: ops that only make sense on floats (or only on integers: bitwise ops) get tiles of that kind,
and the Tensor engine writes fp32 (reference/nki.md §1.4 "PSUM accumulation always FP32", §5.1)."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import is_matmul, tiles
from nki_dsl.verify.program import program

RULE = "dtype"


def check(kernel: Kernel, target: str) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op, spec = site.op, OPS[site.op.name]
        for name, a in tiles(op) if spec.float_only or spec.int_only else ():
            dt = dtypes.get(a.tensor.type.dtype)
            if spec.float_only and not dt.is_float:
                msg = f"{d.operand(name, a)} has dtype {dt.name}; {op.name} takes float tiles only"
                found.append(d.diagnostic(op, RULE, msg))
            elif spec.int_only and dt.is_float:
                msg = (f"{d.operand(name, a)} has dtype {dt.name}; {op.name} takes integer "
                       f"or bool tiles only")  # fmt: skip
                found.append(d.diagnostic(op, RULE, msg))
        if is_matmul(spec) and op.result is not None and op.result.type.dtype != "float32":
            msg = (f"result {d.tensor(op.result)} has dtype {op.result.type.dtype}; the Tensor engine writes "
                   f"float32 into PSUM (convert when copying out, e.g. nl.copy(..., dtype=nl.bfloat16))")  # fmt: skip
            found.append(d.diagnostic(op, RULE, msg))
    return found
