"""A call's keywords against what a release published, for a loader without the publisher's Python.

The manifest records each entry point's keyword defaults (``defaults``: the plan's signature, as far as JSON holds
them), so ``given`` drops a keyword passed at its default: ``attention(q, k, v, scale=None)`` routes as
``attention(q, k, v)`` (the on-chip 1 / sqrt(D), not the runtime-scale twin, which needs a number), and
``strategy="auto"`` as no strategy. ``unpublished`` says, for a call no specialisation holds, which keywords no
specialisation could hold whatever the shapes: one no record names, or a constant at a value none lists. The
names and values come from the caller, and the listed values from the (untrusted) manifest, so each is cut to
``SHOWN`` characters.
"""

from __future__ import annotations

import numbers
from dataclasses import replace

from hub_client.manifest import SpecRecord
from hub_client.package import shown

SHOWN = 64  # characters of a keyword's name or value a refusal quotes
MAX_VALUES = 16  # published values of one keyword a refusal lists


def cut_name(k: str) -> str:
    return k if len(k) <= SHOWN else k[:SHOWN] + "..."


def is_default(v, default) -> bool:
    """``v`` is the recorded default itself: None for None, the same bool, string or number (not a bool for a
    number, nor a number for a bool, nor an array)."""
    if default is None:
        return v is None
    if isinstance(default, bool):
        return type(v) is bool and v == default
    if isinstance(default, str):
        return isinstance(v, str) and v == default
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and not hasattr(v, "shape") and v == default


def given(kwargs: dict, defaults: dict) -> dict:
    """``kwargs`` without the keywords passed at their recorded defaults."""
    return {k: v for k, v in kwargs.items() if not (k in defaults and is_default(v, defaults[k]))}


def _values(specs, k: str) -> list:
    out = []
    for s in specs:
        want = s.constants[k]
        for w in want if isinstance(want, tuple) else (want,):  # (a tuple lists values; a listed tuple is one)
            if w not in out:
                out.append(w)
    return out


def unpublished(specs: tuple[SpecRecord, ...], kwargs: dict, parameters: tuple, defaults: dict, same) -> list[str]:
    """A refusal's lines for the keywords of ``kwargs`` (defaults already dropped) that no specialisation takes at
    their value, naming the keyword, the value and what was published (or that the plan has no such parameter,
    when the manifest records its ``parameters``); ``same(value, want)`` is the loader's constant match."""
    lines = []
    for k, v in kwargs.items():
        takers = [s for s in specs if k in s.constants or k in s.scalars or k in s.keywords]
        at = f"{cut_name(k)}={shown(v, SHOWN)}"
        if not takers:
            if k in defaults:
                rest = f" (its default, {shown(defaults[k], SHOWN)}, is what runs: leave it out)"
            elif parameters and k not in parameters:  # (what Python calls an unexpected keyword argument)
                rest = f", which is no parameter of the entry point ({', '.join(parameters)})"
            else:
                rest = ""
            lines.append(f"  {at}: no published specialisation takes {cut_name(k)}{rest}")
            continue
        if any(k in s.scalars or k in s.keywords for s in takers):
            continue  # (a runtime scalar or a dimension: any value may be held, the shapes decide)
        listed = _values(takers, k)
        if not any(same(v, w) for w in listed):
            more = f", ... ({len(listed)} values)" if len(listed) > MAX_VALUES else ""
            values = ", ".join(shown(w, SHOWN) for w in listed[:MAX_VALUES]) + more
            lines.append(f"  {at}: no published specialisation takes {cut_name(k)} at that value; published: {values}"
                         + (f" (or leave it out: {shown(defaults[k], SHOWN)})" if k in defaults else ""))
    return lines


def not_given(specs: tuple[SpecRecord, ...], kwargs: dict, holds) -> list[str]:
    """A refusal's lines for the specialisations that would hold the call but for a constant it must give and did
    not (``requires``: the plan refuses the call without it); ``holds(spec)`` is the loader's match with the
    requirement lifted."""
    lines = []
    for s in specs:
        missing = [n for n in s.requires if n not in kwargs]
        if missing and holds(replace(s, requires=())):
            lines.append(f"  {s.id}: give {', '.join(missing)} (the plan refuses the call without it)")
    return lines
