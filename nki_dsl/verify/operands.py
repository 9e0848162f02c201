"""Per-op facts more than one rule needs: tile operands, the op's iteration space, matmul roles and the operand
conflicts a specific rule reports (so the generic shape rule can leave them to it)."""

from __future__ import annotations

from dataclasses import dataclass

from nki_dsl.ir.nodes import Access, Op
from nki_dsl.ir.ops.spec import Family, OpSpec, Role
from nki_dsl.targets import Target

ELEMENTWISE_FAMILIES = (Family.UNARY, Family.BINARY, Family.SELECT, Family.COPY, Family.ASSIGN, Family.STORE)
# A value written into a destination access (the NumPy backend broadcasts it, so a DMA copies between equal
# shapes, up to size-1 dimensions).
WRITE_FAMILIES = (Family.ASSIGN, Family.STORE)
WRITE_INSTRUCTIONS = ("nisa.dma_copy",)
TRANSPOSE_FAMILIES = (Family.TRANSPOSE, Family.LOAD_TRANSPOSE2D)


def tiles(op: Op) -> list[tuple[str, Access]]:
    return [(n, v) for n, v in op.operands.items() if isinstance(v, Access)]


def iteration_shape(op: Op, spec: OpSpec) -> tuple[int, ...] | None:
    """The shape the op's mask ranges over: its result, else the first operand it writes."""
    if op.result is not None:
        return tuple(op.result.type.shape)
    for o in spec.writes:
        a = op.operands.get(o.name)
        if isinstance(a, Access):
            return tuple(a.shape)
    return None


def is_elementwise(spec: OpSpec) -> bool:
    return spec.family in ELEMENTWISE_FAMILIES


def write_pair(op: Op, spec: OpSpec) -> tuple[tuple[str, Access], tuple[str, Access]] | None:
    """For store/assign: ((dst name, dst), (value name, value)) when both are tiles."""
    if spec.family not in WRITE_FAMILIES and spec.name not in WRITE_INSTRUCTIONS:
        return None
    dst = [(o.name, op.operands.get(o.name)) for o in spec.operands if o.role is Role.OUT]
    # an indirect DMA's index tile (ir/indirect.py) is not the value written
    src = [(o.name, op.operands.get(o.name)) for o in spec.operands if o.role is Role.IN and o.name != "indices"]
    if len(dst) != 1 or len(src) != 1 or not all(isinstance(a, Access) for _, a in dst + src):
        return None
    return dst[0], src[0]


def partition_conflict(op: Op, spec: OpSpec) -> tuple[tuple[str, Access], tuple[str, Access]] | None:
    """Two tile operands of an elementwise op whose partition counts differ (neither is 1), or None."""
    if not is_elementwise(spec):
        return None
    pair = write_pair(op, spec)
    if pair is not None:
        (dn, dst), (sn, src) = pair
        if dst.shape and len(src.shape) == len(dst.shape) and src.shape[0] not in (1, dst.shape[0]):
            return (sn, src), (dn, dst)
        return None  # other rank or free-size differences are the shape rule's
    operands = tiles(op)
    rank = max((len(a.shape) for _, a in operands), default=0)
    first = None
    for name, a in operands:
        if len(a.shape) != rank or rank == 0 or a.shape[0] == 1:
            continue  # lower-rank operands broadcast along the partition dimension, as do size-1 partitions
        if first is None:
            first = (name, a)
        elif a.shape[0] != first[1].shape[0]:
            return first, (name, a)
    return None


def transpose_rank_error(op: Op, spec: OpSpec) -> tuple[str, Access] | None:
    """The first tile operand of a 2-D transpose that is not 2-D."""
    if spec.family not in TRANSPOSE_FAMILIES:
        return None
    for name, a in tiles(op):
        if len(a.shape) != 2:
            return name, a
    return None


@dataclass(frozen=True)
class MatmulRoles:
    """The Tensor-engine view of a matmul: ``out[M, N] = stationary[K, M].T @ moving[K, N]``."""

    stationary: tuple[str, Access, tuple[int, int]]  # operand name, access, [K, M] after any transpose
    moving: tuple[str, Access, tuple[int, int]]
    transposed: bool  # the stationary operand is given as [M, K] and transposed first


def matmul_roles(op: Op, spec: OpSpec) -> MatmulRoles | None:
    """Roles of a 2-D matmul: ``x``/``y`` (``transpose_x`` says x is already [K, M]) or ``stationary``/``moving``."""
    if "stationary" in op.operands and "moving" in op.operands:
        s_name, m_name, transposed = "stationary", "moving", False
    elif spec.family is Family.MATMUL and "x" in op.operands and "y" in op.operands:
        s_name, m_name, transposed = "x", "y", not bool(op.attrs.get("transpose_x", False))
    else:
        return None
    s, m = op.operands[s_name], op.operands[m_name]
    if not isinstance(s, Access) or not isinstance(m, Access) or len(s.shape) != 2 or len(m.shape) != 2:
        return None
    s_km = (s.shape[1], s.shape[0]) if transposed else (s.shape[0], s.shape[1])
    return MatmulRoles((s_name, s, s_km), (m_name, m, (m.shape[0], m.shape[1])), transposed)


def is_matmul(spec: OpSpec) -> bool:
    names = {o.name for o in spec.operands}
    return spec.family is Family.MATMUL or {"stationary", "moving"} <= names


def matmul_limits_broken(op: Op, spec: OpSpec, t: Target) -> bool:
    """True when the matmul-shape rule reports this op; its oversized result is then a consequence, not news."""
    roles = matmul_roles(op, spec) if is_matmul(spec) else None
    if roles is None:
        return False
    (k, m), (k2, n) = roles.stationary[2], roles.moving[2]
    pmax = t.partitions
    return k > pmax or m > t.gemm_stationary_fmax or k2 > pmax or n > t.matmul_moving_fmax or k != k2
