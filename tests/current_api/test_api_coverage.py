"""docs/current_api_coverage.md stays true.

* Every public name of ``nki_dsl.current`` (``nki``), its ``language`` (``nl``) and ``isa`` (``nisa``), and every
  0.6 name they refuse, has a row; no name has two.
* A ``works`` row's name resolves and every test it cites exists and uses the name (``api_usage.py`` reads the
  test's source, following the kernels and helpers it names); a ``differs`` row likewise cites a test using it.
* A ``refused`` name resolves to a function raising ``NkiApiError`` with the quoted reason; a refused feature
  names a kernel of this file (``refuses_*``) that raises it.
* An ``absent`` name does not resolve.
* An enum row lists exactly the enum's members and values.

The kernels below also exercise the names no other test uses (the ``nisa.constants`` re-exports, the legacy
engine spellings, the top-level classes), the instruction return value, and the refusals of features."""

from __future__ import annotations

import ast
import re
import warnings
from enum import Enum
from pathlib import Path

import numpy as np
import pytest

import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
from nki_dsl.current import unmodelled
from nki_dsl.errors import NkiApiError, NkiVerificationError
from nki_dsl.trace.tensor import NkiTensor as TensorClass
from tests.current_api import api_usage

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "current_api_coverage.md"
STATUSES = ("works", "refused", "differs", "absent")
ROW = re.compile(r"^\| (?P<what>[^|]+?) \| (?P<status>\w+) \| (?P<evidence>.+) \|$")
ENUM_ROW = re.compile(r"^\| `(?P<what>nisa\.\w+)` \| (?P<members>[^|]+) \| (?P<status>\w+) \| (?P<evidence>.+) \|$")
NAME = re.compile(r"`((?:nki|nl|nisa)(?:\.\w+)+|t\.\w+)`")
REF = re.compile(r"tests/[\w/]+\.py::\w+")
SUMMARY = re.compile(r"^\| (?P<kind>names|enums|features) \| (?P<counts>\d+ \| \d+ \| \d+ \| \d+) \|$")
REFUSAL = re.compile(r'"(?P<reason>[^"]+)" \((?P<kernel>refuses_\w+)\)')
MODULES = {"nki": nki, "nl": nl, "nisa": nisa}
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def _rows():
    names, features, enums = [], [], []
    for line in DOC.read_text().splitlines():
        if SUMMARY.match(line) or line.startswith("| rows |"):
            continue
        if m := ENUM_ROW.match(line):
            enums.append((m["what"], m["members"].strip(), m["status"], m["evidence"].strip()))
        elif (m := ROW.match(line)) and m["status"] not in ("status", "members") and not set(m["what"]) <= {"-"}:
            what = m["what"].strip()
            row = (what, m["status"], m["evidence"].strip())
            (names if NAME.fullmatch(what) else features).append(row)
    return names, features, enums


NAMES, FEATURES, ENUMS = _rows()


def _resolve(name: str):
    """The object a row names (``t.reshape`` is the tensor method), or None when it does not resolve."""
    head, *attrs = name.strip("`").split(".")
    value = TensorClass if head == "t" else MODULES[head]
    for attr in attrs:
        try:
            value = getattr(value, attr)
        except AttributeError:
            return None
    return value


def _use_of(name: str) -> str:
    """What a test's source must use for ``name``: ``nl.exp``, or ``.reshape`` for a tensor method."""
    bare = name.strip("`")
    if bare in ("nki.language", "nki.isa"):  # the modules themselves: any use of them
        return {"nki.language": "nl", "nki.isa": "nisa"}[bare]
    return bare[1:] if bare.startswith("t.") else bare


def _check_refs(what: str, evidence: str, use: str | None) -> None:
    refs = REF.findall(evidence)
    assert refs, f"{what}: names no test (path::function)"
    for ref in refs:
        used = api_usage.uses(ref)
        assert used is not None, f"{what}: {ref} does not exist"
        if use is not None:
            assert api_usage.exercises(used, use), f"{what}: {ref} does not use {use}"


def test_the_page_has_its_tables():
    assert len(NAMES) > 200 and len(FEATURES) > 20 and len(ENUMS) == 7
    assert {r[1] for r in NAMES + FEATURES} | {r[2] for r in ENUMS} <= set(STATUSES)
    listed = [r[0].strip("`") for r in NAMES] + [r[0] for r in ENUMS]
    assert len(listed) == len(set(listed)), "a name is listed twice"


