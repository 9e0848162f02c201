"""The trace cache key covers what a kernel's body reaches from Python (nki_dsl/trace/dependencies.py): a helper
held in a dict, a list, an object attribute, a functools.partial, a bound method, a closure cell or a default
argument, and the plain values it reads, so that changing any of them in-process retraces and never returns a
stale result; unchanged, the trace is reused."""

import functools
import types

import numpy as np
import pytest

import nki_dsl as nki
import nki_dsl.language as nl
from nki_dsl.trace import dependencies
from nki_dsl.trace.dependencies import helper_fingerprint
from tests.language.support import F32, rand


def _times(k):
    return lambda t: nl.multiply(t, float(k))


@nki.jit(mode="trace")
def _twice(t):
    return nl.multiply(t, 2.0)


@nki.jit(mode="trace")
def _thrice(t):
    return nl.multiply(t, 3.0)


class _Activations:
    def __init__(self, act):
        self.act = act

    def apply(self, t):
        return self.act(t)


HELPERS = {"scale": _twice}
ACTS = _Activations(_twice)
PARTIAL = functools.partial(nl.multiply, y=2.0)
FACTOR = 2.0
ACT = nl.exp


def _with_default(t, helper=_twice):
    return helper(t)


def _kernel(body):
    """An @nki.jit kernel storing ``body(tile)`` of its input."""

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=body(nl.load(x)))
        return out

    return k


def _check_retraces(kernel, change, before, after):
    """``kernel`` computes ``before(x)``, reuses its trace while nothing changes, and computes ``after(x)``
    (retracing once) after ``change()``."""
    x = rand((128, 16), F32, -1, 1, seed=7)
    np.testing.assert_allclose(kernel(x), before(x), rtol=1e-6)
    count = kernel.trace_count
    np.testing.assert_allclose(kernel(x), before(x), rtol=1e-6)
    assert kernel.trace_count == count  # nothing changed: the trace is reused
    change()
    np.testing.assert_allclose(kernel(x), after(x), rtol=1e-6)
    assert kernel.trace_count == count + 1


def test_a_helper_held_in_a_dict_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: HELPERS["scale"](t))
    _check_retraces(k, lambda: monkeypatch.setitem(HELPERS, "scale", _thrice), lambda x: 2 * x, lambda x: 3 * x)


def test_a_helper_held_in_a_list_is_in_the_key():
    chain = [_twice]
    k = _kernel(lambda t: chain[0](t))
    _check_retraces(k, lambda: chain.__setitem__(0, _thrice), lambda x: 2 * x, lambda x: 3 * x)


def test_a_helper_held_in_an_object_attribute_and_reached_through_a_method_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: ACTS.apply(t))
    _check_retraces(k, lambda: monkeypatch.setattr(ACTS, "act", _thrice), lambda x: 2 * x, lambda x: 3 * x)


def test_an_edited_method_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: ACTS.apply(t))
    edited = lambda self, t: nl.multiply(self.act(t), 5.0)  # noqa: E731 - a method with other code
    _check_retraces(k, lambda: monkeypatch.setattr(_Activations, "apply", edited), lambda x: 2 * x,
                    lambda x: 10 * x)  # fmt: skip


def test_a_bound_method_held_in_a_global_is_in_the_key(monkeypatch):
    monkeypatch.setitem(globals(), "BOUND", ACTS.apply)
    k = _kernel(lambda t: BOUND(t))  # noqa: F821 - set above
    _check_retraces(k, lambda: monkeypatch.setattr(ACTS, "act", _thrice), lambda x: 2 * x, lambda x: 3 * x)


def test_a_partial_and_its_bound_arguments_are_in_the_key(monkeypatch):
    k = _kernel(lambda t: PARTIAL(t))
    change = lambda: monkeypatch.setitem(globals(), "PARTIAL", functools.partial(nl.multiply, y=4.0))  # noqa: E731
    _check_retraces(k, change, lambda x: 2 * x, lambda x: 4 * x)


def test_a_closure_cell_is_in_the_key():
    helper = _twice
    k = _kernel(lambda t: helper(t))

    def change():
        nonlocal helper
        helper = _thrice

    _check_retraces(k, change, lambda x: 2 * x, lambda x: 3 * x)


def test_a_default_argument_of_a_helper_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: _with_default(t))
    change = lambda: monkeypatch.setattr(_with_default, "__defaults__", (_thrice,))  # noqa: E731
    _check_retraces(k, change, lambda x: 2 * x, lambda x: 3 * x)


