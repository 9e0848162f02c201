"""The ``nki-kernels`` command: publish, versions, lock, download, verify, forget, serve. (Not ``kernels``: Hugging
Face kernels installs a command of that name, and one would silently replace the other.)

Exit status 0 on success, 1 on a refused or failed operation (the message says why), 2 on bad usage. Errors are
printed as a styled ``error:`` prefix followed by the message as literal text: a message is never parsed as rich
markup (it may quote ``[tool.kernels.dependencies]`` or a server's words).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn
from rich.text import Text

from hub_client.errors import KernelHubError
from hub_client.server import command as server_command

console = Console(stderr=True)


def error(message: str) -> None:
    """``error: <message>`` on stderr: the prefix styled (red where the terminal has colour), the message verbatim."""
    console.print(Text.assemble(("error:", "bold red"), " ", str(message)), highlight=False, soft_wrap=True)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=console, transient=True)


def cmd_publish(args) -> int:
    from hub_client.bundle import build_bundle
    from hub_client.publish import publish
    from hub_client.settings import HubSettings

    bundle = build_bundle(args.dir, args.version)
    total = sum(len(d) for d in bundle.files.values())
    with _progress() as bar:
        task = bar.add_task(f"uploading {args.repo}", total=total)
        done = publish(bundle, args.repo, HubSettings.from_env(), private=args.private, resume=args.resume,
                       progress=lambda n: bar.update(task, completed=n))  # fmt: skip
    how = "resumed: tagged the commit already on" if args.resume else "on"
    print(f"published {done.repo_id} {done.tag} {how} branch {done.branch}: commit {done.commit}, "
          f"digest sha256:{done.digest}")  # fmt: skip
    return 0


def cmd_versions(args) -> int:
    from hub_client import versions
    from hub_client.resolve import refs
    from hub_client.settings import HubSettings

    branches, tags = refs(HubSettings.from_env(), args.repo)
    by_major: dict[int, list] = {}
    for v, name, commit in versions.releases(tags):
        by_major.setdefault(v[0], []).append(f"{name} ({commit[:12]})")
    for name in sorted(b for b in branches if versions.BRANCH.match(b)):
        major = int(name[1:])
        print(f"{name} -> {', '.join(by_major.get(major, [])) or 'no releases'}  (head {branches[name][:12]})")
    return 0


def cmd_lock(args) -> int:
    from hub_client.lockfile import LOCK_NAME
    from hub_client.projects import lock_project

    for e in lock_project(args.dir):
        print(f"{e.repo_id} = {e.version}: {e.tag or '-'} commit {e.commit} digest sha256:{e.digest}")
    print(f"wrote {Path(args.dir) / LOCK_NAME}")
    return 0


def cmd_download(args) -> int:
    from hub_client.projects import download_project

    with _progress() as bar:
        task = bar.add_task("downloading", total=None)
        fetched = download_project(args.dir, progress=lambda rel: bar.update(task, description=f"downloading {rel}"))
    for repo_id, f in fetched.items():
        print(f"{repo_id}: {len(f.manifest.files) + 1} files verified in {f.snapshot}")
    return 0


def cmd_verify(args) -> int:
    from hub_client.fetch import verify_cached
    from hub_client.resolve import resolve_offline
    from hub_client.settings import HubSettings

    settings = HubSettings.from_env()
    resolved = resolve_offline(settings, args.repo, args.version, args.revision if args.version is None else None)
    manifest, checked = verify_cached(settings, args.repo, resolved.commit)
    print(f"{args.repo} {resolved.label} commit {resolved.commit}: {len(checked)} cached files match their sha256 "
          f"(manifest sha256:{manifest.digest})")  # fmt: skip
    return _run_vectors(settings, args, resolved.commit) if args.run_vectors else 0


def _run_vectors(settings, args, commit: str) -> int:
    from hub_client import execute
    from hub_client.fetch import fetch
    from hub_client.vectors import run_vectors

    def wanted(m):
        return m.ir_files() + [s.test_vectors for e in m.entry_points.values() for s in e.specialisations
                               if s.test_vectors]  # fmt: skip

    # The vectors and IR a plain load did not fetch are fetched now (digest-checked), or read from the cache offline.
    fetched = fetch(settings, args.repo, commit, wanted, local_only=settings.offline)
    backend = execute.default_backend() if args.backend is None else args.backend
    results = run_vectors(fetched.manifest, lambda rel: (fetched.snapshot / rel).read_bytes(), backend=backend)
    for r in results:
        print(f"  {r.entry}/{r.spec}: {r.status} ({r.detail})")
    failed = [r for r in results if r.failed]
    if failed:
        error(f"{len(failed)} of {len(results)} specialisations disagree with their test vectors on backend "
              f"{backend}")  # fmt: skip
        return 1
    print(f"test vectors: {sum(r.status == 'ok' for r in results)} specialisations agree on backend {backend}")
    return 0


def cmd_forget(args) -> int:
    from hub_client import releases
    from hub_client.settings import HubSettings

    settings = HubSettings.from_env()
    removed = releases.forget(settings, args.repo, args.release)
    if removed is None:
        error(f"{args.repo}: nothing recorded for {args.release!r} at {settings.endpoint}; recorded: "
              f"{', '.join(sorted(releases.recorded(settings, args.repo))) or 'nothing'}")  # fmt: skip
        return 1
    for tag, entry in removed.items():
        print(f"forgot {args.repo} {tag} (commit {entry['commit']}, manifest sha256:{entry['digest']}); its next "
              f"fetch is trusted as a first use")  # fmt: skip
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nki-kernels", description="Publish and fetch NKI kernels on a Hugging Face Hub.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("publish", help="build a kernel package's bundle, commit it on v<major>, tag it")
    s.add_argument("dir")
    s.add_argument("--repo", required=True, help="ORG/NAME")
    s.add_argument("--version", help="full version X.Y.Z (default: kernel.toml's)")
    s.add_argument("--private", action="store_true")
    s.add_argument("--resume", action="store_true",
                   help="finish a publish that committed but did not tag (checks the commit holds exactly this bundle)")
    s.set_defaults(run=cmd_publish)
    s = sub.add_parser("versions", help="list majors (branches) and their releases (tags)")
    s.add_argument("repo")
    s.set_defaults(run=cmd_versions)
    s = sub.add_parser("lock", help="pin [tool.kernels.dependencies] of DIR/pyproject.toml in DIR/kernels.lock")
    s.add_argument("dir")
    s.set_defaults(run=cmd_lock)
    s = sub.add_parser("download", help="fetch and verify every release DIR/kernels.lock names")
    s.add_argument("dir")
    s.set_defaults(run=cmd_download)
    s = sub.add_parser("verify", help="re-hash the cached files of a release (--run: and re-run its test vectors)")
    s.add_argument("repo")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--version", type=int)
    g.add_argument("--revision")
    s.add_argument("--run", dest="run_vectors", action="store_true",
                   help="also re-run the verified IR on the bundle's test vectors")  # fmt: skip
    s.add_argument("--backend", default=None,
                   help="the backend --run executes on (default: $NKI_BACKEND, else numpy)")
    s.set_defaults(run=cmd_verify)
    s = sub.add_parser("forget", help="drop the first-use record of a release (after a confirmed re-release)")
    s.add_argument("repo")
    s.add_argument("release", help="the release tag (e.g. v1.0.0) or the recorded commit")
    s.set_defaults(run=cmd_forget)
    s = sub.add_parser("serve", help="run the self-hosted registry")
    server_command.add_arguments(s)
    s.set_defaults(run=server_command.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (KernelHubError, ValueError) as e:  # every Hub failure arrives as a KernelHubError (hub_errors)
        error(str(e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
