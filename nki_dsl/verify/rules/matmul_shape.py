"""Rule ``matmul-shape``: the Tensor engine computes ``stationary[K, M].T @ moving[K, N]`` with K <= 128
(partitions), M <= 128 (PE columns) and N <= the target's moving limit (512, one PSUM bank of fp32; 4096 on
NC-v4, ``Target.matmul_moving_fmax``), and both operands share K (reference/nki.md §1.2 TC#3 and "Matmul
detail", §6). ``nl.matmul(x, y)`` transposes ``x`` [M, K] first; with ``transpose_x=True``
``x`` is already [K, M]; ISA matmuls name their operands ``stationary`` and ``moving``."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.operands import is_matmul, matmul_roles
from nki_dsl.verify.program import program

RULE = "matmul-shape"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    pmax, stationary_fmax, moving_fmax = target.partitions, target.gemm_stationary_fmax, target.matmul_moving_fmax
    found = []
    for site in program(kernel).sites:
        spec = OPS[site.op.name]
        roles = matmul_roles(site.op, spec) if is_matmul(spec) else None
        if roles is None:
            continue
        s_name, s, (k, m) = roles.stationary
        m_name, mv, (k2, n) = roles.moving
        s_tile = f"stationary tile [{k}, {m}]"
        s_from = f"(operand '{s_name}' {d.access(s)}{', transposed' if roles.transposed else ''})"
        m_tile = f"moving tile [{k2}, {n}]"
        m_from = f"(operand '{m_name}' {d.access(mv)})"
        msgs = []
        if k > pmax:
            msgs.append(f"{s_tile} exceeds the partition limit of {pmax} {s_from}")
        if m > stationary_fmax:
            msgs.append(f"{s_tile} exceeds the stationary free-size limit of {stationary_fmax} {s_from}")
        if k2 > pmax:
            msgs.append(f"{m_tile} exceeds the partition limit of {pmax} {m_from}")
        if n > moving_fmax:
            msgs.append(f"{m_tile} exceeds the moving free-size limit of {moving_fmax} {m_from}; "
                        f"split N into tiles of at most {moving_fmax}")  # fmt: skip
        if k != k2:
            msgs.append(f"contraction sizes differ: {s_tile} {s_from} has K={k}, {m_tile} {m_from} has K={k2}; "
                        f"{_layout(s_name, m_name, roles.transposed)}")  # fmt: skip
        found += [d.diagnostic(site.op, RULE, msg) for msg in msgs]
    return found


def _layout(s_name: str, m_name: str, transposed: bool) -> str:
    if s_name == "stationary":
        return "the stationary operand is [K, M] and the moving operand [K, N]"
    if transposed:
        return f"nl.matmul({s_name}, {m_name}) computes {s_name} @ {m_name}: {s_name} is [M, K] and {m_name} [K, N]"
    return f"with transpose_x=True, {s_name} is [K, M] and {m_name} [K, N]"
