"""The kernel library's shape families from the Hub: each package published (cut down to the families under test,
``library_packages``), fetched without trust, and called with shapes nobody pre-traced, on NumPy, the
simulator and JAX, against the package's NumPy reference. No published Python runs."""

import sys

import numpy as np
import pytest

import kernels
import nki_dsl as nki
import nki_dsl.language as nl
from hub_client.bundle import build_bundle
from hub_client.errors import BundleError
from hub_client.publish import publish
from kernels.linear import reference as linear_reference
from kernels.linear.widths import toml_line
from kernels.matmul.reference import matmul as matmul_reference
from kernels.vit_attn.reference import attention_split as attention_split_reference
from tests.hub.conftest import fetched_without_trust, settings
from tests.hub.library_packages import ROOT, families_only

BF16 = nl.bfloat16


def _arrays(rng, shapes, dtype, scale=1.0):
    return [(scale * rng.standard_normal(s)).astype(np.float32).astype(dtype) for s in shapes]


def _close(out, expected, rtol, atol):
    np.testing.assert_allclose(np.asarray(out).astype(np.float64), np.asarray(expected).astype(np.float64),
                               rtol=rtol, atol=atol)  # fmt: skip


# name: (package, entry points, which family lines, entry point, [(shapes, dtype, constants)], reference, (rtol, atol))
CASES = {
    # M = 256 is not a multiple of 512: the tiled family; K = 1024, M = 512, N = 2048 fills the blocks
    "matmul": ("matmul", {"matmul"}, lambda ln: "1024 x M:bfloat16" in ln or "K x M:float32" in ln, "matmul",
               [([(384, 256), (384, 1536)], np.float32, {}), ([(1024, 512), (1024, 2048)], BF16, {})],
               matmul_reference, {"float32": (1e-4, 1e-3), "bfloat16": (2e-2, 1e-1)}),
    # 200 rows: two row tiles while the weight streams in; 700: a group-free tail of symbolic length
    "linear": ("linear", {"linear"}, lambda ln: "M x 256:float32" in ln, "linear",
               [([(200, 256), (256, 192), (192,)], np.float32, {"epilogue": "bias"}),
                ([(700, 256), (256, 192), (192,)], np.float32, {"epilogue": "bias"})],
               linear_reference.linear, {"float32": (1e-5, 2e-4)}),
    # DeiT-S/16 attention from the split layout at batch 2 (394 tokens)
    "attention_split": ("vit_attn", {"attention_split"}, lambda ln: "DeiT-S" in ln and "bfloat16" in ln,
                        "attention_split", [([(768, 394), (394, 384)], BF16, {"num_heads": 6, "seq": 197})],
                        attention_split_reference, {"bfloat16": (1.5e-2, 1.5e-2)}),
}  # fmt: skip


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    out = {}
    for name, (package, entries, keep, *_rest) in CASES.items():
        root = families_only(package, tmp_path_factory.mktemp(name), entries, keep)
        out[name] = build_bundle(root, benchmarks=False)
    return out


