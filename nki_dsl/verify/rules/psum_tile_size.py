"""Rule ``psum-tile-size``: a PSUM tile fits one 2 KiB bank per partition, 512 fp32 values (reference/nki.md
§1.1, §1.2 TC#2); on NC-v4, whose matmuls write up to 4096 fp32 across all 8 banks (§1.2 "Matmul detail"), it
fits ``Target.psum_tile_bytes``. A tensor with block dimensions holds one such tile per block."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.types import TensorType
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import matmul_limits_broken
from nki_dsl.verify.program import program

RULE = "psum-tile-size"


def tile_bytes(t: TensorType) -> int:
    """Bytes per partition of one tile (one block) of an on-chip tensor."""
    n = dtypes.get(t.dtype).itemsize
    for s in t.free_shape:
        n *= s
    return n


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        t = site.op.result
        if t is None or t.type.buffer.value != "psum":
            continue
        size = tile_bytes(t.type)
        if size <= target.psum_tile_bytes or matmul_limits_broken(site.op, OPS[site.op.name], target):
            continue
        each = "each block of " if t.type.block_shape else ""
        if target.psum_tile_bytes == target.psum_bank_bytes:
            fit = f"one {target.psum_bank_bytes}-byte bank ({target.psum_bank_fp32} fp32 values per partition)"
        else:
            fit = f"{target.psum_tile_bytes} bytes ({target.psum_tile_bytes // 4} fp32 values per partition)"
        msg = f"{each}PSUM tensor {d.tensor(t)} needs {size} bytes per partition; a PSUM tile must fit {fit}"
        found.append(d.diagnostic(site.op, RULE, msg))
    return found
