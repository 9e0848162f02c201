"""What running a call in parts costs (hub_client/chunks.py): vit-attn's attention family over S 1..512 (fp32)
published with B in 1..TOP, called at B = 8 without trust on NumPy, against the same family published with B in
1..8 (one instance). Prints the steady per-call wall time of each (after a warm-up call that instantiates and
verifies) and their ratio; the first call's time (instantiation and verification of the parts: at most two shapes)
too, and the modelled trn2 latency of the one instance against the parts' summed.

    python benchmarks/family_parts.py [--top 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import kernels  # noqa: E402
from hub_client import chunks  # noqa: E402
from hub_client.bundle import build_bundle  # noqa: E402
from tests.hub.library_packages import families_only  # noqa: E402


def loaded(top: int, tmp: Path):
    root = families_only("vit_attn", tmp / f"b{top}", {"attention"},
                         lambda ln: "B x H x S x D:float32" in ln and 'S = "1..512"' in ln
                         and "scalars" not in ln)  # fmt: skip
    toml = root / "kernel.toml"
    toml.write_text(re.sub(r'B = "1\.\.\d+"', f'B = "1..{top}"', toml.read_text()))
    return kernels.get_local_kernel(build_bundle(root, benchmarks=False).write(tmp / f"r{top}"))


def modelled(k, at: dict) -> float:
    """The modelled latency (us) of the loaded family's instance with these dimension values."""
    compiled = next(c for key, c in k.attention._parsed.items() if len(key) == 3 and dict(key[1])["B"] == at["B"])
    return compiled.kernel.profile("trn2").latency_us


def timed(k, args, repeat: int) -> tuple[float, float]:
    t = time.perf_counter()
    k.attention(*args, backend="numpy")
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(repeat):
        k.attention(*args, backend="numpy")
    return first, (time.perf_counter() - t) / repeat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=2, help="the B range's top of the family run in parts")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((8, 2, 130, 16)).astype(np.float32) for _ in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        whole, parts = loaded(8, Path(tmp)), loaded(a.top, Path(tmp))
        (f1, s1), (f2, s2) = timed(whole, args, a.repeat), timed(parts, args, a.repeat)
        # modelled trn2 latency: the one instance, and the parts' instances summed (launches do not overlap)
        m1 = modelled(whole, {"B": 8})
        m2 = sum(modelled(parts, {"B": c}) for c in chunks.sizes(8, 1, a.top, 1))
    print(f"modelled trn2: one instance {m1:.1f} us, parts {m2:.1f} us ({m2 / m1:.2f}x)")
    print(f"B = 8 in one instance: first call {f1:.2f} s, then {s1 * 1e3:.1f} ms per call")
    print(f"B = 8 in parts of {a.top}: first call {f2:.2f} s, then {s2 * 1e3:.1f} ms per call ({s2 / s1:.2f}x)")


if __name__ == "__main__":
    main()
