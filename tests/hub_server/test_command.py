"""The registry's command (hub_client/server/command.py) run in this process: the options become the server's
tokens, limits and root. test_cli.py runs the same command in a child process, as a user does; that child imports
the installed package, so a planted bug in the command (a mutation run) is only seen from here."""

from __future__ import annotations

import argparse
import re
import signal

import pytest

from hub_client.server import command
from hub_client.server import server as server_module


def _run(tmp_path, monkeypatch, *options):
    """``command.run`` on these options, stopped as by Ctrl-C as soon as it would serve; (exit code, server)."""
    seen = {}

    def serve_forever(self):
        seen["server"] = self
        self._http.server_close()
        raise KeyboardInterrupt

    monkeypatch.setattr(server_module.RegistryServer, "serve_forever", serve_forever)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    before = signal.getsignal(signal.SIGINT)
    try:
        code = command.run(parser.parse_args(["--root", str(tmp_path / "hub"), "--port", "0", *options]))
    finally:
        signal.signal(signal.SIGINT, before)
    return code, seen.get("server")


def test_a_token_writes_and_a_read_token_only_reads(tmp_path, monkeypatch):
    code, server = _run(tmp_path, monkeypatch, "--token", "w1", "--token", "w2", "--read-token", "r1")
    assert code == 0
    tokens = server._http.tokens
    assert [tokens.identify(f"Bearer {t}").can_write for t in ("w1", "w2", "r1")] == [True, True, False]


def test_a_token_named_both_ways_writes(tmp_path, monkeypatch):
    _, server = _run(tmp_path, monkeypatch, "--read-token", "both", "--token", "both")
    assert server._http.tokens.identify("Bearer both").can_write


def test_the_root_is_created_and_the_banner_names_it_and_the_real_port(tmp_path, monkeypatch, capsys):
    _, server = _run(tmp_path, monkeypatch, "--max-connections", "3", "--max-body", "4096", "--read-timeout", "2.5")
    assert (tmp_path / "hub").is_dir()
    banner = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"kernel registry serving {re.escape(str(server.root))} at http://127\.0\.0\.1:(\d+) "
                        r"\(Ctrl-C stops it\)", banner), banner  # fmt: skip
    assert int(banner.rsplit(":", 1)[1].split()[0]) == server.port != 0
    limits = server.limits
    assert (limits.max_connections, limits.max_commit_body, limits.read_timeout) == (3, 4096, 2.5)


@pytest.mark.parametrize("option", [["--max-connections", "0"], ["--read-timeout", "0"], ["--max-body", "-1"]])
def test_bad_limits_exit_2_before_serving(tmp_path, monkeypatch, capsys, option):
    code, server = _run(tmp_path, monkeypatch, *option)
    assert (code, server) == (2, None)
    assert capsys.readouterr().out.startswith("error: ")
    assert not (tmp_path / "hub").exists()


def test_the_help_gives_each_limit_its_unit():
    import argparse

    from hub_client.server.command import add_arguments

    parser = argparse.ArgumentParser(prog="serve")
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    for usage in ("--max-body BYTES", "--read-timeout SECONDS", "--max-connections MAX_CONNECTIONS"):
        assert usage in text, text


def test_the_server_package_s_deferred_names_are_the_server_module_s():
    # hub_client.server imports the HTTP server and git store only when one of these names is asked for
    import hub_client.server as package

    assert package.RegistryServer is server_module.RegistryServer and package.serve is server_module.serve
    assert set(package.__all__) == {"Limits", "RegistryServer", "serve"}
    with pytest.raises(AttributeError, match="has no attribute 'registry_server'"):
        package.registry_server  # noqa: B018
