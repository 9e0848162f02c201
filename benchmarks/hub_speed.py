"""How fast kernels move through a Hub, over loopback against the self-hosted registry.

    python benchmarks/hub_speed.py [--repeat 10]

Prints the median of --repeat runs of:
- bundle build (trace + verify each specialisation, test vectors, modelled benchmarks);
- cold publish: create repo, branch, one commit, tag, for a bundle already built (target < 1 s);
- cold fetch: get_kernel(version=1) into an empty cache: resolve, download, verify digests (target < 1 s);
- first call: the first run of an entry point (parse + verify the IR, compile, run);
- warm get_kernel, same process: cached and verified once, the same call again (the in-process memo);
- warm, fresh process (target < 20 ms each): a new interpreter, the cache holding the release and its
  verification receipt, nothing in memory. Each line times the call after ``import kernels``; the imports are
  printed on their own line (a once-per-process cost of any Python library, not of a call):
  - get_kernel(version=1) online: two requests revalidate it (refs: a new release is seen at once; the org
    overview: a revoked trusted publisher is noticed at once). It includes building huggingface_hub's default
    HTTP client, whose verified TLS context loads the CA bundle even for a plain-http registry (~30 ms):
    hub_client uses huggingface_hub's client as configured and no longer swaps its private client factory
    for a lazy-TLS one, so this line is over the 20 ms target;
  - get_kernel(revision=<commit>): a commit never changes, so no request at all;
  - get_locked_kernel / load_kernel: the lock pins commit and digest; no request, huggingface_hub not imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# The source checkout's `kernels` facade and first-party packages (an installed nki-dsl does not ship
# kernels/__init__.py, so as not to replace HF kernels' own), as `python -m` from the repo root would find them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SOFTMAX = Path(__file__).parents[1] / "kernels" / "softmax"
FRESH = Path(__file__).with_name("hub_fresh_process.py")


def _median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def _fresh(mode: str, repo: str, arg: str | None = None) -> dict:
    out = subprocess.run([sys.executable, str(FRESH), mode, repo] + ([arg] if arg else []), env=os.environ,
                         capture_output=True, text=True, check=True)  # fmt: skip
    result = json.loads(out.stdout)
    if result["hf_imported_by_call"]:
        raise SystemExit(f"{mode}: a cache-only load imported huggingface_hub")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)

    import kernels
    from hub_client import api
    from hub_client.bundle import build_bundle
    from hub_client.lockfile import Locked, write_lock
    from hub_client.publish import publish
    from hub_client.server import serve
    from hub_client.settings import HubSettings

    with tempfile.TemporaryDirectory() as work, serve(Path(work) / "registry", tokens=["bench"]) as registry:
        os.environ.update(HF_ENDPOINT=registry.url, HF_TOKEN="bench", HF_HUB_DISABLE_TELEMETRY="1")
        os.environ.pop("HF_HUB_OFFLINE", None)
        build, pub, cold, first, warm, fresh = [], [], [], [], [], {}
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
            kernels.get_kernel(f"bench/softmax-{i}", revision=k.info.commit)
            lockfile = Path(work) / f"kernels-{i}.lock"
            write_lock(lockfile, [Locked(f"bench/softmax-{i}", 1, k.info.commit, k.info.revision, k.info.digest)])
            for mode, arg in (("version", None), ("commit", k.info.commit), ("locked", str(lockfile)),
                              ("load", str(lockfile))):  # fmt: skip
                fresh.setdefault(mode, []).append(_fresh(mode, f"bench/softmax-{i}", arg))
    size = sum(len(d) for d in bundle.files.values())
    print(f"bundle: {len(bundle.files)} files, {size / 1024:.0f} KiB (softmax, 3 specialisations)")
    print(f"bundle build                {_median_ms(build):8.1f} ms")
    print(f"cold publish (loopback)     {_median_ms(pub):8.1f} ms   target < 1000 ms")
    print(f"cold fetch (loopback)       {_median_ms(cold):8.1f} ms   target < 1000 ms")
    print(f"first call (parse+compile)  {_median_ms(first):8.1f} ms")
    print(f"warm get_kernel, same process {_median_ms(warm):6.1f} ms   (in-process resolution memo)")
    print("warm, fresh process (call after `import kernels`; target < 20 ms):")
    labels = {"version": "get_kernel(version=1) online", "commit": "get_kernel(revision=<commit>)",
              "locked": "get_locked_kernel(lockfile)", "load": "load_kernel(lockfile)"}  # fmt: skip
    for mode, label in labels.items():
        note = "refs + org overview requests" if mode == "version" else "no request, huggingface_hub not imported"
        print(f"  {label:30} {statistics.median(r['call'] for r in fresh[mode]):6.1f} ms   ({note})")
    imports = statistics.median(r["import_kernels"] for m in fresh.values() for r in m)
    hf = statistics.median(r["import_hf"] for r in fresh["version"])
    print(f"  once per process: import kernels {imports:.0f} ms; huggingface_hub {hf:.0f} ms (online calls only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
