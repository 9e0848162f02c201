"""The ``nki`` command line: trace prints IR that parses back; run checks a kernel against a reference."""

import textwrap

import pytest

from nki_dsl.cli import main
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.ir.printer import print_kernel

KERNELS = textwrap.dedent('''
    import numpy as np
    import nki_dsl as nki
    import nki_dsl.language as nl


    @nki.jit
    def scaled_exp(x, scale):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = nl.program_id(0) * 128 + nl.arange(128)[:, None]
        cols = nl.arange(x.shape[1])[None, :]
        nl.store(out[rows, cols], value=nl.exp(nl.multiply(nl.load(x[rows, cols]), scale)))
        return out


    def good_reference(x, scale):
        return np.exp(x.astype(np.float32) * scale)


    def wrong_reference(x, scale):
        return np.exp(x.astype(np.float32) * scale) + 1


    def misshapen_reference(x, scale):
        return np.exp(x.astype(np.float32) * scale)[:1]
''')


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "kernels_for_cli.py"
    path.write_text(KERNELS)
    return path


ARGS = ["--arg", "x=256x64:float32", "--arg", "scale=0.5", "--grid", "2"]


def test_trace_prints_ir_that_parses_back(kernel_file, capsys):
    assert main(["trace", f"{kernel_file}:scaled_exp", *ARGS]) == 0
    text = capsys.readouterr().out
    assert text.startswith("kernel scaled_exp(%x: f32[256, 64] hbm) -> (%0) {")
    assert 'const "scale" = 0.5' in text and "grid (2,)" in text
    assert print_kernel(parse_kernel(text)) == text


@pytest.mark.parametrize("reference, status, code", [
    ("good_reference", "match", 0), ("wrong_reference", "MISMATCH", 1), ("misshapen_reference", "MISMATCH", 1),
])  # fmt: skip
def test_run_compares_with_a_reference(kernel_file, capsys, reference, status, code):
    assert main(["run", f"{kernel_file}:scaled_exp", *ARGS, "--reference", f"{kernel_file}:{reference}"]) == code
    out = capsys.readouterr().out
    assert status in out and "[256, 64]" in out


def test_run_on_the_jax_backend(kernel_file, capsys):
    ref = f"{kernel_file}:good_reference"
    assert main(["run", f"{kernel_file}:scaled_exp", *ARGS, "--backend", "jax", "--reference", ref]) == 0
    out = capsys.readouterr().out
    assert "jax" in out and "match" in out and "MISMATCH" not in out  # the title wraps


def test_run_without_backend_runs_on_the_default_backend(kernel_file, capsys, monkeypatch):
    ref = f"{kernel_file}:good_reference"
    monkeypatch.setenv("NKI_BACKEND", "simulator")
    assert main(["run", f"{kernel_file}:scaled_exp", *ARGS, "--reference", ref]) == 0
    assert "on the simulator backend" in " ".join(capsys.readouterr().out.split())  # the title wraps
    monkeypatch.delenv("NKI_BACKEND")
    assert main(["run", f"{kernel_file}:scaled_exp", *ARGS, "--reference", ref]) == 0
    assert "on the NumPy reference" in " ".join(capsys.readouterr().out.split())


def test_bad_invocations_explain_themselves(kernel_file, capsys):
    with pytest.raises(SystemExit, match="defines no 'missing'"):
        main(["trace", f"{kernel_file}:missing", *ARGS])
    with pytest.raises(SystemExit, match="no such file"):
        main(["trace", "nowhere.py:k", *ARGS])
    with pytest.raises(SystemExit, match="neither SHAPE:DTYPE"):
        main(["trace", f"{kernel_file}:scaled_exp", "--arg", "x=256x64x:float32", "--arg", "scale=0.5"])
    assert main(["trace", f"{kernel_file}:scaled_exp", "--arg", "x=256x64:float33", "--arg", "scale=0.5"]) == 1
    assert "dtype 'float33' is not a dtype; use one of float32" in capsys.readouterr().out