# JAX: XLA compiles each family instance (5-18 s here, the attention the most), so its runs are slow-marked
@pytest.mark.parametrize("backend", ["numpy", "simulator", pytest.param("jax", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(CASES))
def test_a_fetched_family_runs_unforeseen_shapes_without_trust(registry, bundles, name, backend):
    package, _, _, entry, calls, reference, tolerances = CASES[name]
    publish(bundles[name], f"acme/{package}", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel(f"acme/{package}", version=1)
    assert k.info.trusted is False and k.module is None
    rng = np.random.default_rng(7)
    for shapes, dtype, constants in calls:
        args = _arrays(rng, shapes, dtype)
        out = getattr(k, entry)(*args, backend=backend, **constants)
        rtol, atol = tolerances[np.dtype(dtype).name]
        _close(out, reference(*args, **constants), rtol, atol)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


def test_a_shape_off_the_step_says_why(registry, bundles):
    publish(bundles["matmul"], "acme/matmul", settings())
    k = kernels.get_kernel("acme/matmul", version=1)
    with pytest.raises(kernels.NoSpecialisationError) as e:
        k.matmul(np.ones((384, 200), np.float32), np.ones((384, 512), np.float32))
    assert "dimension M = 200 is not a multiple of 128" in str(e.value)


def test_an_entry_point_without_backend_runs_on_the_default_backend(registry, bundles):
    publish(bundles["linear"], "acme/linear", settings())
    k = kernels.get_kernel("acme/linear", version=1)
    args = _arrays(np.random.default_rng(5), [(200, 256), (256, 192), (192,)], np.float32)
    with nki.use_backend("simulator"):  # as a user's, or the backend fixture's, choice reaches kernel(x)
        out = k.linear(*args, epilogue="bias")
    assert {b for c in k.linear._parsed.values() for (b, _) in c.executables} == {"simulator"}
    _close(out, linear_reference.linear(*args, epilogue="bias"), 1e-5, 2e-4)


def _hf_variant(package: str):
    """``build/torch-neuron/`` of the package as HF kernels imports it (its own module, ``nki`` resolved to
    nki-dsl's current-API front end): Python, so it traces each concrete shape at its first call, as AWS's ``nki``
    compiles it on a Trainium machine; it knows no published shape list."""
    import importlib.util

    import nki_dsl.compat

    nki_dsl.compat.install()
    from tests.hub.library_packages import ROOT

    name = f"_test_hf_variant_{package}"
    spec = importlib.util.spec_from_file_location(name, ROOT / package / "neuron" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_hf_variant_takes_the_shapes_the_family_takes(registry, bundles):
    """A shape no specialisation lists (matmul 384 x 256 x 1536) gives the same numbers from the HF variant's
    Python as from the family's IR fetched without trust; a shape the launcher refuses is refused by both with the
    same reason. (HF kernels runs the variant's Python, trusted by HF's own rules, for any shape its launcher
    accepts; the IR path without trust runs the declared ranges only.)"""
    publish(bundles["matmul"], "acme/matmul", settings())
    ir_path = kernels.get_kernel("acme/matmul", version=1)
    variant = _hf_variant("matmul")
    lhsT, rhs = _arrays(np.random.default_rng(3), [(384, 256), (384, 1536)], np.float32)
    np.testing.assert_allclose(variant.matmul(lhsT, rhs), ir_path.matmul(lhsT, rhs), rtol=1e-5, atol=1e-4)
    from kernels.matmul.launcher import plan_matmul

    bad = (np.ones((384, 200), np.float32), np.ones((384, 512), np.float32))
    with pytest.raises(ValueError) as launcher:
        plan_matmul(*bad)
    with pytest.raises(ValueError) as hf:
        variant.matmul(*bad)
    assert str(hf.value) == str(launcher.value)


# -- the fused kernels of linear (mlp, layernorm_mlp, layernorm_qkv; kernels/linear/token_blocks.py) ----------------
# Published with narrow weights (K 128, H 256) so that NumPy and the simulator run them in a second or two; the
# ranges are kernel.toml's (declared there for ViT-B/16's widths). Called at row counts nobody declared: 197 * 3,
# 197 * 5 + 1 and primes, against the concrete trace's numbers (the launcher's Python, run locally) and float64.
# (Every range's decisions at more row counts: tests/kernels/test_linear_families.py.)
FUSED_K, FUSED_H = 128, 256
FUSED = {
    "mlp": ([("M", FUSED_K), (FUSED_K, FUSED_H), (FUSED_H,), (FUSED_H, FUSED_K), (FUSED_K,), ("M", FUSED_K)], {},
            [(513, 65536)], (591,)),
    "layernorm_mlp": ([("M", FUSED_K), (FUSED_K,), (FUSED_K,), (FUSED_K, FUSED_H), (FUSED_H,), (FUSED_H, FUSED_K),
                       (FUSED_K,)], {"epsilon": 1e-6}, [(513, 1024)], (986,)),
    "layernorm_qkv": ([("M", FUSED_K), (FUSED_K,), (FUSED_K,), (FUSED_K, 3 * FUSED_K), (3 * FUSED_K,)],
                      {"scale": 0.125, "epsilon": 1e-6}, [(1, 128), (2049, 65536)], (97, 2053)),  # 2053: a carried loop
}  # fmt: skip


def _toml_line(shapes, constants, lo, hi):
    args = ", ".join(f'"{"x".join(str(d) for d in s).replace("Mx", "M x ")}:bfloat16"' for s in shapes)
    consts = ", ".join(f"{k} = {v}" for k, v in constants.items())
    consts = f", constants = {{ {consts} }}" if consts else ""
    return f'    {{ args = [{args}], dims = {{ M = "{lo}..{hi}" }}{consts} }},'


@pytest.fixture(scope="module")
def fused_bundle(tmp_path_factory):
    root = families_only("linear", tmp_path_factory.mktemp("fused"), set(FUSED), lambda ln: False)
    toml = (root / "kernel.toml").read_text()
    for entry, (shapes, constants, ranges, _) in FUSED.items():
        head = f"[entry-points.{entry}]"
        at = toml.index("specialisations = [", toml.index(head)) + len("specialisations = [")
        lines = "".join("\n" + _toml_line(shapes, constants, lo, hi) for lo, hi in ranges)
        toml = toml[:at] + lines + toml[at:]
    (root / "kernel.toml").write_text(toml)
    return build_bundle(root, benchmarks=False)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_the_fused_kernels_families_run_unforeseen_row_counts_without_trust(registry, fused_bundle, backend):
    from kernels.linear import launcher

    publish(fused_bundle, "acme/linear", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/linear", version=1)
    assert k.info.trusted is False and k.module is None
    rng = np.random.default_rng(8)
    for entry, (shapes, constants, _, rows) in FUSED.items():
        for m in rows:
            # weights scaled by 1 / sqrt(rows), so that the outputs stay O(1-10) as in a trained model
            args = [a if a.ndim != 2 or "M" in s else (a.astype(np.float32) / np.sqrt(a.shape[0])).astype(BF16)
                    for s, a in zip(shapes, _arrays(rng, [tuple(m if d == "M" else d for d in s) for s in shapes],
                                                    BF16))]  # fmt: skip
            got = getattr(k, entry)(*args, backend=backend, **constants)
            got = got if isinstance(got, tuple) else (got,)
            local = getattr(launcher, entry)(*args, backend="numpy", **constants)  # the concrete trace
            expected = getattr(linear_reference, entry)(*[a.astype(np.float64) for a in args], **constants)
            for g, want, ref in zip(got, local if isinstance(local, tuple) else (local,),
                                    expected if isinstance(expected, tuple) else (expected,)):  # fmt: skip
                np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(want, np.float64))
                _close(g, ref, 2e-2, 8e-2)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


# -- linear's widths (kernels/linear/widths.py): K and N symbolic as well as M ----------------------------------------
# Three of kernel.toml's width families (picked by their N range; the rest are proved in tests/kernels), called at
# widths nobody declared: 384 / 1152 and ViT-L's 1024 / 4096, against the concrete trace and float64.
WIDTHS = {  # entry: [(dtype, (M, K, N) to call, constants)]
    "linear": [(np.float32, (70, 384, 1152), {"epilogue": "bias"}), (BF16, (70, 1024, 4096), {"epilogue": "residual"})],
    "layernorm_linear": [(BF16, (70, 1024, 4096), {"epilogue": "bias", "epsilon": 1e-6})],
}


def _width_line(entry, dtype, mkn, constants):
    """kernel.toml's line (``widths.toml_line``) of the family holding the call: dtype, ranges, epilogue."""
    from kernels.linear import widths

    _, k, n = mkn
    boxes = widths.width_boxes(np.dtype(dtype).itemsize, entry == "layernorm_linear", constants["epilogue"])
    (k0, k1), (n0, n1) = next(b for b in boxes if b[0][0] <= k <= b[0][1] and b[1][0] <= n <= b[1][1])
    dims = f'dims = {{ M = "1..65536", K = "{k0}..{k1}", N = "{n0}..{n1}" }}'
    lines = [widths.toml_line(*f) for f in widths.families(entry) if f[2]["epilogue"] == constants["epilogue"]]
    return next(ln for ln in lines if f':{np.dtype(dtype).name}"]' in ln and dims in ln)


def _width_arrays(entry, m, k, n, dtype, epilogue, rng):
    x = _arrays(rng, [(m, k)], dtype)[0]
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32).astype(dtype)
    b, r = _arrays(rng, [(n,), (m, n)], dtype)
    if entry == "linear":
        return [x, w, b] + [r] * (epilogue == "residual")
    gamma, beta = (1 + 0.1 * rng.standard_normal(k)).astype(np.float32).astype(dtype), _arrays(rng, [(k,)], dtype)[0]
    return [x, gamma, beta, w, b]


@pytest.fixture(scope="module")
def widths_bundle(tmp_path_factory):
    keep = [_width_line(entry, *case) for entry, cases in WIDTHS.items() for case in cases]
    root = families_only("linear", tmp_path_factory.mktemp("widths"), set(WIDTHS), lambda ln: ln in keep)
    return build_bundle(root, benchmarks=False)


def _fetched_without_trust(bundle):
    """A bundle of three width families published as acme/linear and fetched with no trust: (the kernel, the
    hub modules imported before any call)."""
    assert sum(1 for _ in bundle.manifest.ir_files()) == 3  # the three width families alone
    publish(bundle, "acme/linear", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/linear", version=1)
    assert k.info.trusted is False and k.module is None
    return k, imported


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_linear_runs_widths_nobody_declared_without_trust(registry, widths_bundle, backend):
    from kernels.linear import launcher

    k, imported = _fetched_without_trust(widths_bundle)
    rng = np.random.default_rng(9)
    for entry, cases in WIDTHS.items():
        for dtype, (m, kk, n), constants in cases:
            args = _width_arrays(entry, m, kk, n, dtype, constants["epilogue"], rng)
            got = getattr(k, entry)(*args, backend=backend, **constants)
            local = getattr(launcher, entry)(*args, backend="numpy", **constants)  # the concrete trace
            np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(local, np.float64))
            expected = getattr(linear_reference, entry)(*[a.astype(np.float64) for a in args], **constants)
            _close(got, expected, *((1e-5, 2e-4) if dtype is np.float32 else (2e-2, 8e-2)))
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


# -- the row kernels' widths (softmax, rmsnorm, ...: widths.py in each package): W symbolic, epsilon at run time ----
# One width family each (picked by its dtype and W range), fetched without trust and called at a row count and width
# nobody declared, rmsnorm with an epsilon no specialisation fixes (a runtime scalar: the manifest's ``scalars``),
# against the concrete trace (the launcher's Python, run locally: bit for bit) and float64.
ROW_KERNELS = {  # package: (the kept family's line fragment, [(shapes, dtype, keywords)], (rtol, atol))
    "softmax": ('"N x W:bfloat16"', [([(70, 1000)], BF16, {})], (2e-2, 2e-3)),
    "rmsnorm": ('"N x W:float32", "W:float32"], dims = { N = "1..65536", W = "1..4096" }',
                [([(130, 700), (700,)], np.float32, {"epsilon": 1e-5}), ([(3, 1), (1,)], np.float32, {}),
                 ([(200, 2000), (2000,)], np.float32, {"epsilon": 0.5})], (1e-5, 1e-5)),
    "layernorm": ('"N x W:bfloat16", "W:bfloat16", "W:bfloat16"], dims = { N = "1..65536", W = "1..2048" }',
                  [([(394, 1024), (1024,), (1024,)], BF16, {"epsilon": 1e-5}),  # ViT-L at batch 2, HF's epsilon
                   ([(7, 1100), (1100,), (1100,)], BF16, {})], (2e-2, 6e-2)),
}  # fmt: skip


@pytest.fixture(scope="module")
def row_bundles(tmp_path_factory):
    out = {}
    for package, (fragment, *_rest) in ROW_KERNELS.items():
        root = families_only(package, tmp_path_factory.mktemp(package), {package}, lambda ln, f=fragment: f in ln)
        out[package] = build_bundle(root, benchmarks=False)
    return out


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_row_kernels_run_widths_and_epsilons_nobody_declared_without_trust(registry, row_bundles, backend):
    import importlib

    rng = np.random.default_rng(10)
    for package, (_, calls, (rtol, atol)) in ROW_KERNELS.items():
        assert len(row_bundles[package].manifest.ir_files()) == 1  # the one width family
        publish(row_bundles[package], f"acme/{package}", settings())
        imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
        k = kernels.get_kernel(f"acme/{package}", version=1)
        assert k.info.trusted is False and k.module is None
        local = importlib.import_module(f"kernels.{package}")
        for shapes, dtype, keywords in calls:
            args = _arrays(rng, shapes, dtype)
            got = getattr(k, package)(*args, backend=backend, **keywords)
            want = getattr(local, package)(*args, backend="numpy", **keywords)  # the concrete trace
            np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
            expected = getattr(local, f"{package}_reference")(*[a.astype(np.float64) for a in args], **keywords)
            _close(got, expected, rtol, atol)
        assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


def test_matmul_runs_past_8192_without_trust(registry, bundles):
    """The tiled family reaches 16384 (the untrusted-IR budget holds it there): N = 12288, fetched without trust."""
    k = fetched_without_trust(bundles["matmul"], "acme/matmul")
    lhsT, rhs = _arrays(np.random.default_rng(11), [(256, 128), (256, 12288)], np.float32)
    from kernels.matmul import matmul as local

    out = k.matmul(lhsT, rhs)
    np.testing.assert_array_equal(out, local(lhsT, rhs))  # the concrete trace's numbers
    _close(out, matmul_reference(lhsT.astype(np.float64), rhs.astype(np.float64)), 1e-4, 1e-3)


# -- vit-attn's attention over any sequence length (kernels/vit_attn/seq_family.py) ----------------------------------
# Two of kernel.toml's families over B, H, S and D, called at sequence lengths no model has (300, and 640 in the
# second box) with head dims no model has (48, 100), against float64.


@pytest.fixture(scope="module")
def attention_bundle(tmp_path_factory):
    root = families_only("vit_attn", tmp_path_factory.mktemp("attention"), {"attention"},
                         lambda ln: "B x H x S x D:float32" in ln and ('S = "1..512"' in ln or 'S = "1..2048"' in ln)
                         and "scalars" not in ln)
    return build_bundle(root, benchmarks=False)  # fmt: skip


@pytest.mark.parametrize("backend", ["numpy", pytest.param("simulator", marks=pytest.mark.slow)])
def test_vit_attn_runs_a_sequence_length_no_model_has_without_trust(registry, attention_bundle, backend):
    from kernels.vit_attn.reference import attention as attention_reference

    assert sum(1 for _ in attention_bundle.manifest.ir_files()) == 2
    publish(attention_bundle, "acme/vit-attn", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/vit-attn", version=1)
    assert k.info.trusted is False and k.module is None
    rng = np.random.default_rng(11)
    for shape in [(2, 3, 300, 48), (1, 1, 640, 100)]:
        q, kk, v = _arrays(rng, [shape] * 3, np.float32)
        out = k.attention(q, kk, v, backend=backend)
        _close(out, attention_reference(q, kk, v), 1e-5, 1e-5)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


# -- vit-attn's attention_qkv over any sequence length (kernels/vit_attn/head_views.py) --------------------------------
# kernel.toml's per-head view family over S 1..512 (fp32), called at sequence lengths, head counts and head dims no
# model has (300 tokens of head_dim 48 at batch 2; 129 of head_dim 100; 5 heads of 8), against float64 and the
# concrete trace (tests/hub/test_family_views.py: past the family's B and H ranges, and the views' refusals).


@pytest.fixture(scope="module")
def attention_qkv_bundle(tmp_path_factory):
    def keep(ln):
        return '"B x S x (3 x H x D):float32"' in ln and 'S = "1..512"' in ln and "scalars" not in ln

    root = families_only("vit_attn", tmp_path_factory.mktemp("attention_qkv"), {"attention_qkv"}, keep)
    return build_bundle(root, benchmarks=False)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("simulator", marks=pytest.mark.slow)])
def test_vit_attn_qkv_runs_a_sequence_length_no_model_has_without_trust(registry, attention_qkv_bundle, backend):
    from kernels.vit_attn.launcher import plan_attention_qkv
    from kernels.vit_attn.reference import attention_qkv as attention_qkv_reference

    assert sum(1 for _ in attention_qkv_bundle.manifest.ir_files()) == 1
    publish(attention_qkv_bundle, "acme/vit-attn", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/vit-attn", version=1)
    assert k.info.trusted is False and k.module is None
    rng = np.random.default_rng(13)
    for shape, heads in [((2, 300, 3 * 3 * 48), 3), ((1, 129, 3 * 2 * 100), 2), ((1, 20, 3 * 5 * 8), 5)]:
        (qkv,) = _arrays(rng, [shape], np.float32)
        out = k.attention_qkv(qkv, num_heads=heads, backend=backend)
        _close(out, attention_qkv_reference(qkv, heads), 2e-5, 2e-5)
        launch, args, kwargs = plan_attention_qkv(qkv, heads)  # the concrete trace: another schedule, close
        _close(out, nki.trace(launch, *args, target="trn2", **kwargs).compile("numpy").run({"qkv": qkv}), 2e-5, 2e-5)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


# -- vit-attn's attention_split over any batch and sequence length (kernels/vit_attn/head_views.py) -------------------
# The per-head view family over S 1..512 (fp32), called with ``batch=1`` at token counts no model has (300; 129: a
# one-row last query tile), and with ``seq=`` at a batch of 2, against float64.


@pytest.fixture(scope="module")
def attention_split_bundle(tmp_path_factory):
    root = families_only("vit_attn", tmp_path_factory.mktemp("attention_split"), {"attention_split"},
                         lambda ln: '"(2 x H x D) x (B x S):float32"' in ln and 'S = "1..512"' in ln)  # fmt: skip
    return build_bundle(root, benchmarks=False)


def test_vit_attn_split_runs_a_sequence_length_no_model_has_without_trust(registry, attention_split_bundle):
    assert sum(1 for _ in attention_split_bundle.manifest.ir_files()) == 1
    publish(attention_split_bundle, "acme/vit-attn", settings())
    imported = {m for m in sys.modules if m.startswith("_kernels_hub_")}
    k = kernels.get_kernel("acme/vit-attn", version=1)
    assert k.info.trusted is False and k.module is None
    rng = np.random.default_rng(17)
    for tokens, call in ((300, {"batch": 1}), (129, {"batch": 1}), (258, {"seq": 129})):
        qkT, v = _arrays(rng, [(768, tokens), (tokens, 384)], np.float32)
        out = k.attention_split(qkT, v, num_heads=6, backend="numpy", **call)
        _close(out, attention_split_reference(qkT, v, 6, **call), 2e-5, 2e-5)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


# -- the fused kernels' widths (kernels/linear/fused_widths.py): K, H and N symbolic as well as M --------------------
# One family per entry point (the one holding the call; the rest are proved in tests/kernels), called at widths
# nobody declared (DeiT-S/16's MLP and qkv, 384 wide, at 70 rows; a ragged layernorm_mlp) against the concrete trace
# and float64 (ViT-B/L/H's widths: tests/kernels/test_fused_width_families.py).
FUSED_WIDTHS = {  # entry: (dtype, shapes of the call, constants, the box's (K, N, H) point)
    "mlp": (BF16, [(70, 384), (384, 1536), (1536,), (1536, 384), (384,), (70, 384)], {}, (384, 384, 1536)),
    "layernorm_mlp": (np.float32, [(70, 300), (300,), (300,), (300, 700), (700,), (700, 300), (300,)],
                      {"epsilon": 1e-6}, (300, 300, 700)),
    "layernorm_qkv": (BF16, [(70, 384), (384,), (384,), (384, 1152), (1152,)],
                      {"scale": 0.125, "epsilon": 1e-6}, (384, 1152, 0)),
}  # fmt: skip


def _fused_width_line(entry, dtype, point, constants):
    """kernel.toml's line (``widths.toml_line``) of the family holding the call."""
    from kernels.linear import fused_widths
    from kernels.linear.widths import toml_line

    box = fused_widths.box_of(entry, np.dtype(dtype).itemsize, *point)
    lines = [toml_line(*f) for f in fused_widths.families(entry) if f[2] == {}]  # (epsilon, scale: runtime scalars)
    dims = {"mlp": ("K", "H", "N"), "layernorm_mlp": ("K", "H"), "layernorm_qkv": ("K", "N")}[entry]
    want = [f'{d} = "{lo}..{hi}' for d, (lo, hi) in zip(dims, box)]
    return next(ln for ln in lines if f":{np.dtype(dtype).name}\"]" in ln and all(w in ln for w in want))


@pytest.fixture(scope="module")
def fused_widths_bundle(tmp_path_factory):
    keep = [_fused_width_line(entry, dtype, point, constants)
            for entry, (dtype, _, constants, point) in FUSED_WIDTHS.items()]  # fmt: skip
    root = families_only("linear", tmp_path_factory.mktemp("fused_widths"), set(FUSED_WIDTHS),
                         lambda ln: ln in keep)  # fmt: skip
    return build_bundle(root, benchmarks=False)


@pytest.mark.parametrize("backend", ["numpy", "simulator"])
def test_the_fused_kernels_run_widths_nobody_declared_without_trust(registry, fused_widths_bundle, backend):
    from kernels.linear import launcher

    k, imported = _fetched_without_trust(fused_widths_bundle)
    rng = np.random.default_rng(10)
    for entry, (dtype, shapes, constants, _) in FUSED_WIDTHS.items():
        args = [a if a.ndim != 2 or a.shape[0] == 70 else (a.astype(np.float32) / np.sqrt(a.shape[0])).astype(dtype)
                for a in _arrays(rng, shapes, dtype)]  # fmt: skip
        got = getattr(k, entry)(*args, backend=backend, **constants)
        local = getattr(launcher, entry)(*args, backend="numpy", **constants)  # the concrete trace
        expected = getattr(linear_reference, entry)(*[a.astype(np.float64) for a in args], **constants)
        tol = (1e-5, 2e-4) if dtype is np.float32 else (2e-2, 8e-2)
        for g, want, ref in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, local, expected)), strict=True):
            np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(want, np.float64))
            _close(g, ref, *tol)
    assert {m for m in sys.modules if m.startswith("_kernels_hub_")} == imported  # no published package imported


