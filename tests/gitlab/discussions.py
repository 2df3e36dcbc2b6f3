"""What the GitLab dismissal and resolution tests share: one of our findings' discussions (or
someone else's) on the fake GitLab, as gitlab/publish.py would have started it."""

from __future__ import annotations

from pathlib import Path

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.publishing.markers import finding_marker
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_notes import FakeNotes, StoredNote
from tests.fakes.gitlab_server import FakeGitLab

PROJECT = "grp/sub/project"
IID = 3
BOT = "pr-review-bot"
BOT_ID = 90


def started(
    notes: FakeNotes,
    fingerprint: str,
    *,
    title: str = "A problem",
    author: str = BOT,
    head: str = "d" * 40,
    path: str = "a.py",
    line: int = 1,
) -> StoredNote:
    """A discussion started by `author` (our bot by default) with a finding's first note."""
    body = f"**medium** · {title}\n\nWhy it matters.\n\n{finding_marker(fingerprint)}"
    note = notes.add(PROJECT, IID, body, author)
    note.discussion_id = f"{note.id:040x}"
    note.position = {
        "position_type": "text",
        "head_sha": head,
        "new_path": path,
        "old_path": path,
        "new_line": line,
    }
    return note


def ref_of(fake: FakeGitLab) -> MergeRequestRef:
    settings = fake.settings(Path("/nonexistent"), token=GITLAB_TOKEN)
    return parse_merge_request_url(f"{fake.server_url}/{PROJECT}/-/merge_requests/{IID}", settings)


def client_of(fake: FakeGitLab, tmp_path: Path) -> GitLabClient:
    fake.users[GITLAB_TOKEN] = BOT
    fake.user_ids[BOT] = BOT_ID
    return GitLabClient(fake.settings(tmp_path / "cache", token=GITLAB_TOKEN))