def test_the_summary_counts_the_rows():
    counts = {m["kind"]: [int(c) for c in m["counts"].split(" | ")]
              for m in map(SUMMARY.match, DOC.read_text().splitlines()) if m}  # fmt: skip
    tally = {kind: [sum(r[s] == status for r in rows) for status in STATUSES]
             for kind, rows, s in (("names", NAMES, 1), ("enums", ENUMS, 2), ("features", FEATURES, 1))}  # fmt: skip
    assert counts == tally


def test_every_public_and_every_refused_name_has_a_row():
    listed = {r[0].strip("`") for r in NAMES} | {r[0] for r in ENUMS}
    public = {f"{p}.{n}" for p, m in MODULES.items() for n in m.__all__}
    public |= {f"nisa.{n}" for n in unmodelled.ISA} | {f"nl.{n}" for n in unmodelled.LANGUAGE}
    public |= {f"nisa.constants.{n}" for n in nisa.constants.__all__}
    assert sorted(public - listed) == []


@pytest.mark.parametrize("name, status, evidence", NAMES, ids=[r[0].strip("`") for r in NAMES])
def test_a_name_row_is_true(name, status, evidence):
    value = _resolve(name)
    if status == "absent":
        assert value is None, f"{name} exists now: update docs/current_api_coverage.md"
        return
    assert value is not None, f"{name} does not resolve"
    if status == "refused":
        reason = re.fullmatch(r'"(.+)"', evidence)
        assert reason, f"{name}: a refusal quotes its reason"
        with pytest.raises(NkiApiError) as info:
            value(None)
        assert reason[1] in str(info.value)
        return
    assert getattr(value, "__module__", "") != unmodelled.__name__, f"{name} is a refusal"
    _check_refs(name, evidence, _use_of(name))


@pytest.mark.parametrize("feature, status, evidence", FEATURES,
                         ids=[re.sub(r"\W+", "_", r[0]).strip("_")[:60] for r in FEATURES])  # fmt: skip
def test_a_feature_row_is_true(feature, status, evidence):
    if status == "refused":
        m = REFUSAL.fullmatch(evidence)
        assert m, f"{feature}: a refused feature quotes its reason and names its refuses_* kernel"
        with pytest.raises(NkiApiError) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nki.jit(globals()[m["kernel"]])(X)
        assert m["reason"] in str(info.value)
    else:
        assert status in ("works", "differs"), f"{feature}: a feature is not {status}"
        _check_refs(feature, evidence, None)


def test_every_refusal_kernel_is_cited():
    cited = {m["kernel"] for _, _, e in FEATURES if (m := REFUSAL.fullmatch(e))}
    assert cited == {n for n in globals() if n.startswith("refuses_")}


def _members(text: str) -> dict[str, object]:
    pairs = [p.split("=", 1) for p in text.split(", ")]
    return {k: ast.literal_eval(v) for k, v in pairs}


@pytest.mark.parametrize("name, members, status, evidence", ENUMS, ids=[r[0] for r in ENUMS])
def test_an_enum_row_lists_its_members(name, members, status, evidence):
    enum = _resolve(f"`{name}`")
    assert isinstance(enum, type) and issubclass(enum, Enum)
    assert {m.name: m.value for m in enum} == _members(members)
    assert status == "works"
    _check_refs(name, evidence, name)


# ---------------------------------------------------------------------------------------------- small kernels


def test_constants_re_exports_the_enums():
    assert nisa.constants.engine is nisa.engine and nisa.constants.reduce_cmd is nisa.reduce_cmd
    assert nisa.constants.dge_mode is nisa.dge_mode and nisa.constants.oob_mode is nisa.oob_mode
    assert nisa.constants.dma_engine is nisa.dma_engine and nisa.constants.nc_version is nisa.nc_version
    assert nisa.constants.matmul_perf_mode is nisa.matmul_perf_mode


def test_legacy_engine_spellings_name_the_engines():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t, u = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf), nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_copy(dst=u, src=t, engine=nisa.scalar_engine)
        nisa.tensor_copy(dst=t, src=u, engine=nisa.gpsimd_engine)
        nisa.tensor_copy(dst=u, src=t, engine=nisa.vector_engine)
        nisa.tensor_copy(dst=t, src=u, engine=nisa.unknown_engine)
        tp = nl.ndarray((64, 128), x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=tp, data=t, engine=nisa.tensor_engine)
        nisa.tensor_copy(dst=u, src=t)
        nisa.dma_copy(dst=out, src=u)
        return out

    np.testing.assert_array_equal(nki.simulate(k)(X), X)
    assert (nisa.tensor_engine, nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine, nisa.unknown_engine) == (
        nisa.engine.tensor, nisa.engine.vector, nisa.engine.scalar, nisa.engine.gpsimd, nisa.engine.unknown)


