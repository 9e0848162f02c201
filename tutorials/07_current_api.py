"""Lesson 7: the same kernel in both NKI API generations.

AWS's NKI has two generations. The legacy ``neuronxcc.nki`` API (lessons 1-6) has ISA calls that *return* tiles
and loops traced once with a symbolic index. The current ``nki`` package (0.6) has ISA calls that take their
destination first and return nothing, and a compiler that unrolls every loop at specialisation, so a kernel may
keep Python lists of tiles. nki_dsl speaks both over one IR: ``nki_dsl.current`` is the current API, and
``python -m nki_dsl.compat script.py`` makes ``import nki`` mean it, for code written for AWS's stack.
Run it: ``python tutorials/07_current_api.py``.
"""

import numpy as np

import nki_dsl as legacy_nki
import nki_dsl.current as nki
from kernels.matmul import matmul_tiled as matmul_legacy
from kernels.matmul.current_api import matmul_hoisted
from kernels.matmul.current_api import matmul_tiled as matmul_current

# The kernels are the library's, read them beside this lesson (they are not repeated here):
#
# * Legacy (kernels/matmul/kernel.py, ``matmul_tiled``, lesson 2's): ops return tiles; the PSUM accumulator is
#   declared zero (``nl.zeros(..., buffer=nl.psum)``) and accumulated into with ``acc += nl.matmul(...)``; the
#   loops are traced once with a symbolic index.
# * Current (kernels/matmul/current_api.py, ``matmul_tiled``): every tensor is allocated explicitly
#   (``nl.ndarray(..., buffer=nl.sbuf)``) and every instruction writes its ``dst``
#   (``nisa.dma_copy(dst=a, src=...)``, ``nisa.nc_matmul(dst=acc, stationary=a, moving=b)``). nc_matmul's
#   ``accumulate=None`` means "the first write to this PSUM region overwrites, later ones add": the k loop is one
#   accumulation group without any zeroing. DMA cannot read PSUM in the current API, so the result is copied to
#   SBUF (``nisa.tensor_copy``) before it is stored.
# * Current, hoisted (``matmul_hoisted`` there): the loads go into Python lists of tiles, one loop appending and
#   another indexing with its own variable. Under legacy semantics the appending body would run once and the list
#   would hold one tile.


def loop_structure(kernel, *args) -> str:
    """The IR's loops, by source file:line and kind: what stayed a loop and what was unrolled."""
    ir = legacy_nki.trace(kernel, *args).ir
    loops = [f"{s.loc}: {s.kind} x{s.trip_count}" for s, _ in ir.walk() if hasattr(s, "trip_count")]
    return ", ".join(loops) or "none (fully unrolled)"


def main():
    rng = np.random.default_rng(0)
    lhsT = rng.uniform(-1, 1, (512, 256)).astype(np.float32)
    rhs = rng.uniform(-1, 1, (512, 1024)).astype(np.float32)
    expected = lhsT.astype(np.float64).T @ rhs

    old, new, hoisted = matmul_legacy(lhsT, rhs), matmul_current(lhsT, rhs), matmul_hoisted(lhsT, rhs)
    assert np.array_equal(old, new) and np.array_equal(new, hoisted), "one IR: the same fp32 sums, bit for bit"
    assert np.allclose(new, expected, rtol=1e-5, atol=1e-4)
    print(f"legacy, current and hoisted kernels agree bit for bit; max error vs float64: "
          f"{np.abs(new - expected).max():.2e}")

    # Both generations lower to the same engine program, so the modelled timing is the same too.
    _, p_old = legacy_nki.simulate(matmul_legacy, lhsT, rhs, target="trn2")
    _, p_new = nki.simulate(matmul_current, lhsT, rhs, target="trn2")
    print(f"modelled trn2 latency: legacy {p_old.latency_us:.2f} us, current {p_new.latency_us:.2f} us")
    assert abs(p_old.latency_us - p_new.latency_us) < 1e-9

    # Loops: traced symbolically unless the body needs the index as a Python int (a_tiles[k2]) or carries
    # Python state (a_tiles.append): those loops, and only those, are unrolled.
    print("loops of matmul_current:", loop_structure(matmul_current, lhsT, rhs))
    print("loops of matmul_hoisted:", loop_structure(matmul_hoisted, lhsT, rhs))

    # nki.simulate(kernel) is NKI's CPU-simulator entry: a callable that launches like the kernel ([lnc],
    # keyword arguments) and keeps the modelled timing of its last call. With arguments, it is this project's
    # nki.simulate(kernel, *args, target=...) returning (outputs, Profile), as above.
    sim = nki.simulate(matmul_hoisted)
    assert np.array_equal(sim(lhsT, rhs), hoisted)
    print(f"nki.simulate(matmul_hoisted)(...): latency {sim.profile.latency_us:.2f} us")

    # Unmodified third-party code: `python -m nki_dsl.compat their_script.py` (or `-m pytest their_tests/`)
    # makes `import nki, nki.language, nki.isa` resolve to nki_dsl.current and `import neuronxcc.nki` to the
    # legacy API, without shadowing a real installed nki.
    print("run code written for AWS's nki with: python -m nki_dsl.compat script.py")


if __name__ == "__main__":
    main()
