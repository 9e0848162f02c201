"""Shape-family IR text from outside: malformed symbol syntax is refused cleanly by the parser, the family's form is
checked when it is read, and every budget applies to the instantiated IR (a huge declared range is not itself a
refusal at load; a huge *call* is)."""

import pytest

import nki_dsl as nki
from kernels.softmax.kernel import softmax_kernel

ROWS = nki.spec(("N", 512), "float32", dims={"N": (1, 65536)})


@pytest.fixture(scope="module")
def text():
    return nki.trace(softmax_kernel, ROWS, target="trn2").text


def _edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize("old, new, message", [
    ("symbol $N in [1, 65536]", "symbol $N in [1]", "unexpected"),
    ("symbol $N in [1, 65536]", "symbol N in [1, 65536]", "unexpected"),
    ("symbol $N in [1, 65536]", "symbol $N in [1, 2.5]", "unexpected"),
    ("symbol $N in [1, 65536]", "symbol $N in [-1, 65536]", "unexpected"),
    ("symbol $N in [1, 65536]", "symbol $N in [9, 3]", "range 9..3 is not inside"),
    ("symbol $N in [1, 65536]", "symbol $N in [1, 99999999999999999]", "is not inside 0..1099511627776"),
    ("symbol $N in [1, 65536]", "symbol $N in [1, 9999999999999999999999]", "IR integers have at most 18"),
    ("symbol $N in [1, 65536]", "symbol $N in [1, 65536]\n  symbol $N in [1, 2]", "declared twice"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = ($N + 127) // 0", "divisor 0 is not a positive"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = ($M + 127) // 128", "$M is not declared"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = ($_0 + 127) // 128", "$_0 is not declared"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = (i0 + 127) // 128", "i0, which is not an earlier symbol"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = ($N + 127) / 128", "unexpected"),
    ("mask[$N - d0", "mask[$M - d0", "$M is not declared"),
    ("range(0, $_0, 1)", "range(0, $K, 1)", "$K is not declared"),
    ("f32[$N, 512] hbm)", "f32[$Q, 512] hbm)", "$Q is not declared"),
    ("f32[$N, 512] hbm)", "f32[$N$N, 512] hbm)", "unexpected"),
    ("f32[$N, 512] hbm)", "f32[$, 512] hbm)", "unexpected"),
])  # fmt: skip
def test_malformed_symbols_are_refused_by_the_parser(text, old, new, message):
    with pytest.raises(nki.NkiError) as e:
        nki.parse_family(_edit(text, old, new))
    assert message in str(e.value)
    assert isinstance(e.value, nki.NkiParseError | nki.NkiVerificationError)


@pytest.mark.parametrize("old, new, message", [
    ("%4 = nl.exp(x=%3)", "%4 = nl.exp(x=%3[d0, d1 + $N ; 128x512])", "indexes on-chip %3 with a dimension symbol"),
    (": f32[128, 512] sbuf", ": f32[$N, 512] sbuf", "only HBM tensors' dimensions may be symbolic"),
    ("symbol $N in [1, 65536]", "symbol $N in [1, 65536]\n  symbol $B in [1, 8]", "dimension B is no dimension of"),
    ("symbol $_0 = ($N + 127) // 128", "symbol $_0 = ($N - 300) // 128", "may be negative"),
    ("f32[$N, 512] shared_hbm loc(12)\n", "f32[$N, 512] shared_hbm loc(12)\n  %v = hbm.view(x=%0) : i32[$N, 512] "
     "shared_hbm loc(13)\n", "kernel.py:13: hbm.view: a dtype view's shape cannot use a dimension symbol"),
    ("f32[$N, 512] shared_hbm loc(12)\n", "f32[$N, 512] shared_hbm loc(12)\n  %v = hbm.reshape(x=%x) "
     "{shape = ($N, 256)} : f32[$N, 512] hbm loc(13)\n",
     "kernel.py:13: hbm.reshape: attribute shape = ['$N', 256] is not the result's shape ['$N', 512] symbol "
     "for symbol"),
    ("f32[$N, 512] shared_hbm loc(12)\n", "f32[$N, 512] shared_hbm loc(12)\n  %v = hbm.reshape(x=%x) : f32[512, 512] "
     "hbm loc(13)\n", "kernel.py:13: hbm.reshape: the reshape of a tensor with symbolic dimensions N to one with none "
     "may change the element count"),
])  # fmt: skip
def test_a_family_of_the_wrong_form_is_refused_when_read(text, old, new, message):
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_family(_edit(text, old, new))
    assert message in str(e.value)
    assert {d.rule for d in e.value.diagnostics} == {"shape-family"}


def test_parse_ir_and_parse_family_do_not_take_each_others_text(text):
    with pytest.raises(nki.NkiError, match="is a shape family"):
        nki.parse_ir(text)
    concrete = nki.trace(softmax_kernel, nki.spec((128, 512), "float32"), target="trn2").text
    with pytest.raises(nki.NkiError, match="declares no shape symbols"):
        nki.parse_family(concrete)


def test_a_huge_range_loads_but_every_instance_meets_the_budget(text):
    huge = nki.parse_family(_edit(text, "symbol $N in [1, 65536]", "symbol $N in [1, 1099511627776]"))
    assert huge.instantiate((256, 512)).text  # small calls of a huge family run
    with pytest.raises(nki.NkiVerificationError) as e:  # a shape nobody can allocate is refused before anything runs
        huge.instantiate((1 << 36, 512))
    assert {d.rule for d in e.value.diagnostics} == {"budget"}
    assert "at N = 68719476736" in str(e.value)
    tight = nki.parse_family(text, budget=nki.IRBudget(max_iterations=100))
    tight.instantiate((256, 512))  # 2 tiles x 8 ops
    with pytest.raises(nki.NkiVerificationError, match="max_iterations"):
        tight.instantiate((65536, 512))  # the budget given to parse_family applies to each instance


def test_a_symbolic_hbm_index_is_proved_or_refused(text):
    """An HBM index may hold a symbol (a tile starting at a symbolic row); the proof decides it over the range."""
    last_rows = text.replace("%x[d0 + 128*i0, d1 ; 128x512]", "%x[$N - d0 - 128*i0 - 1, d1 ; 128x512]")
    nki.prove_family(nki.parse_family(last_rows), "trn2")  # the rows in reverse, masked as the rows are: in bounds
    past = text.replace("%x[d0 + 128*i0, d1 ; 128x512]", "%x[d0 + $N + 128*i0, d1 ; 128x512]")
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(past), "trn2")
    assert "out-of-bounds" in {d.rule for d in e.value.diagnostics} and "may reach N" in str(e.value)


