"""Every public launcher function of every first-party kernel, called as its users call it (keywords left out, given
at their defaults, given other values, passed by position), on the kernel fetched without trust from the local
registry: the numbers agree with the launcher run locally (trusted: the package's own Python, on NumPy), within the
package's tolerance. The calls the launcher refuses are refused by the fetched kernel too, and the calls the
launcher runs that no published IR serves (``LIMITS``: each another IR, or a value the loader cannot compute) are
refused naming the keyword, its value and what was published.

Each package is cut to the specialisation lines the calls reach (``KEEP``: its fixed-width shapes, the families
the calls fall in), so the test builds in seconds; the lines are the full kernel.toml's own, so a call routes here
as it does in a full release. A refusal of a shape (not a keyword) is one no line of the full kernel.toml holds
either: the launchers refuse exactly past the families' ranges (tests/hub/test_row_kernels_untrusted.py and
tests/kernels/test_vit_attn_families.py sweep those edges).
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import kernels
import nki_dsl as nki
from hub_client.bundle import build_bundle
from hub_client.errors import ScalarArgumentError
from hub_client.package import read_package
from nki_dsl.language import bfloat16
from tests.hub.conftest import fetched_without_trust
from tests.hub.library_packages import ROOT, lines_only


def _one_box(entry_dtype: str, first: str):
    """A keep predicate: the lines whose first argument is ``entry_dtype`` and that mention ``first``."""
    return lambda line: f'args = ["{entry_dtype}' in line and first in line


# package -> (entry point -> which of its kernel.toml lines to publish)
def _short_boxes(line: str) -> bool:
    return 'S = "1..512"' in line or 'S = "1..2048"' in line


KEEP = {
    "softmax": {"softmax": lambda ln: '"N x 512:float32"' in ln or ('"N x W:float32"' in ln and '"1..4096"' in ln)},
    "rmsnorm": {"rmsnorm": lambda ln: '"N x 512:float32"' in ln or ('"N x W:float32"' in ln and '"1..4096"' in ln)},
    "layernorm": {"layernorm": _one_box("N x W:float32", 'W = "1..2048"')},
    "matmul": {"matmul": _one_box("K x M:float32", "K x N:float32")},
    "linear": {
        "linear": _one_box("M x K:float32", 'N = "1..512"'),
        "layernorm_linear": _one_box("M x K:float32", 'N = "1..512"'),
        "mlp": _one_box("M x K:bfloat16", 'H = "1..512", N = "1..7680"'),
        "layernorm_mlp": _one_box("M x K:float32", 'K = "1..3584", H = "1..512"'),
        "layernorm_qkv": _one_box("M x K:float32", 'N = "384..1536 step 384"'),
    },
    # (the families over S up to 512 run the resident strip, those up to 2048 flash: a short call asking for flash
    # runs in the second)
    "vit_attn": {
        "attention": lambda ln: '"1x2x197x64:float32"' in ln or ('"B x H x S x D:float32"' in ln
                                                                  and _short_boxes(ln)),
        "attention_qkv": lambda ln: '"1x197x384:float32"' in ln or ('"B x S x (3 x H x D):float32"' in ln
                                                                     and _short_boxes(ln)),
        "attention_split": lambda ln: '"768 x T:float32"' in ln or ('"(2 x H x D) x (B x S):float32"' in ln
                                                                     and _short_boxes(ln)),
    },
}  # fmt: skip


def _a(*shape, dtype=np.float32, seed=[0]):  # noqa: B006 (one generator state over the table: distinct inputs)
    seed[0] += 1
    return np.random.default_rng(seed[0]).standard_normal(shape).astype(dtype)


def _bf(*shape):
    return _a(*shape, dtype=bfloat16)


class _Shape:
    """An array's shape and dtype, all a launcher's checks and a loader's matching read (no data)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)


