"""Traces are shared between targets unless the kernel body consulted the target; verification is per target.

A body that reads ``nisa.get_nc_version()`` or a per-target ``nl.tile_size`` limit is traced again for each target
that answers differently, and each trace sees its own target's answer."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.isa as nisa
import nki_dsl.language as nl
from nki_dsl.errors import NkiVerificationError
from nki_dsl.targets import DEFAULT_TARGET, TARGETS
from nki_dsl.trace.jit import TRACE_HOOKS

X = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)


@pytest.fixture
def verified():
    """(kernel name, target name) for every verification of a trace while the test runs."""
    seen = []
    hook = lambda kernel, target: seen.append((kernel.name, target.name))
    TRACE_HOOKS.append(hook)
    yield seen
    TRACE_HOOKS.remove(hook)


def _plain(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out


def _by_version(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), float(nisa.get_nc_version())))
    return out


def _by_pmax(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x[0 : nl.tile_size.pmax, :]), 3.0))
    return out


def _by_sbuf_size(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    kib = nl.tile_size.total_available_sbuf_size // 1024
    nl.store(out, value=nl.multiply(nl.load(x), float(kib)))
    return out


def test_a_plain_kernel_is_traced_once_for_every_target_and_verified_for_each(verified):
    kernel = nki.jit(_plain)
    for name in ("trn1", "trn2", "trn3", "trn1"):
        np.testing.assert_array_equal(kernel(X, target=name), 2 * X)
    _, prof1 = nki.simulate(kernel, X, target="trn1")
    _, prof2 = nki.simulate(kernel, X, target="trn2")
    assert kernel.trace_count == 1
    assert verified == [("_plain", "trn1"), ("_plain", "trn2"), ("_plain", "trn3")]
    assert prof1.target.name == "trn1" and prof2.target.name == "trn2"  # lowered and costed per target
    assert prof1.latency_ns != prof2.latency_ns


def test_get_nc_version_answers_for_the_target_and_keys_the_trace_by_it():
    kernel = nki.jit(_by_version)
    for name, version in (("trn1", 2), ("trn2", 3), ("trn3", 4)):
        np.testing.assert_array_equal(kernel(X, target=name), version * X)
        out, _ = nki.simulate(kernel, X, target=name)
        np.testing.assert_array_equal(out, version * X)
    assert kernel.trace_count == 3
    kernel(X, target=TARGETS["trn2"])  # a Target object is the same target as its name
    assert kernel.trace_count == 3
    assert nisa.get_nc_version is nki.isa.get_nc_version


def test_a_limit_every_target_shares_keeps_one_trace():
    kernel = nki.jit(_by_pmax)
    for name in sorted(TARGETS):
        np.testing.assert_array_equal(kernel(X, target=name), 3 * X)
    assert kernel.trace_count == 1


def test_a_per_target_limit_retraces_with_each_targets_value():
    kernel = nki.jit(_by_sbuf_size)
    for name, kib in (("trn1", 192), ("trn2", 224), ("trn3", 256)):  # reference/nki.md §1.1
        np.testing.assert_array_equal(kernel(X, target=name), kib * X)
    assert kernel.trace_count == 3


def _big_tile(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 200 * 1024 // 4), dtype=nl.float32, buffer=nl.sbuf)  # 200 KiB per partition
    t[...] = 0.0
    nl.store(out, value=nl.load(x))
    return out


def test_one_trace_is_verified_against_each_targets_capacity():
    kernel = nki.jit(_big_tile)
    np.testing.assert_array_equal(kernel(X, target="trn2"), X)  # 224 KiB partitions hold it
    with pytest.raises(NkiVerificationError, match="sbuf-capacity|SBUF use"):
        kernel(X, target="trn1")  # 192 KiB do not
    with pytest.raises(NkiVerificationError):
        kernel(X, target="trn1")  # still refused on the second call
    np.testing.assert_array_equal(kernel(X, target="trn2"), X)
    assert kernel.trace_count == 1


def test_outside_a_kernel_the_answers_are_the_default_targets():
    # what kernel(...) with no target= is traced for: trn2 (224 KiB SBUF partitions, NeuronCore gen3)
    assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
    assert nl.tile_size.total_available_sbuf_size == TARGETS[DEFAULT_TARGET].sbuf_bytes_per_partition == 224 * 1024
    assert nisa.get_nc_version() is nisa.nc_version.gen3
    with pytest.raises(AttributeError, match="no limit 'pmin'"):
        _ = nl.tile_size.pmin
