"""A throwaway virtual environment with Hugging Face ``kernels`` 0.17.2, and a simulated Neuron machine for it.

The venv lives in pytest's cache directory and is reused while it still imports kernels 0.17.2; on a fresh machine
(or after ``pytest --cache-clear``) it is created and ``kernels==0.17.2`` installed with pip from the configured
index. Nothing of this project is installed into it: it is what a user of HF kernels has.

HF kernels decides the machine is a Neuron machine when ``import torch`` works and ``hasattr(torch, "neuron")``
(``kernels/backends.py:_backend``, checked before CUDA because torch-neuronx can load into any torch build). The
simulated machine is a directory with a ``torch`` module that has exactly what HF kernels reads of it: ``neuron``,
``__version__``, ``version.cuda``/``version.hip``, ``backends``, ``compiled_with_cxx11_abi``; put it first on
``PYTHONPATH`` to be on a Trainium machine as far as HF kernels can tell.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

HF_KERNELS = "0.17.2"

_TORCH_STUB = '''"""torch as HF kernels sees it on a Trainium machine with torch-neuronx loaded (a test stand-in)."""
__version__ = "2.9.0"
neuron = object()  # torch-neuronx registers torch.neuron; HF kernels' Neuron check is hasattr(torch, "neuron")


class version:
    cuda = None
    hip = None


class backends:
    class mps:
        @staticmethod
        def is_available():
            return False


def compiled_with_cxx11_abi():
    return True
'''


def _python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _has(python: Path, package: str, version: str) -> bool:
    probe = f"import importlib.metadata as m; assert m.version({package!r}) == {version!r}"
    return python.is_file() and subprocess.run([str(python), "-c", probe], capture_output=True, cwd="/").returncode == 0


def ensure_venv(root: Path, package: str = "kernels", version: str = HF_KERNELS) -> Path:
    """The venv's python, creating the venv and installing ``package==version`` into it if needed."""
    python = _python(root)
    if _has(python, package, version):
        return python
    venv.EnvBuilder(clear=True, with_pip=True).create(root)
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", f"{package}=={version}"],
                             capture_output=True, text=True, cwd="/")  # fmt: skip
    if install.returncode != 0 or not _has(python, package, version):
        raise RuntimeError(f"could not install {package}=={version} into {root}:\n{install.stderr[-2000:]}")
    return python


def neuron_machine(directory: Path) -> Path:
    """A PYTHONPATH entry that makes HF kernels see a Neuron device."""
    (directory / "torch").mkdir(parents=True, exist_ok=True)
    (directory / "torch" / "__init__.py").write_text(_TORCH_STUB)
    return directory


def run(python: Path, args: list[str], cwd: Path, *, pythonpath: list[Path] = (), check: bool = True,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """Run the HF venv's python (or its ``kernels`` command) with this process's HF_* settings, outside the
    source tree (so neither this project's ``kernels`` nor ``hub_client`` is importable by accident)."""
    # HF kernels 0.17.2 sends an empty user agent when HF_HUB_DISABLE_TELEMETRY is set, which huggingface_hub 2.4
    # turns into a header ending in "; " that httpx refuses: every request fails. The HF venv runs without it (the
    # endpoint is the local registry either way).
    skip = ("PYTHON", "VIRTUAL_ENV", "HF_HUB_DISABLE_TELEMETRY")
    full = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    full["HF_HUB_DISABLE_XET"] = "1"
    exe = [str(python.parent / args[0])] + args[1:] if args[0] == "kernels" else [str(python), *args]
    done = subprocess.run(exe, capture_output=True, text=True, cwd=cwd, env=full, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done

