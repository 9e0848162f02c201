"""The family prover (``verify/family.py``): every verifier rule has an argument over a family's range, and each
argument is exercised where checking a few instances would have been wrong."""

import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.verify.family import BLIND, MONOTONE, PROVEN, RULE_ARGUMENTS
from nki_dsl.verify.integer_sets import at_least
from nki_dsl.verify.rational_sets import may_have_point
from nki_dsl.verify.rules import RULE_IDS


def test_every_rule_has_an_argument_over_a_range():
    # A new verifier rule fails here until verify/family.py says why it holds for a whole family (until then the
    # prover refuses every family, naming the rule).
    assert set(RULE_IDS) | {"budget"} == set(RULE_ARGUMENTS)
    assert set(RULE_ARGUMENTS.values()) == {BLIND, MONOTONE, PROVEN}


def test_a_rule_without_an_argument_refuses_every_family_naming_the_rule(monkeypatch):
    import nki_dsl.verify.family as family

    @nki.jit
    def copy_rows(x):  # (a kernel of its own: a traced family is cached per kernel and spec)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
        for t in nl.affine_range(x.shape[0] // 128):
            nl.store(out[t * 128 + i_p, i_f], value=nl.load(x[t * 128 + i_p, i_f]))
        return out

    monkeypatch.delitem(family.RULE_ARGUMENTS, "bitcast")
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(copy_rows, rows(128, 1024))
    (diag,) = e.value.diagnostics
    assert (diag.rule, diag.op, diag.loc.line) == ("shape-family", "kernel", 0)
    assert diag.message == ("rule bitcast has no argument over a shape family's range (verify/family.py), so no "
                            "family can be proved")  # fmt: skip
    monkeypatch.undo()
    nki.trace(copy_rows, rows(128, 2048))  # (the same family with every argument: proved)


def rows(lo, hi):
    return nki.spec(("N", 512), "float32", dims={"N": (lo, hi)})


@nki.jit
def _first_tile_each_iteration(x):
    """Every iteration of the tile loop stores the first tile: a write that ignores the loop index."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(math.ceil(n / 128)):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < n))
        nl.store(out[i_p, i_f], value=tile, mask=(i_p < n))
    return out


def test_a_monotone_rule_is_checked_at_the_top_of_the_range():
    # With N <= 128 the loop runs once, and a loop of one iteration carries nothing: the family is fine.
    nki.trace(_first_tile_each_iteration, rows(1, 128))
    # With N up to 1024 the lowest instance (N = 1, one iteration) still passes; the largest does not.
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_first_tile_each_iteration, rows(1, 1024))
    assert {d.rule for d in e.value.diagnostics} == {"affine-dependence"}
    assert "at the top of the family (N = 1024, _0 = 8)" in str(e.value)


@nki.jit
def _whole_tiles_only(x):
    """floor(N / 128) unmasked tiles: in bounds for every N, because 128 * floor(N / 128) <= N."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(n // 128):
        nl.store(out[t * 128 + i_p, i_f], value=nl.load(x[t * 128 + i_p, i_f]))
    return out


def test_the_proof_uses_what_a_derived_symbol_means():
    family = nki.trace(_whole_tiles_only, rows(128, 65536))  # proved: the loop stop is tied to N by its definition
    x = np.arange(300 * 512, dtype=np.float32).reshape(300, 512)
    out = family.instantiate(x).compile("numpy").run({"x": x})
    np.testing.assert_array_equal(out[:256], x[:256])  # two whole tiles copied; rows 256..299 are not written


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_instances_run_on_every_backend(backend):
    from kernels.softmax.kernel import softmax_kernel
    from kernels.softmax.reference import softmax

    family = nki.parse_family(nki.trace(softmax_kernel, rows(1, 65536), target="trn2").text)
    x = np.random.default_rng(5).standard_normal((200, 512)).astype(np.float32)
    out = family.instantiate(x, target="trn2").compile(backend, "trn2").run({"x": x})
    np.testing.assert_allclose(np.asarray(out), softmax(x), rtol=1e-5, atol=1e-6)


_coef = st.integers(-4, 4)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_coef, _coef, _coef, st.integers(-12, 12)), min_size=1, max_size=5),
       st.tuples(st.integers(-3, 0), st.integers(0, 3)))  # fmt: skip