def test_proving_a_parsed_family_refuses_an_unprovable_edit(text):
    nki.prove_family(nki.parse_family(text), "trn2")
    unmasked = text.replace(" mask[$N - d0 - 128*i0 >= 1]", "")
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.prove_family(nki.parse_family(unmasked), "trn2")
    assert "out-of-bounds" in {d.rule for d in e.value.diagnostics}
    assert "N in 1..65536" in str(e.value)


def test_a_long_chain_of_derived_symbols_is_checked_once_per_line(monkeypatch):
    """Each symbol line is checked against the ones before it once: the reader's work grows linearly with the
    table (it re-checked the whole table per line, 18 s for 5,000 hostile lines)."""
    from nki_dsl.ir import parser, symbols

    calls = []
    def counted(s, earlier, intervals=None):
        calls.append(s.name)
        symbols.check_symbol(s, earlier, intervals)

    monkeypatch.setattr(parser, "check_symbol", counted)
    chain = "\n  ".join(f"symbol $M{i} = ${'N' if i == 0 else f'M{i - 1}'} + 1" for i in range(300))
    text = ("kernel k(%x: f32[$N, 512] hbm) -> (%0) {\n  symbol $N in [1, 10]\n  " + chain + "\n  grid ()\n"
            '  source "k.py"\n  %0 = alloc() : f32[$N, 512] shared_hbm loc(1)\n}\n')
    nki.parse_family(text)
    assert len(calls) == 301


# -- symbols with a step (a range of multiples) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def stepped():
    from kernels.matmul.kernel import matmul_tiled

    k = {"K": (128, 4096, 128)}
    return nki.trace(matmul_tiled, nki.spec(("K", "M"), "float32", dims=k | {"M": (128, 4096, 128)}),
                     nki.spec(("K", "N"), "float32", dims=k | {"N": (512, 8192, 512)}), target="trn2").text  # fmt: skip


def test_a_stepped_symbol_round_trips_through_both_readers(stepped):
    from nki_dsl.ir.fastread import Reader

    from .test_fastread import _both

    assert "symbol $M in [128, 4096] step 128" in stepped
    for t in (stepped, " ".join(stepped.split())):
        Reader(t).start()  # the fast reader reads it (no fallback to lark)
        assert _both(t) == (stepped, stepped)
    family = nki.parse_family(stepped)
    assert family.text == stepped and family.dims["M"] == (128, 4096, 128)