def test_a_global_constant_the_body_reads_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: nl.multiply(t, FACTOR))
    _check_retraces(k, lambda: monkeypatch.setitem(globals(), "FACTOR", 6.0), lambda x: 2 * x, lambda x: 6 * x)


def test_a_library_function_rebound_in_a_global_is_in_the_key(monkeypatch):
    k = _kernel(lambda t: ACT(t))
    _check_retraces(k, lambda: monkeypatch.setitem(globals(), "ACT", nl.tanh), np.exp, np.tanh)


def test_a_function_passed_as_an_argument_is_walked_too(monkeypatch):
    @nki.jit
    def k(x, act):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=act(nl.load(x)))
        return out

    def act(t):
        return HELPERS["scale"](t)

    x = rand((128, 16), F32, -1, 1, seed=8)
    np.testing.assert_allclose(k(x, act), 2 * x, rtol=1e-6)
    monkeypatch.setitem(HELPERS, "scale", _thrice)
    np.testing.assert_allclose(k(x, act), 3 * x, rtol=1e-6)


def test_the_walk_is_cycle_safe_and_bounded(monkeypatch):
    loop: dict = {"scale": _twice}
    loop["self"] = loop  # a cycle
    ACTS.me = ACTS  # an object referring to itself
    monkeypatch.setitem(globals(), "LOOP", loop)
    fn = lambda t: LOOP["scale"](ACTS.apply(t))  # noqa: E731, F821
    first = helper_fingerprint(fn)
    assert first == helper_fingerprint(fn)  # deterministic
    monkeypatch.setitem(loop, "scale", _thrice)
    assert helper_fingerprint(fn) != first
    del ACTS.me

    # a huge container: walked up to the bound, not further (a change past it is not seen, by design)
    big = list(range(100_000))
    monkeypatch.setitem(globals(), "BIG", big)
    fn = lambda t: BIG  # noqa: E731, F821
    walk = dependencies._Walk()
    walk.code_of(fn, "fn")
    assert len(walk.out) <= dependencies._MAX_ITEMS + 3
    before = helper_fingerprint(fn)
    big[0] = -1
    assert helper_fingerprint(fn) != before
    before = helper_fingerprint(fn)
    big[-1] = -1
    assert helper_fingerprint(fn) == before


def test_library_modules_and_objects_are_not_walked():
    arr = np.zeros((512, 512))
    fn = lambda t: (np, nl, arr)  # noqa: E731 - a NumPy array and library modules in closure cells
    walk = dependencies._Walk()
    walk.code_of(fn, "fn")
    kinds = [rec[1][0] for rec in walk.out]
    assert kinds == ["lib", "lib", "lib"]  # by name/type only: arrays are data, library modules the installation


def test_a_notebook_function_is_walked_not_taken_for_library_code():
    namespace = {"__name__": "__main__", "HELPERS": HELPERS}
    exec("def body(t):\n    return HELPERS['scale'](t)\n", namespace)  # as a cell of a notebook defines it
    fn = types.FunctionType(namespace["body"].__code__, namespace)
    assert ("fn:HELPERS['scale']", ("kernel", _twice.source_hash)) in _records(fn)


def _records(fn):
    walk = dependencies._Walk()
    walk.code_of(fn, "fn")
    return walk.out


# -- the fingerprint a launch reuses (HelperFingerprint, trace/reads.py) -------------------------------------------


class _Config:
    scale = 2.0

    def factor(self):
        return self.scale