X, W, B, R = _a(70, 96), _a(96, 200), _a(200), _a(70, 200)  # linear
NX, NG, NB = _a(50, 64), _a(64), _a(64)  # the LayerNorm fusions' x, gamma, beta
Q2 = [_a(1, 2, 197, 64) for _ in range(3)]  # a model's shape (the test vectors' spec)
Q3 = [_a(2, 3, 40, 16) for _ in range(3)]  # a family's shape over S
Q600 = [_a(1, 2, 600, 16) for _ in range(3)]  # past the strip's 512 tokens
QKV2, QKV3 = _a(1, 197, 384), _a(2, 30, 3 * 3 * 8)
SPLIT6 = (_a(768, 197), _a(197, 384))  # ViT-S-like split layout, one sequence of 197
SPLIT2 = (_a(2 * 2 * 16, 2 * 40), _a(2 * 40, 2 * 16))  # two sequences of 40 tokens, 2 heads of 16
MLP = (_bf(40, 64), _bf(64, 128), _bf(128), _bf(128, 64), _bf(64), _bf(40, 64))
LN_MLP = (_a(30, 64), _a(64), _a(64), _a(64, 128), _a(128), _a(128, 64), _a(64))
QKV_W = (_a(20, 64), _a(64), _a(64), _a(64, 384), _a(384))

# (package, launcher function = the Hub entry point, positional arguments, keywords)
CALLS = [
    ("softmax", "softmax", (_a(5, 512),), {}),
    ("softmax", "softmax", (_a(130, 300),), {}),
    ("softmax", "softmax", (_a(1, 1),), {}),
    ("rmsnorm", "rmsnorm", (_a(4, 512), _a(512)), {}),
    ("rmsnorm", "rmsnorm", (_a(4, 512), _a(512)), {"epsilon": 1e-6}),
    ("rmsnorm", "rmsnorm", (_a(4, 512), _a(512)), {"epsilon": 1e-3}),
    ("rmsnorm", "rmsnorm", (_a(4, 512), _a(512), 1e-3), {}),
    ("rmsnorm", "rmsnorm", (_a(3, 300), _a(300)), {}),
    ("rmsnorm", "rmsnorm", (_a(3, 300), _a(300)), {"epsilon": 0.5}),
    ("layernorm", "layernorm", (_a(6, 200), _a(200), _a(200)), {}),
    ("layernorm", "layernorm", (_a(6, 200), _a(200), _a(200)), {"epsilon": 1e-6}),
    ("layernorm", "layernorm", (_a(6, 200), _a(200), _a(200)), {"epsilon": 1e-2}),
    ("layernorm", "layernorm", (_a(6, 200), _a(200), _a(200), 1e-2), {}),
    ("matmul", "matmul", (_a(128, 128), _a(128, 512)), {}),
    ("matmul", "matmul", (_a(256, 128), _a(256, 1024)), {}),
    ("linear", "linear", (X, W), {}),
    ("linear", "linear", (X, W), {"epilogue": "none"}),
    ("linear", "linear", (X, W), {"epilogue": None}),
    ("linear", "linear", (X, W, B), {}),
    ("linear", "linear", (X, W, B), {"epilogue": None}),
    ("linear", "linear", (X, W, B), {"epilogue": "bias"}),
    ("linear", "linear", (X, W, B), {"epilogue": "gelu"}),
    ("linear", "linear", (X, W, B, None), {}),
    ("linear", "linear", (X, W, B, R), {}),
    ("linear", "linear", (X, W, B, R), {"epilogue": "residual"}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100)), {}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {"epilogue": None}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {"epilogue": "gelu"}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {"epsilon": 1e-6}),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {"epsilon": 1e-3, "epilogue": "bias"}),
    ("linear", "mlp", MLP, {}),
    ("linear", "mlp", MLP, {"schedule": "auto"}),
    ("linear", "layernorm_mlp", LN_MLP, {}),
    ("linear", "layernorm_mlp", LN_MLP, {"epsilon": 1e-6}),
    ("linear", "layernorm_mlp", LN_MLP, {"epsilon": 1e-3}),
    ("linear", "layernorm_qkv", QKV_W, {"scale": 0.125}),
    ("linear", "layernorm_qkv", QKV_W, {"scale": 0.2, "epsilon": 1e-3}),
    ("linear", "layernorm_qkv", QKV_W + (0.3,), {}),
    ("vit_attn", "attention", Q2, {}),
    ("vit_attn", "attention", Q2, {"strategy": "resident"}),
    ("vit_attn", "attention", Q2, {"strategy": "auto"}),
    ("vit_attn", "attention", Q2, {"strategy": "flash"}),
    ("vit_attn", "attention", Q2, {"scale": None}),
    ("vit_attn", "attention", Q2, {"scale": 0.1}),
    ("vit_attn", "attention", Q2, {"evict": "auto"}),
    ("vit_attn", "attention", Q3, {}),
    ("vit_attn", "attention", Q3, {"scale": 0.2}),
    ("vit_attn", "attention", Q3, {"strategy": "flash"}),
    ("vit_attn", "attention", Q3, {"strategy": "resident"}),
    ("vit_attn", "attention", Q3, {"scale": None, "strategy": "auto"}),
    ("vit_attn", "attention", Q3, {"evict": ("scalar",)}),
    ("vit_attn", "attention", (*Q3, 0.25), {}),
    ("vit_attn", "attention_qkv", (QKV2,), {"num_heads": 2}),
    ("vit_attn", "attention_qkv", (QKV2,), {"num_heads": 2, "strategy": "resident"}),
    ("vit_attn", "attention_qkv", (QKV2,), {"num_heads": 2, "scale": None}),
    ("vit_attn", "attention_qkv", (QKV3,), {"num_heads": 3}),
    ("vit_attn", "attention_qkv", (QKV3,), {"num_heads": 3, "scale": 0.3}),
    ("vit_attn", "attention_qkv", (QKV3,), {"num_heads": 3, "strategy": "flash"}),
    ("vit_attn", "attention_qkv", (QKV3, 3), {}),
    ("vit_attn", "attention_split", SPLIT6, {"num_heads": 6, "seq": 197}),
    ("vit_attn", "attention_split", SPLIT6, {"num_heads": 6, "seq": 197, "strategy": "resident"}),
    ("vit_attn", "attention_split", SPLIT6, {"num_heads": 6, "batch": 1}),
    ("vit_attn", "attention_split", SPLIT2, {"num_heads": 2, "seq": 40}),
    ("vit_attn", "attention_split", SPLIT2, {"num_heads": 2, "batch": 2}),
    ("vit_attn", "attention_split", SPLIT2, {"num_heads": 2, "seq": 40, "batch": 2, "strategy": "flash"}),
]

