"""Budgets for untrusted IR: each hostile text from issue 7 is refused by name before anything compiles, the
defaults fit every real kernel, and a caller can tighten each budget."""

from __future__ import annotations

import dataclasses

import pytest

import nki_dsl as nki
from nki_dsl.errors import NkiApiError, NkiParseError, NkiVerificationError
from nki_dsl.ir.budget import DEFAULT_BUDGET, IRBudget
from nki_dsl.ir.parser import parse_kernel
from nki_dsl.passes.verifier import check
from nki_dsl.verify.budgets import measure
from tests.security.corpus import seeds

HEAD = ('kernel k(%a: f32[128, 512] hbm) -> (%c) {\n  grid GRID\n  source "k.py"\n'
        "  %c = alloc() : f32[128, 512] hbm loc(2)\n")
LOAD = "%t = nl.load(src=%a) : f32[128, 512] sbuf loc(3)"
STORE = "nl.store(dst=%c, value=%t) loc(4)"


def kernel_text(body: str, grid: str = "()") -> str:
    return HEAD.replace("GRID", grid) + body + "}\n"


def refusal(text: str, budget: IRBudget | None = None) -> NkiVerificationError:
    with pytest.raises(NkiVerificationError) as info:
        nki.parse_ir(text, budget=budget)
    (d,) = [d for d in info.value.diagnostics if d.rule == "budget"][:1]
    return d


def test_the_base_text_runs():
    traced = nki.parse_ir(kernel_text(f"  {LOAD}\n  {STORE}\n"))
    assert traced.compile().run({"a": __import__("numpy").ones((128, 512), "float32")}).shape == (128, 512)


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        (kernel_text(f"  {LOAD}\n  {STORE}\n", grid="(1000000000, 1000000000)"), "max_iterations",
         "1,000,000,000,000,000,000"),
        (kernel_text(f"  affine i0 = range(0, 1000000, 1) loc(3) {{\n    affine i1 = range(0, 1000000, 1) loc(3) {{\n"
                     f"      {LOAD}\n      {STORE}\n    }}\n  }}\n"),
         "max_iterations", "1,000,000,000,001"),
        (kernel_text("  %big = alloc() : f32[1099511627776] hbm loc(3)\n  " + STORE.replace("%t", "%a") + "\n"),
         "max_tensor_bytes", "4,398,046,511,104"),
        (kernel_text("  %big = alloc() : f32[128, 8388608] sbuf loc(3)\n  " + STORE.replace("%t", "%a") + "\n"),
         "max_tensor_bytes (the target's sbuf holds 29,360,128)", "4,294,967,296"),
        (kernel_text("".join(f"  %b{k} = alloc() : f32[1073741824] hbm loc(3)\n" for k in range(5))
                     + "  " + STORE.replace("%t", "%a") + "\n"), "max_hbm_bytes", "17,180,393,472"),
    ],
)  # fmt: skip
def test_hostile_work_and_memory_are_refused_by_name(text, field, value):
    d = refusal(text)
    assert d.message.startswith(f"budget {field} exceeded: ")
    assert f" is {value}, the budget allows " in d.message


def test_fifty_nested_loops_are_a_budget_refusal_not_a_syntax_error():
    depth = 50
    body = "".join(f"{'  ' * (k + 1)}affine i{k} = range(0, 1, 1) loc(3) {{\n" for k in range(depth))
    body += "  " * (depth + 1) + LOAD + "\n" + "  " * (depth + 1) + STORE + "\n"
    body += "".join(f"{'  ' * (k + 1)}}}\n" for k in reversed(range(depth)))
    d = refusal(kernel_text(body))
    assert "budget max_loop_depth exceeded: loop i8's nesting depth is 9, the budget allows 8" in d.message
    assert d.loc.line == 13


def test_a_huge_mask_is_refused_before_it_is_built():
    mask = ", ".join(["d0 >= 0"] * 150_000)
    d = refusal(kernel_text(f"  {LOAD}\n  nl.store(dst=%c, value=%t) mask[{mask}] loc(4)\n"))
    assert "budget max_expression_terms exceeded: the constraints of a mask (at least) is 257" in d.message
    assert d.loc.line == 6
    terms = " + ".join(["d0"] * 1000)
    d = refusal(kernel_text(f"  {LOAD.replace('%a)', f'%a[{terms}, d1 ; 128x512])')}\n  {STORE}\n"))
    assert "the terms of an expression (at least) is 257" in d.message


