"""Tracing shape families: symbolic dimensions stay symbolic in the IR, the family is proved for its range, and
each concrete shape instantiates to exactly the IR a concrete trace gives."""

import inspect
import math

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from kernels.softmax.kernel import softmax_kernel
from kernels.softmax.reference import softmax as softmax_reference

ROWS = nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn if hasattr(fn, "fn") else fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


def test_softmax_family_text_shows_symbols_and_round_trips():
    family = nki.trace(softmax_kernel, ROWS, target="trn2")
    assert isinstance(family, nki.ShapeFamily)
    text = family.text
    assert "%x: f32[$N, 512] hbm" in text
    assert "symbol $N in [1, 65536]" in text
    assert "symbol $_0 = ($N + 127) // 128" in text  # math.ceil(N / 128): a derived symbol
    assert "affine i0 = range(0, $_0, 1)" in text  # the trip count stays symbolic
    assert "mask[$N - d0 - 128*i0 >= 1]" in text  # rows < N: a mask over the symbol
    again = nki.parse_family(text)
    assert again.text == text
    assert family.dims == {"N": (1, 65536)}


@pytest.mark.parametrize("n", [1, 127, 128, 300, 4097])
def test_instances_are_exactly_the_concrete_traces(n):
    family = nki.parse_family(nki.trace(softmax_kernel, ROWS, target="trn2").text)
    concrete = nki.trace(softmax_kernel, nki.spec((n, 512), "float32"), target="trn2")
    assert family.instantiate((n, 512), target="trn2").text == concrete.text


def test_an_unforeseen_batch_size_runs_and_matches_the_reference():
    family = nki.parse_family(nki.trace(softmax_kernel, ROWS, target="trn2").text)
    x = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
    kernel = family.instantiate(x, target="trn2")
    assert family.instantiate(x, target="trn2") is kernel  # verified once per concrete shape
    out = kernel.compile("numpy", "trn2").run({"x": x})
    np.testing.assert_allclose(out, softmax_reference(x), rtol=1e-5, atol=1e-7)


def test_binding_checks_ranges_and_fixed_dimensions():
    family = nki.trace(softmax_kernel, ROWS, target="trn2")
    assert family.bind((300, 512)) == {"N": 300}
    with pytest.raises(nki.NkiShapeFamilyError, match=r"dimension N = 70000 is outside the family's range 1\.\.65536"):
        family.instantiate((70000, 512))
    with pytest.raises(nki.NkiShapeFamilyError, match="dimension 1 is 256, the family's is 512"):
        family.instantiate((8, 256))
    with pytest.raises(nki.NkiShapeFamilyError, match="rank 3"):
        family.instantiate((8, 512, 1))


@nki.jit
def _unmasked_copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(m)[None, :]
    for t in nl.affine_range(math.ceil(n / 128)):
        tile = nl.load(x[t * 128 + i_p, i_f])
        nl.store(out[t * 128 + i_p, i_f], value=tile)
    return out


def test_a_rule_broken_inside_the_range_refuses_the_family_even_when_both_ends_pass():
    # N = 128 and N = 1024 are multiples of the tile: both ends are in bounds, N = 200 is not.
    ends = nki.spec(("N", 512), "float32", dims={"N": (128, 1024)})
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_unmasked_copy, ends)
    rules = {d.rule for d in e.value.diagnostics}
    assert rules == {"out-of-bounds"}
    assert "N in 128..1024" in str(e.value) and "may reach N" in str(e.value)
    assert e.value.diagnostics[0].loc.line == _line_of(_unmasked_copy, "tile = nl.load")
    for n in (128, 1024):  # the concrete kernels at the ends are fine, so only the proof over the range refuses
        nki.trace(_unmasked_copy, nki.spec((n, 512), "float32"))


def test_the_budget_is_proved_at_the_top_of_the_range():
    huge = nki.spec(("N", 512), "float32", dims={"N": (1, 1 << 34)})
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(softmax_kernel, huge)
    # (N up to 2**34 also puts its masks' constants past int32: mask-range refuses it too)
    assert {d.rule for d in e.value.diagnostics} == {"budget", "mask-range"}
    assert "at the top of the family (N = 17179869184" in str(e.value)


@nki.jit
def _branches_on_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    if n > 128:
        m = m + 1
    return out


@nki.jit
def _arange_of_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    rows = nl.arange(n)[:, None]
    nl.store(out[rows, nl.arange(m)[None, :]], value=nl.load(x[rows, nl.arange(m)[None, :]]))
    return out


@nki.jit
def _tile_of_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nl.store(out, value=buf)
    return out