_BIG = (nki.spec((2, 8192), "float32"), nki.spec((8192, 8192), "float32"))  # (shapes only: 256 MiB of weight)
# (package, function, arguments, keywords, the launcher's refusal, the fetched kernel's)
REFUSED = [
    ("softmax", "softmax", (_a(4, 8, dtype=np.int32),), {}, "dtype int32 is not supported",
     r"no published specialisation of softmax for \(4x8:int32\)"),
    ("rmsnorm", "rmsnorm", (_a(4, 512), _a(512, dtype=np.float16)), {}, "must share a dtype",
     r"for \(4x512:float32, 512:float16\)"),
    ("layernorm", "layernorm", (_Shape((2, 9000), np.float32), _Shape((9000,), np.float32),
                                _Shape((9000,), np.float32)), {}, "at most 8192 columns", r"for \(2x9000:float32"),
    ("linear", "linear", (X, W, B), {"epilogue": "bogus"}, "epilogue must be one of",
     r"epilogue='bogus': no published specialisation takes epilogue at that value; published: 'none', 'bias', "
     r"'gelu', 'residual' \(or leave it out: None\)"),
    ("linear", "linear", _BIG, {}, r"K 8192 and N 8192 in float32 .* do not fit SBUF", r"for \(2x8192:float32, "),
    ("linear", "layernorm_linear", (NX, NG, NB, _a(64, 100), _a(100)), {"epilogue": "residual"},
     "no residual epilogue", r"epilogue='residual': .* published: 'none', 'bias', 'gelu'"),
    ("linear", "mlp", (_a(40, 64), _a(64, 128), _a(128), _a(128, 64), _a(64), _a(40, 64)), {},
     "DMA transpose, which takes 2-byte dtypes only", r"for \(40x64:float32, "),
    ("vit_attn", "attention", Q3, {"strategy": "bogus"}, "strategy must be one of",
     r"strategy='bogus': .* published: 'auto', 'resident', 'flash'"),
    ("vit_attn", "attention", Q3, {"evict": ("tensor",)}, "evict must be 'auto' or a non-empty sequence of engine",
     r"evict=\('tensor',\): .* published: 'auto', \('scalar', 'scalar', 'vector', 'scalar'\), \('scalar',\)"),
    ("vit_attn", "attention", [_a(1, 1, 8, 200) for _ in range(3)], {}, "head_dim 200 exceeds the limit of 128",
     r"D = 200 is outside the published range 1\.\.128"),
    ("vit_attn", "attention_qkv", (QKV3,), {"num_heads": 3, "strategy": "bogus"}, "strategy must be one of",
     r"strategy='bogus'"),
    ("vit_attn", "attention_split", SPLIT2, {"num_heads": 2, "seq": 40, "strategy": "bogus"},
     "strategy must be one of", r"strategy='bogus'"),
    # a constant the plan cannot do without (the manifest's requires): left out, the specialisation does not hold
    ("vit_attn", "attention_split", SPLIT6, {"num_heads": 6}, r"needs seq \(tokens per sequence\) or batch",
     r"for \(768x197:float32, 197x384:float32, num_heads=6\)[.]\n  768xT-float32.*: give seq \(the plan refuses the "
     r"call without it\)"),
    ("vit_attn", "attention_qkv", (QKV2,), {}, "missing 1 required positional argument: 'num_heads'",
     r"for \(1x197x384:float32\)[.]\n  1x197x384-float32.*: give num_heads"),
]  # fmt: skip

