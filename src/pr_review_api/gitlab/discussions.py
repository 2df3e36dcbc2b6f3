"""Our findings' discussions on a merge request, as GitLab lists them (specification §§15, 17).

`GET .../merge_requests/:iid/discussions` lists every discussion, oldest first, each with its
notes (standalone notes are `individual_note` discussions of one note). One of our findings'
discussions is one whose first note is ours (our `GET /user` username), not a system note, and
carries a finding's marker: dismissals (gitlab/dismissals.py) and resolving fixed threads
(gitlab/resolve.py) read only those. A discussion is resolved when every resolvable note of it
is (GitLab's API says so per note; its discussion entity has no such field).

GitLab lists discussions oldest first and takes no order: a merge request with more than
`MAX_DISCUSSION_PAGES` pages of 100 is read at both ends (its first page and its newest pages,
`GitLabClient.paginated`), so a flood of others' discussions before our findings' (or after
them) does not hide them from dismissals and resolution. A discussion GitLab lists with a
shape we do not read, or an id that could not be a path piece of a URL, is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import DiscussionNote
from pr_review_api.gitlab.hooks import DISCUSSION_ID
from pr_review_api.gitlab.urls import MergeRequestRef

MAX_DISCUSSION_PAGES = 10


class DiscussionWire(BaseModel):
    """A discussion as GitLab's API returns it (the fields we read)."""

    model_config = ConfigDict(extra="ignore")
    id: str
    individual_note: bool = False
    notes: list[DiscussionNote] = []


@dataclass(frozen=True)
class FindingDiscussion:
    """One of our findings' discussions: its id, its notes oldest first (the first is ours)."""

    id: str
    notes: tuple[DiscussionNote, ...]

    @property
    def first(self) -> DiscussionNote:
        return self.notes[0]

    @property
    def fingerprint(self) -> str:
        found = self.first.finding_fingerprint()
        assert found is not None  # `finding_discussions` keeps only those
        return found

    @property
    def replies(self) -> tuple[DiscussionNote, ...]:
        return self.notes[1:]

    @property
    def resolvable(self) -> bool:
        return any(note.resolvable for note in self.notes)

    @property
    def resolved(self) -> bool:
        return all(note.resolved for note in self.notes if note.resolvable)


def is_resolved(wire: DiscussionWire) -> bool:
    """Whether GitLab says the discussion is resolved (every resolvable note of it, one at
    least)."""
    resolvable = [note for note in wire.notes if note.resolvable]
    return bool(resolvable) and all(note.resolved for note in resolvable)


def ours(item: Any, username: str) -> FindingDiscussion | None:
    """The listed discussion when it is one of our findings' (module docstring), else None."""
    try:
        wire = DiscussionWire.model_validate(item)
    except ValidationError:
        return None
    if wire.individual_note or not wire.notes or DISCUSSION_ID.fullmatch(wire.id) is None:
        return None
    first = wire.notes[0]
    author = first.username or ""
    if first.system or author.lower() != username.lower() or first.finding_fingerprint() is None:
        return None
    return FindingDiscussion(wire.id, tuple(wire.notes))


async def finding_discussions(
    gitlab: GitLabClient, ref: MergeRequestRef
) -> list[FindingDiscussion]:
    """Our findings' discussions on the merge request, oldest first (`GitLabUnavailable` or
    `PullRequestNotFound` when GitLab does not list them)."""
    username = await gitlab.username()
    url = ref.api_url(gitlab.settings, "/discussions")
    items, _ = await gitlab.paginated(url, max_pages=MAX_DISCUSSION_PAGES, ends=True)
    found = [ours(item, username) for item in items]
    return [discussion for discussion in found if discussion is not None]
