"""`python -m hub_client.server --root DIR [--host H] [--port N] [--token T ...] [--read-token T ...]`."""

from .command import main

if __name__ == "__main__":
    raise SystemExit(main())
