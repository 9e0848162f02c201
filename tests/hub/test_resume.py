"""`kernels publish --resume`: a publish that committed but did not tag blocks its version until it is resumed,
and resuming tags the commit only if it holds exactly the bundle being published."""

import json

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

import kernels
from hub_client.bundle import Bundle
from hub_client.cli import main
from hub_client.errors import PublishRefusedError
from hub_client.manifest import MANIFEST, dump, sha256_hex
from hub_client.publish import publish
from tests.hub.conftest import SOFTMAX, TOKEN, settings


class Crash(BaseException):
    """The process dying between the commit and the tag (not an Exception: nothing may catch and translate it)."""


def _crash_before_tagging(bundle) -> str:
    """Publish ``bundle`` with the process 'killed' as it is about to create the tag; the commit it left."""
    commits = []
    real_commit = HfApi.create_commit

    def committing(self, *args, **kwargs):
        info = real_commit(self, *args, **kwargs)
        commits.append(info.oid)
        return info

    def dying(self, *args, **kwargs):
        raise Crash

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HfApi, "create_commit", committing)
        patch.setattr(HfApi, "create_tag", dying)
        with pytest.raises(Crash):
            publish(bundle, "acme/softmax", settings())
    return commits[0]


def _tags(registry) -> dict[str, str]:
    refs = HfApi(endpoint=registry.url, token=TOKEN).list_repo_refs("acme/softmax", repo_type="kernel")
    return {t.name: t.target_commit for t in refs.tags}


def test_a_crashed_publish_blocks_its_version_until_resumed(registry, capsys):
    from hub_client.bundle import build_bundle

    softmax_bundle = build_bundle(SOFTMAX)  # what `kernels publish` builds (with modelled benchmarks), as it crashed
    commit = _crash_before_tagging(softmax_bundle)
    assert _tags(registry) == {}
    with pytest.raises(PublishRefusedError, match="--resume"):
        publish(softmax_bundle, "acme/softmax", settings())
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax", "--resume"]) == 0
    assert f"published acme/softmax v1.0.0 resumed: tagged the commit already on branch v1: commit {commit}" in (
        capsys.readouterr().out)  # fmt: skip
    assert _tags(registry) == {"v1.0.0": commit}
    k = kernels.get_kernel("acme/softmax", version=1)
    assert (k.info.commit, k.info.digest) == (commit, softmax_bundle.manifest.digest)
    with pytest.raises(PublishRefusedError, match="already exists"):  # resumed once; the release is now immutable
        publish(softmax_bundle, "acme/softmax", settings(), resume=True)


def _consistent_change(bundle: Bundle) -> Bundle:
    files = dict(bundle.files)
    rel = bundle.manifest.ir_files()[0]
    files[rel] = files[rel] + b"\n"
    raw = json.loads(files[MANIFEST])
    raw["files"][rel] = sha256_hex(files[rel])
    files[MANIFEST] = dump(raw)
    return Bundle(files)


def _behind_the_manifest(bundle: Bundle) -> Bundle:
    rel = bundle.manifest.ir_files()[0]
    return Bundle({**bundle.files, rel: bundle.files[rel] + b"\n"})


def _extra_file(bundle: Bundle) -> Bundle:
    return Bundle({**bundle.files, "notes.txt": b"not part of the release\n"})


@pytest.mark.parametrize("left, reason", [
    (_consistent_change, "manifest.json has sha256"),
    (_behind_the_manifest, "differs"),
    (_extra_file, "notes.txt is not in this bundle"),
], ids=["other-manifest", "file-behind-the-manifest", "extra-file"])  # fmt: skip
def test_resume_refuses_a_commit_that_is_not_exactly_this_bundle(registry, softmax_bundle, left, reason):
    publish(softmax_bundle, "acme/softmax", settings())
    ops = [CommitOperationAdd(p, d) for p, d in sorted(left(Bundle(dict(_v101().files))).files.items())]
    HfApi(endpoint=registry.url, token=TOKEN).create_commit("acme/softmax", ops, commit_message="crashed publish",
                                                            repo_type="kernel", revision="v1")  # fmt: skip
    before = _tags(registry)
    with pytest.raises(PublishRefusedError, match="not exactly this bundle") as e:
        publish(_v101(), "acme/softmax", settings(), resume=True)
    assert reason in str(e.value)
    assert _tags(registry) == before


def _v101():
    from hub_client.bundle import build_bundle

    return _V101.setdefault("b", build_bundle(SOFTMAX, "1.0.1", benchmarks=False))


_V101: dict = {}


def test_resume_with_nothing_to_resume_is_refused(registry, softmax_bundle, capsys):
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax", "--resume"]) == 1
    assert "nothing to resume" in capsys.readouterr().err
    publish(softmax_bundle, "acme/softmax", settings())
    with pytest.raises(PublishRefusedError, match="nothing to resume.*holds version 1.0.0 \\(already tagged\\)"):
        publish(_v101(), "acme/softmax", settings(), resume=True)
    assert not (registry.root / "kernels" / "acme" / "other").exists()
