"""The current API's entry points and diagnostics: ``nki.simulate(kernel)`` callables, ``kernel[lnc]``,
``nki.jit`` options, and errors that name the kernel line, the op and the rule (the verifier's messages are the
same for both generations)."""

import re
import warnings

import numpy as np
import pytest

import nki_dsl
import nki_dsl.current as nki
import nki_dsl.current.isa as nisa
import nki_dsl.current.language as nl
import nki_dsl.language as lnl
from nki_dsl.errors import NkiApiError, NkiError, NkiTraceError, NkiVerificationError
from tests.current_api.kernel_io import out as _out
from tests.current_api.kernel_io import sbuf as _sbuf

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


@nki.jit
def scale(x, factor=2.0):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_simulate_callable_launches_like_the_kernel():
    sim = nki.simulate(scale)
    np.testing.assert_array_equal(sim(X, factor=3.0), 3 * X)  # keyword arguments
    assert sim.profile.latency_us > 0
    np.testing.assert_array_equal(nki.cpu_simulate(scale)[1](X), 2 * X)


def test_simulate_with_arguments_is_the_projects_form():
    out, profile = nki.simulate(scale, X, target="trn3")
    np.testing.assert_array_equal(out, 2 * X)
    assert profile.latency_us > 0


def test_outputs_written_into_passed_arrays():
    @nki.jit
    def into(x, out):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.activation(dst=t, op=nl.exp, data=t)
        nisa.dma_copy(dst=out, src=t)

    x = X / 1e4
    out = np.zeros_like(x)
    assert nki.simulate(into)(x, out) is None
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)


def test_plain_function_calling_jit_sub_kernels():
    @nki.jit
    def load(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        return t

    def top(x):  # not decorated: production libraries compose @nki.jit helpers this way
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = load(x)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(nki.simulate(top)(X), 2 * X)


def test_lnc2_program_id_splits_the_work():
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        assert nl.num_programs() == 2 and nl.program_ndim() == 1
        half = x.shape[1] // 2
        start = nl.program_id(0) * half
        t = nl.ndarray((128, half), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, nl.ds(start, half)])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out[:, nl.ds(start, half)], src=t)
        return out

    np.testing.assert_array_equal(halves[2](X), X + 1)
    np.testing.assert_array_equal(nki.simulate(halves)[2](X), X + 1)
    # §2.7 spells it simulate(k[2]): the launch brings its LNC degree, and it is not given twice
    sim = nki.simulate(halves[2])
    np.testing.assert_array_equal(sim(X), X + 1)
    assert len(sim.core_profiles) == 2
    with pytest.raises(NkiApiError, match="given once"):
        sim[2]


@pytest.mark.parametrize("bad", [3, (2, 2), 0])
def test_lnc_must_be_one_or_two(bad):
    with pytest.raises(NkiApiError, match="LNC|one number"):
        scale[bad]


def test_jit_options():
    with pytest.warns(UserWarning, match="no_such_option"):
        nki.jit(lambda x: x, no_such_option=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nki.jit(mode="jax", debug_kernel=True, show_compiler_tb=True, experimental_flags="x")(lambda x: x)
    with pytest.warns(DeprecationWarning, match="platform_target"):
        on_trn3 = nki.jit(platform_target="trn3")(_generation)
    with pytest.raises(NkiApiError, match="platform_target"):
        nki.jit(platform_target="tpu")
    assert on_trn3(X)[0, 0] == 4.0 and nki.simulate(on_trn3)(X)[0, 0] == 4.0  # the kernel's own target


def _generation(x):
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(nisa.get_nc_version()))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_platform_target_override(monkeypatch):
    @nki.jit
    def gen(x):
        out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(nisa.get_nc_version()))
        nisa.dma_copy(dst=out, src=t)
        return out

    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")
    assert gen(X)[0, 0] == 4.0
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    assert nki.simulate(gen)(X)[0, 0] == 2.0
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    assert gen(X)[0, 0] == 2.0  # on the simulator
    assert any(b == "simulator" for (_, b) in gen._compiled)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "tpu")
    with pytest.raises(NkiApiError, match="NEURON_PLATFORM_TARGET_OVERRIDE"):
        gen(X)