# (package, function, arguments, keywords, the fetched kernel's refusal): calls the launcher takes (its plan makes a
# kernel call) that run only with trust, each for the reason given
LIMITS = [
    # another eviction engine is another IR (the families copy P^T on the Scalar engine, seq_family.COPY_ENGINES)
    ("vit_attn", "attention", Q3, {"evict": ("vector",)}, r"evict=\('vector',\): no published specialisation takes "
                                                          r"evict at that value"),
    # the resident strip off the models' shapes past 512 tokens: the families over S run flash there
    ("vit_attn", "attention", Q600, {"strategy": "resident"}, r"for \(1x2x600x16:float32, .*strategy='resident'\)[.]"),
    # num_heads makes the scale head_dim ** -0.5, which the loader would have to compute from the plan's rule
    ("linear", "layernorm_qkv", QKV_W, {"num_heads": 2}, r"num_heads=2: no published specialisation takes "
                                                        r"num_heads"),
    # a schedule forced: the families publish the schedule their box needs, not every one
    ("linear", "mlp", MLP, {"schedule": "tiled"}, r"schedule='tiled': no published specialisation takes schedule"),
]  # fmt: skip


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    out = {}
    for name, keep in KEEP.items():
        root = lines_only(name, tmp_path_factory.mktemp(name), set(keep), lambda e, ln, keep=keep: keep[e](ln))
        out[name] = (build_bundle(root, benchmarks=False), read_package(root))
    return out


@pytest.fixture
def fetched(registry, bundles):
    """Each package fetched without trust, as ``acme/<name>``."""
    return {name: fetched_without_trust(bundle, f"acme/{name.replace('_', '-')}") for name, (bundle, _) in
            bundles.items()}  # fmt: skip


def _launcher(name: str, function: str):
    return getattr(__import__(f"kernels.{name}", fromlist=[function]), function)


