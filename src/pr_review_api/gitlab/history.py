"""What our own earlier notes on a merge request say (specification §§10, 17), and the fixed
sentences a GitLab publication fails with.

GitLab lists every note of a merge request in one listing (`GET .../notes`): our review notes
and the first notes of our discussions alike, newest first. Markers count only in notes whose
author is our identity (`GET /user`'s `username`, publishing/markers.py's rules); system notes
(GitLab's own "added 1 commit" lines) are skipped. The listing is read for at most
`MAX_LIST_PAGES` pages of 100: our notes are among the newest, whatever came before them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import ReviewError
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.publishing.failures import PublishFailure, PublishWords
from pr_review_api.publishing.markers import Post, PriorState, read_markers

MAX_LIST_PAGES = 30
MAX_NOTE_BYTES = 4 * 1024 * 1024  # a note holds at most 1,000,000 characters


GITLAB_PUBLISH = PublishWords(
    "GitLab", "merge request", "the api scope and the right to comment on the merge request"
)


class _AuthorWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    username: str | None = None


class NoteWire(BaseModel):
    """A note as GitLab's API returns it (the fields we read)."""

    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    body: str | None = None
    author: _AuthorWire | None = None
    system: bool = False


def note_url(ref: MergeRequestRef, note_id: int | None) -> str | None:
    """Where a note is shown: the merge request's page, at the note's anchor."""
    return None if note_id is None else f"{ref.url}#note_{note_id}"


def _posts(items: list[Any], ref: MergeRequestRef) -> list[Post]:
    """The listing's notes (newest first) as posts, oldest first."""
    posts: list[Post] = []
    for index, item in enumerate(items):
        try:
            note = NoteWire.model_validate(item)
        except ValidationError:
            raise PublishFailure("GitLab returned note data that is not valid.") from None
        if note.system:
            continue
        author = None if note.author is None else note.author.username
        order = len(items) - index
        posts.append(Post(author, note.body or "", note.id, note_url(ref, note.id), order))
    return sorted(posts, key=lambda post: post.order)


async def prior_state(
    gitlab: GitLabClient, ref: MergeRequestRef, *, head_sha: str | None = None
) -> PriorState:
    """The markers of our own notes on the merge request, discussions' notes included.

    `complete` is False when the listing outran its budget and our note of `head_sha` was not
    among the pages read: it may lie in the older pages, and only the caller knows whether
    that may be risked."""
    username = await gitlab.username()
    url = ref.api_url(gitlab.settings, "/notes") + "?sort=desc&order_by=created_at"
    items, complete = await gitlab.paginated(url, max_pages=MAX_LIST_PAGES)
    state = read_markers(_posts(items, ref), username, reviews=True)
    state.complete = complete or (head_sha is not None and state.review_of(head_sha) is not None)
    return state


async def our_note_body(gitlab: GitLabClient, ref: MergeRequestRef, note_id: int) -> str | None:
    """The body of our note `note_id` on the merge request (`GET .../notes/:note_id`), or None
    when it cannot be read or is not ours (only our notes' lines count, as markers do)."""
    url = ref.api_url(gitlab.settings, f"/notes/{note_id}")
    try:
        response = await gitlab.request("GET", url, limit=MAX_NOTE_BYTES)
        if response.status != 200:
            return None
        username = await gitlab.username()
    except ReviewError:
        return None
    try:
        note = NoteWire.model_validate_json(response.body)
    except ValidationError:
        return None
    author = None if note.author is None else note.author.username
    return note.body if author == username and not note.system else None