def test_layernorm_linear_takes_epsilon_at_run_time_without_trust(registry, widths_bundle):
    """The LayerNorm kernels' width families take epsilon (and layernorm_qkv's softmax scale) as runtime scalars: a
    fetched kernel called with HF's epsilon 1e-5 computes the reference's numbers for it, which differ from 1e-6's
    (the rows' variance is of epsilon's order, so epsilon matters), bit for bit the concrete trace's, no trust; a
    call leaving it out gets the plan's default."""
    from kernels.linear import launcher

    rng = np.random.default_rng(12)
    k, _ = _fetched_without_trust(widths_bundle)
    x, gamma, beta, w, b = _width_arrays("layernorm_linear", 70, 1024, 4096, BF16, "bias", rng)
    x = (1e-3 * x.astype(np.float32)).astype(BF16)  # variance ~1e-6
    outs = {}
    for eps in (1e-5, 1e-6):
        outs[eps] = got = np.asarray(k.layernorm_linear(x, gamma, beta, w, b, epsilon=eps, epilogue="bias"), np.float64)
        np.testing.assert_array_equal(got, np.asarray(launcher.layernorm_linear(x, gamma, beta, w, b, epsilon=eps,
                                                                                 epilogue="bias"), np.float64))
        _close(got, linear_reference.layernorm_linear(*[a.astype(np.float64) for a in (x, gamma, beta, w, b)],
                                                      epsilon=eps, epilogue="bias"), 2e-2, 8e-2)  # fmt: skip
    assert np.abs(outs[1e-5] - outs[1e-6]).max() > 1.0
    default = k.layernorm_linear(x, gamma, beta, w, b, epilogue="bias")
    np.testing.assert_array_equal(np.asarray(default, np.float64), outs[1e-6])


