"""A launch binds its arguments through ``specs._bind_plain`` when the kernel's signature and the call are plain:
the same names and values, in signature order with defaults applied, as ``inspect.Signature.bind`` gives; every
other call (and every wrong one) goes through the general binder, which names what is wrong."""

import inspect

import numpy as np
import pytest

import nki_dsl as nki
from nki_dsl.trace import specs


def _f(a, b, c=3, *, d=4, e):
    pass


def _g(a, /, b):
    pass


def _h(a, *rest):
    pass


CALLS = [(_f, (1, 2), {"e": 5}), (_f, (1,), {"b": 2, "e": 5, "d": 0}), (_f, (), {"a": 1, "b": 2, "c": 0, "e": 5}),
         (_f, (1, 2, 3), {"e": 5, "d": 6}),
         (_f, (1, 2, 3, 4), {"e": 5}), (_f, (1, 2), {}), (_f, (1, 2), {"e": 5, "z": 0}), (_f, (1,), {"a": 1, "e": 5}),
         (_g, (1, 2), {}), (_g, (), {"a": 1, "b": 2}), (_h, (1, 2, 3), {})]  # fmt: skip


def _inspect_bind(fn, args, kwargs):
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return list(bound.arguments.items())


@pytest.mark.parametrize("fn,args,kwargs", CALLS, ids=range(len(CALLS)))
def test_the_plain_binder_binds_as_inspect_or_leaves_the_call_to_it(fn, args, kwargs):
    plain = specs._bind_plain(fn, args, kwargs)
    if plain is not None:
        assert plain == _inspect_bind(fn, args, kwargs)
    else:  # a wrong call, or a signature with positional-only or variadic parameters
        assert _inspect_bind(fn, args, kwargs) is None or fn in (_g, _h)
    assert (plain is None) == (fn is not _f or _inspect_bind(fn, args, kwargs) is None)


def test_a_launch_and_the_general_binder_agree_on_specs_and_arrays():
    @nki.jit
    def k(x, y, scale=0.5, *, mode="fast"):
        return x

    x = np.zeros((4, 8), np.float32)
    fast = specs.bind(k.fn, (x, x), {"mode": "slow"})
    sig = inspect.signature(k.fn)
    bound = sig.bind(x, x, mode="slow")
    bound.apply_defaults()
    general = specs._specs(k.fn, bound.arguments.items(), sig)
    assert fast[0] == general[0] and list(fast[1]) == list(general[1]) == ["x", "y"]
    assert [n for n, _ in fast[0].items] == ["x", "y", "scale", "mode"]
