"""Publish a bundle: one commit on branch ``v<major>`` and an immutable tag ``v<major>.<minor>.<patch>``.

Refusals leave the repo unchanged: a version that is already tagged, not newer than the newest release of its
major, or already committed at the branch head by a publish that has not tagged yet (a racing publish of the same
version). The commit names the branch head it was built on (``parent_commit``), so of two racing publishes the
second commit is refused by the Hub (412) instead of silently stacking; tag creation fails if the tag exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from hub_client import versions
from hub_client.bundle import Bundle
from hub_client.errors import PublishRefusedError
from hub_client.manifest import MANIFEST, parse
from hub_client.settings import HubSettings


@dataclass(frozen=True)
class Published:
    repo_id: str
    version: str
    tag: str
    branch: str
    commit: str
    digest: str


def _head_manifest_version(api, settings, repo_id, head) -> str | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        path = hf_hub_download(
            repo_id, MANIFEST, repo_type=settings.repo_type, revision=head, cache_dir=settings.cache_dir,
            endpoint=settings.endpoint, token=settings.token,
        )  # fmt: skip
    except EntryNotFoundError:
        return None
    with open(path, "rb") as f:
        return parse(f.read()).version


def publish(bundle: Bundle, repo_id: str, settings: HubSettings, *, private: bool = False,
            progress=None) -> Published:  # fmt: skip
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    manifest = bundle.manifest
    tag, branch = versions.tag_name(manifest.version), versions.branch_name(manifest.major)
    api = settings.api()
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        refs = api.list_repo_refs(repo_id, repo_type=settings.repo_type)
    except RepositoryNotFoundError:
        api.create_repo(repo_id, repo_type=settings.repo_type, exist_ok=True, private=private)
        refs = api.list_repo_refs(repo_id, repo_type=settings.repo_type)
    tags = {t.name: t.target_commit for t in refs.tags}
    branches = {b.name: b.target_commit for b in refs.branches}
    if tag in tags:
        raise PublishRefusedError(f"{repo_id} {tag} already exists (commit {tags[tag]}); releases are immutable, "
                                  f"publish a new version")  # fmt: skip
    newest = versions.newest(tags, manifest.major)
    if newest is not None and versions.parse_tag(newest[0]) > versions.parse_tag(tag):
        raise PublishRefusedError(f"{repo_id}: {tag} is older than the newest release of {branch}, {newest[0]}")
    if branch not in branches:
        api.create_branch(repo_id, repo_type=settings.repo_type, branch=branch, exist_ok=True)
        branches = {b.name: b.target_commit for b in api.list_repo_refs(repo_id, repo_type=settings.repo_type).branches}
    head = branches[branch]
    if _head_manifest_version(api, settings, repo_id, head) == manifest.version and head not in tags.values():
        raise PublishRefusedError(f"{repo_id}: {branch} head {head[:12]} already holds version {manifest.version} "
                                  f"(another publish of it is in progress or did not finish tagging)")  # fmt: skip
    stale = [p for p in api.list_repo_files(repo_id, repo_type=settings.repo_type, revision=head)
             if p not in bundle.files and p != ".gitattributes"]  # fmt: skip
    ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=data) for p, data in sorted(bundle.files.items())]
    ops += [CommitOperationDelete(path_in_repo=p) for p in stale]
    if progress:
        progress(sum(len(d) for d in bundle.files.values()))
    info = api.create_commit(repo_id, ops, repo_type=settings.repo_type, revision=branch, parent_commit=head,
                             commit_message=f"{manifest.name} {manifest.version}",
                             commit_description=f"bundle digest sha256:{manifest.digest}")  # fmt: skip
    api.create_tag(repo_id, repo_type=settings.repo_type, tag=tag, revision=info.oid,
                   tag_message=f"{manifest.name} {manifest.version}")  # fmt: skip
    return Published(repo_id, manifest.version, tag, branch, info.oid, manifest.digest)