@nki.jit
def _loads_whole_tensor(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out


@pytest.mark.parametrize("kernel, line, what", [
    (_branches_on_rows, "if n > 128", "the comparison N > 128 is true for some sizes of the family and false"),
    (_arange_of_rows, "rows = nl.arange(n)", "dimension N is used where a concrete Python int is needed"),
    (_tile_of_rows, "buf = nl.ndarray", "an sbuf tensor of shape [N, 512] needs a concrete size for dimension N"),
    (_loads_whole_tensor, "nl.load(x)", "operand 'src' views [N, 512] of %x"),
])  # fmt: skip
def test_a_value_the_kernel_needs_concretely_names_the_dimension_and_the_line(kernel, line, what):
    with pytest.raises(nki.InconclusiveDimensionError) as e:
        nki.trace(kernel, nki.spec(("N", 512), "float32", dims={"N": (1, 1024)}))
    assert what in str(e.value)
    assert e.value.loc.line == _line_of(kernel, line)
    assert "N in 1..1024" in str(e.value) or "dimension N" in str(e.value)


def test_comparisons_the_range_decides_are_answered():
    seen = {}

    @nki.jit
    def k(x):
        n, m = x.shape
        seen["ge1"] = n >= 1
        seen["lt0"] = n < 0
        seen["eq"] = n == n
        seen["fixed"] = m == 512
        seen["nonzero"] = bool(n)
        seen["mod"] = str(n % 128)
        seen["floor"] = str(math.floor(n / 4))
        seen["remainder"] = 0 <= n % 128 < 128  # decided with floordiv(N, 128) tied to N, not by intervals alone
        seen["ceil"] = math.ceil(n / 128) * 128 >= n
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        return out

    with pytest.raises(nki.NkiVerificationError, match="never written"):  # the kernel writes nothing; traced anyway
        nki.trace(k, nki.spec(("N", 512), "float32", dims={"N": (1, 64)}))
    assert seen["ge1"] is True and seen["lt0"] is False and seen["eq"] is True and seen["fixed"] is True
    assert seen["nonzero"] is True and seen["remainder"] is True and seen["ceil"] is True
    assert seen["mod"] == "N - 128*floordiv(N, 128)" and seen["floor"] == "floordiv(N, 4)"


def test_spec_needs_a_range_for_every_symbol():
    with pytest.raises(nki.NkiApiError, match="has no range"):
        nki.spec(("N", 512), "float32")
    with pytest.raises(nki.NkiApiError, match="does not use"):
        nki.spec((128, 512), "float32", dims={"N": (1, 2)})
    with pytest.raises(nki.NkiApiError, match="must satisfy"):
        nki.spec(("N", 512), "float32", dims={"N": (5, 2)})


def test_a_family_itself_does_not_run_or_time():
    with pytest.raises(nki.NkiApiError, match=r"shape family \(N in 1\.\.65536\), which cannot run or compile"):
        softmax_kernel(ROWS)
    with pytest.raises(nki.NkiApiError, match="cannot be timed"):
        nki.benchmark(softmax_kernel, ROWS)
    with pytest.raises(nki.NkiApiError, match="cannot be emitted"):
        nki.emit(softmax_kernel, ROWS)


def test_instances_are_kept_least_recently_used_first(monkeypatch):
    import nki_dsl.family

    monkeypatch.setattr(nki_dsl.family, "MAX_INSTANCES", 2)
    family = nki.trace(softmax_kernel, ROWS, target="trn2")
    a = family.instantiate((1, 512))
    b = family.instantiate((2, 512))
    assert family.instantiate((1, 512)) is a  # used again: now the most recent
    family.instantiate((3, 512))  # evicts (2, 512), the least recently used
    assert family.instantiate((1, 512)) is a and family.instantiate((2, 512)) is not b


@nki.jit
def _batched_scale(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    b, n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for k in nl.affine_range(b):
        for t in nl.sequential_range(math.ceil(n / 128)):
            rows = t * 128 + i_p
            tile = nl.load(x[k, rows, i_f], mask=(rows < n))
            nl.store(out[k, rows, i_f], value=nl.multiply(tile, 2.0, mask=(rows < n)), mask=(rows < n))
    return out


def test_two_symbols_a_batch_loop_and_a_sequential_row_loop():
    spec = nki.spec(("B", "N", 256), "float32", dims={"B": (1, 64), "N": (1, 4096)})
    family = nki.parse_family(nki.trace(_batched_scale, spec).text)
    assert family.dims == {"B": (1, 64), "N": (1, 4096)}
    assert "affine i0 = range(0, $B, 1)" in family.text and "sequential i1 = range(0, $_0, 1)" in family.text
    x = np.random.default_rng(2).standard_normal((3, 300, 256)).astype(np.float32)
    assert family.bind(x) == {"B": 3, "N": 300}
    np.testing.assert_array_equal(family.instantiate(x).compile().run({"x": x}), 2 * x)
    with pytest.raises(nki.NkiShapeFamilyError, match="dimension B = 65 is outside"):
        family.instantiate((65, 300, 256))
