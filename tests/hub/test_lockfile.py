"""kernels.lock and [tool.kernels.dependencies] as files: what is accepted, what is refused (and the message that
says why), and the exact format written (a file people commit and review in diffs)."""

import json

import pytest

from hub_client.errors import LockError
from hub_client.lockfile import Locked, dependencies, read_lock, write_lock

A, B = "a" * 40, "b" * 40
DA, DB = "d" * 64, "e" * 64


def _project(tmp_path, body: str):
    (tmp_path / "pyproject.toml").write_text(body)
    return tmp_path


def test_dependencies_are_read_sorted(tmp_path):
    project = _project(tmp_path, '[tool.kernels.dependencies]\n"zeta/b" = 2\n"acme/a" = 0\n')
    assert list(dependencies(project).items()) == [("acme/a", 0), ("zeta/b", 2)]


def test_a_missing_pyproject_says_where_it_looked(tmp_path):
    with pytest.raises(LockError) as e:
        dependencies(tmp_path)
    where = tmp_path / "pyproject.toml"
    assert str(e.value) == f"{where}: not found (kernels lock reads [tool.kernels.dependencies] from it)"


@pytest.mark.parametrize("body", ["[project]\nname = 'x'\n", "[tool.kernels.dependencies]\n",
                                  "[tool.kernels]\ndependencies = ['acme/a']\n",
                                  "[tool.kernels]\ndependencies = 1\n"], ids=["absent", "empty", "a-list", "a-number"])
def test_no_usable_dependency_table_is_refused(tmp_path, body):
    with pytest.raises(LockError) as e:
        dependencies(_project(tmp_path, body))
    assert str(e.value) == f'{tmp_path / "pyproject.toml"}: no [tool.kernels.dependencies] (e.g. "acme/softmax" = 1)'


@pytest.mark.parametrize("entry", ['"acme" = 1', '"a/b/c" = 1', '"acme/a" = -1', '"acme/a" = true', '"acme/a" = "1"',
                                   '"acme/a" = 1.0'])  # fmt: skip
def test_a_malformed_dependency_is_refused_by_name(tmp_path, entry):
    with pytest.raises(LockError) as e:
        dependencies(_project(tmp_path, f"[tool.kernels.dependencies]\n{entry}\n"))
    repo_id = entry.split(" = ")[0].strip('"')
    assert f"dependency {repo_id!r} = " in str(e.value) and 'expected "org/name" = <major version>' in str(e.value)
    assert str(e.value).startswith(str(tmp_path / "pyproject.toml"))


def test_the_lock_file_format_is_fixed_sorted_and_round_trips(tmp_path):
    path = tmp_path / "kernels.lock"
    entries = [Locked("zeta/b", 2, B, "v2.0.1", DB), Locked("acme/a", 1, A, None, DA)]
    write_lock(path, entries)
    assert path.read_text() == (
        "[\n"
        '  {\n    "dependency": {\n      "repo-id": "acme/a",\n      "version": 1\n    },\n'
        f'    "lock": {{\n      "commit": "{A}",\n      "tag": null,\n      "digest": "sha256:{DA}"\n    }}\n  }},\n'
        '  {\n    "dependency": {\n      "repo-id": "zeta/b",\n      "version": 2\n    },\n'
        f'    "lock": {{\n      "commit": "{B}",\n      "tag": "v2.0.1",\n      "digest": "sha256:{DB}"\n    }}\n  }}\n'
        "]\n"
    )
    assert read_lock(path) == {e.repo_id: e for e in entries}


def test_read_lock_refusals_name_the_file_and_the_fix(tmp_path):
    path = tmp_path / "kernels.lock"
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{path}: no lock file (run `kernels lock {tmp_path}`)"
    path.write_text("[{")
    with pytest.raises(LockError, match=f"^{path}: not valid JSON \\(Expecting"):
        read_lock(path)
    for data in ({"dependency": {}}, [{"dependency": {"repo-id": "acme/a"}, "lock": {"commit": A}}], [1],
                 [{"dependency": {"repo-id": "acme/a", "version": "x"}, "lock": {"commit": A, "digest": DA}}]):
        path.write_text(json.dumps(data))
        with pytest.raises(LockError) as e:
            read_lock(path)
        assert str(e.value) == f"{path}: each entry needs dependency.repo-id/version and lock.commit/digest"
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": 1},
                                 "lock": {"commit": A[:-1], "digest": f"sha256:{DA}"}}]))  # fmt: skip
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{path}: acme/a: commit must be 40 hex, digest sha256:<64 hex>"


def test_an_empty_lock_locks_nothing(tmp_path):
    path = tmp_path / "kernels.lock"
    path.write_text("[]")
    assert read_lock(path) == {}
