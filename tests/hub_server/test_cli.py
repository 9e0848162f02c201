"""`python -m hub_client.server`: a registry in its own process, stopped with Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

from huggingface_hub import HfApi

from .conftest import WRITE_TOKEN


def test_module_entry_point_serves_and_stops_on_interrupt(hub_env):
    root = hub_env / "hub"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub_client.server", "--root", str(root), "--port", "0", "--token", WRITE_TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        banner = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", banner).group(0)
        api = HfApi(endpoint=url, token=WRITE_TOKEN)
        api.create_repo("acme/cli", repo_type="kernel")
        assert (root / "kernels" / "acme" / "cli" / "HEAD").is_file()
        assert [b.name for b in api.list_repo_refs("acme/cli", repo_type="kernel").branches] == ["main"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