def test_the_fused_layernorm_kernels_take_epsilon_and_the_scale_at_run_time_without_trust(registry,
                                                                                          fused_widths_bundle):
    """layernorm_mlp's epsilon and layernorm_qkv's epsilon and softmax scale, as runtime scalars (see above)."""
    rng = np.random.default_rng(13)
    k, _ = _fetched_without_trust(fused_widths_bundle)
    dtype, shapes, _, _ = FUSED_WIDTHS["layernorm_mlp"]
    args = [a if a.ndim != 2 or a.shape[0] == 70 else (a / np.sqrt(a.shape[0])).astype(dtype)
            for a in _arrays(rng, shapes, dtype)]  # fmt: skip
    args[0] = 1e-3 * args[0]
    got = {eps: np.asarray(k.layernorm_mlp(*args, epsilon=eps), np.float64) for eps in (1e-5, 1e-6)}
    for eps, out in got.items():
        _close(out, linear_reference.layernorm_mlp(*[a.astype(np.float64) for a in args], epsilon=eps), 1e-5, 2e-4)
    assert np.abs(got[1e-5] - got[1e-6]).max() > 1e-2
    dtype, shapes, _, _ = FUSED_WIDTHS["layernorm_qkv"]
    args = [a if a.ndim != 2 or a.shape[0] == 70 else (a.astype(np.float32) / np.sqrt(a.shape[0])).astype(dtype)
            for a in _arrays(rng, shapes, dtype)]  # fmt: skip
    qkT, v = k.layernorm_qkv(*args, scale=0.1, epsilon=1e-5)
    ref_qkT, ref_v = linear_reference.layernorm_qkv(*[a.astype(np.float64) for a in args], scale=0.1, epsilon=1e-5)
    _close(qkT, ref_qkT, 2e-2, 8e-2)
    _close(v, ref_v, 2e-2, 8e-2)
    default_qkT, _ = k.layernorm_qkv(*args, epsilon=1e-5)  # the plan's default scale, 0.125: k^T 1.25 times as large
    hd = shapes[3][1] // 3
    np.testing.assert_allclose(np.asarray(default_qkT[hd:], np.float64), 1.25 * np.asarray(qkT[hd:], np.float64),
                               rtol=2e-2, atol=2e-2)  # fmt: skip


