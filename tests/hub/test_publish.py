"""Publishing to the self-hosted registry through huggingface_hub: branch v<major>, immutable tags, refusals that
leave the repo unchanged, racing publishes, tokens."""

import threading

import pytest
from huggingface_hub import HfApi

from hub_client.errors import AuthenticationError, PublishRefusedError
from hub_client.publish import publish
from tests.hub.conftest import TOKEN, settings


def _refs(server, repo="acme/softmax"):
    r = HfApi(endpoint=server.url, token=TOKEN).list_repo_refs(repo, repo_type="kernel")
    return {b.name: b.target_commit for b in r.branches}, {t.name: t.target_commit for t in r.tags}


def test_publish_commits_on_the_major_branch_and_tags(registry, softmax_bundle):
    done = publish(softmax_bundle, "acme/softmax", settings())
    branches, tags = _refs(registry)
    assert (done.tag, done.branch) == ("v1.0.0", "v1")
    assert tags == {"v1.0.0": done.commit} and branches["v1"] == done.commit
    files = HfApi(endpoint=registry.url).list_repo_files("acme/softmax", repo_type="kernel", revision="v1.0.0")
    assert set(softmax_bundle.files) <= set(files)


def test_existing_version_is_refused_and_the_repo_unchanged(registry, softmax_bundle):
    publish(softmax_bundle, "acme/softmax", settings())
    before = _refs(registry)
    with pytest.raises(PublishRefusedError, match="v1.0.0 already exists"):
        publish(softmax_bundle, "acme/softmax", settings())
    assert _refs(registry) == before


def test_older_version_than_the_newest_release_is_refused(registry, softmax_bundles):
    publish(softmax_bundles["1.1.0"], "acme/softmax", settings())
    before = _refs(registry)
    with pytest.raises(PublishRefusedError, match="older"):
        publish(softmax_bundles["1.0.0"], "acme/softmax", settings())
    assert _refs(registry) == before


def test_racing_publishes_of_one_version_exactly_one_wins(registry, softmax_bundle):
    publish(softmax_bundle, "acme/softmax", settings())  # the repo and branch exist; the race is on v1.0.1
    from hub_client.bundle import build_bundle
    from tests.hub.conftest import SOFTMAX

    bundle = build_bundle(SOFTMAX, "1.0.1", benchmarks=False)
    results, barrier = [], threading.Barrier(4)

    def racer():
        barrier.wait()
        try:
            results.append(publish(bundle, "acme/softmax", settings()))
        except PublishRefusedError as e:  # refused by our check, or the Hub's 412 / 409 translated into ours
            results.append(e)

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1, results
    assert all(isinstance(r, PublishRefusedError) and "acme/softmax" in str(r) for r in results if r not in winners)
    branches, tags = _refs(registry)
    assert tags["v1.0.1"] == winners[0].commit == branches["v1"]  # no losing commit stacked on the branch


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_wrong_or_missing_token_writes_nothing(registry, softmax_bundle, monkeypatch, token):
    if token is None:
        monkeypatch.delenv("HF_TOKEN")
    else:
        monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(AuthenticationError) as e:
        publish(softmax_bundle, "acme/softmax", settings())
    assert e.value.status == 401 and e.value.repo_id == "acme/softmax" and e.value.revision == "v1.0.0"
    msg = str(e.value)
    assert "acme/softmax" in msg and "v1.0.0" in msg and "HF_TOKEN" in msg
    assert ("is not set" if token is None else "refused it") in msg  # what to do differs: set it, or fix it
    assert not (registry.root / "kernels" / "acme" / "softmax").exists()
