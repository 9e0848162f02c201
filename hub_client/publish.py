"""Publish a bundle: one commit on branch ``v<major>`` and an immutable tag ``v<major>.<minor>.<patch>``.

Refusals leave the repo unchanged: a version that is already tagged, not newer than the newest release of its
major, or already committed at the branch head by a publish that has not tagged yet (a racing publish of the same
version). The commit names the branch head it was built on (``parent_commit``), so of two racing publishes the
second commit is refused by the Hub (412) instead of silently stacking; tag creation fails if the tag exists. Either
way the loser gets a PublishRefusedError, as does every other Hub failure its own ``KernelHubError`` subclass.

A publish that committed but did not tag (a crash, a cut connection) leaves the branch head holding the version
untagged, which blocks that version; ``resume=True`` (``nki-kernels publish --resume``) finishes it: it checks the head
commit holds exactly this bundle (the manifest's sha256, and every other file's git blob id against the bundle's
bytes, with nothing extra) and only then creates the tag.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from hub_client import versions
from hub_client.bundle import Bundle
from hub_client.errors import PublishRefusedError
from hub_client.hub_errors import hub_call
from hub_client.manifest import MANIFEST, parse, sha256_hex
from hub_client.settings import HubSettings


@dataclass(frozen=True)
class Published:
    repo_id: str
    version: str
    tag: str
    branch: str
    commit: str
    digest: str


def _head_manifest(settings, repo_id, head) -> bytes | None:
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
        return f.read()


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _differences(api, settings, repo_id: str, commit: str, bundle: Bundle, head_manifest: bytes) -> list[str]:
    """How the files at ``commit`` differ from the bundle (empty: it holds exactly this bundle)."""
    if sha256_hex(head_manifest) != bundle.manifest.digest:
        return [f"{MANIFEST} has sha256 {sha256_hex(head_manifest)}, this bundle's is {bundle.manifest.digest}"]
    remote = {}
    for entry in api.list_repo_tree(repo_id, repo_type=settings.repo_type, revision=commit, recursive=True):
        if getattr(entry, "blob_id", None) is not None and entry.path != ".gitattributes":
            lfs = getattr(entry, "lfs", None)
            remote[entry.path] = ("sha256", lfs.sha256) if lfs else ("git", entry.blob_id)
    out = [f"{p} is not in this bundle" for p in sorted(set(remote) - set(bundle.files))]
    out += [f"{p} is missing" for p in sorted(set(bundle.files) - set(remote))]
    for p in sorted(set(remote) & set(bundle.files)):
        kind, oid = remote[p]
        mine = sha256_hex(bundle.files[p]) if kind == "sha256" else _git_blob_id(bundle.files[p])
        if oid != mine:
            out.append(f"{p} differs ({kind} {oid[:12]}, this bundle's {mine[:12]})")
    return out


def publish(bundle: Bundle, repo_id: str, settings: HubSettings, *, private: bool = False, progress=None,
            resume: bool = False) -> Published:  # fmt: skip
    """Commit ``bundle`` on ``v<major>`` and tag it; ``resume`` instead tags an untagged commit of exactly it."""
    tag = versions.tag_name(bundle.manifest.version)
    with hub_call(settings, repo_id, tag, f"{'resume the publish of' if resume else 'publish'} {tag}"):
        return _publish(bundle, repo_id, settings, private=private, progress=progress, resume=resume)


def _publish(bundle: Bundle, repo_id: str, settings: HubSettings, *, private: bool, progress,
             resume: bool) -> Published:  # fmt: skip
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete
    from huggingface_hub.errors import RepositoryNotFoundError

    manifest = bundle.manifest
    tag, branch = versions.tag_name(manifest.version), versions.branch_name(manifest.major)
    api = settings.api()
    try:
        refs = api.list_repo_refs(repo_id, repo_type=settings.repo_type)
    except RepositoryNotFoundError:
        if resume:
            raise PublishRefusedError(f"{repo_id}: nothing to resume, the repo does not exist at {settings.endpoint}; "
                                      f"publish without --resume") from None  # fmt: skip
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
        if resume:
            raise PublishRefusedError(f"{repo_id}: nothing to resume, there is no branch {branch}; publish without "
                                      f"--resume")  # fmt: skip
        api.create_branch(repo_id, repo_type=settings.repo_type, branch=branch, exist_ok=True)
        branches = {b.name: b.target_commit for b in api.list_repo_refs(repo_id, repo_type=settings.repo_type).branches}
    head = branches[branch]
    head_manifest = _head_manifest(settings, repo_id, head)
    head_version = parse(head_manifest).version if head_manifest is not None else None
    pending = head_version == manifest.version and head not in tags.values()
    if resume:
        if not pending:
            raise PublishRefusedError(
                f"{repo_id}: nothing to resume: {branch} head {head[:12]} holds "
                f"{f'version {head_version}' if head_version else 'no bundle'}"
                f"{' (already tagged)' if head in tags.values() else ''}, not an untagged {manifest.version}; "
                f"publish without --resume"
            )
        diffs = _differences(api, settings, repo_id, head, bundle, head_manifest)
        if diffs:
            raise PublishRefusedError(
                f"{repo_id}: {branch} head {head[:12]} holds version {manifest.version} but not exactly this bundle, "
                f"so it is not tagged: {'; '.join(diffs[:5])}{' ...' if len(diffs) > 5 else ''}. Publish the next "
                f"version instead (the untagged commit stays unreleased)"
            )
        api.create_tag(repo_id, repo_type=settings.repo_type, tag=tag, revision=head,
                       tag_message=f"{manifest.name} {manifest.version}")  # fmt: skip
        return Published(repo_id, manifest.version, tag, branch, head, manifest.digest)
    if pending:
        raise PublishRefusedError(
            f"{repo_id}: {branch} head {head[:12]} already holds version {manifest.version}, untagged (another "
            f"publish of it is in progress, or one stopped before tagging). If it was yours and it stopped, "
            f"`nki-kernels publish DIR --repo {repo_id} --version {manifest.version} --resume` tags it after checking "
            f"it holds exactly this bundle"
        )
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