def test_the_streamed_mlp_families_run_without_trust(registry, tmp_path):
    """The MLPs' streamed families (``schedule = "streamed"``: the weights by hidden blocks, where both do not fit
    SBUF; kernels/linear/fused_streamed.py), published alone and called at small widths they hold: the launcher's
    streamed schedule's numbers bit for bit, and float64's (ViT-H/14's widths: tests/kernels/test_fused_streamed.py)."""
    from kernels.linear import fused_widths, launcher

    keep = [toml_line(*f) for entry, dtype in (("mlp", "bfloat16"), ("layernorm_mlp", "float32"))
            for f in fused_widths.families(entry) if f[2] == {"schedule": "streamed"} and f":{dtype}" in f[0][0]][::4]
    assert len(keep) == 2  # the first box of each (N, or K, up to 512)
    root = families_only("linear", tmp_path, {"mlp", "layernorm_mlp"}, lambda ln: ln in keep)
    publish(build_bundle(root, benchmarks=False), "acme/linear", settings())
    k = kernels.get_kernel("acme/linear", version=1)
    assert k.info.trusted is False
    rng = np.random.default_rng(14)
    cases = {"mlp": (BF16, [(70, 200), (200, 700), (700,), (700, 300), (300,), (70, 300)], {}),
             "layernorm_mlp": (np.float32, [(70, 300), (300,), (300,), (300, 700), (700,), (700, 300), (300,)],
                               {"epsilon": 1e-5})}  # fmt: skip
    for entry, (dtype, shapes, constants) in cases.items():
        args = [a if a.ndim != 2 or a.shape[0] == 70 else (a.astype(np.float32) / np.sqrt(a.shape[0])).astype(dtype)
                for a in _arrays(rng, shapes, dtype)]  # fmt: skip
        got = getattr(k, entry)(*args, **constants)
        launch, largs, kwargs = getattr(launcher, f"plan_{entry}")(*args, **constants, schedule="streamed")
        traced = nki.trace(launch, *largs, target="trn2", **kwargs)
        want = traced.compile("numpy").run(dict(zip(traced.param_names, largs)))
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
        expected = getattr(linear_reference, entry)(*[a.astype(np.float64) for a in args], **constants)
        _close(got, expected, *((1e-5, 2e-4) if dtype is np.float32 else (2e-2, 8e-2)))


