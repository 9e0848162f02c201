"""kernels.lock at the edges of each check: repo ids, version 0, digests-file records that are not records, an
entry carrying its own digest, and the digests file's exact text (people commit and review it)."""

import json

import pytest

from hub_client.errors import LockError
from hub_client.lockfile import Locked, dependencies, digests_path, read_lock, write_lock

A, B = "a" * 40, "b" * 40
DA, DB = "d" * 64, "e" * 64


def _lock(tmp_path, dependency, lock=None):
    path = tmp_path / "kernels.lock"
    path.write_text(json.dumps([{"dependency": dependency, "lock": lock or {"commit": A}}]))
    return path


@pytest.mark.parametrize("repo_id", ["acme", "a/b/c", 5, None])
def test_a_locked_repo_id_must_be_org_slash_name(tmp_path, repo_id):
    path = _lock(tmp_path, {"repo-id": repo_id, "version": 1})
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{path}: repo-id {repo_id!r} is not 'org/name'"


def test_major_version_zero_is_a_version_and_minus_one_is_not(tmp_path):
    assert read_lock(_lock(tmp_path, {"repo-id": "acme/a", "version": 0})) == {"acme/a": Locked("acme/a", 0, A, None,
                                                                                                None)}  # fmt: skip
    with pytest.raises(LockError, match="acme/a: version must be a major version number, got -1"):
        read_lock(_lock(tmp_path, {"repo-id": "acme/a", "version": -1}))


@pytest.mark.parametrize("record", ["d" * 64, ["x"], {"manifest-sha256": 5}, {"manifest-sha256": "d" * 63}])
def test_a_digests_record_that_is_not_a_record_of_64_hex_digits_is_refused(tmp_path, record):
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1})
    digests_path(path).write_text(json.dumps({"format": "nki-kernels-lock-digests/1", "locks": {"acme/a": record}}))
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == f"{digests_path(path)}: acme/a: manifest-sha256 must be 64 hex digits"


def test_an_entry_with_its_own_digest_is_not_overridden_by_the_digests_file(tmp_path):
    """The older single-file form carries the digest in the lock itself; a digests file beside it (for another
    commit, with another digest) does not apply to that entry."""
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1}, {"commit": A, "digest": f"sha256:{DA}"})
    digests_path(path).write_text(json.dumps({"format": "nki-kernels-lock-digests/1",
                                              "locks": {"acme/a": {"commit": B, "manifest-sha256": DB}}}))
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, None, DA)}


def test_the_digests_file_is_sorted_json_indented_by_two_with_a_final_newline(tmp_path):
    path = tmp_path / "kernels.lock"
    write_lock(path, [Locked("acme/a", 1, A, "v1.0.0", DA)])
    assert digests_path(path).read_text() == (
        "{\n"
        '  "format": "nki-kernels-lock-digests/1",\n'
        '  "locks": {\n'
        '    "acme/a": {\n'
        f'      "commit": "{A}",\n'
        f'      "manifest-sha256": "{DA}",\n'
        '      "tag": "v1.0.0"\n'
        "    }\n"
        "  }\n"
        "}\n"
    )


@pytest.mark.parametrize("tag", [1, ["v1.0.0"], {"v": 1}])
def test_a_tag_that_is_not_a_string_is_read_as_no_tag(tmp_path, tag):
    """A hand-edited lock or digests file with a non-string tag pins by commit and digest only: the tag would
    otherwise reach the release record (``versions.parse_tag``) as a number or a list."""
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1}, {"commit": A, "tag": tag, "digest": f"sha256:{DA}"})
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, None, DA)}
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1})
    digests_path(path).write_text(json.dumps({"format": "nki-kernels-lock-digests/1",
                                              "locks": {"acme/a": {"commit": A, "tag": tag, "manifest-sha256": DA}}}))
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, None, DA)}


def test_a_digests_file_without_a_tag_keeps_the_tag_the_lock_names(tmp_path):
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1}, {"commit": A, "tag": "v1.0.0"})
    digests_path(path).write_text(json.dumps({"format": "nki-kernels-lock-digests/1",
                                              "locks": {"acme/a": {"commit": A, "manifest-sha256": DA}}}))
    assert read_lock(path) == {"acme/a": Locked("acme/a", 1, A, "v1.0.0", DA)}


@pytest.mark.parametrize("which", ["lock", "digests"])
def test_json_nested_past_the_reader_is_a_lock_error(tmp_path, which):
    # json's decoder recurses per level: a deep [[[[...]]]] was a RecursionError out of read_lock
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1})
    target = path if which == "lock" else digests_path(path)
    target.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LockError, match="nested deeper than the JSON reader goes"):
        read_lock(path)


