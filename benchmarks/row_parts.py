"""What running a row kernel's call in parts costs (hub_client/chunks.py, blocks from verify/independent.py):
rmsnorm's ``N x 512`` float32 family, called at N = 70000, run by ``chunks.run`` as instances of the family's top
(65536, rounded down to the kernel's 128-row tile) and the rest, against one instance of 70000 rows (the same
family traced with N up to 70000). Prints the modelled trn2 latency of the one instance against the parts' summed
(launches do not overlap), the steady NumPy wall time per call of each (median, after a warm-up call), and checks
the two give the same numbers bit for bit.

    python benchmarks/row_parts.py [--rows 70000] [--top 65536] [--repeat 7]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import nki_dsl as nki  # noqa: E402
from benchmarks.timing import median_time  # noqa: E402
from hub_client import chunks  # noqa: E402
from kernels.rmsnorm import launcher  # noqa: E402
from tests.kernels.family_args import FamilyArg  # noqa: E402


def family(rows_top: int):
    specs = [nki.spec(("N", 512), "float32", dims={"N": (1, rows_top)}), nki.spec((512,), "float32")]
    stand_ins = [FamilyArg(s, shape, "float32") for s, shape in zip(specs, nki.symbolic_shapes(*specs))]
    launch, args, kwargs = launcher.plan_rmsnorm(*stand_ins)
    return nki.trace(launch, *[a.spec for a in args], target="trn2", **kwargs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=70_000)
    ap.add_argument("--top", type=int, default=65_536, help="the top of the family's N range run in parts")
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    whole_family, parts_family = family(a.rows), family(a.top)
    proved = parts_family.independence[0]
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((a.rows, 512)).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    instances = {}

    def instance(fam, n):
        key = (id(fam), n)
        if key not in instances:
            inst = fam.instantiate((n, 512), (512,), target="trn2")
            instances[key] = (inst, inst.compile("numpy"))
        return instances[key]

    def whole():
        return instance(whole_family, a.rows)[1].run({"x": x, "g": g})

    def parts():
        return chunks.run(lambda part: instance(parts_family, part[0].shape[0])[1].run({"x": part[0], "g": part[1]}),
                          (x, g), {"N": (a.rows, 1, a.top, 1)}, proved, "row_parts")  # fmt: skip

    np.testing.assert_array_equal(parts(), whole())
    cuts = chunks.sizes(a.rows, 1, a.top, 1, proved["N"].block)
    m1 = instance(whole_family, a.rows)[0].profile("trn2").latency_us
    m2 = sum(instance(parts_family, c)[0].profile("trn2").latency_us for c in cuts)
    w1, w2 = median_time(whole, a.repeat, warm=True), median_time(parts, a.repeat, warm=True)
    print(f"N = {a.rows}: parts {cuts} (blocks of {proved['N'].block}), the same numbers bit for bit")
    print(f"modelled trn2: one instance {m1:.1f} us, parts {m2:.1f} us ({m2 / m1:.4f}x)")
    print(f"NumPy per call: one instance {w1 * 1e3:.1f} ms, parts {w2 * 1e3:.1f} ms ({w2 / w1:.2f}x)")


if __name__ == "__main__":
    main()
