"""Legacy-API (``neuronxcc.nki``) kernels written in the style of AWS's published reference set, each checked
against a float64 NumPy formula on the NumPy reference, the JAX backend and the simulator: flash attention
backward (``flash_bwd.py``, tests/kernels/test_flash_attn_bwd.py); direct allocation, indirect DMA, pooling and
select-and-scatter (tests/kernels/test_legacy_reference_set.py)."""
