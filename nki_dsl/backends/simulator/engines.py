"""Which engine (or DMA) runs each op, and under which instruction name the cost model prices it.

``nisa`` ops name their engine in the op table (``OpSpec.engine``, or the ``engine`` attribute where the kernel
chooses). Language-level ``nl`` ops are mapped here by a small table following reference/nki.md §2.4.

TEMPORARY: the ``nl`` part of this table stands in for the lower-language pass (nki_dsl/passes). Once lowering
turns every nl op into nisa instructions and DMA ops before the simulator sees the kernel, delete ``_LANGUAGE``
and ``_language_instruction`` and keep only the nisa path.
"""

from __future__ import annotations

from nki_dsl.ir.nodes import Access, Imm, Op
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.ops.isa import ACTIVATIONS

ENGINES = ("tensor", "vector", "scalar", "gpsimd")  # compute engines, each with its own instruction queue (§1.1)
DMA = "dma"

# Ops that only declare or re-view storage: no instruction is issued for them.
NO_INSTRUCTION = frozenset({"alloc", "hbm.reshape", "nl.random_seed"})

# nl op family -> (engine, the nisa instruction whose cost formula applies), reference/nki.md §2.4.
_LANGUAGE = {
    "load": (DMA, "nisa.dma_copy"),
    "load_transpose2d": (DMA, "nisa.dma_transpose"),
    "store": (DMA, "nisa.dma_copy"),
    "matmul": ("tensor", "nisa.nc_matmul"),
    "transpose": ("tensor", "nisa.nc_transpose"),  # PE transpose into PSUM (§2.4)
    "copy": ("vector", "nisa.tensor_copy"),  # nl.copy uses the Vector engine (tensor_copy), §2.4 new-gen note
    "expand_dims": ("vector", "nisa.tensor_copy"),
    "select": ("vector", "nisa.tensor_tensor"),  # nl.where -> Vector select (§2.4, exact lowering unconfirmed)
    "dropout": ("vector", "nisa.tensor_scalar"),  # §2.3: dropout costs max(MIN_II, N) on the Vector engine
    "reduce": ("vector", "nisa.tensor_reduce"),  # nl.max/sum -> tensor_reduce on VectorE (§2.4)
    "fill": ("vector", "nisa.memset"),
    "assign": ("vector", "nisa.tensor_copy"),
}


def instruction(op: Op) -> tuple[str, str] | None:
    """``(engine, opcode)`` for ``op``: ``engine`` is a compute engine or ``"dma"``; ``opcode`` the nisa
    instruction whose cost formula prices it. None for ops that issue nothing."""
    if op.name in NO_INSTRUCTION:
        return None
    spec = OPS[op.name]
    if spec.engine is not None:
        return str(op.attrs.get("engine", spec.engine)), op.name
    return _language_instruction(op, spec.family)


def _language_instruction(op: Op, family: str) -> tuple[str, str]:
    if family == "unary":
        # Activation functions run on the Scalar engine (§2.4); the other unary math (bitwise, negation...) is
        # a Vector-engine ALU op.
        fn = OPS[op.name].extra["fn"]
        return ("scalar", "nisa.activation") if fn in ACTIVATIONS else ("vector", "nisa.tensor_scalar")
    if family == "binary":
        # Two tiles of the full shape: tensor_tensor; a scalar or a [P, 1] operand: tensor_scalar (§2.3).
        tiles = [v for v in op.operands.values() if isinstance(v, Access)]
        full = op.result.type.shape if op.result is not None else ()
        if len(tiles) == 2 and all(_free(t.shape) == _free(full) for t in tiles):
            return "vector", "nisa.tensor_tensor"
        return "vector", "nisa.tensor_scalar"
    if family == "broadcast_to":
        src = op.operands["x"]
        if isinstance(src, Access) and src.shape[0] != op.result.type.shape[0]:
            # Broadcasting across partitions is a matmul with a ones stationary on the Tensor engine (§2.4).
            return "tensor", "nisa.nc_matmul"
        return "vector", "nisa.tensor_copy"
    if family == "assign":
        src = op.operands["src"]
        if op.attrs.get("accumulate", "none") != "none" and not isinstance(src, Imm):
            return "vector", "nisa.tensor_tensor"
        return "vector", "nisa.tensor_copy" if not isinstance(src, Imm) else "nisa.memset"
    try:
        return _LANGUAGE[family]
    except KeyError:
        raise NotImplementedError(f"the simulator has no engine for {op.name} (family {family})") from None


def _free(shape) -> int:
    n = 1
    for s in shape[1:]:
        n *= s
    return n
