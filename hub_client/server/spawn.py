"""Starting a registry (or any server) in a child process that cannot outlive the process that started it.

Tests and benchmarks run `python -m hub_client.server` / `nki-kernels serve` as users do, in their own process.
A test that fails, times out or is interrupted must not leave that server behind, re-parented to init. So:

- the child runs in its own process group, and `stop()` (or, as a last resort, an `atexit` hook) kills the group;
- on Linux the child also asks the kernel to kill it when its parent dies (`PR_SET_PDEATHSIG`), which covers the
  parent being killed outright, when neither finalizers nor atexit run (the kernel ties this to the thread that
  called `spawn`, so call it from a thread that lives as long as the child should: the main thread);
- the child's SIGINT is reset to the default action: a parent started from a shell that ignores SIGINT (any
  background job) passes the ignored disposition on, and Python then installs no KeyboardInterrupt handler, so
  Ctrl-C / SIGINT would not stop the server.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_live: set[subprocess.Popen] = set()
_guard = threading.Lock()


def _prepare_child() -> None:  # runs in the child between fork and exec
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(args: list[str], **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen(args, **popen_kwargs)` in a new process group that dies with this process."""
    proc = subprocess.Popen(args, preexec_fn=_prepare_child, process_group=0, **popen_kwargs)
    with _guard:
        _live.add(proc)
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
    """Send `sig` (SIGINT: the server's clean stop), wait up to `timeout`, then kill whatever is left in the group.

    Returns the child's exit code (negative: killed by that signal, as Popen reports it).
    """
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait(timeout)
        return proc.returncode
    finally:
        _kill_group(proc)  # any grandchild still in the group (a git process mid-request) goes too
        with _guard:
            _live.discard(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@atexit.register
def _kill_all() -> None:
    with _guard:
        leftovers = list(_live)
    for proc in leftovers:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            proc.wait(5)
