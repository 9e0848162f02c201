"""What a release of a first-party kernel costs to build and ship: its IR bytes, its manifest bytes, and the time to
build the bundle (trace, verify and prove every specialisation, check the test vectors; no modelled figures).

    python benchmarks/bundle_cost.py [softmax vit_attn ...]

Run it on two checkouts to compare a change (the kernels are read from the checkout this file is in). Prints the CPU
time (``time.process_time``: on a shared machine wall time floats with the load) beside the wall time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hub_client.bundle import build_bundle  # noqa: E402
from hub_client.manifest import MANIFEST  # noqa: E402


def main(names: list[str]) -> None:
    for name in names or ["softmax", "vit_attn"]:
        wall, cpu = time.perf_counter(), time.process_time()
        bundle = build_bundle(ROOT / "kernels" / name, benchmarks=False)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        ir = [data for path, data in bundle.files.items() if path.startswith("ir/")]
        print(f"{name}: {len(ir)} IR files, {sum(map(len, ir)):,} IR bytes, manifest {len(bundle.files[MANIFEST]):,} "
              f"bytes, build {cpu:.1f} s CPU ({wall:.1f} s wall)")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
