"""Compile-time constant kernel arguments as legacy NKI kernels pass them: a frozen ``FlashConfig`` dataclass,
dtype objects (``norm_dtype=nl.float32``), enum members, scalars, tuples, strings and None. The body receives the
Python value itself (not an HBM tensor); the trace cache is keyed by value."""

import collections
import enum
from dataclasses import dataclass, field

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.trace.jit import TRACE_HOOKS
from tests.language.support import BF16, F32, assert_ulps, exact, rand, rounded


@dataclass(frozen=True)
class FlashConfig:
    seq_tile_size: int = 128
    training: bool = False
    scale: float = 1.0


class Act(enum.Enum):
    none = 0
    relu = 1


@pytest.fixture
def traces():
    seen = []
    hook = lambda kernel, target: seen.append(kernel)
    TRACE_HOOKS.append(hook)
    yield seen
    TRACE_HOOKS.remove(hook)


def _configured(x, config=FlashConfig(), norm_dtype=nl.float32, act=Act.none, tag=None):
    """Row sums of ``x * config.scale`` over tiles of ``config.seq_tile_size`` columns, each tile's sum computed
    in ``norm_dtype``; ``act`` optionally applied first. Every constant changes the traced code."""
    assert isinstance(config, FlashConfig) and isinstance(act, Act), "constants arrive as Python values"
    n = x.shape[1] // config.seq_tile_size
    out = nl.ndarray((128, n), dtype=norm_dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(n):
        t = nl.load(x[:, nl.ds(j * config.seq_tile_size, config.seq_tile_size)])
        if act == Act.relu:
            t = nl.relu(t)
        s = nl.sum(nl.multiply(t, config.scale, dtype=norm_dtype), axis=1, keepdims=True, dtype=norm_dtype)
        nl.store(out[:, nl.ds(j, 1)], value=s)
    return out


def _expected(x, tile, scale, dtype, relu=False):
    """float64 formula: each scaled element rounded to ``dtype`` (the multiply's result), summed exactly; the
    caller compares after one more rounding to ``dtype``, within an ulp for the fp32 accumulation."""
    v = np.maximum(exact(x), 0) if relu else exact(x)
    return exact(rounded(v * scale, dtype)).reshape(128, -1, tile).sum(axis=2)


def test_different_configs_trace_twice_and_compute_their_own_results(traces):
    kernel = nki.jit(_configured)
    x = rand((128, 512), F32, seed=11)
    got = kernel(x, FlashConfig(seq_tile_size=128, scale=0.5))
    np.testing.assert_allclose(got, _expected(x, 128, 0.5, F32), rtol=1e-5, atol=1e-5)
    assert got.shape == (128, 4)
    got = kernel(x, FlashConfig(seq_tile_size=256, scale=2.0))
    np.testing.assert_allclose(got, _expected(x, 256, 2.0, F32), rtol=1e-5, atol=1e-5)
    assert got.shape == (128, 2)
    assert len(traces) == 2


def test_equal_configs_hit_the_cache(traces):
    kernel = nki.jit(_configured)
    x = rand((128, 256), F32, seed=12)
    first = kernel(x, FlashConfig(seq_tile_size=128, training=True))
    again = kernel(x, FlashConfig(seq_tile_size=128, training=True))  # a different but equal object
    np.testing.assert_array_equal(first, again)
    kernel(x, FlashConfig(seq_tile_size=128, training=False))  # one field differs: a new trace
    assert len(traces) == 2


def test_dtype_objects_enums_and_none_are_constants(traces):
    kernel = nki.jit(_configured)
    x = rand((128, 256), F32, -2, 2, seed=13)
    bf = kernel(x, norm_dtype=nl.bfloat16)
    assert bf.dtype == BF16
    assert_ulps(bf, _expected(x, 128, 1.0, BF16), BF16, ulps=1, what="bf16 sums")
    kernel(x, norm_dtype=nl.bfloat16)  # cached
    f32 = kernel(x, norm_dtype=np.float32)  # a NumPy scalar type names the same dtype as nl.float32 ...
    np.testing.assert_allclose(f32, _expected(x, 128, 1.0, F32), rtol=1e-5, atol=1e-5)
    kernel(x, norm_dtype=nl.float32)  # ... and compares equal to it (np.float32 == nl.float32): cached
    relu = kernel(x, act=Act.relu)
    np.testing.assert_allclose(relu, _expected(x, 128, 1.0, F32, relu=True), rtol=1e-5, atol=1e-5)
    kernel(x, act=Act.relu, tag=None)
    assert len(traces) == 3


def test_constants_are_recorded_in_the_ir_by_value():
    text = nki.trace(nki.jit(_configured), rand((128, 256), F32), FlashConfig(scale=0.25), nl.bfloat16).text
    assert 'const "config" = ("FlashConfig", ("seq_tile_size", 128), ("training", false), ("scale", 0.25))' in text
    assert 'const "norm_dtype" = "bfloat16"' in text
    assert 'const "act" = "Act.none"' in text


@nki.jit
def scaled(x, factor):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), factor))
    return out


