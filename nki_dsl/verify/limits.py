"""Tile limits of the NeuronCore the rules enforce (reference/nki.md §1.1-§1.2); the same on trn1, trn2, trn3, so
they are read from the default target of ``nki_dsl/targets.py``. Per-target capacities (SBUF size) are looked up by
the rule that uses them (``rules/sbuf_capacity.py``)."""

from nki_dsl.targets import DEFAULT_TARGET, TARGETS

_T = TARGETS[DEFAULT_TARGET]
PMAX = _T.partitions  # partitions of SBUF and PSUM (§1.2 TC#1, tile_size.pmax)
PSUM_BANK_BYTES = _T.psum_bank_bytes  # bytes per partition of one PSUM bank: 512 fp32 (§1.1, §1.2 TC#2)
PSUM_BANKS = _T.psum_banks  # PSUM banks per partition (§1.1)
STATIONARY_FMAX = 128  # free size of the stationary matmul operand: PE columns (§1.2 TC#3)
MOVING_FMAX = 512  # free size of the moving matmul operand: one PSUM bank of fp32 (§1.2 TC#3)
MAX_TILE_RANK = 5  # partition + up to four free dimensions in one access pattern (§1.2)