@pytest.mark.parametrize("new, message", [
    ("symbol $M in [128, 4096] step 0", "the step 0 is not an integer in 1..1099511627776"),
    ("symbol $M in [128, 4096] step 100", "does not start and end at multiples of its step 100"),
    ("symbol $M in [100, 4096] step 128", "does not start and end at multiples"),
    ("symbol $M in [128, 4096] step -128", "unexpected"),
    ("symbol $M in [128, 4096] step 2.5", "unexpected"),
    ("symbol $M in [128, 4096] step", "unexpected"),
    ("symbol $M in [128, 4096] step 128 step 128", "unexpected"),
    ("symbol $M in [128, 4096] step 9999999999999999999999", "IR integers have at most 18"),
    ("symbol $M in [128, 4096] step 1099511627777", "is not an integer in 1..1099511627776"),
])  # fmt: skip
def test_malformed_steps_are_refused_by_the_parser(stepped, new, message):
    with pytest.raises(nki.NkiError) as e:
        nki.parse_family(_edit(stepped, "symbol $M in [128, 4096] step 128", new))
    assert message in str(e.value)
    assert isinstance(e.value, nki.NkiParseError | nki.NkiVerificationError)


def test_a_derived_symbol_has_no_step(stepped):
    with pytest.raises(nki.NkiParseError, match="unexpected"):
        nki.parse_family(_edit(stepped, "symbol $_0 = ($M) // 128", "symbol $_0 = ($M) // 128 step 2"))


def test_a_call_off_the_step_is_refused_and_budgets_apply_to_instances(stepped):
    family = nki.parse_family(stepped)
    with pytest.raises(nki.NkiShapeFamilyError, match="dimension M = 200 is not a multiple of 128"):
        family.instantiate((256, 200), (256, 512))
    tight = nki.parse_family(stepped, budget=nki.IRBudget(max_iterations=200))
    tight.instantiate((256, 256), (256, 512))
    with pytest.raises(nki.NkiVerificationError, match="max_iterations"):
        tight.instantiate((4096, 4096), (4096, 8192))


# -- a reshape of a tensor with a symbolic dimension ----------------------------------------------------------------
import nki_dsl.language as nl  # noqa: E402


@nki.jit
def _split_columns(x):
    """x [N, 256] viewed as [N, 2, 128]: each row tile moved as 2 x 128 columns."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0]
    xv, ov = x.reshape((n, 2, 128)), out.reshape((n, 2, 128))
    i_p, i_j, i_c = nl.arange(128)[:, None, None], nl.arange(2)[None, :, None], nl.arange(128)[None, None, :]
    for t in nl.affine_range((n + 127) // 128):
        rows = t * 128 + i_p
        nl.store(ov[rows, i_j, i_c], value=nl.load(xv[rows, i_j, i_c], mask=rows < n), mask=rows < n)
    return out


@pytest.fixture(scope="module")
def reshaped():
    return nki.trace(_split_columns, nki.spec(("N", 256), "float32", dims={"N": (1, 4096)}), target="trn2").text


def test_a_reshape_keeping_the_symbol_round_trips_and_runs(reshaped):
    import numpy as np

    from nki_dsl.ir.fastread import Reader

    from .test_fastread import _both

    assert "{shape = ($N, 2, 128)}" in reshaped
    Reader(reshaped).start()
    assert _both(reshaped) == (reshaped, reshaped)
    family = nki.parse_family(reshaped)
    nki.prove_family(family, "trn2")
    x = np.arange(300 * 256, dtype=np.float32).reshape(300, 256)
    np.testing.assert_array_equal(family.instantiate(x).compile("numpy").run({"x": x}), x)


RESHAPE = "{shape = ($N, 2, 128)} : f32[$N, 2, 128]"


@pytest.mark.parametrize("new, message", [
    ("{shape = (2, $N, 128)} : f32[2, $N, 128]", None),  # still keeps N as a dimension
    ("{shape = ($N, 2, 128)} : f32[$N, 256, 1]", "symbol for symbol"),
    ("{shape = (512, 128)} : f32[512, 128]", "may change the element count"),
])  # fmt: skip
def test_a_reshape_that_may_change_the_count_is_refused(reshaped, new, message):
    text = _edit(reshaped, RESHAPE, new)
    if message is None:
        nki.parse_family(text)  # the form is fine (the proof then decides the accesses)
        return
    with pytest.raises(nki.NkiError) as e:
        nki.parse_family(text)
    assert message in str(e.value)


def test_no_other_attribute_may_name_a_symbol(text):
    with pytest.raises(nki.NkiVerificationError, match="attribute 'axis' uses a dimension symbol; only a reshape's"):
        nki.parse_family(_edit(text, "{axis = (1,)", "{axis = ($N,)"))


def test_an_affine_attribute_naming_a_symbol_is_refused_at_its_line(text):
    """An iota's ``expr`` over ``$N`` would make an on-chip tile's values depend on the call's shape: refused, with
    the op's source line and name (not only the message)."""
    iota = "    %9 = nisa.iota() {expr = 4*d0 + $N, shape = (128, 4)} : i32[128, 4] sbuf loc(19)\n"
    at = text.index("    %1 = nl.load")
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_family(text[:at] + iota + text[at:])
    [d] = e.value.diagnostics
    assert (d.loc.line, d.op) == (19, "nisa.iota")
    assert d.message == "attribute 'expr' uses a dimension symbol; only masks and loop stops may"


