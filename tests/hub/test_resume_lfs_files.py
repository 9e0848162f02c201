"""`kernels publish --resume` compares the files of the untagged commit with the bundle. The Hub keeps large files
in LFS: the tree lists them with their content's sha256 (``entry.lfs.sha256``) and the blob id of the pointer file,
so an LFS file is compared by sha256 and a regular one by git blob id. (The self-hosted registry answers "regular"
for every file, so this is checked on the tree a Hub would list.)"""

import hashlib
from types import SimpleNamespace

from hub_client.manifest import MANIFEST, sha256_hex
from hub_client.publish import _differences, _git_blob_id
from tests.hub.conftest import settings

MANIFEST_BYTES = b'{"name": "softmax"}'
VECTORS = "test_vectors/softmax.npz"
FILES = {MANIFEST: MANIFEST_BYTES, "ir/softmax.nkir": b"kernel softmax() -> () {}\n", VECTORS: b"\x93NUMPY" * 1000}


class _Tree:
    """``list_repo_tree`` of a commit holding ``FILES``, the vectors in LFS with content ``lfs_bytes``."""

    def __init__(self, lfs_bytes):
        self.lfs_bytes = lfs_bytes

    def list_repo_tree(self, repo_id, repo_type, revision, recursive):
        for path, data in FILES.items():
            if path == VECTORS:
                pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\n" % sha256_hex(
                    self.lfs_bytes).encode()  # fmt: skip
                yield SimpleNamespace(
                    path=path,
                    blob_id=_git_blob_id(pointer),
                    lfs=SimpleNamespace(sha256=hashlib.sha256(self.lfs_bytes).hexdigest()),
                )
            else:
                yield SimpleNamespace(path=path, blob_id=_git_blob_id(data), lfs=None)


def _diffs(lfs_bytes):
    bundle = SimpleNamespace(manifest=SimpleNamespace(digest=sha256_hex(MANIFEST_BYTES)), files=FILES)
    return _differences(_Tree(lfs_bytes), settings(), "acme/softmax", "0" * 40, bundle, MANIFEST_BYTES)


def test_an_lfs_file_holding_the_bundles_bytes_is_the_same_file():
    assert _diffs(FILES[VECTORS]) == []


def test_an_lfs_file_holding_other_bytes_differs_by_sha256():
    (diff,) = _diffs(b"other bytes")
    assert diff.startswith(f"{VECTORS} differs (sha256 {hashlib.sha256(b'other bytes').hexdigest()[:12]}, ")
