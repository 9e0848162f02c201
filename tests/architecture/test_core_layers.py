"""The layers of ``nki_dsl`` as import contracts (DESIGN.md, "The flow of a kernel"), checked on the import graph
read from source (``module_graph``: module-level and deferred imports alike).

Lowest first; a module may import modules of its own layer and of the layers below it, never above:

    foundation   errors, dtypes, targets: what every layer may use
    ir           the IR, its op table, printer and parser
    verify       the verifier
    passes       the pass pipeline, lowering and allocation
    backends     numpy_ref, simulator, ... (each independent of the others) and the registry that finds them
    trace        tracing Python kernels into IR, the jit cache
    front end    the language namespaces kernels import: nl (language, with compiler and typing), nisa (isa)
    api          the nki_dsl facade, api, profiling and the CLI

Inside a layer, two kinds of module are siblings that never import each other: backends (one exception, declared
in ``BETWEEN_BACKENDS``) and the front ends ``language`` / ``isa``. Backends never import the registry either:
a backend found through it at run time is a dependency no reader of the imports can see.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.architecture import module_graph

PACKAGE = "nki_dsl"
LAYERS = ["foundation", "ir", "verify", "passes", "backends", "trace", "front end", "api"]
PLACES = {
    "nki_dsl.errors": "foundation", "nki_dsl.dtypes": "foundation", "nki_dsl.targets": "foundation",
    "nki_dsl.ir": "ir",
    "nki_dsl.verify": "verify",
    "nki_dsl.passes": "passes",
    "nki_dsl.backends": "backends",
    "nki_dsl.trace": "trace",
    "nki_dsl.language": "front end", "nki_dsl.compiler": "front end", "nki_dsl.typing": "front end",
    "nki_dsl.isa": "front end",
    "nki_dsl": "api", "nki_dsl.api": "api", "nki_dsl.profiling": "api", "nki_dsl.cli": "api",
    "nki_dsl.__main__": "api",
}  # fmt: skip
# Siblings: module prefix -> the component it belongs to; components of one layer do not import each other.
FRONT_ENDS = {"nki_dsl.language": "nl", "nki_dsl.compiler": "nl", "nki_dsl.typing": "nl", "nki_dsl.isa": "nisa"}
REGISTRY = "nki_dsl.backends"
# The only imports allowed between backends, with the reason.
BETWEEN_BACKENDS = {
    ("simulator", "numpy_ref"): "the NumPy reference is the executable spec; numbers mode computes the simulator's "
    "outputs with it, from the lowered IR it times (simulator/prepared.py)",
}

MODULES = module_graph.modules(PACKAGE)
IMPORTS = module_graph.imports(PACKAGE)


def _place(module: str) -> str | None:
    best = None
    for prefix in PLACES:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def layer_of(module: str) -> str | None:
    place = _place(module)
    return PLACES[place] if place else None


def _backend(module: str) -> str | None:
    """``numpy_ref`` for ``nki_dsl.backends.numpy_ref.emitter``; None for the registry and non-backends."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and module.startswith(REGISTRY + ".") else None


def _front_end(module: str) -> str | None:
    return next((c for p, c in FRONT_ENDS.items() if module == p or module.startswith(p + ".")), None)


def _where(e: module_graph.Import) -> str:
    return f"{e.path.relative_to(module_graph.ROOT)}:{e.line} imports {e.imported}"


def test_the_graph_is_read():
    # the checks below pass vacuously on an empty graph
    assert len(MODULES) > 80 and len(IMPORTS) > 300
    assert any(e.importer == "nki_dsl.trace.tensor" and e.imported == "nki_dsl.trace.semantics" for e in IMPORTS)


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) is None] == []


def test_no_module_imports_a_layer_above_its_own():
    rank = {layer: k for k, layer in enumerate(LAYERS)}
    up = [f"{_where(e)} ({layer_of(e.importer)} -> {layer_of(e.imported)})" for e in IMPORTS
          if rank[layer_of(e.imported)] > rank[layer_of(e.importer)]]  # fmt: skip
    assert up == []


def test_backends_import_no_other_backend_and_not_the_registry():
    bad = []
    for e in IMPORTS:
        mine, theirs = _backend(e.importer), _backend(e.imported)
        if mine is None:
            continue
        if e.imported == REGISTRY:
            bad.append(f"{_where(e)} (the registry)")
        elif theirs is not None and theirs != mine and (mine, theirs) not in BETWEEN_BACKENDS:
            bad.append(_where(e))
    assert bad == []


def test_the_declared_exceptions_are_used():
    used = {(_backend(e.importer), _backend(e.imported)) for e in IMPORTS}
    assert set(BETWEEN_BACKENDS) <= used, "drop exceptions no import needs any more"


def test_the_front_ends_are_independent():
    bad = [_where(e) for e in IMPORTS if None is not _front_end(e.importer) != _front_end(e.imported) is not None]
    assert bad == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), deferred imports included; a module
    importing the package it is part of (whose ``__init__`` imports it) does not count."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in IMPORTS:
        if e.imported in graph and not e.importer.startswith(e.imported + "."):
            graph[e.importer].add(e.imported)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles() == []


def test_every_deferred_import_says_why():
    # Imports inside functions hide the graph; they stay only where import time needs them, with the reason in a
    # `# deferred: ...` comment on the import or just above it.
    assert [_where(e) for e in IMPORTS if e.deferred and not e.reason] == []


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_has_modules(layer):
    assert any(layer_of(m) == layer for m in MODULES)


def test_what_the_deferred_imports_keep_out_of_import_nki_dsl_stays_out():
    # The reason the deferred imports left give: `import nki_dsl` does not load these. If a module-level import
    # pulls one in anyway, the deferrals buy nothing and should go.
    kept_out = ["nki_dsl.verify", "nki_dsl.passes", "nki_dsl.ir.parser", "nki_dsl.ir.printer"]
    code = f"import sys, nki_dsl; print([m for m in {kept_out!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
