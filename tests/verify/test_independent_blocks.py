"""Independence in blocks (``verify/independent.py``): a row kernel that loops over ``ceil(N / T)`` tiles of ``T``
rows, touching rows ``T*i + p`` under the mask ``T*i + p < N``, is independent along ``N`` in blocks of ``T``, and
its instances over slices that start at multiples of ``T`` give the whole call's numbers bit for bit (its ops may
mix the rows of a block). Each rule the block proof adds is broken once by a kernel that really mixes rows across
blocks (or would, cut at the wrong multiple): run whole and in block-aligned parts, it gives other numbers."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl

T, W = 4, 8  # a small block keeps the kernels and their calls tiny
I_P, I_F = nl.arange(T)[:, None], nl.arange(W)[None, :]


def rows(hi=64):
    return nki.spec(("N", W), "float32", dims={"N": (1, hi)})


@nki.jit
def _block_centred(x):
    """out = x minus the mean of its block of T rows (a partition reduction: rows mixed within a block only)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    ones = nl.full((T, T), 1.0 / T, dtype=nl.float32)
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        tile = nl.load(x[r, I_F], mask=(r < n))
        mean = nl.matmul(ones, tile, transpose_x=True, mask=(r < n))
        nl.store(out[r, I_F], value=nl.subtract(tile, mean, mask=(r < n)), mask=(r < n))
    return out


def _run(family, x):
    return family.instantiate(x).compile("numpy").run({"x": x})


def _parts(family, x, cuts):
    out, start = [], 0
    for size in cuts:
        out.append(_run(family, x[start : start + size]))
        start += size
    return np.concatenate(out)


X = np.random.default_rng(0).standard_normal((23, W)).astype(np.float32)


def test_a_row_kernel_over_tiles_of_rows_is_independent_in_blocks_and_runs_in_parts():
    family = nki.trace(_block_centred, rows())
    proved, refused = family.independence
    assert proved["N"].block == T and proved["N"].params == (0,) and proved["N"].outputs == (0,) and refused == {}
    whole = _run(family, X)
    for cuts in ([8, 15], [4, 4, 12, 3], [20, 3]):  # multiples of T, the last ragged
        np.testing.assert_array_equal(_parts(family, X, cuts), whole)
    # the whole blocks against NumPy (the ragged last one averages rows the mask left unloaded, the same in parts)
    means = np.repeat(X[:20].reshape(5, T, W).mean(1), T, 0)
    np.testing.assert_allclose(whole[:20], X[:20] - means, rtol=1e-5, atol=1e-6)
    # cut where a block is not whole, the rows of a block are mixed with other ones: the proof's block matters
    assert not np.array_equal(_parts(family, X, [6, 17]), whole)


