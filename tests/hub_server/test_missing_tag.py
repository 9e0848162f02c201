"""Deleting a tag the repo does not have is the Hub's 404 RevisionNotFound naming the tag (the client raises
``RevisionNotFoundError``), not a server error, and leaves the repo's tags as they were."""

import pytest
from huggingface_hub.errors import RevisionNotFoundError


def test_deleting_a_missing_tag_is_revision_not_found_naming_it(api, kernel_repo):
    api.create_tag(kernel_repo, repo_type="kernel", tag="v1.0.0", revision="v1")
    with pytest.raises(RevisionNotFoundError, match=r"Revision not found: 'v1\.0\.1' in acme/"):
        api.delete_tag(kernel_repo, repo_type="kernel", tag="v1.0.1")
    assert [tag.name for tag in api.list_repo_refs(kernel_repo, repo_type="kernel").tags] == ["v1.0.0"]
