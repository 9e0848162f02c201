"""The list of verifier rules. Each rule is ``fn(kernel, target) -> list[Diagnostic]`` in its own module, with a
stable short id (``RULE``) that diagnostics carry.

``WELL_FORMED`` rules run first: they check what every other rule (and every backend) relies on, such as op
names in the op table, tensors defined before use and variables in scope. When they find a problem the remaining
rules are skipped, because their facts would be meaningless on such IR.
"""

from nki_dsl.verify.rules import (
    affine_dependence,
    dtype,
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
    structure,
)

WELL_FORMED = [structure.check, mask_vars.check]

RULES = [
    *WELL_FORMED,
    operand_buffer.check,
    partition_limit.check,
    psum_tile_size.check,
    psum_banks.check,
    matmul_shape.check,
    partition_mismatch.check,
    shape.check,
    out_of_bounds.check,
    rank.check,
    dtype.check,
    affine_dependence.check,
    scope.check,
    output_written.check,
    sbuf_capacity.check,
]

RULE_IDS = [
    structure.RULE, mask_vars.RULE, operand_buffer.RULE, partition_limit.RULE, psum_tile_size.RULE,
    psum_banks.RULE, matmul_shape.RULE, partition_mismatch.RULE, shape.RULE, out_of_bounds.RULE, rank.RULE,
    dtype.RULE, affine_dependence.RULE, scope.RULE, output_written.RULE, sbuf_capacity.RULE,
]  # fmt: skip
