"""Test ids for hostile strings."""

import re


def spelled(value: object) -> str:
    """``ascii(value)`` with each backslash escape spelled in angle brackets: ``'x\\n'`` -> ``'x<n>'``,
    ``'\\x00'`` -> ``'<x00>'``, a backslash -> ``<backslash>``.

    An id holding a backslash cannot select its test when pytest runs twice in one process (pytest 8 escapes the
    id again on the second collection), which is what mutation testing does: mutmut maps the tests in-process and
    then runs each mutant's tests by id. The id stays readable and unique.
    """
    return re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|.)",
                  lambda m: "<backslash>" if m[1] == "\\" else f"<{m[1]}>", ascii(value))
