"""The kernels command: publish, versions, the refusal exit status, and serve in its own process."""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

import kernels
from hub_client.bundle import build_bundle
from hub_client.cli import main, parser
from hub_client.publish import publish
from hub_client.server.spawn import spawn, stop
from tests.hub.conftest import SOFTMAX, settings


def test_publish_and_versions(registry, capsys):
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 0
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax", "--version", "1.2.0"]) == 0
    out = capsys.readouterr().out
    assert "published acme/softmax v1.0.0 on branch v1" in out and "v1.2.0" in out
    assert main(["versions", "acme/softmax"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("v1 -> v1.0.0 (") and "v1.2.0 (" in out


def test_refused_publish_exits_1_with_the_reason(registry, capsys):
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 0
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 1
    assert "already exists" in capsys.readouterr().err


def test_unknown_repo(registry, capsys):
    assert main(["versions", "acme/missing"]) == 1
    assert "acme/missing" in capsys.readouterr().err


def test_serve_in_its_own_process_publish_through_it_and_stop_with_ctrl_c(tmp_path, monkeypatch):
    """`nki-kernels serve` as a user runs it: print the URL, take a real publish and load, exit 0 on SIGINT.

    The server runs through `spawn`: its own process group, killed by `stop` even if the test fails, and SIGINT
    reset to the default in the child, so the test also passes under a shell that ignores SIGINT (a background
    job), which would otherwise hand the server an ignored SIGINT and make Ctrl-C do nothing.
    """
    exe = shutil.which("nki-kernels", path=os.path.dirname(sys.executable))  # the [project.scripts] entry point
    cmd = [exe] if exe else [sys.executable, "-m", "hub_client.cli"]
    args = ["serve", "--root", str(tmp_path / "hub"), "--port", "0", "--token", "tok", "--trusted-publisher", "acme"]
    stderr = open(tmp_path / "serve.stderr", "w+")  # noqa: SIM115 - a file, not a pipe: it can never fill up
    proc = spawn([*cmd, *args], stdout=subprocess.PIPE, stderr=stderr, text=True,
                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert url and url.group(1) != "0"
        monkeypatch.setenv("HF_ENDPOINT", url.group(0))
        monkeypatch.setenv("HF_TOKEN", "tok")
        done = publish(build_bundle(SOFTMAX, benchmarks=False), "acme/softmax", settings())
        k = kernels.get_kernel("acme/softmax", version=1)
        assert k.info.commit == done.commit and k.info.trusted_by == "trusted publisher acme"
    finally:
        returncode = stop(proc, signal.SIGINT)
        stderr.seek(0)
        err = stderr.read()
        stderr.close()
    assert returncode == 0 and "Traceback" not in err, err
    assert (tmp_path / "hub" / "kernels" / "acme" / "softmax" / "HEAD").is_file()


def test_kernels_serve_takes_the_same_options_as_python_m_hub_client_server():
    from hub_client.server import command

    args = parser().parse_args(["serve", "--root", "hub", "--max-connections", "3", "--max-body", "1024",
                                "--read-timeout", "2.5"])  # fmt: skip
    assert args.run is command.run
    assert (args.max_connections, args.max_body, args.read_timeout) == (3, 1024, 2.5)
    own = argparse.ArgumentParser()
    command.add_arguments(own)
    assert vars(own.parse_args(["--root", "hub"])) == {k: v for k, v in vars(parser().parse_args(
        ["serve", "--root", "hub"])).items() if k not in ("command", "run")}  # fmt: skip


def test_a_usage_error_names_the_installed_command(capsys):
    # the console script is nki-kernels (pyproject: not `kernels`, which HF kernels installs), and argparse's usage
    # line must say so, whatever the interpreter's argv[0] was
    with pytest.raises(SystemExit) as e:
        main(["no-such-subcommand"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("usage: nki-kernels ")


def test_help_says_what_download_does():
    help_text = " ".join(parser().format_help().split())  # (argparse wraps it to the terminal's width)
    assert re.search(r"\bdownload\s+fetch and verify every release DIR/kernels.lock names\b", help_text), help_text
