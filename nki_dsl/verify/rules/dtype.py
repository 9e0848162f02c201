"""Rule ``dtype``: ops that only make sense on floats (or only on integers: bitwise ops) get tiles of that kind;
the Tensor engine multiplies float tiles (fp8, bf16, fp16, fp32; reference/nki.md §1.2, §2.3) and writes fp32
(§1.4 "PSUM accumulation always FP32", §5.1). An operand whose op-table entry lists its dtypes has one of them
(the MX matmul: packed data, e8m0/uint8 scales, §2.7 nc_matmul_mx). The packed MX types are storage: only ops
that move bits (``BIT_MOVES``) and ops that list them read or write them (§2.7 "dtypes", memset "x4 types only
0")."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir import hbm_views
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import is_matmul, tiles
from nki_dsl.verify.program import program

RULE = "dtype"
# Ops that copy elements bit for bit (or fill them), and so may hold packed MX tiles.
# Between packed tiles only: a copy from or to another dtype would convert raw bits as if they were a number.
BIT_MOVES = frozenset({"alloc", "assign", "hbm.reshape", "nl.load", "nl.store", "nl.copy", "nisa.dma_copy",
                       "nisa.tensor_copy", "nisa.memset"})  # fmt: skip


def _packed_misuse(op, spec) -> list[str]:
    if op.name == hbm_views.VIEW:
        return []  # a reinterpretation of bits, packed ones included (rule hbm-view)
    msgs = []
    listed = {o.name for o in spec.operands if o.dtypes is not None}
    for name, a in tiles(op):
        dt = dtypes.get(a.tensor.type.dtype)
        if name in listed:
            allowed = spec.operand(name).dtypes
            if dt.name not in allowed:
                msgs.append(f"{d.operand(name, a)} has dtype {dt.name}; {op.name} takes {' or '.join(allowed)}")
        elif dt.is_packed and op.name not in BIT_MOVES:
            msgs.append(f"{d.operand(name, a)} has the packed MX dtype {dt.name}, which holds {dt.lanes} values per "
                        f"element; {op.name} cannot compute on it (only copies, nisa.nc_matmul_mx and "
                        f"nisa.quantize_mx take packed tiles)")  # fmt: skip
    if op.name in BIT_MOVES:
        kinds = {a.tensor.type.dtype for _, a in tiles(op)} | ({op.result.type.dtype} if op.result else set())
        packed = sorted(k for k in kinds if dtypes.get(k).is_packed)
        if packed and len(kinds) > 1:
            msgs.append(f"{op.name} copies between {' and '.join(sorted(kinds))}; a packed MX dtype ({packed[0]}) is "
                        f"copied only to and from tiles of the same dtype (its elements are raw bits)")  # fmt: skip
    result = op.result
    makes_packed = isinstance(spec.result_dtype, str) and spec.result_dtype in dtypes.BY_NAME and \
        dtypes.get(spec.result_dtype).is_packed
    if result is not None and dtypes.get(result.type.dtype).is_packed and op.name not in BIT_MOVES \
            and not makes_packed:
        msgs.append(f"result {d.tensor(result)} has the packed MX dtype {result.type.dtype}; {op.name} cannot "
                    f"produce it")  # fmt: skip
    return msgs


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op, spec = site.op, OPS[site.op.name]
        found += [d.diagnostic(op, RULE, msg) for msg in _packed_misuse(op, spec)]
        float_only = spec.float_only or is_matmul(spec)
        listed = {o.name for o in spec.operands if o.dtypes is not None}
        for name, a in tiles(op) if float_only or spec.int_only else ():
            if name in listed or dtypes.get(a.tensor.type.dtype).is_packed:
                continue  # checked above
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
