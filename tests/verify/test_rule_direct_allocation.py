"""Rule ``direct-allocation``: placements from ``ncc.sbuf`` / ``ncc.psum`` (reference/nki.md §2.7 "Direct
allocation") are inside the target's memory, aligned, and never share space while in use; each refusal has an
accepted counterpart that differs only in the placement."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.compiler as ncc
import nki_dsl.language as nl
from nki_dsl.passes.pipeline import compile_for_target

X = (np.arange(512 * 64, dtype=np.float32).reshape(512, 64) % 97) / 97


def _double_buffered(sbuf_alloc, psum_alloc=None, blocks=4, read_lag=0):
    """Each 128-row block of x goes through a 4-block SBUF tensor ``buf`` (placed by ``sbuf_alloc``) and a PSUM
    accumulator; the store reads block ``i - read_lag``."""

    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((blocks, nl.par_dim(128), 64), nl.float32, buffer=sbuf_alloc)
        for i in nl.affine_range(4):
            acc = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=psum_alloc or nl.psum)
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
            acc[...] = nl.exp(buf[i])
            nl.store(out[nl.ds(i * 128, 128), :], value=nl.copy(acc))
        return out

    return kernel


def test_mod_alloc_double_buffer_is_honoured_and_computes_the_same():
    k = _double_buffered(ncc.sbuf.mod_alloc(base_addr=1024, num_free_tiles=(2,)), ncc.psum.mod_alloc(base_bank=3))
    np.testing.assert_allclose(k(X), np.exp(X), rtol=1e-6)
    out, _ = nki.simulate(k, X, target="trn2")
    np.testing.assert_allclose(out, np.exp(X), rtol=1e-6)
    _, alloc = compile_for_target(nki.trace(k, X, target="trn2").ir, nki.get_target("trn2"))
    buf = next(p for p in alloc.placements.values() if p.blocks)
    assert buf.blocks == ((0, 1024), (0, 1280), (0, 1024), (0, 1280))  # block i at 1024 + (i % 2) * 256 bytes
    acc = next(p for p in alloc.placements.values() if p.buffer == "psum" and p.byte_offset == 3 * 2048)
    assert acc.partitions == 128


def test_alloc_with_a_function_places_each_block():
    k = _double_buffered(ncc.sbuf.alloc(lambda idx, pdim, fbytes: (0, 4096 + idx[0] * fbytes)))
    np.testing.assert_allclose(nki.simulate(k, X, target="trn2")[0], np.exp(X), rtol=1e-6)
    ir = nki.trace(k, X).ir
    placed = next(s for s in ir.body if s.name == "alloc" and s.attrs)
    assert placed.attrs["address"] == (0, 4096, 0, 4352, 0, 4608, 0, 4864)


def test_blocks_sharing_space_count_once_for_sbuf_capacity():
    # 64 blocks of 8 KiB (512 KiB logically) in two slots: 16 KiB of SBUF, which fits
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 2048), x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((64, nl.par_dim(128), 2048), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.sequential_range(64):
            buf[i] = nl.load(x)
            nl.store(out, value=buf[i])
        return out

    nki.trace(kernel, np.zeros((128, 2048), np.float32), target="trn2")


def test_golden(golden, rejected):
    # read_lag: the store reads the block before, which shares the slot of the one just loaded (one slot)
    @nki.jit
    def lagging(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        for i in nl.sequential_range(3):
            buf[i + 1] = nl.load(x[nl.ds(i * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], value=buf[i])
        return out

    golden("direct-allocation", rejected(lagging, X))


def test_two_slots_hold_a_block_and_the_one_before():
    @nki.jit
    def lagging(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        buf[0] = nl.load(x[0:128, :])
        for i in nl.sequential_range(3):
            buf[i + 1] = nl.load(x[nl.ds((i + 1) * 128, 128), :])
            nl.store(out[nl.ds(i * 128, 128), :], value=buf[i])
        return out

    got = lagging(X)
    np.testing.assert_array_equal(got[:384], X[:384])


def _two_tensors(b_addr):
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        b = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=b_addr))
        a[...] = nl.load(x[0:128, :])
        b[...] = nl.exp(a)
        nl.store(out, value=nl.add(a, b))
        return out

    return kernel


def test_overlapping_live_tensors_are_refused(golden, rejected):
    golden("direct-allocation", rejected(_two_tensors(128), X), "overlap")
    np.testing.assert_allclose(_two_tensors(256)(X), X[:128] + np.exp(X[:128]), rtol=1e-6)


@pytest.mark.parametrize("alloc, message", [
    (lambda: ncc.sbuf.mod_alloc(base_addr=224 * 1024), "exceed the 229376 of a trn2 partition"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=2), "byte offset 2 is not a multiple of"),
    (lambda: ncc.sbuf.alloc(lambda idx, p, f: (32, 0)), "partitions 32..159 exceed the 128 partitions"),
    (lambda: ncc.sbuf.alloc(lambda idx, p, f: (0, idx[0] * 128)), "overlap partly"),
])  # fmt: skip
def test_bad_sbuf_placements_are_refused(rejected, alloc, message):
    err = rejected(_double_buffered(alloc()), X)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    assert message in str(err), str(err)


@pytest.mark.parametrize("alloc, message", [
    (lambda: ncc.psum.mod_alloc(base_bank=8), "exceed the 16384 of a trn2 partition (8 PSUM banks)"),
    (lambda: ncc.psum.mod_alloc(base_bank=0, base_addr=1900), "cross a PSUM bank boundary"),
])  # fmt: skip
def test_bad_psum_placements_are_refused(rejected, alloc, message):
    err = rejected(_double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)), alloc()), X)
    assert message in str(err), str(err)


def test_two_psum_tiles_in_one_bank_are_accepted():
    # [128, 64] f32 is 256 B: base_addr 1792 ends at the bank's last byte
    k = _double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)),
                         ncc.psum.mod_alloc(base_bank=7, base_addr=1792))
    np.testing.assert_allclose(k(X), np.exp(X), rtol=1e-6)


def test_indexing_blocks_with_different_loops_through_shared_space_is_refused(rejected):
    @nki.jit
    def two_loops(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        for i in nl.affine_range(4):
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
        for j in nl.affine_range(4):
            nl.store(out[nl.ds(j * 128, 128), :], value=buf[j])
        return out

    err = rejected(two_loops, X)
    assert {d.rule for d in err.diagnostics} == {"direct-allocation"}
    assert "indexed with different loop indices at line" in str(err)


def test_a_slot_per_block_may_be_filled_and_read_in_different_loops():
    @nki.jit
    def two_loops(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(4,)))
        for i in nl.affine_range(4):
            buf[i] = nl.load(x[nl.ds(i * 128, 128), :])
        for j in nl.affine_range(4):
            nl.store(out[nl.ds(j * 128, 128), :], value=buf[j])
        return out

    np.testing.assert_array_equal(nki.simulate(two_loops, X, target="trn2")[0], X)


@pytest.mark.parametrize("make, message", [
    (lambda: ncc.sbuf.mod_alloc(base_addr=-1), "base_addr=-1 must be >= 0"),
    (lambda: ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(0,)), "every entry must be >= 1"),
    (lambda: ncc.psum.alloc(3), "takes a function"),
])  # fmt: skip
def test_bad_arguments_are_refused_at_the_kernel_line(make, message):
    from nki_dsl.errors import NkiApiError

    with pytest.raises(NkiApiError, match=message):
        _double_buffered(make())(X)


def test_the_simulator_orders_blocks_that_share_space():
    # one slot: block i+1's load waits for block i's last read (WAR on the shared bytes); two slots overlap them
    def latency(slots):
        k = _double_buffered(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(slots,)))
        out, profile = nki.simulate(k, X, target="trn2")
        np.testing.assert_allclose(out, np.exp(X), rtol=1e-6)
        return profile.latency_ns

    assert latency(1) > latency(2)


def test_nki_compiler_is_a_package_under_the_legacy_import_alias(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "uses_ncc.py"
    path.write_text("import neuronxcc.nki.compiler as ncc\n"
              "from neuronxcc.nki.compiler import psum, sbuf\n"
              "import nki_dsl.compiler\n"
              "assert ncc is nki_dsl.compiler and sbuf is ncc.sbuf and psum is ncc.psum\n"
              "print(ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)), ncc.psum.mod_alloc(base_bank=1))\n")
    r = subprocess.run([sys.executable, "-m", "nki_dsl.compat", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)) ncc.psum.mod_alloc(base_bank=1)" in r.stdout


def _sixteen_psum_blocks(psum_buffer):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((16, nl.par_dim(128), 512), nl.float32, buffer=psum_buffer)
        total = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(16):
            acc[i] = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)
            total[...] = nl.add(total, acc[i])
        nl.store(out, value=total)
        return out

    return kernel


def test_psum_blocks_sharing_two_banks_count_as_two():
    from nki_dsl.verify.placements import banks_of

    a, b = np.ones((128, 128), np.float32), np.ones((128, 512), np.float32)
    # 16 one-bank blocks, placed by the kernel in banks 0 and 1: two banks are in use (psum-banks counts
    # banks_of), not the sixteen a tensor of 16 one-bank blocks would take
    k = _sixteen_psum_blocks(ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)))
    np.testing.assert_array_equal(k(a, b), np.full((128, 512), 16 * 128.0, np.float32))
    acc = next(s for s, _ in nki.trace(k, a, b).ir.walk() if getattr(s, "name", "") == "alloc" and s.attrs)
    assert banks_of(acc, 2048) == {0, 1}
