"""Lesson 5: publish a kernel to a Hub, load it back by version, pin it in a lock file, and load it offline.

Kernels are shared as versioned Hub repos: a major version is a branch (``v1``), every release an immutable tag
(``v1.0.0``). A release holds the kernel's Python, the verified IR of each shape it declares, test vectors, and a
manifest with the sha256 of every file. Loading checks every digest before using a byte and, unless you say you
trust the publisher, runs only the published IR: no downloaded Python is executed.
Run it: ``python tutorials/05_publish_and_load.py`` (it starts its own registry on 127.0.0.1; no internet needed).
"""

import os
import pathlib
import tempfile

import numpy as np

import kernels
from hub_client.cli import main as kernels_cli  # the `kernels` command line, called in-process
from hub_client.server import serve

PACKAGE = pathlib.Path(__file__).parents[1] / "kernels" / "softmax"  # kernel.toml, kernel.py, launcher.py, ...


def softmax_reference(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def lesson(work: pathlib.Path):
    # 1. A self-hosted registry: the subset of the Hub API huggingface_hub needs, repos as bare git repositories.
    #    Writes need a token. Port 0 picks a free port.
    with serve(work / "registry", tokens=["tutorial-token"]) as registry:
        # huggingface_hub (and so kernels) finds the Hub, the cache and the token through the usual variables.
        os.environ.update(HF_ENDPOINT=registry.url, HF_HUB_CACHE=str(work / "cache"), HF_TOKEN="tutorial-token")
        print(f"registry at {registry.url}")

        # 2. Publish: build the bundle (trace + verify each declared shape, test vectors), one commit on branch v1,
        #    tag v1.0.0. The same command again is refused: releases are immutable.
        assert kernels_cli(["publish", str(PACKAGE), "--repo", "acme/softmax"]) == 0
        assert kernels_cli(["publish", str(PACKAGE), "--repo", "acme/softmax"]) == 1, "v1.0.0 exists already"
        assert kernels_cli(["versions", "acme/softmax"]) == 0

        # 3. Load by major version: the newest v1.x.y release, downloaded into the HF cache and verified.
        softmax = kernels.get_kernel("acme/softmax", version=1)
        print(softmax.info)
        x = np.random.default_rng(0).standard_normal((300, 512)).astype(np.float32)
        y = softmax.softmax(x)  # the published N x 512 float32 family: any N in 1..65536 runs, without trust
        assert np.allclose(y, softmax_reference(x), rtol=1e-5, atol=1e-7)
        print(f"softmax(300x512) from the Hub matches NumPy: max |err| = {np.abs(y - softmax_reference(x)).max():.2e}")

        # 4. The families take any width up to 8192 and up to 65536 rows in one instance; more rows run too, without
        #    trust, as instances over slices of whole 128-row tiles (the loader proves from the IR that each tile is
        #    computed from its own rows). A shape outside them (wider rows) is refused, and the message lists them.
        #    Trusting the publisher imports the published Python (under a name unique to this release).
        assert np.allclose(softmax.softmax(np.ones((65537, 7), np.float32)), 1 / 7)  # 65536 rows, then 1
        try:
            softmax.softmax(np.ones((2, 9000), np.float32))
            raise AssertionError("an unpublished shape must not run")
        except kernels.NoSpecialisationError as e:
            print(str(e).splitlines()[0])
        trusted = kernels.get_kernel("acme/softmax", version=1, trust_remote_code=["acme/softmax"])
        assert np.allclose(trusted.module.softmax(np.ones((3, 7), np.float32)), 1 / 7)

        # 5. Pin it: a project lists its kernels in pyproject.toml; `kernels lock` pins commit and manifest digest.
        project = work / "app"
        project.mkdir()
        (project / "pyproject.toml").write_text(
            '[project]\nname = "app"\n[tool.kernels.dependencies]\n"acme/softmax" = 1\n'
        )
        assert kernels_cli(["lock", str(project)]) == 0
        assert kernels_cli(["download", str(project)]) == 0  # every file of the locked release, verified

    # 6. The registry is gone and we declare ourselves offline: the pinned kernel and the same
    #    get_kernel(version=1) call still work, from the cache (the resolved ref was recorded when we were online).
    os.environ["HF_HUB_OFFLINE"] = "1"
    pinned = kernels.load_kernel("acme/softmax", lockfile=project / "kernels.lock")
    again = kernels.get_kernel("acme/softmax", version=1)
    assert pinned.info.commit == again.info.commit == softmax.info.commit
    assert np.allclose(pinned.softmax(x), y)
    print(
        f"offline: loaded {pinned.info.repo_id} {pinned.info.revision} commit {pinned.info.commit[:12]} from the cache"
    )


def main():
    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as work:
            lesson(pathlib.Path(work))
    finally:  # the lesson also runs inside the test suite: leave the environment as it was
        os.environ.clear()
        os.environ.update(saved)


if __name__ == "__main__":
    main()
