"""Where the Hub is and where its cache lives, read from the environment once per call at the facade boundary and
then passed explicitly to every ``huggingface_hub`` call.

``huggingface_hub`` reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE into module constants when it is first
imported; reading them here at call time means a process that changes its environment (a test, a notebook) is
honoured too, with the same meaning and precedence as huggingface_hub's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_TYPE = "kernel"  # huggingface_hub >= 2.4 and the self-hosted registry both know kernel repos
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    cache_dir: Path
    token: str | None
    offline: bool
    repo_type: str = REPO_TYPE
    user_agent: str | dict | None = None  # HF kernels' user_agent=: added to every Hub request's User-Agent

    @classmethod
    def from_env(cls, *, token: str | None = None, endpoint: str | None = None) -> HubSettings:
        env = os.environ
        hf_home = Path(
            os.path.expanduser(env.get("HF_HOME") or Path(env.get("XDG_CACHE_HOME", "~/.cache")) / "huggingface")
        )
        cache = (
            env.get("KERNELS_CACHE") or env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or hf_home / "hub"
        )
        offline = (env.get("HF_HUB_OFFLINE") or env.get("TRANSFORMERS_OFFLINE") or "").lower() in _TRUE
        return cls(
            endpoint=(endpoint or env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/"),
            cache_dir=Path(os.path.expanduser(str(cache))),
            token=token or env.get("HF_TOKEN") or None,
            offline=offline,
        )

    def repo_cache(self, repo_id: str) -> Path:
        """The standard HF cache folder of a repo: ``<cache>/kernels--org--name``."""
        return self.cache_dir / f"{self.repo_type}s--{repo_id.replace('/', '--')}"

    def snapshot_dir(self, repo_id: str, commit: str) -> Path:
        """Where huggingface_hub files a commit's downloads: ``<repo cache>/snapshots/<commit>``."""
        return self.repo_cache(repo_id) / "snapshots" / commit

    def api(self):
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=self.token, user_agent=self.user_agent)
