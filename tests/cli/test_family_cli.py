"""``nki trace --dim`` prints a shape family's IR; ``nki check`` proves a family file for its whole range."""

from pathlib import Path

import pytest

from nki_dsl.cli import main

SOFTMAX = Path(__file__).parents[2] / "kernels" / "softmax" / "kernel.py"


@pytest.fixture
def family_file(tmp_path, capsys):
    assert main(["trace", f"{SOFTMAX}:softmax_kernel", "--arg", "x=Nx512:float32", "--dim", "N=1..65536"]) == 0
    path = tmp_path / "softmax_family.nkir"
    path.write_text(capsys.readouterr().out)
    return path


def test_trace_prints_the_family_and_check_proves_it(family_file, capsys):
    text = family_file.read_text()
    assert text.startswith("kernel softmax_kernel(%x: f32[$N, 512] hbm)") and "symbol $N in [1, 65536]" in text
    assert main(["check", str(family_file)]) == 0
    assert "shape family softmax_kernel is valid for trn2 at every size (N in 1..65536)" in capsys.readouterr().out


def test_check_names_each_access_that_breaks_for_some_size(family_file, capsys):
    family_file.write_text(family_file.read_text().replace(" mask[$N - d0 - 128*i0 >= 1]", ""))
    assert main(["check", str(family_file)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "nl.load: out-of-bound access for tensor %x f32[$N, 512]" in out
    assert "nl.store: out-of-bound access for tensor %0 f32[$N, 512]" in out
    assert "N in 1..65536" in out


@pytest.mark.parametrize("dim", ["N=1-5", "N=..5", "1=1..5", "N", "N=1..5:", "N=1..5:x"])
def test_a_malformed_dim_is_refused(dim):
    with pytest.raises(SystemExit, match="--dim expects NAME=LO..HI"):
        main(["trace", f"{SOFTMAX}:softmax_kernel", "--arg", "x=Nx512:float32", "--dim", dim])


def test_a_stepped_dim_traces_multiples_only(tmp_path, capsys):
    matmul = Path(__file__).parents[2] / "kernels" / "matmul" / "kernel.py"
    args = ["trace", f"{matmul}:matmul_tiled", "--arg", "lhsT=KxM:float32", "--arg", "rhs=KxN:float32",
            "--dim", "K=128..4096:128", "--dim", "M=128..4096:128", "--dim", "N=512..8192:512"]  # fmt: skip
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "symbol $M in [128, 4096] step 128" in text and "symbol $N in [512, 8192] step 512" in text
    path = tmp_path / "matmul.nkir"
    path.write_text(text)
    assert main(["check", str(path)]) == 0
    assert "at every size (K in 128..4096 step 128, M in 128..4096 step 128, N in 512..8192 step 512)" in (
        capsys.readouterr().out)
