"""The registry's command line, shared by ``nki-kernels serve`` and ``python -m hub_client.server``: one set of
options (root, address, tokens, trusted publishers, the request limits) and one way to run in the foreground."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal

from .limits import Limits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", required=True, help="directory holding the repositories (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port (printed)")
    parser.add_argument("--token", action="append", default=[], help="a write token (repeatable); none: read-only")
    parser.add_argument("--read-token", action="append", default=[], help="a read-only token (repeatable)")
    parser.add_argument("--trusted-publisher", action="append", default=[],
                        help="an organisation reported as a trusted kernel publisher (repeatable)")  # fmt: skip
    parser.add_argument("--verbose", action="store_true", help="log every request")
    defaults = Limits()
    parser.add_argument("--max-body", type=int, default=defaults.max_commit_body, metavar="BYTES",
                        help="largest commit body accepted (413 past it)")
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections,
                        help="worker threads; connections past it get 503 + Retry-After")
    parser.add_argument("--read-timeout", type=float, default=defaults.read_timeout, metavar="SECONDS",
                        help="a request body that sends nothing for this long ends in 408")


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT (Ctrl-C); exit 0 then, 2 on bad limits."""
    # Started from a shell that ignores SIGINT (a background job), Python installs no KeyboardInterrupt handler;
    # Ctrl-C / SIGINT is this server's documented stop, so install it whatever was inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        limits = Limits(max_commit_body=args.max_body, max_connections=args.max_connections,
                        read_timeout=args.read_timeout)
    except ValueError as error:
        print(f"error: {error}", flush=True)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    tokens = {**dict.fromkeys(args.read_token, "read"), **dict.fromkeys(args.token, "write")}
    from .server import RegistryServer  # deferred: see __init__.py

    os.makedirs(args.root, exist_ok=True)
    server = RegistryServer(args.root, args.host, args.port, tokens, args.trusted_publisher, limits)
    # Ctrl-C is the normal way to stop a foreground server, from the moment the banner says where it serves. The
    # URL carries the real port (with --port 0, the one the OS picked): scripts and tests read it from here.
    with contextlib.suppress(KeyboardInterrupt):
        print(f"kernel registry serving {server.root} at {server.url} (Ctrl-C stops it)", flush=True)
        server.serve_forever()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hub_client.server", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