def test_ops_text_strings_and_values_have_budgets():
    many = "".join(f"  %t{k} = nl.load(src=%a) : f32[128, 512] sbuf loc(3)\n" for k in range(101))
    assert "the number of ops and loops is 101, the budget allows 100" in refusal(
        kernel_text(many + "  " + STORE.replace("%t", "%t0") + "\n"), IRBudget(max_ops=100)).message  # fmt: skip
    text = kernel_text(f"  {LOAD}\n  {STORE}\n")
    d = refusal(text, IRBudget(max_text_bytes=100))
    assert d.message == (f"budget max_text_bytes exceeded: the IR text's size in bytes is {len(text)}, the budget "
                         "allows 100")
    long_name = text.replace('"k.py"', '"' + "k" * 5000 + '.py"')
    assert "the string at column 10's length is 5,003" in refusal(long_name, IRBudget(max_string_chars=4096)).message
    nested = text.replace('source "k.py"', 'source "k.py"\n  const "c" = ' + "(" * 500 + ")" * 500)
    assert "a tuple's nesting depth is 9, the budget allows 8" in refusal(nested).message
    assert "the grid's rank is 5" in refusal(kernel_text(f"  {LOAD}\n  {STORE}\n", grid="(1, 1, 1, 1, 1)")).message


def test_integers_beyond_64_bits_are_a_parse_error():
    text = kernel_text(f"  {LOAD}\n  {STORE}\n").replace("loc(4)", "loc(" + "9" * 5000 + ")")
    with pytest.raises(NkiParseError, match="the integer at column 34 has 5000 digits; IR integers have at most 18"):
        nki.parse_ir(text)


def test_the_verifier_applies_a_budget_to_ir_built_in_python():
    kernel = parse_kernel(kernel_text(f"  {LOAD}\n  {STORE}\n", grid="(64,)"))
    check(kernel, nki.get_target("trn2"))  # traced kernels carry no budget
    with pytest.raises(NkiVerificationError, match="budget max_iterations exceeded: .* is 128, the budget allows 100"):
        check(kernel, nki.get_target("trn2"), budget=IRBudget(max_iterations=100))


def test_measure_sums_the_iterations_of_every_op_as_the_check_does_exactly_at_the_limit():
    """``measure`` is what the defaults are checked against: it must count what the check counts (64 grid
    points x 3 ops = 192, not the last op's 64), and 192 is allowed by a budget of 192 but not of 191."""
    kernel = parse_kernel(kernel_text(f"  {LOAD}\n  {STORE}\n", grid="(64,)"))
    assert measure(kernel)["iterations"] == 192
    check(kernel, nki.get_target("trn2"), budget=IRBudget(max_iterations=192))
    with pytest.raises(NkiVerificationError, match="max_iterations exceeded: .* is 192, the budget allows 191"):
        check(kernel, nki.get_target("trn2"), budget=IRBudget(max_iterations=191))


def test_hbm_bytes_count_the_parameters_and_hbm_tensors_not_on_chip_tiles_or_reshape_views():
    """256 KiB for %a, 256 KiB for %c: the SBUF tile %t and the reshape %v (a view of %c) take no HBM of their own."""
    view = "%v = hbm.reshape(x=%c) {shape = (256, 256)} : f32[256, 256] hbm loc(5)"
    kernel = parse_kernel(kernel_text(f"  {LOAD}\n  {STORE}\n  {view}\n"))
    assert measure(kernel)["hbm_bytes"] == 2 * 128 * 512 * 4


def _nested(depth: int) -> str:
    body = "".join(f"{'  ' * (k + 1)}affine i{k} = range(0, 2, 1) loc(3) {{\n" for k in range(depth))
    body += "  " * (depth + 1) + LOAD + "\n" + "  " * (depth + 1) + STORE + "\n"
    return kernel_text(body + "".join(f"{'  ' * (k + 1)}}}\n" for k in reversed(range(depth))))


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_measure_counts_the_nesting_depth_and_the_iterations_of_the_loops(depth):
    # the measure the defaults are checked against (test_the_defaults_fit_every_real_kernel) is the one the budget
    # refuses on: depth loops of 2 trips around a load and a store (each run 2**depth times) after the output's
    # alloc (run once)
    m = measure(parse_kernel(_nested(depth)))
    assert (m["loop_depth"], m["iterations"], m["ops"]) == (depth, 1 + 2 * 2**depth, 3 + depth)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(IRBudget)])
