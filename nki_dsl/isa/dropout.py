"""``nisa.dropout``: the Vector-engine instruction ``nl.dropout`` lowers to (reference/nki.md §2.3)."""

from __future__ import annotations

from nki_dsl.trace.tensor import build_op


def dropout(data, prob, *, dtype=None, mask=None):
    """``data`` with each element zeroed with probability ``prob`` (a number, or a tile such as ``[P, 1]`` that
    broadcasts to ``data``), drawing from the generator ``nl.random_seed`` seeds. Float tiles only."""
    return build_op("nisa.dropout", {"data": data, "prob": prob}, dtype=dtype, mask=mask)
