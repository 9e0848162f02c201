"""The bounds one registry process keeps on what clients may cost it: body sizes, time, connections.

Every number is a default for `serve(..., limits=Limits(...))` and `python -m hub_client.server --max-body ...`;
tests tighten them to see each refusal quickly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    # A commit carries its files inline as base64 (preupload answers "regular" for everything), so the commit
    # body is the one large request; 512 MiB of base64 is ~384 MiB of files. Past it: 413.
    max_commit_body: int = 512 * 1024 * 1024
    # Every other body is a small JSON document (create, preupload of up to 256 files with 512-byte samples,
    # branch, tag, README YAML check). Past it: 413.
    max_json_body: int = 8 * 1024 * 1024
    # Of a commit line, what is not a file's content (path, summary, description) is kept in memory: bound it.
    max_commit_line_metadata: int = 1024 * 1024
    # Worker threads (one per connection). Connections past the cap are answered 503 + Retry-After by at most
    # `refusal_slots` short-lived threads, each done within `refusal_timeout`; past both, a connection is closed.
    max_connections: int = 64
    refusal_slots: int = 64
    refusal_timeout: float = 2.0
    retry_after: int = 1  # seconds, in the 503's Retry-After
    # A kept-alive connection may sit idle this long before its next request; once a request's first byte has
    # arrived, the whole request line and headers must follow within `head_timeout`.
    idle_timeout: float = 15.0
    head_timeout: float = 10.0
    # A body read that gets no byte for this long ends in 408 (a stalled client); so does a body arriving slower
    # than `min_body_rate` bytes/s on average after the first `read_timeout` seconds (a trickling one).
    read_timeout: float = 30.0
    min_body_rate: int = 64 * 1024

    def __post_init__(self):
        for name, value in vars(self).items():
            if value <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")
