"""Rule ``dtype``: ops that only make sense on floats (or only on integers: bitwise ops) get tiles of that kind;
the Tensor engine multiplies float tiles (fp8, bf16, fp16, fp32; reference/nki.md §1.2, §2.3) and writes fp32
(§1.4 "PSUM accumulation always FP32", §5.1)."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import is_matmul, tiles
from nki_dsl.verify.program import program

RULE = "dtype"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op, spec = site.op, OPS[site.op.name]
        float_only = spec.float_only or is_matmul(spec)
        for name, a in tiles(op) if float_only or spec.int_only else ():
            dt = dtypes.get(a.tensor.type.dtype)
            if float_only and not dt.is_float:
                msg = f"{d.operand(name, a)} has dtype {dt.name}; {op.name} takes float tiles only"
                if is_matmul(spec):
                    msg += (" (the Tensor engine multiplies fp8, bf16, fp16 or fp32 tiles; convert with dtype= on "
                            "the nl.load or nl.copy that makes it)")
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