def test_the_defaults_fit_every_real_kernel(field):
    """The tutorials' and the kernel library's kernels, traced and lowered, measured against each default."""
    measured = {"max_ops": "ops", "max_loop_depth": "loop_depth", "max_grid_rank": "grid_rank",
                "max_iterations": "iterations", "max_tensor_bytes": "tensor_bytes", "max_hbm_bytes": "hbm_bytes",
                "max_expression_terms": "expression_terms"}  # fmt: skip
    for seed in seeds():
        kernel = nki.parse_ir(seed.text).ir  # parses within every default
        if field in measured:
            assert measure(kernel)[measured[field]] <= getattr(DEFAULT_BUDGET, field), (seed.name, field)
        elif field == "max_text_bytes":
            assert len(seed.text.encode()) * 100 <= DEFAULT_BUDGET.max_text_bytes


def test_budgets_are_checked_values():
    with pytest.raises(NkiApiError, match="IRBudget.max_ops must be an int >= 0, not -1"):
        IRBudget(max_ops=-1)
    assert nki.IRBudget is IRBudget


def test_the_deepest_kernel_the_default_budget_allows_compiles_and_runs_on_every_backend():
    """Grid rank 4 and 8 nested loops around masked ops: the generated code stays under CPython's 20 nested
    blocks, so the budget's refusal comes before the compiler's SyntaxError could."""
    import numpy as np

    depth = DEFAULT_BUDGET.max_loop_depth
    body = "".join(f"{'  ' * (k + 1)}affine i{k} = range(0, 1, 1) loc(3) {{\n" for k in range(depth))
    pad = "  " * (depth + 1)
    body += (f"{pad}%t = nl.load(src=%a) mask[d0 <= 99] : f32[128, 512] sbuf loc(3)\n"
             f"{pad}%u = nl.exp(x=%t) mask[d0 <= 99, d1 >= pid3] : f32[128, 512] sbuf loc(3)\n"
             f"{pad}nl.store(dst=%c, value=%u) mask[d0 <= 99] loc(4)\n")  # fmt: skip
    body += "".join(f"{'  ' * (k + 1)}}}\n" for k in reversed(range(depth)))
    text = kernel_text(body, grid="(1, 1, 1, 2)").replace("hbm loc(2)", "shared_hbm loc(2)")
    a = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
    for backend in nki.backend_names():
        out = nki.parse_ir(text).compile(backend=backend).run({"a": a})
        # the last instance (pid3 = 1) masks column 0 off: its exp tile keeps the poison there, and is stored
        # (XLA's exp, on the jax backend, is within two fp32 ulps of NumPy's rather than equal to it)
        rtol = 3e-7 if backend == "jax" else 0
        np.testing.assert_allclose(out[:100, 1:], np.exp(a[:100, 1:]), rtol=rtol, atol=0)
        assert np.isnan(out[:100, 0]).all()


def test_an_access_view_is_budgeted_at_the_fp32_the_engines_compute_in():
    """bf16 [128, 512] tensors take 131,072 bytes, within a 200,000-byte budget, but each access view of them is a
    [128, 512] fp32 tile on the engines (262,144 bytes): each op's views are refused, by operand, at their line."""
    text = kernel_text(f"  {LOAD}\n  {STORE}\n").replace("f32", "bf16")
    with pytest.raises(NkiVerificationError) as info:
        nki.parse_ir(text, budget=IRBudget(max_tensor_bytes=200_000))
    found = [(d.loc.line, d.op, d.message) for d in info.value.diagnostics]
    view = ("budget max_tensor_bytes exceeded: operand '{}' view [128, 512] in bytes (at 4 per element) is "
            "262,144, the budget allows 200,000")  # fmt: skip
    assert found == [(3, "nl.load", view.format("src")), (4, "nl.store", view.format("dst")),
                     (4, "nl.store", view.format("value"))]  # fmt: skip
