"""Rule ``double-row``: ``nisa.nc_matmul(..., perf_mode=double_row)`` (reference/nki.md §1.2, §2.7 nc_matmul): the
mode exists on NeuronCore-v3 and later (trn2, trn3; not trn1's NC-v2) and multiplies FP8 tiles only
(float8_e4m3 / float8_e5m2). Its operand shapes (``stationary [K, 2, M]``, ``moving [K, 2, N]``: the contraction
runs over K partitions x 2 rows) and the ban on column tiling are the op table's result rule
(``ir/ops/isa.py``), which the ``shape`` rule applies to parsed IR; the tracer checks the dtype as it builds the op,
and this rule holds parsed IR and kernels traced for an older target to both facts."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "double-row"
FP8 = ("float8_e4m3", "float8_e5m2")  # the fp8 formats of NC-v3 (§2.7: "fp8 only")
FIRST_NC_VERSION = 3  # §2.7 nc_matmul: "double_row (v3/v4)"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op = site.op
        if op.name != "nisa.nc_matmul" or op.attrs.get("perf_mode") != "double_row":
            continue
        if target.nc_version < FIRST_NC_VERSION:
            msg = (f"perf_mode=double_row needs NeuronCore-v{FIRST_NC_VERSION} or later (trn2, trn3); {target.name} "
                   f"has NeuronCore-v{target.nc_version}, which multiplies FP8 at the BF16 rate: use "
                   f"perf_mode=none with [K, M] and [K, N] tiles")  # fmt: skip
            found.append(d.diagnostic(op, RULE, msg))
        for name in ("stationary", "moving"):
            a = op.operands.get(name)
            if not isinstance(a, Access):
                continue
            dt = dtypes.get(a.tensor.type.dtype).name
            if dt not in FP8:
                msg = (f"{d.operand(name, a)} has dtype {dt}; perf_mode=double_row multiplies fp8 tiles only "
                       f"({' / '.join(FP8)}); convert with dtype= on the nl.load or nl.copy that makes it")  # fmt: skip
                found.append(d.diagnostic(op, RULE, msg))
    return found
