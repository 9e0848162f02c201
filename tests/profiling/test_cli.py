"""``nki profile`` (rich summary, Chrome trace, timing-only mode for huge shapes) and ``nki asm`` listing the
program the simulator runs."""

import json
import re

import pytest

import nki_dsl as nki
from nki_dsl.cli import main

KERNELS = "tests/profiling/kernels.py"
MATMUL = "kernels/matmul/kernel.py:matmul_tiled"  # the library's tiled matmul
MATMUL_ARGS = ["--arg", "lhsT=256x256:float32", "--arg", "rhs=256x1024:float32"]


def test_profile_prints_the_summary_and_writes_a_chrome_trace(capsys, tmp_path):
    trace = tmp_path / "matmul.json"
    code = main(["profile", MATMUL, *MATMUL_ARGS, "--target", "trn2", "--trace", str(trace)])
    out = capsys.readouterr().out
    assert code == 0
    assert "outputs (random inputs, seed 0): float32[256, 1024]" in out
    for figure in ("busy %", "tensor", "vector", "FLOPs", "bytes moved", "Tensor-engine utilisation",
                   "arithmetic intensity", "critical path"):  # fmt: skip
        assert figure in out, figure
    assert re.search(r"matmul_tiled on trn2: [\d.]+ us modelled", out)
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "tensor" in tracks and any(t.startswith("dma") for t in tracks)
    work = [e for e in events if e["ph"] == "X" and e.get("cat") == "instruction"]
    prof = nki.benchmark(matmul_kernel(), nki.spec((256, 256), "float32"), nki.spec((256, 1024), "float32"))
    assert len(work) == prof.instructions
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in work)


def matmul_kernel():
    from kernels.matmul import matmul_tiled

    return matmul_tiled


def test_profile_timing_only_takes_shapes_too_large_to_run(capsys):
    code = main(["profile", f"{KERNELS}:add", "--arg", "a=262144x4096:float32", "--arg", "b=262144x4096:float32",
                 "--grid", "2", "--timing-only", "--target", "trn1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "add on trn1" in out and "outputs" not in out
    assert "memory-bound" in out


def test_profile_reports_a_kernel_error(capsys):
    code = main(["profile", MATMUL, "--arg", "lhsT=256x256:float32", "--arg", "rhs=128x1024:float32"])
    assert code == 1
    assert "error" in capsys.readouterr().out


def _instructions_run(listing: str) -> int:
    """Instruction lines of an ``nki asm`` listing, each counted once per iteration of its enclosing loops."""
    total, trips = 0, [1]
    for line in listing.splitlines():
        s = line.strip()
        loop = re.match(r"\w+ i\d+ in range\((\d+), (\d+), (\d+)\) \{$", s)
        if loop:
            lo, hi, step = map(int, loop.groups())
            trips.append(trips[-1] * len(range(lo, hi, step)))
        elif s == "}":
            trips.pop()
        elif s and not s.startswith(";"):
            total += trips[-1]
    return total


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_asm_lists_the_program_the_simulator_runs(capsys, target):
    assert main(["asm", MATMUL, *MATMUL_ARGS, "--target", target]) == 0
    listing = capsys.readouterr().out
    prof = nki.benchmark(matmul_kernel(), nki.spec((256, 256), "float32"), nki.spec((256, 1024), "float32"),
                         target=target)  # fmt: skip
    assert _instructions_run(listing) == prof.instructions
    opcodes = {line.split()[1] for line in listing.splitlines() if line.strip() and not line.startswith(";")
               and not line.strip().startswith(("affine", "sequential", "}"))}  # fmt: skip
    ran = {e.opcode.removeprefix("nisa.") for e in prof.critical_path}
    assert ran <= opcodes