def test_int_and_float_scalars_are_different_constants(traces):
    # An int and a float promote differently with an integer tile (weak scalar types, nki.md §2.2), so 2 and
    # 2.0 must not share a trace even though 2 == 2.0.
    x = np.arange(128 * 4, dtype=np.int32).reshape(128, 4)
    np.testing.assert_array_equal(scaled(x, 2), 2 * x)
    np.testing.assert_array_equal(scaled(x, 2.0), 2.0 * x)
    np.testing.assert_array_equal(scaled(x, True), x)
    muls = [op for k in traces for op in _ops(k) if op.name == "nl.multiply"]
    assert [m.operands["y"].value for m in muls] == [2, 2.0, True]
    assert [type(m.operands["y"].value) for m in muls] == [int, float, bool]


def _ops(kernel):
    return [s for s in kernel.body if hasattr(s, "operands")]


@dataclass
class MutableConfig:
    tile: int = 128


@dataclass(frozen=True)
class ListConfig:
    tiles: list = field(default_factory=lambda: [128])


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (MutableConfig(), r"argument 'factor': the value is an instance of the mutable dataclass MutableConfig; .*"
                          r"declare it @dataclass\(frozen=True\)"),
        (ListConfig(), r"argument 'factor': field factor.tiles of the frozen dataclass ListConfig is a mutable list"),
        (Opaque(), r"argument 'factor': the value of type Opaque is neither an array nor a compile-time constant"),
        ((1, Opaque()), r"argument 'factor': factor\[1\] of type Opaque is neither"),
        ({1: 2}, r"argument 'factor': factor has key 1; constant dicts have string keys only"),
        ((np.ones(3), 2.0), r"argument 'factor': factor\[0\] is an array inside a compile-time constant; a "
                            r"tuple argument holds tensors only or constants only"),
    ],
    ids=["mutable-dataclass", "list-field", "object", "object-in-tuple", "int-key", "array-in-tuple"],
)  # fmt: skip
def test_values_that_cannot_be_keyed_by_value_are_refused(value, message):
    with pytest.raises(nki.NkiApiError, match=message):
        scaled(np.ones((128, 4), np.float32), value)


@nki.jit
def dict_kernel(x, options):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), options["scale"]))
    return out


def test_dicts_with_string_keys_reach_the_body_read_only(traces):
    x = rand((128, 8), F32, seed=14)
    np.testing.assert_array_equal(dict_kernel(x, {"scale": 3.0, "name": "a"}), rounded(exact(x) * 3, F32))
    dict_kernel(x, {"name": "a", "scale": 3.0})  # the same dict: cached
    assert len(traces) == 1


@nki.jit
def engine_kernel(x, engine):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nisa.nc_transpose(nl.load(x), engine=engine))
    return out


def test_int_enum_members_are_enum_constants(traces):
    x = rand((32, 32), F32, seed=15)
    np.testing.assert_array_equal(engine_kernel(x, nisa.vector_engine), x.T)
    np.testing.assert_array_equal(engine_kernel(x, nisa.tensor_engine), x.T)
    assert [k.constants["engine"] for k in traces] == ["Engine.vector", "Engine.tensor"]
    assert {op.attrs["engine"] for k in traces for op in _ops(k) if op.name == "nisa.nc_transpose"} == {
        "vector", "tensor"
    }


Window = collections.namedtuple("Window", ["left", "right"])


@nki.jit
def window_kernel(x, window):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), float(window.left - window[1])))
    return out


def test_namedtuples_keep_their_fields_and_lists_arrive_as_tuples(traces):
    x = rand((128, 8), F32, seed=16)
    np.testing.assert_array_equal(window_kernel(x, Window(5, 2)), x * 3)
    np.testing.assert_array_equal(window_kernel(x, Window(left=5, right=2)), x * 3)  # equal: cached
    assert len(traces) == 1
    np.testing.assert_array_equal(sizes_kernel(x, [1, 2]), x * 2)


@nki.jit
def sizes_kernel(x, sizes):
    assert isinstance(sizes, tuple), "a list argument reaches the body as a tuple"
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), float(len(sizes))))
    return out


class _Int(int):
    pass


PLAIN = [None, True, False, 0, -3, 2**70, "", "resident", 0.5, -0.0, float("nan"), float("inf"), (),
         ("scalar", "vector", None, True, 1)]  # fmt: skip
OTHER = [((1, 2), 3), (1, 2.0), _Int(2), [1, 2], Act.relu, np.float32(2.0)]  # left to the general path


@pytest.mark.parametrize("value", PLAIN + OTHER, ids=repr)
def test_the_launch_path_for_plain_constants_normalises_as_the_general_one(value):
    """``constants._plain`` (builtin scalars, and tuples of the non-float ones, by type alone) gives what
    ``_normalise`` gives, or leaves the value to it."""
    from nki_dsl.trace import constants

    fast, general = constants.constant("p", value), constants._normalise("p", value, "p")
    assert (fast.key, repr(fast.record), repr(fast.value), type(fast.value)) == \
        (general.key, repr(general.record), repr(general.value), type(general.value))  # fmt: skip
    assert (constants._plain(value) is not None) == any(value is v for v in PLAIN)
