"""``nl.tile_size``: hardware tile limits (reference/nki.md §1.2)."""

pmax = 128  # partitions of SBUF and PSUM
psum_fmax = 512  # fp32 elements per partition in one 2 KiB PSUM bank
psum_bank_fmax = 512
psum_num_banks = 8
gemm_stationary_fmax = 128  # free size of the stationary (left) matmul operand: PE columns
gemm_moving_fmax = 512  # free size of the moving (right) matmul operand: one PSUM bank
bn_stats_fmax = 512
psum_min_align = 4  # byte alignment of PSUM free offsets; NKI does not document it, 4 B (one fp32) is assumed
sbuf_min_align = 4  # likewise for SBUF
total_available_sbuf_size = 224 * 1024  # bytes per partition on trn2, the default target
