"""Legacy-API (``neuronxcc.nki``) kernels written in the style of AWS's published reference set: direct
allocation, indirect DMA, pooling and select-and-scatter. Each is checked against a float64 NumPy formula on the
NumPy reference, the JAX backend and the simulator (tests/kernels/test_legacy_reference_set.py)."""
