"""The HF kernels build variant of a release: ``build/torch-neuron/``, what Hugging Face ``kernels`` loads on a
Trainium machine.

HF kernels (0.17) picks a variant directory under ``build/`` by the machine's backend; a pure-Python NKI kernel
is the noarch variant ``torch-neuron``. It needs the variant's ``__init__.py`` (imported as a module named by the
metadata ``id``, so relative imports of its sibling files work) and ``metadata.json`` with kebab-case keys:

- ``name`` (``^[a-z][-a-z0-9]*[a-z0-9]$``; a Python package name ``vit_attn`` becomes ``vit-attn``), ``id``
  (unique per build: HF registers the module in ``sys.modules`` under it, so two versions load side by side),
  ``version`` (the major, = branch ``v<major>``), ``license``, ``python-depends`` (``["nki"]``: HF checks it
  against its curated list and that ``import nki`` resolves), ``backend.type``;
- ``digest``: sha256 of every file of the variant except the top-level ``metadata.json``, base64, by path
  relative to the variant (HF's ``Digest.hash_variant`` computes the same).

The Python is the package's ``[neuron]`` files (written against AWS's current ``nki`` API), copied from
``neuron/`` unchanged. Everything here is deterministic, like the rest of the bundle.
"""

from __future__ import annotations

import base64
import hashlib
import json

from hub_client.errors import BundleError
from hub_client.package import KernelPackage

VARIANT = "torch-neuron"
PREFIX = f"build/{VARIANT}/"
METADATA = "metadata.json"
PYTHON_DEPENDS = ("nki",)  # HF's curated name for the Neuron backend: {"pkg": "nki", "import": "nki"}


def hf_name(package_name: str) -> str:
    return package_name.replace("_", "-")


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def variant_files(pkg: KernelPackage) -> dict[str, bytes]:
    """``build/torch-neuron/*`` of the package's bundle (empty if it declares no ``[neuron]`` files)."""
    if not pkg.neuron_files:
        return {}
    files = {rel.removeprefix("neuron/"): (pkg.root / rel).read_bytes() for rel in pkg.neuron_files}
    if METADATA in files:
        raise BundleError(f"{pkg.name}: [neuron] files may not include {METADATA}; the bundle writes it")
    digest = {path: _b64_sha256(data) for path, data in sorted(files.items())}
    # The id is unique per build (a different file gives a different module name) and the same for the same bytes.
    build = hashlib.sha256("".join(f"{p}\0{d}\n" for p, d in digest.items()).encode()).hexdigest()[:7]
    python_name = pkg.name.replace("-", "_")
    metadata = {
        "name": hf_name(pkg.name),
        "id": f"_{python_name}_neuron_{build}",
        "version": pkg.major,
        "license": pkg.license,
        "python-depends": list(PYTHON_DEPENDS),
        "backend": {"type": "neuron"},
        "digest": {"algorithm": "sha256", "files": digest},
    }
    files[METADATA] = (json.dumps(metadata, indent=2, sort_keys=True) + "\n").encode()
    return {PREFIX + path: data for path, data in sorted(files.items())}
