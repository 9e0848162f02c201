"""What one helper-fingerprint walk read (``trace/dependencies.py``), and the check that the same walk now would
read the same objects: the fingerprint of a launch without a change in between is reused instead of walked again.

The walk reads names from mappings (a function's globals, a module's, a class's, an object's ``__dict__``, a dict
it holds), attributes (a function's ``__code__``, ``__defaults__``, ``__module__``; a class's ``__bases__``; an
object's ``__class__`` and ``__dict__``; a sub-kernel's ``fn``), closure cells, and the items and lengths of the
containers it walks. Each read is recorded with the object it found (or ``MISSING``: a name defined later must
count too). The fingerprint is a function of those objects (leaves are immutable and keyed by value, everything
else is walked through further reads, which are recorded too), so when every read finds the very object it found
before, a new walk would find the same values and the same graph: the same fingerprint. Any difference (a helper
rebound in a notebook cell, a function's ``__code__`` replaced, a closure cell or a default changed, a module
attribute rebound, an item added to a dict the body reads) fails the check and the walk runs again.

The check compares identities with C-level loops (``map``/``operator.is_``), grouped per mapping: a few microseconds
where the walk took hundreds (ViT attention's body reaches ~80 values).
"""

from __future__ import annotations

import operator
from itertools import repeat

MISSING = object()  # what a read of an absent name or attribute found


def cell_value(cell):
    """The contents of a closure cell, ``MISSING`` when it is not filled yet."""
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING


class Reads:
    """The reads of one walk; ``same()`` says whether each finds what it found."""

    def __init__(self):
        self._maps: dict[int, tuple[object, dict]] = {}  # id(mapping) -> (mapping, {key: object found})
        self._attrs: list[tuple[object, str, object]] = []  # compared by identity
        self._labels: list[tuple[object, str, str]] = []  # names (``__qualname__``, ...): by value, since a built-in
        # type computes a new string at each read
        self._cells: list[tuple[object, object]] = []
        self._lengths: list[tuple[object, int]] = []  # mutable containers walked: dict, list, set, mappingproxy
        self._items: list[tuple[object, tuple]] = []  # a list's items walked (a prefix of it), in order
        self._members: list[tuple[object, tuple, frozenset]] = []  # a set's members (held) and their identities
        self._frozen = None

    # -- recording (during the walk) -------------------------------------------------------------------------------
    def name(self, mapping, key, found) -> None:
        entry = self._maps.get(id(mapping))
        if entry is None:
            entry = self._maps[id(mapping)] = (mapping, {})
        entry[1][key] = found

    def attr(self, obj, name: str, found) -> None:
        self._attrs.append((obj, name, found))

    def label(self, obj, name: str, found: str) -> None:
        self._labels.append((obj, name, found))

    def cell(self, cell, found) -> None:
        self._cells.append((cell, found))

    def length(self, container) -> None:
        self._lengths.append((container, len(container)))

    def list_items(self, container: list, items: tuple) -> None:
        self._items.append((container, items))

    def set_members(self, container: set) -> None:
        members = tuple(container)
        self._members.append((container, members, frozenset(map(id, members))))

    # -- checking (at a later launch) ------------------------------------------------------------------------------
    def freeze(self) -> None:
        """Lay the reads out for ``same`` (once, after the walk)."""
        maps = [(m.get, tuple(found), tuple(found.values())) for m, found in self._maps.values()]
        attrs = tuple(zip(*self._attrs)) or ((), (), ())
        lengths = tuple(zip(*self._lengths)) or ((), ())
        labels = tuple(zip(*self._labels)) or ((), (), ())
        self._frozen = (maps, attrs, lengths, labels)

    def same(self) -> bool:
        """Whether every read finds the object it found (lengths first: the item checks read prefixes)."""
        maps, (objs, names, found), (containers, counts), (labelled, label_names, labels) = self._frozen
        if not all(map(operator.eq, map(len, containers), counts)):
            return False
        for get, keys, objects in maps:
            if not all(map(operator.is_, map(get, keys, repeat(MISSING)), objects)):
                return False
        if not all(map(operator.is_, map(getattr, objs, names, repeat(MISSING)), found)):
            return False
        if not all(map(operator.eq, map(getattr, labelled, label_names, repeat(MISSING)), labels)):
            return False
        if not all(cell_value(cell) is obj for cell, obj in self._cells):
            return False
        if not all(all(map(operator.is_, container, items)) for container, items in self._items):
            return False
        return all(frozenset(map(id, container)) == ids for container, _, ids in self._members)
