"""nisa enumerations and target queries: engine selectors, reduce_cmd, DMA modes, nc_version/get_nc_version.
The values are NKI's (reference/nki.md §2.3), so kernels that pass them as ints or names behave the same."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from tests.backend_fixture import backend_independent
from tests.isa.support import F32, assert_close, f32, rand, run_tiles


@backend_independent
def test_engine_values_match_nki():
    assert {e.name: int(e) for e in nisa.engine} == {
        "unknown": 0, "tensor": 1, "scalar": 2, "gpsimd": 3, "vector": 5, "sync": 6,
    }  # fmt: skip


@backend_independent
def test_engine_selectors_are_engine_members():
    selectors = {
        nisa.tensor_engine: "tensor", nisa.vector_engine: "vector", nisa.scalar_engine: "scalar",
        nisa.gpsimd_engine: "gpsimd", nisa.unknown_engine: "unknown",
    }  # fmt: skip
    for member, name in selectors.items():
        assert member is nisa.engine[name]


@backend_independent
def test_command_and_mode_enums_have_nkis_members():
    assert [m.name for m in nisa.reduce_cmd] == ["idle", "reset", "reset_reduce", "reduce"]
    assert {m.name for m in nisa.dge_mode} == {"none", "swdge", "hwdge", "unknown"}
    assert {m.name for m in nisa.oob_mode} == {"error", "skip"}


@backend_independent
def test_nc_version_orders_generations_and_the_default_target_is_trn2():
    assert nisa.nc_version.gen2 < nisa.nc_version.gen3 < nisa.nc_version.gen4
    assert nisa.get_nc_version() is nisa.nc_version.gen3


def test_a_kernel_can_branch_on_the_nc_version_at_trace_time():
    # A gen3+ kernel transposes with a DMA, an older one on the Tensor engine; both give a.T.
    def body(x):
        if nisa.get_nc_version() >= nisa.nc_version.gen3:
            return nisa.dma_transpose(x)
        return nisa.nc_transpose(x)

    a = rand((64, 96), seed=1)
    np.testing.assert_array_equal(run_tiles(body, a), a.T)


@pytest.mark.parametrize("engine", [nisa.engine.gpsimd, "gpsimd", 3])
def test_engine_may_be_given_as_member_name_or_value(engine):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_copy(nl.load(a), engine=engine))
        return out

    a = rand((32, 8), seed=2)
    np.testing.assert_array_equal(kernel(a), a)
    assert 'engine = "gpsimd"' in str(nki.trace(kernel, a))


@pytest.mark.parametrize("engine, pattern", [
    (nisa.tensor_engine, r"nisa\.tensor_scalar.*engine=tensor is not supported.*vector, scalar, gpsimd"),
    (42, r"nisa\.tensor_scalar.*engine=42 is not a nisa\.engine"),
])  # fmt: skip
@backend_independent
def test_engine_errors_name_the_op_and_the_engines_it_runs_on(engine, pattern):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_scalar(nl.load(a), np.add, 1.0, engine=engine))
        return out

    with pytest.raises(nki.NkiError, match=pattern):
        kernel(rand((32, 8)))


def test_reduce_cmd_may_be_given_by_name():
    data = rand((16, 32), seed=3)

    def body(x):
        acc = nl.ndarray((16, 1), dtype=nl.float32)
        nisa.activation(np.square, x, reduce_op=np.add, reduce_res=acc, reduce_cmd="reset_reduce")
        return acc

    assert_close(run_tiles(body, data), np.square(f32(data).astype(np.float64)).sum(1, keepdims=True), F32,
                 rtol=1e-5, atol=1e-5)  # fmt: skip


@backend_independent
def test_an_unknown_reduce_cmd_is_rejected_naming_the_op():
    def body(x):
        acc = nl.ndarray((16, 1), dtype=nl.float32)
        nisa.activation(np.exp, x, reduce_op=np.add, reduce_res=acc, reduce_cmd="accumulate")
        return acc

    with pytest.raises(nki.NkiError, match=r"nisa\.activation.*reduce_cmd='accumulate'.*reset_reduce"):
        run_tiles(body, rand((16, 32)))