@nki.jit
def _next_row(x):
    """out[r] = x[r] + x[r + 1]: the last row of a block reads the next block's first."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        here = nl.load(x[r, I_F], mask=(r < n))
        after = nl.load(x[r + 1, I_F], mask=(r + 1 < n))
        nl.store(out[r, I_F], value=nl.add(here, after, mask=(r < n)), mask=(r < n))
    return out


@nki.jit
def _two_blocks(x):
    """out[r] = x[r] + x[r + T] for the 2T rows a loop over ceil(N / T) loads at once: p ranges past the block."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    i_2p = nl.arange(2 * T)[:, None]
    for i in nl.affine_range((n + T - 1) // T):
        tile = nl.load(x[T * i + i_2p, I_F], mask=(T * i + i_2p < n))
        r = T * i + I_P
        nl.store(out[r, I_F], value=nl.add(tile[I_P, I_F], tile[T + I_P, I_F], mask=(r < n)), mask=(r < n))
    return out


def _copy_blocks(x, store_mask):
    """out = x over ceil(N / T) blocks of T rows, each loaded under ``r < N`` and stored under ``store_mask(r, i,
    n)``: the kernels below differ only in that mask."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        nl.store(out[r, I_F], value=nl.load(x[r, I_F], mask=(r < n)), mask=store_mask(r, i, n))
    return out


@nki.jit
def _first_blocks_only(x):
    """Only the first two blocks are copied: a mask on the loop's index alone."""
    return _copy_blocks(x, lambda r, i, n: (r < n) & (i + 0 * I_P < 2))


@nki.jit
def _all_but_last_row(x):
    """Every row but the call's last: the mask ``T*i + p + 1 < N`` drops each part's last row instead."""
    return _copy_blocks(x, lambda r, i, n: r + 1 < n)


@nki.jit
def _complete_blocks_after_one(x):
    """Blocks whose next row exists (a loop over (N - 1) // T, not ceil(N / T)): a part's last whole block is
    dropped though the call has rows after it."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for i in nl.affine_range((n - 1) // T):
        r = T * i + I_P
        nl.store(out[r, I_F], value=nl.load(x[r, I_F], mask=(r < n)), mask=(r < n))
    return out


@nki.jit
def _half_rows(x):
    """out's first rows are x's even blocks compacted (a loop over ceil(N / 2T) reading blocks of 2T rows and writing
    blocks of T): x and out in blocks of different sizes."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for i in nl.affine_range((n + 2 * T - 1) // (2 * T)):
        nl.store(out[T * i + I_P, I_F], value=nl.load(x[2 * T * i + I_P, I_F], mask=(2 * T * i + I_P < n)),
                 mask=(2 * T * i + I_P < n))  # fmt: skip
    return out


@nki.jit
def _sums_then_copy(x):
    """Block sums over T rows in one loop, a copy in pairs of rows in another: cut at a multiple of 2 but not of T,
    the first loop's blocks would be split."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    copy = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    ones = nl.full((T, T), 1.0, dtype=nl.float32)
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        tile = nl.load(x[r, I_F], mask=(r < n))
        nl.store(out[r, I_F], value=nl.matmul(ones, tile, transpose_x=True, mask=(r < n)), mask=(r < n))
    i_2 = nl.arange(2)[:, None]
    for j in nl.affine_range((n + 1) // 2):
        r = 2 * j + i_2
        nl.store(copy[r, I_F], value=nl.load(x[r, I_F], mask=(r < n)), mask=(r < n))
    return out, copy


@nki.jit
def _first_block_doubled(x):
    """The first block outside the loop, doubled, the loop over the rest (``ceil(N / T) - 1`` blocks): each part
    would double its own first block."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    r = I_P
    first = nl.load(x[r, I_F], mask=(r < n))
    nl.store(out[r, I_F], value=nl.multiply(first, 2.0, mask=(r < n)), mask=(r < n))
    for i in nl.affine_range((n + T - 1) // T - 1):
        r = T * i + T + I_P
        nl.store(out[r, I_F], value=nl.load(x[r, I_F], mask=(r < n)), mask=(r < n))
    return out


@nki.jit
def _sum_of_columns_left_of_the_end(x):
    """Per row, the sum of the columns j with ``T*i + j < N``: a reduce_mask whose p (a column) ranges past T, so a
    part's last block sums fewer columns than the call's would."""
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        tile = nl.load(x[r, I_F], mask=(r < n))
        total = nl.sum(tile, axis=[1], keepdims=True, mask=(r < n) & (T * i + I_F < n))
        nl.store(out[r, nl.arange(1)[None, :]], value=total, mask=(r < n))
    return out


@nki.jit
def _first_half(x):
    """Only the rows below N / 2: a mask on twice the row, which each part would take at its own half."""
    return _copy_blocks(x, lambda r, i, n: 2 * r < n)


@nki.jit
def _scaled_where_two_rows_follow(x):
    """A tile made before the loop under a mask on N (``p + 2 < N``), used by every block: a part of fewer than
    T + 2 rows sees another tile."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    p = I_P
    scale = nl.multiply(nl.full((T, W), 1.0, dtype=nl.float32), 2.0, mask=(p + 2 < n))
    for i in nl.affine_range((n + T - 1) // T):
        r = T * i + I_P
        nl.store(out[r, I_F], value=nl.multiply(nl.load(x[r, I_F], mask=(r < n)), scale, mask=(r < n)), mask=(r < n))
    return out


@pytest.mark.parametrize("kernel, why, cuts", [
    (_first_half, "depends on N other than as 4*i0 + p (p in 0..3) < N: $N - 2*d0 - 8*i0 - 1 >= 0", [8, 15]),
    (_scaled_where_two_rows_follow, "depends on N outside a loop over N", [20, 3]),
    (_sum_of_columns_left_of_the_end, "other than as 4*i0 + p (p in 0..3) < N: $N - d1 - 4*i0 - 1 >= 0", [8, 15]),
    (_first_block_doubled, "the size _1 is computed from N", [8, 15]),
    (_next_row, "along N at d0 + 4*i0 + 1, not at 4*i + p (p in 0..3)", [8, 15]),
    (_two_blocks, "along N at d0 + 4*i0, not at 4*i + p (p in 0..3)", [8, 15]),
    (_first_blocks_only, "depends on N other than as 4*i0 + p (p in 0..3) < N: -i0 + 1 >= 0", [4, 19]),
    (_all_but_last_row, "depends on N other than as 4*i0 + p (p in 0..3) < N: $N - d0 - 4*i0 - 2 >= 0", [8, 15]),
    (_complete_blocks_after_one, "the size _0 is computed from N", [8, 15]),
    (_half_rows, "along N at d0 + 4*i0, not at 8*i + p (p in 0..7)", [8, 15]),
    (_sums_then_copy, "blocks of different sizes (i1: 2, i0: 4)", [6, 17]),
])  # fmt: skip
def test_a_kernel_that_mixes_rows_across_blocks_is_not_independent_along_them(kernel, why, cuts):
    family = nki.trace(kernel, rows())
    proved, refused = family.independence
    assert "N" not in proved
    assert why in refused["N"]
    whole, parts = _run(family, X), _parts_any(family, X, cuts)
    assert any(not np.array_equal(p, w) for p, w in zip(parts, whole))  # it really mixes: the parts differ


def _parts_any(family, x, cuts):
    """Every output of the instances over slices ``cuts`` of ``x``, joined (a kernel may return several)."""
    outs, start = [], 0
    for size in cuts:
        out = _run(family, x[start : start + size])
        outs.append(out if isinstance(out, tuple) else (out,))
        start += size
    return [np.concatenate(o) for o in zip(*outs)]