def test_elimination_never_refutes_a_system_with_an_integer_point(rows_, box):
    """``may_have_point`` says "no" only when brute force finds no integer point either."""
    from nki_dsl.ir.affine import Affine

    names = ("a", "b", "c")
    constraints = [at_least(Affine.of(k, **{n: c for n, c in zip(names, cs) if c})) for *cs, k in rows_]
    ranges = {n: box for n in names}
    brute = any(all(k + sum(c * p[i] for i, c in enumerate(cs)) >= 0 for *cs, k in rows_)
                for p in product(range(box[0], box[1] + 1), repeat=3))  # fmt: skip
    if brute:
        assert may_have_point(constraints, ranges)


@nki.jit
def _reads_past_a_fixed_vector(x, g):
    """Rows are a family, but the weight read is out of bounds whatever N is: the lowest instance shows it."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    w = nl.load(g[nl.arange(1)[:, None], nl.arange(2 * m)[None, :]])
    for t in nl.affine_range(math.ceil(n / 128)):
        tile = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < n))
        nl.store(out[t * 128 + i_p, i_f], value=tile, mask=(t * 128 + i_p < n))
    nl.store(out[nl.arange(1)[:, None], i_f], value=w[nl.arange(1)[:, None], i_f])
    return out


def test_a_rule_broken_away_from_the_symbols_is_reported_too():
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_reads_past_a_fixed_vector, rows(1, 1024), nki.spec((1, 512), "float32"))
    assert [d.rule for d in e.value.diagnostics] == ["out-of-bounds"]
    assert "at N = 1:" in str(e.value) and "exceeds dimension size of 512" in str(e.value)


@nki.jit
def _ceil_tiles_unmasked(x):
    """ceil(N / 128) unmasked tiles: in bounds exactly when N is a multiple of 128."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(math.ceil(n / 128)):
        nl.store(out[t * 128 + i_p, i_f], value=nl.load(x[t * 128 + i_p, i_f]))
    return out


def test_the_proof_uses_a_declared_step():
    """Unmasked whole tiles over ceil(N / 128): refused over 128..65536 (N = 200 reads past the end), proved over its
    multiples of 128, whose divisibility the integer search knows (the intervals alone cannot tell the two apart)."""
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_ceil_tiles_unmasked, nki.spec(("N", 512), "float32", dims={"N": (128, 65536)}))
    assert {d.rule for d in e.value.diagnostics} == {"out-of-bounds"}
    family = nki.trace(_ceil_tiles_unmasked, nki.spec(("N", 512), "float32", dims={"N": (128, 65536, 128)}))
    assert "symbol $N in [128, 65536] step 128" in family.text
    x = np.arange(384 * 512, dtype=np.float32).reshape(384, 512)
    np.testing.assert_array_equal(family.instantiate(x).compile("numpy").run({"x": x}), x)
    # a step that does not make N a multiple of the tile is not enough
    with pytest.raises(nki.NkiVerificationError, match="out-of-bound"):
        nki.trace(_ceil_tiles_unmasked, nki.spec(("N", 512), "float32", dims={"N": (64, 65536, 64)}))


