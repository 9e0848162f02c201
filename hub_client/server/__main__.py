"""`python -m hub_client.server --root DIR [--host H] [--port N] [--token T ...] [--read-token T ...]`."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal

from .limits import Limits
from .server import RegistryServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hub_client.server", description=__doc__)
    parser.add_argument("--root", required=True, help="directory holding the repositories (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--token", action="append", default=[], help="a write token (repeatable)")
    parser.add_argument("--read-token", action="append", default=[], help="a read-only token (repeatable)")
    parser.add_argument("--trusted-publisher", action="append", default=[], help="an org marked trusted")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    defaults = Limits()
    parser.add_argument("--max-body", type=int, default=defaults.max_commit_body, metavar="BYTES",
                        help="largest commit body accepted (413 past it)")
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections,
                        help="worker threads; connections past it get 503 + Retry-After")
    parser.add_argument("--read-timeout", type=float, default=defaults.read_timeout, metavar="SECONDS",
                        help="a request body that sends nothing for this long ends in 408")
    args = parser.parse_args(argv)
    # Started from a shell that ignores SIGINT (a background job), Python installs no KeyboardInterrupt handler;
    # Ctrl-C / SIGINT is this server's documented stop, so install it whatever was inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        limits = Limits(max_commit_body=args.max_body, max_connections=args.max_connections,
                        read_timeout=args.read_timeout)
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    tokens = {**dict.fromkeys(args.read_token, "read"), **dict.fromkeys(args.token, "write")}
    os.makedirs(args.root, exist_ok=True)
    server = RegistryServer(args.root, args.host, args.port, tokens, args.trusted_publisher, limits)
    # Ctrl-C is the normal way to stop a foreground server, from the moment the banner says where it serves.
    with contextlib.suppress(KeyboardInterrupt):
        print(f"registry serving {server.root} at {server.url}", flush=True)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
