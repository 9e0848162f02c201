"""Lesson 3: reading the IR a kernel traces into, and the NumPy code it runs as.

Tracing runs the kernel body once. Loops stay loops (``affine i0 = range(...)``), indices stay symbolic
(``d0 + 128*i0``), and every op remembers the kernel line that made it (``loc(...)``). The text form is exact:
parsing it gives the same kernel back, which is how kernels are shared on the Hub.

The kernel read here is the kernel library's row softmax (``kernels/softmax/kernel.py``: rows in tiles of 128
partitions; the last tile may be ragged, so every op on it carries a mask).
Run it: ``python tutorials/03_reading_the_ir.py``.
"""

import numpy as np

import nki_dsl as nki
from kernels.softmax.kernel import softmax_kernel


def main():
    x = np.random.default_rng(0).standard_normal((300, 64)).astype(np.float32)

    traced = nki.trace(softmax_kernel, x)
    text = traced.text
    print(text)
    # What to look for in the text above:
    # * `kernel softmax_kernel(%x: f32[300, 64] hbm) -> (%0)`: the signature, with HBM parameters and outputs.
    # * `affine i0 = range(0, 3, 1)`: the loop, traced once no matter how many iterations it has.
    # * `%x[d0 + 128*i0, d1 ; 128x64]`: an access; d0, d1 are the tile's own axes, i0 the loop index.
    # * `mask[d0 + 128*i0 <= 299]`: the predicate that trims the ragged last tile (rows 300..383 are skipped).
    # * `loc(N)`: the line of the kernel's file that created each op (18: the load); diagnostics point there.
    for fragment in ("kernel softmax_kernel(%x: f32[300, 64] hbm) -> (%0)", "affine i0 = range(0, 3, 1)",
                     "%x[d0 + 128*i0, d1 ; 128x64]", "mask[d0 + 128*i0 <= 299]", "loc(18)"):
        assert fragment in text, f"this lesson's notes describe {fragment!r}; the IR printed above changed"

    again = nki.parse_ir(text)  # the parser verifies what it reads: Hub bundles are untrusted input
    assert again.text == text, "printing the parsed IR gives the same text"
    print("parse(print(ir)) prints identically: True")

    # The NumPy reference backend turns the IR into plain Python over NumPy arrays; here is what runs.
    print(nki.emit(softmax_kernel, x, backend="numpy"))

    y = softmax_kernel(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(y, e / e.sum(axis=1, keepdims=True), atol=1e-6)
    print("softmax_kernel matches NumPy on 300 rows (3 tiles, the last one masked)")


if __name__ == "__main__":
    main()