def _scenarios():
    """(name, fn, roots, change): ``change()`` edits something ``fn`` (or a root) reaches, as a user might between
    two launches; each is one way the reused fingerprint could go stale."""
    out = []

    # a helper redefined in a notebook cell (the body and the helper share the notebook's globals)
    cell = {"__name__": "__main__", "nl": nl}
    exec("def helper(t):\n    return nl.multiply(t, 2.0)\n\ndef body(t):\n    return helper(t)\n", cell)
    out.append(("notebook cell", cell["body"], (),
                lambda: exec("def helper(t):\n    return nl.multiply(t, 3.0)\n", cell)))  # fmt: skip

    helper = _twice

    def closure(t):
        return helper(t)

    def rebind_cell():
        nonlocal helper
        helper = _thrice

    out.append(("closure cell", closure, (), rebind_cell))

    module = types.ModuleType("once_user_helpers")  # a user module (not installed, not imported by name)
    module.scale = _twice
    out.append(("module attribute", lambda t: module.scale(t), (), lambda: setattr(module, "scale", _thrice)))

    def edited(t):
        return nl.multiply(t, 2.0)

    def other(t):
        return nl.multiply(t, 5.0)

    out.append(("__code__ replaced", lambda t: edited(t), (), lambda: setattr(edited, "__code__", other.__code__)))

    def relabelled(t):
        return nl.multiply(t, 2.0)

    out.append(("__module__ changed (library code now)", lambda t: relabelled(t), (),
                lambda: setattr(relabelled, "__module__", "numpy")))  # fmt: skip

    def keyword(t, *, k=2.0):
        return nl.multiply(t, k)

    out.append(("kwdefaults edited in place", lambda t: keyword(t), (),
                lambda: keyword.__kwdefaults__.__setitem__("k", 4.0)))  # fmt: skip

    table = {"a": 1.0}
    out.append(("dict gains a key", lambda t: table, (), lambda: table.__setitem__("b", 2.0)))

    members, grown = {1.0}, {1.0}
    out.append(("set gains a member", lambda t: grown, (), lambda: grown.add(2.0)))
    out.append(("set member replaced", lambda t: members, (), lambda: (members.clear(), members.add(2.0))))

    chain = [_twice]
    out.append(("list item replaced", lambda t: chain, (), lambda: chain.__setitem__(0, _thrice)))

    cfg = _Config()
    out.append(("object gains an attribute", lambda t: cfg.factor(), (), lambda: setattr(cfg, "scale", 3.0)))

    class Other(_Config):
        scale = 7.0

    cfg2 = _Config()
    out.append(("object changes class", lambda t: cfg2.factor(), (), lambda: setattr(cfg2, "__class__", Other)))

    class Local:
        scale = 2.0

    obj = Local()
    out.append(("class attribute rebound", lambda t: obj.scale, (), lambda: setattr(Local, "scale", 9.0)))

    space = {"__name__": "__main__"}
    exec("def body(t):\n    return abs(t)\n", space)  # a builtin: not in the globals when first walked
    out.append(("an absent global defined", space["body"], (), lambda: space.__setitem__("abs", _thrice)))

    box = {"act": _twice}

    def act(t):
        return box["act"](t)

    out.append(("what an argument reaches", lambda t: t, (act,), lambda: box.__setitem__("act", _thrice)))
    return out


SCENARIOS = _scenarios()


@pytest.mark.parametrize("name,fn,roots,change", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_a_reused_fingerprint_is_the_walks_until_a_change_and_after_it(name, fn, roots, change):
    reused = dependencies.HelperFingerprint(fn)
    first = reused(*roots)
    assert first == helper_fingerprint(fn, *roots) and reused.walks == 1
    for _ in range(3):
        assert reused(*roots) == first
    assert reused.walks == 1  # unchanged: not walked again
    change()
    assert reused(*roots) == helper_fingerprint(fn, *roots) != first
    assert reused.walks == 2
    assert reused(*roots) == helper_fingerprint(fn, *roots) and reused.walks == 2


def test_another_argument_is_walked():
    reused = dependencies.HelperFingerprint(lambda t: t)
    a, b = (lambda t: _twice(t)), (lambda t: _thrice(t))
    assert reused(a) == helper_fingerprint(lambda t: t, a)
    assert reused(b) == helper_fingerprint(lambda t: t, b) != reused(a)
    assert reused.walks == 3


def test_a_launch_without_a_change_does_not_walk_and_a_notebook_redefinition_retraces():
    cell = {"__name__": "__main__", "nl": nl, "nki": nki}
    exec("def helper(t):\n    return nl.multiply(t, 2.0)\n", cell)
    exec("@nki.jit\ndef kernel(x):\n    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)\n"
         "    nl.store(out, value=helper(nl.load(x)))\n    return out\n", cell)  # fmt: skip
    kernel, x = cell["kernel"], rand((128, 16), F32, -1, 1, seed=9)
    for _ in range(3):
        np.testing.assert_allclose(kernel(x), 2 * x, rtol=1e-6)
    assert (kernel.trace_count, kernel.helpers.walks) == (1, 1)
    exec("def helper(t):\n    return nl.multiply(t, 3.0)\n", cell)  # the cell run again, edited
    np.testing.assert_allclose(kernel(x), 3 * x, rtol=1e-6)
    assert (kernel.trace_count, kernel.helpers.walks) == (2, 2)


def test_a_module_attribute_rebound_retraces():
    module = types.ModuleType("once_user_config")
    module.ACT = nl.exp
    k = _kernel(lambda t: module.ACT(t))
    _check_retraces(k, lambda: setattr(module, "ACT", nl.tanh), np.exp, np.tanh)
