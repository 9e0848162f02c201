"""``nki_dsl.compat``: code importing ``nki`` / ``neuronxcc.nki`` runs unmodified, and a real installation of
either is never shadowed silently."""

import subprocess
import sys
import textwrap

import pytest

KERNEL_SCRIPT = """
import numpy as np
import nki
import nki.language as nl
import nki.isa as nisa
from nki.isa.constants import dge_mode, oob_mode
import neuronxcc.nki.language as lnl
from neuronxcc import nki as legacy

@nki.jit(platform_target="trn2")  # as HF kernels' Neuron example writes it
def relu(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown)
    nisa.tensor_scalar(dst=t, data=t, operand0=0.0, op0=nl.maximum)
    nisa.dma_copy(dst=out, src=t)
    return out

x = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)
assert np.array_equal(nki.simulate(relu)(x), np.maximum(x, 0))
print("ran", nki.__name__, nl.__name__, lnl.__name__, legacy.__name__)
"""


def _run(args, cwd, extra_path=None):
    env = None
    if extra_path is not None:
        import os

        env = {**os.environ, "PYTHONPATH": str(extra_path)}
    return subprocess.run([sys.executable, "-m", "nki_dsl.compat", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_script_importing_nki_runs_unmodified(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL_SCRIPT)
    r = _run([str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ran nki_dsl.current nki_dsl.current.language nki_dsl.language nki_dsl" in r.stdout


def test_pytest_suite_importing_nki_runs_unmodified(tmp_path):
    (tmp_path / "test_third_party.py").write_text(textwrap.dedent("""
        import numpy as np
        import nki, nki.isa as nisa, nki.language as nl

        @nki.jit
        def double(x):
            out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out, src=t)
            return out

        def test_double():
            x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
            np.testing.assert_array_equal(nki.cpu_simulate(double)(x), 2 * x)

        def test_fails():
            assert nki.language.tile_size.pmax == 129
    """))
    r = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)], tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr  # the suite's own status comes back: one test fails
    assert "1 failed, 1 passed" in r.stdout


def test_a_real_installation_is_not_shadowed_silently(tmp_path):
    fake = tmp_path / "site" / "nki"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    script = tmp_path / "which.py"
    script.write_text("import nki, neuronxcc.nki\nprint('real' if getattr(nki, 'REAL', False) else 'alias', "
                      "neuronxcc.nki.__name__)\n")
    r = _run([str(script)], tmp_path, extra_path=tmp_path / "site")
    assert r.returncode == 0, r.stderr
    assert "real nki_dsl" in r.stdout  # nki left alone, neuronxcc (not installed) aliased
    assert "a real 'nki' is installed" in r.stderr


def test_install_in_process_aliases_the_same_module_objects():
    from nki_dsl import compat

    if compat._installed is None and compat._real_installation("nki") is not None:
        pytest.skip("a real nki is installed here")
    compat.install()
    try:
        import nki
        import nki.isa
        import nki.language

        import nki_dsl.current

        assert nki is nki_dsl.current and nki.language is nki_dsl.current.language
        assert nki.isa.constants.oob_mode.skip == 1
        assert nki_dsl.current.__spec__.name == "nki_dsl.current"  # the module keeps its identity
        with pytest.raises(ModuleNotFoundError):
            import nki.no_such_module  # noqa: F401
    finally:
        compat.uninstall()
    assert "nki" not in sys.modules


def test_usage_without_arguments():
    r = subprocess.run([sys.executable, "-m", "nki_dsl.compat"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage" in r.stdout
