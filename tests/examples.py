"""How many examples a property test draws.

Each test declares the count that its bug-finding needs in a long run; the default suite draws a third of it (at
least 20: the cases a draw finds only sometimes are pinned with ``@example`` where they matter), so the suite stays
within its time budget. ``pytest --hypothesis-profile deep`` (registered in tests/conftest.py) draws the whole count;
run it with the slow tests."""

from hypothesis import settings

DEEP = "deep"


def examples(declared: int) -> int:
    return declared if settings.get_current_profile_name() == DEEP else max(20, declared // 3)