def test_an_entry_points_tolerance_goes_with_its_vectors(fused_widths_bundle, tmp_path):
    """kernel.toml's ``tolerance`` of an entry point (the MLPs': their outputs are O(1000) with the bundle's inputs)
    is what the builder checks the reference with and ships in the vectors, over the package's; a malformed one is
    refused naming the entry point."""
    from hub_client.npz import load_npz
    from hub_client.package import read_package

    spec = next(s for s in fused_widths_bundle.manifest.entry_points["layernorm_mlp"].specialisations
                if s.test_vectors)  # the float32 family (bfloat16 ships no vectors)
    assert tuple(load_npz(fused_widths_bundle.files[spec.test_vectors])["tolerance"]) == (1e-5, 2e-2)
    assert read_package(ROOT / "linear").tolerance["float32"] == (1e-5, 2e-4)  # the package's, for the others
    root = families_only("linear", tmp_path, {"mlp"}, lambda ln: False)
    toml = (root / "kernel.toml").read_text().replace("float16 = { rtol = 1e-2, atol = 4.0 }", "float16 = 0.1")
    (root / "kernel.toml").write_text(toml)
    with pytest.raises(BundleError, match=r"\[entry-points.mlp\]: tolerance must map dtypes"):
        read_package(root)


def test_a_kernel_of_two_outputs_is_checked_output_by_output(tmp_path):
    """layernorm_qkv's float32 width family (q^T/k^T and V): the builder checks both outputs against the reference
    (a reference whose V is off is refused) and ships no vectors (they hold one output)."""
    from kernels.linear import fused_widths

    line = next(toml_line(*f) for f in fused_widths.families("layernorm_qkv") if "float32" in f[0][0])
    root = families_only("linear", tmp_path / "ok", {"layernorm_qkv"}, lambda ln: ln == line)
    (spec,) = build_bundle(root, benchmarks=False).manifest.entry_points["layernorm_qkv"].specialisations
    assert spec.is_family and spec.test_vectors is None
    root = families_only("linear", tmp_path / "off", {"layernorm_qkv"}, lambda ln: ln == line)
    ref = (root / "reference.py").read_text()
    v_out = "y[:, 2 * hd:].astype(x.dtype)"
    (root / "reference.py").write_text(ref.replace(v_out, f"({v_out} + 1e-2).astype(x.dtype)"))
    with pytest.raises(BundleError, match="disagrees with its NumPy reference"):
        build_bundle(root, benchmarks=False)
