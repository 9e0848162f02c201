"""How fast IR text parses: 1 MB of realistic IR, against json.loads of the same number of bytes, in one run.

    python benchmarks/ir_parse_speed.py [--megabytes 1] [--repeat 5]

The text is real kernels' traced IR (the kernel library's softmax, tiled matmul and RMSNorm that the reference
benchmarks time), their bodies repeated with fresh tensor names until the kernel is ``--megabytes`` long, so every
line is one a tracer writes. Prints the median time of ``nki.parse_ir`` (parse, budget and verifier) and of the
parser alone, the MB/s, and the ratio to ``json.loads`` of a JSON document of the same size (a C parser: the floor
of what parsing text can cost here).
Then it doubles the size, to show the time is linear. Target (issue 7): 1 MB parses in under 1 s. On a shared
machine the wall times float with the load; the parse's CPU time (``time.process_time``) is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import nki_dsl as nki  # noqa: E402
from benchmarks.timing import median_time  # noqa: E402
from kernels.matmul import matmul_tiled  # noqa: E402
from kernels.rmsnorm import rmsnorm_rows  # noqa: E402
from kernels.softmax import softmax_rows  # noqa: E402

# The doubled text holds more ops than the default budget allows (IRBudget.max_ops); the speed is what is measured.
BUDGET = nki.IRBudget(max_ops=1_000_000, max_text_bytes=64 << 20)

_TENSOR = re.compile(r"%(\w+)")


def _kernels() -> list[str]:
    f32 = np.float32
    return [
        nki.trace(softmax_rows, np.zeros((1024, 512), f32)).text,
        nki.trace(matmul_tiled, np.zeros((512, 512), f32), np.zeros((512, 1024), f32)).text,
        nki.trace(rmsnorm_rows, np.zeros((1024, 512), f32), np.zeros((512,), f32)).text,
    ]


def realistic_ir(nbytes: int) -> str:
    """One kernel of about ``nbytes`` whose body repeats the bodies of real kernels (tensors renamed per copy)."""
    params: dict[str, str] = {}
    bodies = []
    for k, text in enumerate(_kernels()):
        lines = text.splitlines()
        header = lines[0]
        for name, ty in re.findall(r"%(\w+): (\w+\[[^\]]*\] \w+)", header.split("->")[0]):
            params[f"{name}_{k}"] = ty
        names = {name for name, _ in re.findall(r"%(\w+): (\w+\[[^\]]*\] \w+)", header.split("->")[0])}
        body = [_TENSOR.sub(lambda m: f"{m[0]}_{k}" if m[1] in names else m[0], line)  # noqa: B023
                for line in lines[3:-1] if not line.startswith("  const ")]  # fmt: skip
        bodies.append(body)
    head = [f"kernel big({', '.join(f'%{n}: {t}' for n, t in params.items())}) -> (%0_c0) {{", "  grid ()",
            '  source "kernels/softmax/whole_row.py"']  # fmt: skip
    out, size, copy = [], sum(len(x) + 1 for x in head) + 2, 0
    while size < nbytes:
        for body in bodies:
            for line in body:
                line = _TENSOR.sub(lambda m: m[0] if m[1] in params else f"{m[0]}_c{copy}", line)  # noqa: B023
                out.append(line)
                size += len(line) + 1
            copy += 1
    return "\n".join(head + out + ["}"]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--megabytes", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    nbytes = int(args.megabytes * 1e6)
    nki.parse_ir_unverified(realistic_ir(1000))  # build the lark parser once, outside the timings
    for size in (nbytes, 2 * nbytes):
        text = realistic_ir(size)
        n_ops = text.count(" loc(")
        doc = json.dumps([{"op": line.split("(")[0].strip(), "line": line} for line in text.splitlines()])
        t_json = median_time(lambda: json.loads(doc), args.repeat)  # noqa: B023
        t_parse = median_time(lambda: nki.parse_ir_unverified(text, budget=BUDGET), args.repeat)  # noqa: B023
        cpu_parse = median_time(lambda: nki.parse_ir_unverified(text, budget=BUDGET), args.repeat,  # noqa: B023
                                time.process_time)  # fmt: skip
        t_full = median_time(lambda: nki.parse_ir(text, budget=BUDGET), args.repeat)  # noqa: B023
        mb = len(text.encode()) / 1e6
        print(f"{mb:.2f} MB of IR ({n_ops} ops): parse {t_parse:.3f} s ({mb / t_parse:.2f} MB/s; CPU time "
              f"{cpu_parse:.3f} s), "
              f"parse_ir (parse + budgets + verify) {t_full:.3f} s; json.loads of {len(doc) / 1e6:.2f} MB "
              f"{t_json * 1e3:.1f} ms; parse / json.loads = "
              f"{t_parse / t_json * len(doc) / len(text):.0f}x per byte")  # fmt: skip


if __name__ == "__main__":
    main()