def _line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def test_dst_shape_mismatch_names_the_line_and_op():
    def body(x):
        t = nl.ndarray((128, 32), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, 0:32])
        r = nl.ndarray((128, 16), x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.exp, data=t)  # the bad line
        return t

    with pytest.raises(NkiError) as e:
        nki.jit(body)(X)
    assert re.search(rf"test_api_surface.py:{_line_of(body, 'the bad line')}: nisa.activation: 'dst' \[128, 16\]",
                     str(e.value))


def test_dma_from_psum_is_refused():
    @nki.jit
    def k(x):
        p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.memset(dst=p, value=0.0)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=p)
        return out

    with pytest.raises(NkiApiError, match="PSUM, which DMA cannot read"):
        k(X)


def test_raw_ints_for_enums_are_refused():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, oob_mode=0)
        return x

    with pytest.raises(NkiApiError, match="oob_mode=0 is not a nisa.oob_mode member"):
        k(X)


def test_verifier_messages_are_the_same_in_both_generations():
    """A 256-partition tile: the verifier reports it once, with the same rule and wording for either API."""
    big = np.zeros((256, 64), np.float32)

    @nki.jit
    def current(x):
        t = nl.ndarray((256, 64), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        return x

    @nki_dsl.jit
    def legacy(x):
        t = lnl.load(x)
        lnl.store(x, t)
        return x

    with pytest.raises(NkiVerificationError) as e_cur:
        current(big)
    with pytest.raises(NkiVerificationError) as e_leg:
        legacy(big)
    (d_cur,), (d_leg,) = e_cur.value.diagnostics[:1], e_leg.value.diagnostics[:1]
    assert d_cur.rule == d_leg.rule
    assert "partition" in d_cur.message and "128" in d_cur.message
    assert d_cur.loc.line == _line_of(current.fn, "nl.ndarray((256")


def test_removed_legacy_names_are_not_exported():
    for name in ("arange", "mgrid", "par_dim", "nc", "spmd_dim", "loop_reduce"):
        assert not hasattr(nl, name), name
    assert nl.tile_size.pmax == 128 and nl.tile_size.total_available_sbuf_size == 224 * 1024


def test_access_patterns_on_hbm_and_sbuf():
    @nki.jit
    def k(x):
        out = nl.ndarray((128, 32), x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 32), x.dtype, buffer=nl.sbuf)
        # even columns of x [128, 64]: element (p, j) = flat[64 p + 2 j]
        nisa.dma_copy(dst=t, src=x.ap(pattern=[[64, 128], [2, 32]], offset=0))
        s = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        odd = s.ap(pattern=[[64, 128], [2, 32]], offset=1)  # on-chip: partitions first, then the free offsets
        nisa.tensor_tensor(dst=t, data1=t, data2=odd, op=nl.subtract)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(k(X), X[:, 0::2] - X[:, 1::2])


def test_access_pattern_with_a_loop_offset_and_refused_runtime_offsets():
    @nki.jit
    def rows(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((64, 64), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x.ap(pattern=[[64, 64], [1, 64]], offset=i * 64 * 64))
            nisa.dma_copy(dst=out.ap(pattern=[[64, 64], [1, 64]], offset=i * 64 * 64), src=t)
        return out

    np.testing.assert_array_equal(rows(X), X)

    @nki.jit
    def dynamic(x):  # a runtime offset (test_runtime_offsets.py) only instructions with a dynamic start take
        t = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nl.load(x.ap(pattern=[[64, 128], [1, 64]], scalar_offset=t))
        return x

    with pytest.raises(NkiTraceError, match="can only be moved by nisa.dma_copy or nisa.tensor_copy"):
        dynamic(X)


def test_integer_indexing_keeps_on_chip_tiles_two_dimensional():
    shapes = {}

    @nki.jit
    def k(x):
        t = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        shapes.update(row=t[3].shape, col=t[:, 5].shape, elem=t[2, 7].shape, hbm_row=x[3].shape, last=t[-1].shape,
                      cube=nl.ndarray((128, 4, 8), x.dtype, buffer=nl.sbuf)[:, 1].shape)
        out = nl.ndarray((1, 64), x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[-2])
        return out

    np.testing.assert_array_equal(k(X), X[126:127])
    assert shapes == {"row": (1, 64), "col": (128, 1), "elem": (1, 1), "hbm_row": (64,), "cube": (128, 8),
                      "last": (1, 64)}


@pytest.mark.parametrize("backend", ["numpy", "jax", "simulator"])
def test_device_print_prints_the_values_where_the_kernel_runs_it(backend, capsys):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((1, 4), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i:i + 1, :])
            nl.device_print("row", t)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)  # after the print: not shown
            nisa.dma_copy(dst=out[i:i + 1, :], src=t)
        nl.device_print("input", x)
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = nki.simulate(k)(x) if backend == "simulator" else k(x, backend=backend)
    np.testing.assert_array_equal(out, 2 * x)
    printed = " ".join(capsys.readouterr().out.split())
    assert printed == "row [[0. 1. 2. 3.]] row [[4. 5. 6. 7.]] input [[0. 1. 2. 3.] [4. 5. 6. 7.]]"