@pytest.mark.parametrize("index, proved", [
    ("d0 + 128*i0 + 999999999999999999*$N - 999999999999999999*$N", True),  # the huge terms cancel
    ("d0 + 128*i0 + 999999999999999999*$N - 999999999999999998*$N", False),  # N past the start: out of bounds
    ("d0 + 128*i0 + 999999999999999999*$_0 - 999999999999999999*$_0", True),
    ("d0 + 128*i0 - 999999999999999999*$N", False),
])  # fmt: skip
def test_hostile_symbolic_indices_are_decided_quickly(text, index, proved):
    """Coefficients at the IR's 18-digit limit in symbolic HBM indices: exact integer arithmetic, settled by the
    proof (Python ints do not overflow; the search's node budget bounds the work)."""
    family = nki.parse_family(_edit(text, "%x[d0 + 128*i0, d1 ; 128x512]", f"%x[{index}, d1 ; 128x512]"))
    if proved:
        nki.prove_family(family, "trn2")
    else:
        with pytest.raises(nki.NkiVerificationError, match="out-of-bound"):
            nki.prove_family(family, "trn2")


BIG = "999999999999999999"  # the largest IR integer (18 digits)


@pytest.mark.parametrize("length", [1, 5000])
def test_a_derived_symbol_past_2_to_the_62_is_refused_when_read(text, length):
    # A chain of products once grew without limit: 200 links made a loop stop of 3,600 digits in a 3,730-character
    # message, 5000 made Python refuse to print the number (ValueError out of the verifier) and the proof never end.
    chain = "\n".join(f"  symbol $c{k} = {BIG}*${'N' if k == 0 else f'c{k - 1}'}" for k in range(length))
    grown = _edit(text, "  symbol $_0", chain + "\n  symbol $_0")
    grown = grown.replace("range(0, $_0, 1)", f"range(0, $c{length - 1}, 1)")
    with pytest.raises(nki.NkiParseError) as e:
        nki.parse_family(grown)
    assert str(e.value) == (f"<nkir>:3: symbol c0: its definition {BIG}*N may reach 65535999999999999934464 over "
                            f"the family's ranges, past the bound 4611686018427387904 (2**62) on a dimension's value")


def test_derived_symbols_up_to_2_to_the_62_are_read(text):
    wide = _edit(text, "symbol $N in [1, 65536]", "symbol $N in [1, 1099511627776]")
    ok = _edit(wide, "  symbol $_0", "  symbol $W = 4194303*$N\n  symbol $_0")  # up to 2**62 - 2**40
    assert nki.parse_family(ok).instantiate((256, 512)).text
    with pytest.raises(nki.NkiParseError, match="symbol W: its definition 4194305\\*N may reach 4611687117939015680"):
        nki.parse_family(_edit(wide, "  symbol $_0", "  symbol $W = 4194305*$N\n  symbol $_0"))


def test_a_refusal_lists_at_most_fifty_diagnostics_and_keeps_them_all(text):
    # 3,000 symbols no parameter binds once made a 329 KB message, which the Hub passes on whole in its refusal
    unbound = "\n".join(f"  symbol $b{k} in [1, 2]" for k in range(300))
    with pytest.raises(nki.NkiVerificationError) as e:
        nki.parse_family(_edit(text, "  symbol $_0", unbound + "\n  symbol $_0"))
    assert len(e.value.diagnostics) == 300
    lines = str(e.value).splitlines()
    assert lines[:2] == [f"kernel.py:0: kernel: dimension b{k} is no dimension of a parameter, so a call cannot bind "
                         f"it from its arrays" for k in (0, 1)]  # fmt: skip
    assert len(lines) == 51 and lines[-1] == ("... and 250 more diagnostics (NkiVerificationError.diagnostics holds "
                                              "every one)")  # fmt: skip