def test_legacy_float_limits():
    assert (nl.fp32.min, nl.fp16.max) == (float(np.finfo(np.float32).min), 65504.0)
    assert nl.bf16.min == nl.bfp16.min == -3.3895313892515355e38  # bfloat16's lowest finite value


def test_top_level_classes_and_errors():
    @nki.jit
    def k(x):
        return x

    assert isinstance(k, nki.CurrentKernel) and isinstance(nki.simulate(k), nki.SimulatedKernel)
    assert nki.language is nl and nki.isa is nisa
    assert all(issubclass(e, nki.NkiError) for e in (nki.NkiApiError, nki.NkiTraceError, nki.NkiVerificationError))


def test_instructions_return_instructions_and_name_is_only_accepted():
    returned = []

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        returned.append(nisa.dma_copy(dst=t, src=x, name="load"))
        returned.append(nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, name="bump"))
        returned.append(nisa.dma_copy(dst=out, src=t, name="store"))
        return out

    np.testing.assert_array_equal(k(X), X + 1)
    assert [type(i) for i in returned] == [nisa.NkiInstruction] * 3  # as 0.6 does (for .depends_on)
    assert not hasattr(k, "with_schedule")


def test_two_cores_writing_the_same_shared_hbm_without_a_sync_op_are_refused():
    @nki.jit
    def both(x):
        out = nl.ndarray(x.shape[1:], x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape[1:], x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[nl.program_id(0)])
        nisa.dma_copy(dst=out, src=t)  # each core writes all of out, with its own values: a race
        return out

    pair = np.stack([X, -X])
    with pytest.raises(NkiVerificationError) as e:
        both[2](pair)
    assert [d.rule for d in e.value.diagnostics] == ["core-race"]
    np.testing.assert_array_equal(both(pair), X)  # on one core (no kernel[2]) nothing races


def test_kernels_the_0_3_restrictions_reject_run_here():
    @nki.jit
    def lax(x, sizes, *, scale=None):  # a keyword-only parameter and a list argument
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.private_hbm)  # an output outside shared HBM
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        if scale is not None:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(lax(X, [1, 2], scale=2.0), 2 * X)


# Kernels whose features are refused (the feature table cites each by name; each raises NkiApiError).


def _sbuf(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def refuses_oob_skip_at_a_register_offset(x):
    r = nisa.register_alloc()
    t = nl.ndarray((64, 64), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[64, 64], [1, 64]], offset=0, scalar_offset=r), oob_mode=nisa.oob_mode.skip)
    return x


def refuses_activation_load_reduce(x):
    t, r = _sbuf(x), nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=t, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=r, reduce_cmd=nisa.reduce_cmd.load_reduce)
    return x


def refuses_tensor_scalar_reduce_continuing(x):
    t, r = _sbuf(x), nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=r,
                              reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
    return x


def refuses_tensor_scalar_cumulative_continuing_after_idle(x):
    t = _sbuf(x)
    nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.add, imm0=0.0)  # sets the Vector registers
    nisa.exponential(dst=t, src=t)  # reduce_cmd=idle: may clobber them
    nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.add, imm0=0.0, reduce_cmd=nisa.reduce_cmd.reduce)
    return x


def refuses_select_reduce_load_reduce(x):
    t, r = _sbuf(x), nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    p = nl.ndarray(x.shape, nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=p, value=1)
    nisa.select_reduce(dst=t, predicate=p, on_true=t, on_false=0.0, reduce_res=r,
                       reduce_cmd=nisa.reduce_cmd.load_reduce)  # fmt: skip
    return x


def refuses_stream_shuffle_on_psum(x):
    p = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
    nisa.memset(dst=p, value=0.0)
    nisa.nc_stream_shuffle(dst=p, src=p, shuffle_mask=list(range(32)))
    return x


def refuses_range_select_of_three_axes(x):
    t, b = nl.ndarray((128, 4, 16), nl.float32, buffer=nl.sbuf), nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.memset(dst=b, value=0.0)
    nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=b, bound1=b)
    return x


def refuses_dynamic_range_with_a_register_start(x):
    start = nisa.register_alloc(2)
    for _ in nl.dynamic_range(start, 8):
        pass
    return x


def refuses_reshape_merging_a_strided_slice(x):
    t = nl.ndarray((128, 4, 16), x.dtype, buffer=nl.sbuf)
    t[:, :, 0:8].reshape((128, 32))
    return x


def refuses_reshape_merging_an_op_result(x):
    t = nl.ndarray((128, 4, 16), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nl.exp(t).reshape((128, 64))
    return x