def test_device_print_takes_a_constant_prefix():
    @nki.jit
    def k(x):
        nl.device_print(3, x)
        return x

    with pytest.raises(nki.NkiError, match="prefix must be a constant string"):
        k(X)


def test_lnc2_cores_run_at_once_in_the_profile():
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        half = x.shape[0] // nl.num_programs()
        rows = nl.ds(nl.program_id(0) * half, half)
        for j in nl.affine_range(x.shape[1] // 512):
            t = nl.ndarray((half, 512), x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[rows, nl.ds(j * 512, 512)])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[rows, nl.ds(j * 512, 512)], src=t)
        return out

    x = np.random.default_rng(0).uniform(-1, 1, (256, 4096)).astype(np.float32)
    one, two = nki.simulate(halves), nki.simulate(halves)[2]
    np.testing.assert_allclose(one(x[:128]), np.exp(x[:128]), rtol=1e-6)
    np.testing.assert_allclose(two(x), np.exp(x), rtol=1e-6)
    assert len(two.core_profiles) == 2
    # each core does the single-core kernel's work on its half: the same modelled time, not twice it
    assert two.profile.latency_us == pytest.approx(one.profile.latency_us, rel=0.05)
    _, prof = nki.simulate(halves[2], x, target="trn2")
    assert prof.latency_us == pytest.approx(two.profile.latency_us)


def test_reshape_splits_free_axes_of_on_chip_tiles():
    @nki.jit
    def k(x):
        t = nl.ndarray((128, 64), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        blocks = t.reshape((128, 4, 16))
        sums = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sums, op=nl.add, data=blocks, axis=2)
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=sums)
        return out

    np.testing.assert_allclose(k(X), X.reshape(128, 4, 16).sum(axis=2), rtol=1e-6)
    # merges, slices, HBM views and the refusals: tests/current_api/test_reshape.py


def test_hwdge_dma_needs_equal_dtypes():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.sync)
        return x

    with pytest.raises(NkiApiError, match="hwdge copies raw bytes"):
        k(X)


@pytest.mark.parametrize("name", ["topk", "activate2", "nc_n_gather", "nonzero_with_count", "rand_get_state"])
def test_unmodelled_instructions_import_and_refuse_when_called(name):
    from nki_dsl.current import isa

    fn = getattr(isa, name)  # `from nki.isa import topk` works: unmodified code imports
    with pytest.raises(nki.NkiError, match=rf"nisa.{name} is not modelled by nki_dsl: \S"):
        fn(None)
    with pytest.raises(AttributeError):
        isa.no_such_instruction  # noqa: B018 - a misspelt name is still an AttributeError


@pytest.mark.parametrize("name", ["abs_max", "abs_min"])
def test_unmodelled_alu_operator_passed_as_an_op_says_why(name):
    @nki.jit
    def k(x):
        t = _sbuf(x)
        nisa.tensor_scalar(dst=t, data=t, op0=getattr(nl, name), operand0=0.0)
        return x

    # the kernel line, the instruction, the operand and the reason (not only the list of supported ops)
    with pytest.raises(NkiApiError, match=rf"test_api_surface.py:\d+: nisa.tensor_scalar: op0={name}: "
                                          rf"nl.{name} is not modelled by nki_dsl: an ALU operator"):
        k(X)


def test_no_reorder_keeps_values_and_says_what_the_simulator_does_not_model():
    @nki.jit
    def k(x):
        with nl.no_reorder():
            t = _sbuf(x)
            nisa.activation(dst=t, op=nl.exp, data=t)
        return _out(t)

    with pytest.warns(UserWarning, match="does not enforce the block's order"):
        np.testing.assert_allclose(k(X / X.size), np.exp(X / X.size), rtol=1e-6)
