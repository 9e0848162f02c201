"""One fresh-process measurement for benchmarks/hub_speed.py: import ``kernels``, then time one warm call.

    python benchmarks/hub_fresh_process.py MODE REPO [COMMIT_OR_LOCKFILE]

MODE is ``version`` (get_kernel(version=1), online), ``commit`` (get_kernel(revision=COMMIT)), ``locked``
(get_locked_kernel with LOCKFILE) or ``load`` (load_kernel with LOCKFILE). Prints one JSON line of milliseconds:
``import_kernels``, ``import_hf`` (the online mode imports huggingface_hub before the timed call and reports it
here, as a once-per-process library cost; the other modes must not need it at all) and ``call``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

# The source checkout's `kernels` facade (an installed nki-dsl ships only `hub_client` under a name of its own, so as
# not to replace HF kernels' `kernels/__init__.py`): the same first path entry as `python -m` from the repo root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(mode: str, repo: str, arg: str | None = None) -> dict:
    t0 = time.perf_counter()
    import kernels

    t1 = time.perf_counter()
    import_hf = 0.0
    if mode == "version":
        import huggingface_hub.hf_api  # noqa: F401 - timed on its own: every online call pays it once per process

        import_hf = time.perf_counter() - t1
    t2 = time.perf_counter()
    if mode == "version":
        kernels.get_kernel(repo, version=1)
    elif mode == "commit":
        kernels.get_kernel(repo, revision=arg)
    elif mode == "locked":
        kernels.get_locked_kernel(repo, lockfile=arg)
    elif mode == "load":
        kernels.load_kernel(repo, lockfile=arg)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    t3 = time.perf_counter()
    return {
        "import_kernels": 1000 * (t1 - t0),
        "import_hf": 1000 * import_hf,
        "call": 1000 * (t3 - t2),
        "hf_imported_by_call": mode != "version" and "huggingface_hub.hf_api" in sys.modules,
    }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
