"""The kernels command: publish, versions and the refusal exit status."""

from hub_client.cli import main
from tests.hub.conftest import SOFTMAX


def test_publish_and_versions(registry, capsys):
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 0
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax", "--version", "1.2.0"]) == 0
    out = capsys.readouterr().out
    assert "published acme/softmax v1.0.0 on branch v1" in out and "v1.2.0" in out
    assert main(["versions", "acme/softmax"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("v1 -> v1.0.0 (") and "v1.2.0 (" in out


def test_refused_publish_exits_1_with_the_reason(registry, capsys):
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 0
    assert main(["publish", str(SOFTMAX), "--repo", "acme/softmax"]) == 1
    assert "already exists" in capsys.readouterr().err


def test_unknown_repo(registry, capsys):
    assert main(["versions", "acme/missing"]) == 1
    assert "acme/missing" in capsys.readouterr().err
