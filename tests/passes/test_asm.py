"""``nki asm``: the engine-instruction listing of a kernel for a target."""

import re

from nki_dsl.cli import main


def test_asm_lists_engine_instructions_with_addresses_and_buffers(capsys):
    code = main(["asm", "kernels/matmul/kernel.py:matmul_tiled", "--arg", "lhsT=256x128:float32",
                 "--arg", "rhs=256x512:float32", "--target", "trn1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("; kernel matmul_tiled on trn1")
    assert re.search(r"; %2: sbuf\[0:128\] \+0x0 512 B x 2 buffers", out)  # the k loop has 2 iterations
    assert "; %1: psum[0:128] +0x0 2048 B x 1 buffer" in out
    lines = out.splitlines()
    matmul = next(s for s in lines if "nc_matmul" in s)
    # the accumulation is the matmul's destination, in PSUM bank 0; operands carry buffer, partitions, address, AP
    assert matmul.split()[0] == "tensor" and "dst+=%1@psum[0:+128]+0x0" in matmul
    assert "zero_first=i2" in matmul and "memset" not in out  # the first matmul of each group overwrites
    assert "stationary=%2@sbuf[0:+128]+0x0+512*{i2%2} f32[128x128] ap=[[1,128],[4,128]]" in matmul
    loads = [s for s in lines if "dma_copy" in s and "src=%lhsT" in s]
    assert loads and loads[0].split()[0] == "dma" and "src=%lhsT@hbm+512*i0 + 65536*i2" in loads[0]
    assert any(s.strip().startswith("affine i2 in range(0, 2, 1) {") for s in lines)
    assert not any(" assign" in s or "nl." in s for s in lines)
