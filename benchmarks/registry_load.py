"""The self-hosted registry under load: concurrent huggingface_hub clients reading and publishing at once.

    python benchmarks/registry_load.py [--clients 8] [--reads 200] [--publishes 20]

Starts `python -m hub_client.server` on 127.0.0.1 (its own process, as in production), creates one kernel repo,
then runs each client in its own process with the real huggingface_hub client. Every client does `--reads`
reads (refs, repo info, recursive tree, file HEAD, file download; in rotation) and `--publishes` publishes (a
three-file commit to branch v1 of the shared repo plus an immutable tag), interleaved, all clients at once.
Prints p50/p99 latency per operation and overall, counts failed requests, and runs `git fsck --strict` on the
repo afterwards. Exits 1 if any request failed or fsck is not clean. Target (issue 4): no failed request.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TOKEN = "load-test-token"
REPO = "acme/load"
READS = ("refs", "info", "tree", "head", "download")


@dataclass
class ClientResult:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


@dataclass
class Report:
    clients: int
    wall_seconds: float
    latencies: dict[str, list[float]]
    failures: list[str]
    fsck_ok: bool
    fsck_output: str

    @property
    def operations(self) -> int:
        return sum(len(samples) for samples in self.latencies.values()) + len(self.failures)


def _point_client_at(url: str, home: Path) -> None:
    """Environment and import-time constants of huggingface_hub, so no request leaves 127.0.0.1."""
    os.environ.update(HF_ENDPOINT=url, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1")
    os.environ.pop("HF_TOKEN", None)
    from huggingface_hub import constants

    constants.ENDPOINT = url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_DISABLE_TELEMETRY = True
    constants.AGENT_HARNESSES_PATH = str(home / "agent-harnesses.json")


def _client(url: str, index: int, reads: int, publishes: int, start_at: float, scratch: str) -> ClientResult:
    home = Path(scratch) / f"client-{index}"
    _point_client_at(url, home)
    from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download

    api = HfApi(endpoint=url, token=TOKEN)
    result = ClientResult()
    total = reads + publishes
    publish_every = total // publishes if publishes else total + 1
    done_publishes = 0

    def timed(kind: str, call) -> None:
        began = time.perf_counter()
        try:
            call()
        except Exception as exc:  # a failed request is the measurement, not a crash
            result.failures.append(f"client {index} {kind}: {type(exc).__name__}: {exc}".splitlines()[0])
            return
        result.latencies.setdefault(kind, []).append(time.perf_counter() - began)

    def publish(number: int) -> None:
        stamp = f"{index}.{number}"
        api.create_commit(REPO, repo_type="kernel", revision="v1", commit_message=f"publish {stamp}", operations=[
            CommitOperationAdd(f"clients/{index}/manifest.json", f'{{"version": "{stamp}"}}\n'.encode()),
            CommitOperationAdd(f"clients/{index}/ir/kernel.nki", f"kernel k{stamp}\n".encode() * 50),
            CommitOperationAdd(f"clients/{index}/tests/vectors.bin", os.urandom(4096)),
        ])
        api.create_tag(REPO, repo_type="kernel", tag=f"v1.{index}.{number}", revision="v1")

    read_calls = {
        "refs": lambda: api.list_repo_refs(REPO, repo_type="kernel"),
        "info": lambda: api.repo_info(REPO, repo_type="kernel", revision="v1"),
        "tree": lambda: list(api.list_repo_tree(REPO, repo_type="kernel", revision="v1", recursive=True)),
        "head": lambda: api.file_exists(REPO, "seed/manifest.json", repo_type="kernel", revision="v1"),
        "download": lambda: hf_hub_download(REPO, "seed/ir/kernel.nki", repo_type="kernel", revision="v1",
                                            endpoint=url, token=TOKEN, cache_dir=home / "cache",
                                            force_download=True),
    }
    while time.time() < start_at:  # all clients start together
        time.sleep(0.005)
    done_reads = 0
    for step in range(total):
        if done_publishes < publishes and (step + 1) % publish_every == 0:
            timed("publish", lambda n=done_publishes: publish(n))
            done_publishes += 1
        elif done_reads < reads:
            kind = READS[(step + index) % len(READS)]
            timed(kind, read_calls[kind])
            done_reads += 1
        else:
            timed("publish", lambda n=done_publishes: publish(n))
            done_publishes += 1
    return result


def _start_server(root: Path) -> tuple[subprocess.Popen, str]:
    from hub_client.server.spawn import spawn, stop

    # spawn: its own process group, killed with this process however it ends (no server left behind).
    proc = spawn(
        [sys.executable, "-m", "hub_client.server", "--root", str(root), "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    match = re.search(r"http://[\d.]+:\d+", proc.stdout.readline())
    if match is None:
        stop(proc, signal.SIGKILL)
        raise RuntimeError("the registry did not start")
    return proc, match.group(0)


def _seed(url: str, scratch: Path) -> None:
    _point_client_at(url, scratch / "seed-client")
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=url, token=TOKEN)
    api.create_repo(REPO, repo_type="kernel")
    api.create_branch(REPO, repo_type="kernel", branch="v1")
    api.create_commit(REPO, repo_type="kernel", revision="v1", commit_message="seed", operations=[
        CommitOperationAdd("seed/manifest.json", b'{"name": "load"}\n'),
        CommitOperationAdd("seed/ir/kernel.nki", b"kernel load\n" * 200),
    ])


def run(clients: int = 8, reads: int = 200, publishes: int = 20, root: Path | None = None) -> Report:
    with tempfile.TemporaryDirectory(prefix="registry-load-") as scratch_dir:
        scratch = Path(scratch_dir)
        root = Path(root) if root is not None else scratch / "hub"
        server, url = _start_server(root)
        try:
            _seed(url, scratch)
            # fork keeps start-up cheap; the parent runs no threads of its own at this point.
            context = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
            start_at = time.time() + 1.0
            with context.Pool(clients) as pool:
                results = pool.starmap(_client, [(url, i, reads, publishes, start_at, scratch_dir)
                                                 for i in range(clients)])
            wall = time.time() - start_at
        finally:
            from hub_client.server.spawn import stop

            stop(server, signal.SIGINT)  # SIGINT: the server's clean stop; the group is killed if it hangs
        latencies: dict[str, list[float]] = {}
        failures: list[str] = []
        for result in results:
            failures += result.failures
            for kind, samples in result.latencies.items():
                latencies.setdefault(kind, []).extend(samples)
        fsck = subprocess.run(["git", f"--git-dir={root / 'kernels' / REPO}", "fsck", "--strict"],
                              capture_output=True, text=True)
        return Report(clients, wall, latencies, failures, fsck.returncode == 0, fsck.stdout + fsck.stderr)


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def print_report(report: Report) -> None:
    print(f"{report.clients} clients, {report.operations} operations in {report.wall_seconds:.1f} s, "
          f"{len(report.failures)} failed")
    print(f"{'operation':<10} {'count':>6} {'p50 ms':>8} {'p99 ms':>8}")
    everything = []
    for kind in (*READS, "publish"):
        samples = report.latencies.get(kind, [])
        everything += samples
        if samples:
            print(f"{kind:<10} {len(samples):>6} {_percentile(samples, .5) * 1e3:>8.1f} "
                  f"{_percentile(samples, .99) * 1e3:>8.1f}")
    if everything:
        print(f"{'all':<10} {len(everything):>6} {statistics.median(everything) * 1e3:>8.1f} "
              f"{_percentile(everything, .99) * 1e3:>8.1f}")
    for failure in report.failures[:10]:
        print("FAILED", failure)
    print("git fsck --strict:", "clean" if report.fsck_ok else report.fsck_output)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--publishes", type=int, default=20)
    args = parser.parse_args()
    report = run(args.clients, args.reads, args.publishes)
    print_report(report)
    return 0 if not report.failures and report.fsck_ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    raise SystemExit(main())
