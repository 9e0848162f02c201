"""Every user-facing call takes a target as a name or as a Target object alike, resolves it once (unknown names are
refused there, listing the valid ones), and passes the Target inward."""

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.errors import NkiApiError
from nki_dsl.targets import TARGETS

X = np.ones((128, 64), np.float32)


@nki.jit
def _double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.multiply(nl.load(x), 2.0))
    return out


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_name_and_its_target_give_the_same_results(name):
    target = nki.get_target(name)
    assert target is TARGETS[name] and nki.get_target(target) is target
    by_name, by_object = nki.simulate(_double, X, target=name), nki.simulate(_double, X, target=target)
    np.testing.assert_array_equal(by_name[0], by_object[0])
    assert by_name[1].target is by_object[1].target is target
    assert by_name[1].latency_ns == by_object[1].latency_ns
    spec = nki.spec(X.shape, "float32")
    timed = [nki.benchmark(_double, spec, target=t).latency_ns for t in (name, target)]
    assert timed[0] == timed[1]
    traced = nki.trace(_double, X, target=target)
    assert nki.parse_ir(traced.text, target=target).text == nki.parse_ir(traced.text, target=name).text
    exe = traced.compile("simulator", target)
    np.testing.assert_array_equal(exe.run({"x": X}), 2 * X)
    assert exe.profile.target is target
    np.testing.assert_array_equal(_double(X, backend="simulator", target=target), 2 * X)


@pytest.mark.parametrize("call", [
    lambda: nki.simulate(_double, X, target="trn9"),
    lambda: nki.benchmark(_double, nki.spec(X.shape, "float32"), target="trn9"),
    lambda: nki.trace(_double, X, target="trn9"),
    lambda: _double(X, target="trn9"),
    lambda: nki.trace(_double, X).compile("simulator", "trn9"),
    lambda: nki.parse_ir(nki.trace(_double, X).text, target="trn9"),
])  # fmt: skip
def test_an_unknown_target_is_refused_at_the_call_naming_it(call):
    with pytest.raises(NkiApiError, match="unknown target 'trn9'; expected one of trn1, trn2, trn3"):
        call()
