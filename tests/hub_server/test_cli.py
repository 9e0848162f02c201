"""`python -m hub_client.server`: a registry in its own process, stopped with Ctrl-C, never left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from huggingface_hub import HfApi

from hub_client.server.spawn import spawn, stop

from .conftest import WRITE_TOKEN


def _server_args(root) -> list[str]:
    return [sys.executable, "-m", "hub_client.server", "--root", str(root), "--port", "0", "--token", WRITE_TOKEN]


def _url(proc) -> str:
    banner = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", banner)
    assert found, banner
    return found.group(0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for every purpose that matters here.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def test_module_entry_point_serves_and_stops_on_interrupt(hub_env):
    root = hub_env / "hub"
    proc = spawn(_server_args(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        api = HfApi(endpoint=_url(proc), token=WRITE_TOKEN)
        api.create_repo("acme/cli", repo_type="kernel")
        assert (root / "kernels" / "acme" / "cli" / "HEAD").is_file()
        assert [b.name for b in api.list_repo_refs("acme/cli", repo_type="kernel").branches] == ["main"]
    finally:
        returncode = stop(proc, signal.SIGINT)
    assert returncode == 0, proc.stderr.read()


def test_server_stops_on_sigint_even_if_started_with_sigint_ignored(hub_env):
    """A shell running pytest as a background job ignores SIGINT, and children inherit that; the server's main
    installs its own handler, so SIGINT still stops it cleanly (plain Popen here: no help from `spawn`)."""
    proc = subprocess.Popen(_server_args(hub_env / "hub"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, process_group=0,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _url(proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        stop(proc, signal.SIGKILL)
    assert proc.returncode == 0, proc.stderr.read()


def test_spawn_resets_an_inherited_ignored_sigint(hub_env):
    """`spawn` itself hands the child the default SIGINT, whatever this process has (seen in /proc)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        time.sleep(0.2)  # past exec
        with open(f"/proc/{proc.pid}/status") as status:
            ignored = int(next(line for line in status if line.startswith("SigIgn:")).split()[1], 16)
        assert not ignored & (1 << (signal.SIGINT - 1))
    finally:
        assert stop(proc, signal.SIGINT) != 0  # the plain sleeper dies of the KeyboardInterrupt


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_a_spawned_server_dies_with_its_parent_even_when_the_parent_is_killed(hub_env):
    """The parent (standing in for a pytest run) is SIGKILLed: no finalizer or atexit runs, the server goes anyway."""
    parent_code = textwrap.dedent(f"""
        import subprocess, sys, time
        from hub_client.server.spawn import spawn
        proc = spawn({_server_args(hub_env / 'hub')!r}, stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        print(proc.pid, flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, process_group=0)
    try:
        server_pid = int(parent.stdout.readline())
        assert _alive(server_pid)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server_pid), "the registry outlived the process that started it"
    finally:
        stop(parent, signal.SIGKILL)
