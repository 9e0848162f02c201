"""How fast kernels move through a Hub, over loopback against the self-hosted registry.

    python benchmarks/hub_speed.py [--repeat 10]

Prints the median of --repeat runs of:
- bundle build (trace + verify each specialisation, test vectors, modelled benchmarks);
- cold publish: create repo, branch, one commit, tag, for a bundle already built (target < 1 s);
- cold fetch: get_kernel(version=1) into an empty cache: resolve, download, verify digests (target < 1 s);
- first call: the first run of an entry point (parse + verify the IR, compile, run);
- warm get_kernel: cached and verified once, the same call again (target < 20 ms);
- warm cache, fresh process: the cache is warm but nothing is resolved in memory (one list_repo_refs round trip).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

SOFTMAX = Path(__file__).parents[1] / "kernels" / "softmax"


def _median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)

    import kernels
    from hub_client import api
    from hub_client.bundle import build_bundle
    from hub_client.publish import publish
    from hub_client.server import serve
    from hub_client.settings import HubSettings

    with tempfile.TemporaryDirectory() as work, serve(Path(work) / "registry", tokens=["bench"]) as registry:
        os.environ.update(HF_ENDPOINT=registry.url, HF_TOKEN="bench", HF_HUB_DISABLE_TELEMETRY="1")
        os.environ.pop("HF_HUB_OFFLINE", None)
        build, pub, cold, first, warm, fresh = [], [], [], [], [], []
        x = np.random.default_rng(0).standard_normal((128, 512)).astype(np.float32)
        for i in range(args.repeat):
            t = time.perf_counter()
            bundle = build_bundle(SOFTMAX)
            build.append(time.perf_counter() - t)
            t = time.perf_counter()
            publish(bundle, f"bench/softmax-{i}", HubSettings.from_env())
            pub.append(time.perf_counter() - t)
            os.environ["HF_HUB_CACHE"] = str(Path(work) / f"cache-{i}")  # an empty cache: a cold fetch
            api.clear_memo()
            t = time.perf_counter()
            k = kernels.get_kernel(f"bench/softmax-{i}", version=1)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            k.softmax(x)
            first.append(time.perf_counter() - t)
            for _ in range(5):
                t = time.perf_counter()
                kernels.get_kernel(f"bench/softmax-{i}", version=1)
                warm.append(time.perf_counter() - t)
            api.clear_memo()  # as a new process would: cache warm, nothing resolved or loaded in memory
            t = time.perf_counter()
            kernels.get_kernel(f"bench/softmax-{i}", version=1)
            fresh.append(time.perf_counter() - t)
    size = sum(len(d) for d in bundle.files.values())
    print(f"bundle: {len(bundle.files)} files, {size / 1024:.0f} KiB (softmax, 3 specialisations)")
    print(f"bundle build                {_median_ms(build):8.1f} ms")
    print(f"cold publish (loopback)     {_median_ms(pub):8.1f} ms   target < 1000 ms")
    print(f"cold fetch (loopback)       {_median_ms(cold):8.1f} ms   target < 1000 ms")
    print(f"first call (parse+compile)  {_median_ms(first):8.1f} ms")
    print(f"warm get_kernel             {_median_ms(warm):8.1f} ms   target < 20 ms")
    print(f"warm cache, fresh process   {_median_ms(fresh):8.1f} ms   (one refs round trip + receipt check)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