@nki.jit
def _from_the_end(x, mirrored=False):
    """Row tiles counted from the end of x (index ``N - 128 - 128*t``: a symbolic offset) and, mirrored, also from
    the start: two accesses to ``out`` inside the loop with different multiples of N."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, m = x.shape
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(n // 256):
        end = n - 128 - t * 128 + i_p
        nl.store(out[end, i_f], value=nl.exp(nl.load(x[end, i_f])))
        if mirrored:
            nl.store(out[t * 128 + i_p, i_f], value=nl.exp(nl.load(x[t * 128 + i_p, i_f])))
    return out


def test_symbolic_offsets_in_hbm_indices_are_proved():
    family = nki.trace(_from_the_end, nki.spec(("N", 64), "float32", dims={"N": (256, 65536, 256)}))
    assert "nl.store(dst=%0[$N + d0 - 128*i0 - 128, d1 ; 128x64]" in family.text
    x = np.random.default_rng(1).standard_normal((768, 64)).astype(np.float32)
    out = family.instantiate(x).compile("numpy").run({"x": x})
    np.testing.assert_allclose(out[384:], np.exp(x[384:]), rtol=1e-6)  # the last half, counted from the end
    past = family.text.replace("$N + d0 - 128*i0 - 128,", "$N + d0 - 128*i0 - 64,")  # 64 rows past the end
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(past), "trn2")
    assert {d.rule for d in e.value.diagnostics} == {"out-of-bounds"} and "may reach N" in str(e.value)


def test_accesses_with_different_symbolic_offsets_in_one_loop_are_refused():
    """Whether two iterations meet could depend on N when the symbol terms do not cancel: refused (here safely
    so: the two halves never meet, but the argument over the range does not reach that far)."""
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_from_the_end, nki.spec(("N", 64), "float32", dims={"N": (256, 65536, 256)}), mirrored=True)
    assert {d.rule for d in e.value.diagnostics} == {"affine-dependence"}
    assert "other multiples of the family's dimensions" in str(e.value)


@nki.jit
def _halves_added(x):
    """Row tiles of x's first half plus the matching tiles of its second (index ``N/2 + 128*t``): two reads of x
    inside the loop with different multiples of N, one write to ``out``."""
    n, m = x.shape
    out = nl.ndarray((n // 2, m), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(m)[None, :]
    for t in nl.affine_range(n // 256):
        low = nl.load(x[t * 128 + i_p, i_f])
        high = nl.load(x[n // 2 + t * 128 + i_p, i_f])
        nl.store(out[t * 128 + i_p, i_f], value=nl.add(low, high))
    return out


def test_reads_with_different_symbolic_offsets_in_one_loop_are_proved():
    """A tensor the loop only reads is never half of a dependence (the rule pairs reads with writes), so its reads
    may carry different symbol terms; the loop's writes to ``out`` share theirs."""
    family = nki.trace(_halves_added, nki.spec(("N", 64), "float32", dims={"N": (256, 65536, 256)}))
    x = np.random.default_rng(2).standard_normal((768, 64)).astype(np.float32)
    np.testing.assert_array_equal(family.instantiate(x).compile("numpy").run({"x": x}), x[:384] + x[384:])


def test_an_equality_constraint_bounds_both_ways():
    """An equality is two inequalities: ``a + b == 5`` has no point with a, b in [0, 2], one with a, b in [0, 3],
    and ``a - b == 0`` still has one where ``a + b >= 3`` holds."""
    plus = ({"a": 1, "b": 1}, -5, True)
    assert not may_have_point([plus], {"a": (0, 2), "b": (0, 2)})
    assert may_have_point([plus], {"a": (0, 3), "b": (0, 3)})
    assert not may_have_point([({"a": 1}, -5, True)], {"a": (6, 9)})  # a == 5 below the box: refuted from above
    same = ({"a": 1, "b": -1}, 0, True)
    assert may_have_point([same, ({"a": 1, "b": 1}, -3, False)], {"a": (0, 2), "b": (0, 2)})


@nki.jit
def _rows_from(x, start):
    """The 128 rows of x from row ``start``: in bounds for every N >= 128 exactly when start is 0."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(x.shape[1])[None, :]
    nl.store(out[i_p, i_f], value=nl.load(x[start + i_p, i_f]))
    return out


def test_an_access_one_past_the_smallest_size_is_refused_by_the_proof_too():
    # rows 1..128 of a family with N >= 128: its last row is the smallest N itself. The proof's quick bound
    # (the index stays below the smallest size) must not take it as inside, so the proof's own refusal stands
    # beside the lowest instance's.
    nki.trace(_rows_from, rows(128, 1024), 0)
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.trace(_rows_from, rows(128, 1024), 1)
    assert [d.rule for d in e.value.diagnostics] == ["out-of-bounds", "out-of-bounds"]
    assert "at N = 128: " in e.value.diagnostics[0].message
    assert ("for some size of the family (N in 128..1024) the index d0 + 1 (operand 'src' %x[128, 512] in 'hbm') "
            "may reach N") in e.value.diagnostics[1].message