def _plan(name: str, function: str):
    return getattr(__import__(f"kernels.{name}.launcher", fromlist=["launcher"]), f"plan_{function}")


def _local(name, function, args, kwargs):
    """The call run trusted, locally: the launcher function, or its plan and launch for a keyword only the plan
    takes (``evict``, ``schedule``: what a Hub call may pass, the plan being the entry point)."""
    fn = _launcher(name, function)
    if set(kwargs) <= set(inspect.signature(fn).parameters):
        return fn(*args, backend="numpy", **kwargs)
    launch, kargs, kkw = _plan(name, function)(*args, **kwargs)
    return launch(*kargs, backend="numpy", **kkw)


def _tolerance(pkg, function, dtype):
    ep = next(e for e in pkg.entry_points if e.name == function)
    return ep.tolerance.get(dtype) or pkg.tolerance.get(dtype, (1e-5, 1e-6))


def _label(call) -> str:
    name, function, args, kwargs = call[:4]
    shapes = ", ".join("x".join(map(str, a.shape)) if hasattr(a, "shape") else repr(a) for a in args)
    return f"{function}({shapes}{''.join(f', {k}={v!r}' for k, v in kwargs.items())})"


def test_the_table_covers_every_public_launcher_function():
    """Every function each package exports that launches a kernel (the plans' launchers) has calls in the table,
    and every entry point of each kernel.toml too."""
    for name in KEEP:
        module = __import__(f"kernels.{name}", fromlist=["__all__"])
        plans = {n[len("plan_"):] for n in module.__all__ if n.startswith("plan_")}
        assert plans <= {c[1] for c in CALLS if c[0] == name}, name
        entries = {e.name for e in read_package(ROOT / name).entry_points}
        assert entries == plans and entries == set(KEEP[name]), name
    assert len(CALLS) >= 60 and len(REFUSED) >= 9


@pytest.mark.parametrize("name", list(KEEP))
def test_every_call_agrees_with_the_launcher_run_locally(fetched, bundles, name):
    k, (_, pkg) = fetched[name], bundles[name]
    failures = []
    for call in (c for c in CALLS if c[0] == name):
        _, function, args, kwargs = call
        how = getattr(k, function).route(*args, **kwargs)[0]
        expected = _local(name, function, args, kwargs)
        got = getattr(k, function)(*args, backend="numpy", **kwargs)
        pairs = zip(got, expected) if isinstance(expected, tuple) else [(got, expected)]
        rtol, atol = _tolerance(pkg, function, np.dtype(args[0].dtype).name)
        for g, e in pairs:
            if g.shape != e.shape or not np.allclose(np.asarray(g, np.float64), np.asarray(e, np.float64), rtol=rtol,
                                                     atol=atol):  # fmt: skip
                failures.append(f"{_label(call)} ({how}): max |difference| "
                                f"{np.abs(np.asarray(g, np.float64) - np.asarray(e, np.float64)).max()}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("call", REFUSED, ids=_label)
def test_a_call_the_launcher_refuses_is_refused_without_trust(fetched, call):
    name, function, args, kwargs, launcher_says, hub_says = call
    with pytest.raises((ValueError, TypeError), match=launcher_says):
        _plan(name, function)(*args, **kwargs)  # (the launcher's first step)
    with pytest.raises((kernels.NoSpecialisationError, ScalarArgumentError), match=hub_says):
        getattr(fetched[name], function).route(*args, **kwargs)


@pytest.mark.parametrize("call", LIMITS, ids=_label)
def test_a_call_only_another_ir_serves_is_refused_naming_the_keyword(fetched, call):
    name, function, args, kwargs, hub_says = call
    launch, _, _ = _plan(name, function)(*args, **kwargs)  # the launcher takes it (with trust it runs)
    assert callable(launch)
    with pytest.raises(kernels.NoSpecialisationError, match=hub_says) as refused:
        getattr(fetched[name], function)(*args, backend="numpy", **kwargs)
    assert re.search(r"Published:\n", str(refused.value))
