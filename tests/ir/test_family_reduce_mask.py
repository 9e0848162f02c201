"""A reduction masked to a symbolic number of columns (``bn_stats`` over the first K of 512, K a shape symbol:
layernorm_linear's width families, kernels/linear/widths.py): the mask becomes the op's ``reduce_mask``, which a
family may hold (verify/family.py, form (c)); its text round-trips, it is proved, and an instance computes what the
concrete kernel for that K computes."""

import copy

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.ir.nodes import Op
from nki_dsl.verify.family import check_form


@nki.jit
def _stats(x):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    k = x.shape[1]
    i_p, i_f = nl.arange(128)[:, None], nl.arange(512)[None, :]
    rows = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32)
    nisa.dma_copy(dst=rows[i_p, i_f], src=x[i_p, i_f], mask=i_f < k)
    st = nisa.bn_stats(rows[i_p, i_f], mask=i_f < k, dtype=nl.float32)
    nl.store(out[i_p, nl.arange(6)[None, :]], value=st)
    return out


@pytest.fixture(scope="module")
def family():
    return nki.trace(_stats, nki.spec((128, "K"), "float32", dims={"K": (1, 512)}), target="trn2")


def test_a_symbolic_reduce_mask_round_trips_and_is_proved(family):
    assert "reduce_mask = [$K - d1 >= 1]" in family.text
    parsed = nki.parse_family(family.text)
    assert parsed.text == family.text
    nki.prove_family(parsed, "trn2")


@pytest.mark.parametrize("k", [1, 164, 300, 512])
def test_an_instance_computes_the_concrete_kernels_statistics(family, k):
    x = (2 * np.random.default_rng(k).standard_normal((128, k)) + 0.5).astype(np.float32)
    got = family.instantiate(x).compile("numpy").run({"x": x})
    np.testing.assert_array_equal(got, _stats(x))
    np.testing.assert_allclose(got[:, 1], x[:, 0::2].mean(axis=1), rtol=1e-5, atol=1e-6)


def test_an_undeclared_symbol_in_a_reduce_mask_is_refused(family):
    text = family.text.replace("reduce_mask = [$K - d1 >= 1]", "reduce_mask = [$Z - d1 >= 1]")
    with pytest.raises(nki.NkiError, match="reduce_mask.: shape symbol \\$Z is not declared"):
        nki.parse_family(text)


def test_a_reduce_mask_built_with_an_undeclared_symbol_is_refused_at_its_op(family):
    # IR built in Python skips the parser's check above: the family's form check refuses it too, naming the op
    ir = copy.deepcopy(family.ir)
    (op,) = [s for s, _ in ir.walk() if isinstance(s, Op) and s.name == "nisa.bn_stats"]
    op.attrs["reduce_mask"] = op.attrs["reduce_mask"].rename({"$K": "$Z"})
    (diag,) = check_form(ir)
    assert (diag.rule, diag.op, diag.loc) == ("shape-family", "nisa.bn_stats", op.loc)
    assert diag.message == "attribute 'reduce_mask' uses $Z, which is not a declared symbol"
