"""The import-graph reader the layer contracts run on, on a small package written for the test."""

from tests.architecture import module_graph

FILES = {
    "pkg/__init__.py": "from pkg import a\n",
    "pkg/a.py": "import os\nfrom . import b\nfrom .sub.c import thing\n",
    "pkg/b.py": (
        "def f():\n"
        "    # deferred: keeps `import pkg` light\n"
        "    from pkg.sub import c\n"
        "    import pkg.a\n"
        "\n"
        "def g():\n"
        "    from pkg import a  # no reason\n"
    ),
    "pkg/sub/__init__.py": "",
    "pkg/sub/c.py": "from .. import b\nfrom ..a import os\nthing = 1\n",
}


def _graph(tmp_path):
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return module_graph.imports("pkg", tmp_path)


def test_modules_are_named_by_package_path(tmp_path):
    _graph(tmp_path)
    assert set(module_graph.modules("pkg", tmp_path)) == {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"}


def test_relative_and_submodule_imports_resolve_and_third_party_ones_are_ignored(tmp_path):
    edges = {(e.importer, e.imported) for e in _graph(tmp_path) if not e.deferred}
    assert edges == {("pkg", "pkg.a"), ("pkg.a", "pkg.b"), ("pkg.a", "pkg.sub.c"), ("pkg.sub.c", "pkg.b"),
                     ("pkg.sub.c", "pkg.a")}  # fmt: skip


def test_imports_inside_functions_are_deferred_with_the_reason_heading_their_block(tmp_path):
    deferred = {(e.imported, e.line, e.reason) for e in _graph(tmp_path) if e.deferred}
    assert deferred == {("pkg.sub.c", 3, "keeps `import pkg` light"), ("pkg.a", 4, "keeps `import pkg` light"),
                        ("pkg.a", 7, "")}  # fmt: skip
