"""From a verified release (a snapshot directory whose files passed their digest checks) to a loaded kernel.

Without trust nothing from the release is executed: entry points run the published IR, parsed and verified on
first use. With trust the published Python package is imported too, under a module name unique to the release
(``_kernels_hub_<name>_<commit>``), so several versions of one kernel can live in one process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hub_client.entry import EntryPoint
from hub_client.errors import BundleError
from hub_client.manifest import Manifest
from hub_client.package_import import function_at, import_package_dir


@dataclass(frozen=True)
class KernelInfo:
    repo_id: str
    version: str | None  # the full release version, e.g. "1.0.0" (None for an untagged revision)
    revision: str  # what was asked for and resolved: "v1.0.0", "v1", "main", a commit, or a local path
    commit: str | None
    digest: str  # sha256 of manifest.json: the whole bundle's digest (every file's digest is in it)
    entry_points: tuple[str, ...]
    trusted: bool
    path: Path = field(repr=False)
    trusted_by: str | None = None  # why the published Python runs: "trust_remote_code" or "trusted publisher <org>"

    def __str__(self) -> str:
        runs = f"published Python and IR ({self.trusted_by})" if self.trusted else "verified IR specialisations only"
        return (
            f"{self.repo_id} {('v' + self.version) if self.version else self.revision} commit {self.commit or '-'}\n"
            f"  digest sha256:{self.digest}\n  entry points: {', '.join(self.entry_points)}\n"
            f"  runs: {runs}"
        )


class LoadedKernel:
    """A kernel from the Hub: its entry points as attributes (``k.softmax(x)``) and ``k.info``."""

    def __init__(self, info: KernelInfo, entry_points: dict[str, EntryPoint], module=None):
        self.info = info
        self._entry_points = entry_points
        self.module = module  # the imported published package, when trusted

    def __getattr__(self, name: str):
        entries = self.__dict__.get("_entry_points", {})
        if name in entries:
            return entries[name]
        raise AttributeError(f"kernel {self.info.repo_id} has no entry point {name!r}; it has {', '.join(entries)}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._entry_points))

    def __repr__(self) -> str:
        entries = ", ".join(self._entry_points)
        return f"<LoadedKernel {self.info.repo_id} {self.info.version or self.info.revision} ({entries})>"


def _plan(module, ref: str, manifest: Manifest):
    try:
        return function_at(module, ref)
    except (ImportError, AttributeError) as e:
        raise BundleError(f"{manifest.name}: plan {ref!r} is not in the published package ({e})") from None


def load(snapshot: Path, manifest: Manifest, *, repo_id: str, revision: str, commit: str | None, trusted: bool,
         backend: str | None = None, trusted_by: str | None = None) -> LoadedKernel:  # fmt: skip
    label = f"{repo_id}@{manifest.version}"
    module = None
    if trusted:
        unique = (commit or manifest.digest)[:12]
        module_name = f"_kernels_hub_{manifest.name.replace('-', '_')}_{unique}"
        module = import_package_dir(module_name, snapshot / manifest.python_package)
    entries = {
        name: EntryPoint(
            name, label, snapshot, ep.specialisations, plan=_plan(module, ep.plan, manifest) if module else None,
            parameters=ep.parameters, defaults=ep.defaults, **({"default_backend": backend} if backend else {}),
        )
        for name, ep in manifest.entry_points.items()
    }  # fmt: skip
    info = KernelInfo(repo_id, manifest.version, revision, commit, manifest.digest, tuple(entries), trusted, snapshot,
                      (trusted_by or "trust_remote_code") if trusted else None)  # fmt: skip
    return LoadedKernel(info, entries, module)
