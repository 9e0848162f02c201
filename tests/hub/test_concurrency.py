"""Several processes loading the same kernel at once: one downloads, all get a verified kernel."""

import multiprocessing

import numpy as np

from hub_client.publish import publish
from tests.hub.conftest import settings


def _worker(env: dict, queue) -> None:
    import os

    os.environ.update(env)
    import kernels

    fetched = []
    k = kernels.get_kernel("acme/softmax", version=1, progress=fetched.append)
    y = k.softmax(np.ones((128, 512), np.float32))
    queue.put((fetched, k.info.digest, float(y.sum())))


def test_concurrent_get_kernel_downloads_once(registry, softmax_bundle):
    import os

    publish(softmax_bundle, "acme/softmax", settings())
    env = {k: os.environ[k] for k in ("HF_ENDPOINT", "HF_HUB_CACHE", "HF_HOME", "HF_HUB_DISABLE_TELEMETRY")}
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no shared in-process memo
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(env, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    downloads = [f for f, _, _ in results if f]
    assert len(downloads) == 1 and sorted(downloads[0]) == sorted(softmax_bundle.manifest.ir_files())
    assert {d for _, d, _ in results} == {softmax_bundle.manifest.digest}
    assert all(abs(s - 128.0) < 1e-3 for _, _, s in results)