@pytest.mark.parametrize("repo_id", ["../..", "a--b/c", "acme/.x", "acme/x\x00", "a" * 97 + "/b", "ac me/x",
                                     "acme/a..b"])  # fmt: skip
def test_a_locked_repo_id_follows_hugging_face_s_rule(tmp_path, repo_id):
    # they were accepted (only one '/' was asked for); a repo id becomes a cache folder and a label
    path = _lock(tmp_path, {"repo-id": repo_id, "version": 1})
    with pytest.raises(LockError, match="is not 'org/name'"):
        read_lock(path)


@pytest.mark.parametrize("dependency, lock, message", [
    ({"repo-id": "a" * 100_000 + "/b", "version": 1}, None, "repo-id 'aaaa"),
    ({"repo-id": "acme/a", "version": "x" * 100_000}, None, "version must be a major version number"),
    ({"repo-id": "acme/a", "version": 10**400}, None, "version must be a major version number"),
    ({"repo-id": "acme/a", "version": 1}, {"commit": "z" * 100_000}, "commit must be 40 hex digits"),
])  # fmt: skip
def test_a_hostile_lock_entry_is_refused_with_a_short_message(tmp_path, dependency, lock, message):
    # each was echoed whole (a 1 MB value, a 1 MB message); a 400-digit version was accepted
    with pytest.raises(LockError) as e:
        read_lock(_lock(tmp_path, dependency, lock))
    assert message in str(e.value) and len(str(e.value)) < 400


def test_a_tag_that_is_no_release_tag_is_read_as_no_tag_and_a_repo_locked_twice_is_refused(tmp_path):
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1}, {"commit": A, "tag": "../" * 100_000})
    assert read_lock(path)["acme/a"].tag is None  # a label only: it was kept whole
    path.write_text(json.dumps([{"dependency": {"repo-id": "acme/a", "version": v}, "lock": {"commit": c}}
                                for v, c in ((1, A), (2, B))]))  # fmt: skip
    with pytest.raises(LockError, match="acme/a is locked twice"):  # the last one silently won
        read_lock(path)


def test_an_integer_past_python_s_digit_limit_is_a_lock_error(tmp_path):
    # json.loads raises a plain ValueError (not JSONDecodeError) for an integer of more than 4,300 digits
    path = tmp_path / "kernels.lock"
    path.write_text('[{"dependency": {"repo-id": "acme/a", "version": ' + "1" * 5000 + '}, "lock": {"commit": "'
                    + A + '"}}]')  # fmt: skip
    with pytest.raises(LockError, match="not valid JSON .*Exceeds the limit"):
        read_lock(path)


@pytest.mark.parametrize("commit, quoted", [("c" * 64, "c" * 64), ("c" * 65, "c" * 64 + "..."),
                                            ("c" * 100_000, "c" * 64 + "..."), (12345, "12345")])  # fmt: skip
def test_a_stale_digests_commit_is_quoted_whole_up_to_64_characters_and_cut_past_them(tmp_path, commit, quoted):
    # the digests file is as untrusted as the lock: a hostile commit value is not echoed whole
    path = _lock(tmp_path, {"repo-id": "acme/a", "version": 1})
    digests_path(path).write_text(json.dumps({"format": "nki-kernels-lock-digests/1",
                                              "locks": {"acme/a": {"commit": commit, "manifest-sha256": DA}}}))
    with pytest.raises(LockError) as e:
        read_lock(path)
    assert str(e.value) == (f"{digests_path(path)} pins acme/a at commit {quoted}, but kernels.lock at {A}: one of "
                            f"them is stale (the lock was rewritten without its digests); run `nki-kernels lock`")


def test_a_major_version_is_at_most_2_to_the_31_minus_1_in_the_lock_and_in_pyproject(tmp_path):
    top = 2**31 - 1
    assert read_lock(_lock(tmp_path, {"repo-id": "acme/a", "version": top}))["acme/a"].version == top
    with pytest.raises(LockError, match=f"acme/a: version must be a major version number, got {top + 1}"):
        read_lock(_lock(tmp_path, {"repo-id": "acme/a", "version": top + 1}))
    (tmp_path / "pyproject.toml").write_text(f'[tool.kernels.dependencies]\n"acme/a" = {top}\n')
    assert dependencies(tmp_path) == {"acme/a": top}
    (tmp_path / "pyproject.toml").write_text(f'[tool.kernels.dependencies]\n"acme/a" = {top + 1}\n')
    with pytest.raises(LockError, match=f"dependency 'acme/a' = {top + 1}: expected"):
        dependencies(tmp_path)
