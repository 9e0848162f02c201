"""The list of verifier rules. Each rule is ``fn(kernel, target: Target) -> list[Diagnostic]`` in its own module, with a
stable short id (``RULE``) that diagnostics carry.

``WELL_FORMED`` rules run first: they check what every other rule (and every backend) relies on, such as op
names in the op table, tensors defined before use and variables in scope. When they find a problem the remaining
rules are skipped, because their facts would be meaningless on such IR.

``PLACING`` rules (``psum-banks``, ``sbuf-capacity``) judge what the allocator will make of the kernel: they read an
``AllocatorView`` (``verify/allocator_view.py``) of the kernel after the ``lower-language`` pass, which the caller of
the verifier supplies (``passes/verifier.py``: the verifier layer imports no pass), and run after the other rules. Their
signature is ``fn(kernel, target, view) -> list[Diagnostic]``.
"""

from nki_dsl.verify.rules import (
    affine_dependence,
    bitcast,
    core_race,
    core_sync,
    direct_allocation,
    double_row,
    dtype,
    hbm_view,
    indirect_dma,
    mask_range,
    mask_shape,
    mask_vars,
    matmul_shape,
    operand_buffer,
    out_of_bounds,
    output_written,
    partition_limit,
    partition_mismatch,
    psum_banks,
    psum_tile_size,
    rank,
    sbuf_capacity,
    scope,
    shape,
    shared_hbm_scope,
    structure,
)

# Run order. Each module's ``check`` is the rule and its ``RULE`` the id diagnostics carry, so the two lists below
# cannot drift apart.
_MODULES = [
    structure,
    mask_vars,
    mask_shape,
    mask_range,
    operand_buffer,
    partition_limit,
    psum_tile_size,
    matmul_shape,
    double_row,
    partition_mismatch,
    shape,
    hbm_view,
    out_of_bounds,
    rank,
    dtype,
    affine_dependence,
    scope,
    output_written,
    shared_hbm_scope,
    direct_allocation,
    indirect_dma,
    core_sync,
    core_race,
    bitcast,
]

_PLACING = [psum_banks, sbuf_capacity]

WELL_FORMED = [structure.check, mask_vars.check]
RULES = [m.check for m in _MODULES]
PLACING = [m.check for m in _PLACING]
RULE_IDS = [m.RULE for m in _MODULES + _PLACING]  # in run order
