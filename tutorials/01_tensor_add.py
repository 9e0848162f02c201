"""Lesson 1: add two tensors with an SPMD grid.

A kernel is a Python function decorated with ``@nki.jit``. Its arguments arrive as tensors in HBM (device
memory); compute engines only see on-chip memory (SBUF), so the kernel loads tiles, computes, and stores the
result back. Run it: ``python tutorials/01_tensor_add.py``.
"""

import numpy as np

import nki_dsl as nki
import nki_dsl.language as nl


@nki.jit
def add_kernel(a_input, b_input):
    # The output lives in HBM, visible to every instance of the launch grid.
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

    # Each instance of the grid handles one 128 x 512 tile. The partition dimension (rows, at most 128) comes
    # first; nl.arange(...)[:, None] indexes it and nl.arange(...)[None, :] the free dimension.
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]

    a_tile = nl.load(a_input[ix, iy])  # HBM -> SBUF
    b_tile = nl.load(b_input[ix, iy])
    nl.store(c_output[ix, iy], value=a_tile + b_tile)  # computed in fp32, rounded to float16 on write
    return c_output


def main():
    rng = np.random.default_rng(0)
    a = rng.random((256, 1024)).astype(np.float16)
    b = rng.random((256, 1024)).astype(np.float16)

    # kernel[2, 2] launches a 2 x 2 grid: four instances, one per tile of the 256 x 1024 inputs.
    c = add_kernel[2, 2](a, b)

    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    assert np.array_equal(c, expected), "the kernel must match NumPy exactly: one fp32 add, one rounding"
    print(f"add_kernel[2, 2]: {c.shape} {c.dtype}, equal to NumPy: True")

    # The traced IR: one trace serves every grid instance; program ids stay symbolic (pid0, pid1).
    print(nki.trace(add_kernel[2, 2], a, b))


if __name__ == "__main__":
    main()
