"""The GitLab requests of the comment commands (specification §15 on a merge request, section 17).

Who may ask: the user's access level on the project, inherited from its groups included
(`GET /projects/:id/members/all/:user_id`), Developer (30) or higher; a user who is not a
member (404) may not. Never the note's own claims. The answers are kept briefly in the
holder's `PermissionCache` (permissions.py), through an `AccessLevels`.

Our replies: a note on the merge request, or a note in the discussion the command was written
in; an award emoji on a note (`thumbsup` for `ignore`, `eyes` over the answers' hourly limit);
a discussion's notes, to tell one of our findings' discussions (its first note is ours and
carries a finding's marker) and the head it was posted on. Our answers carry
`<!-- pr-review:answer=<question note id> -->`, read only from our own notes. Every request
goes through the job's `GitLabClient`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitLabUnavailable
from pr_review_api.gitlab.client import GitLabClient, status_error
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.markers import MarkedPost

DEVELOPER_ACCESS = 30  # GitLab's Developer role; Maintainer is 40, Owner 50
MAX_MEMBER_BYTES = 64 * 1024
MAX_DISCUSSION_BYTES = 8 * 1024 * 1024  # a discussion's notes, each up to 1,000,000 characters
# Markers count only unescaped (model text's `<` is always `\\<`): publishing/markers.py's rule.
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}", re.ASCII)

Award = Literal["thumbsup", "eyes"]


class AccessLevels:
    """`may_ask` with its answers kept in a `PermissionCache`: the holder's (the job queue's,
    shared by the webhook route and the worker's reviews), else one of its own."""

    def __init__(self, cache: PermissionCache | None = None) -> None:
        self.cache = cache or PermissionCache()

    async def may_ask(self, client: GitLabClient, ref: MergeRequestRef, user_id: int) -> bool:
        """Whether the user has Developer (30) or higher access to the merge request's project.
        An answer GitLab does not give (a 401 or 403 to our token) is a no; a GitLab that
        fails is `GitLabUnavailable`."""
        # The project under `gitlab:` and the user by id: never a GitHub repository's answer.
        return await self.cache.answer(
            ref.dismissals_key, str(user_id), lambda: _may_ask(client, ref, user_id)
        )


async def _may_ask(client: GitLabClient, ref: MergeRequestRef, user_id: int) -> bool:
    url = ref.project_api_url(client.settings, f"/members/all/{user_id}")
    response = await client.request("GET", url, limit=MAX_MEMBER_BYTES)
    if response.status in (401, 403, 404):
        return False
    if not 200 <= response.status < 300:
        raise GitLabUnavailable("GitLab did not say who may ask.")
    member = response.json()
    level = member.get("access_level") if isinstance(member, dict) else None
    if not isinstance(level, int) or isinstance(level, bool):
        return False
    state = member.get("state", "active") if isinstance(member, dict) else None
    return level >= DEVELOPER_ACCESS and state == "active"


async def post_note(
    client: GitLabClient, ref: MergeRequestRef, body: str, *, discussion_id: str | None = None
) -> int | None:
    """A note on the merge request, or in its discussion `discussion_id`; the note's id."""
    tail = "/notes" if discussion_id is None else f"/discussions/{discussion_id}/notes"
    response = await client.request("POST", ref.api_url(client.settings, tail), json={"body": body})
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous, read=False)
    created: Any = response.json()
    note_id = created.get("id") if isinstance(created, dict) else None
    return note_id if isinstance(note_id, int) and not isinstance(note_id, bool) else None


class _Author(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int | None = None
    username: str | None = None


class _Position(BaseModel):
    model_config = ConfigDict(extra="ignore")
    head_sha: str | None = None
    new_path: str | None = None
    old_path: str | None = None
    new_line: int | None = None
    old_line: int | None = None


class DiscussionNote(MarkedPost):
    """A note of a discussion as GitLab's API returns it (the fields the comments seam reads)."""

    model_config = ConfigDict(extra="ignore")

    id: int
    author: _Author | None = None
    system: bool = False
    position: _Position | None = None
    original_position: _Position | None = None
    resolvable: bool = False
    resolved: bool = False

    @property
    def username(self) -> str | None:
        return None if self.author is None else self.author.username

    @property
    def author_id(self) -> int | None:
        return None if self.author is None else self.author.id

    def posted_head(self) -> str | None:
        """The head the note was posted on: its original position's (GitLab moves `position`
        along with later pushes), else its position's; None when it names no valid commit."""
        for position in (self.original_position, self.position):
            head = None if position is None else position.head_sha
            if head is not None and _SHA.fullmatch(head):
                return head
        return None

    def path(self) -> str | None:
        position = self.original_position or self.position
        return None if position is None else position.new_path or position.old_path

    def line(self) -> int | None:
        position = self.original_position or self.position
        return None if position is None else position.new_line or position.old_line


class _DiscussionWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    notes: list[DiscussionNote] = []


async def discussion_notes(
    client: GitLabClient, ref: MergeRequestRef, discussion_id: str
) -> list[DiscussionNote] | None:
    """The notes of the merge request's discussion, oldest first; None when GitLab has no such
    discussion on it (or answers with something that is not one)."""
    url = ref.api_url(client.settings, f"/discussions/{discussion_id}")
    response = await client.request("GET", url, limit=MAX_DISCUSSION_BYTES)
    if response.status == 404:
        return None
    if not 200 <= response.status < 300:
        raise status_error(response, anonymous=client.anonymous)
    try:
        wire = _DiscussionWire.model_validate_json(response.body)
    except ValidationError:
        return None
    return None if wire.id != discussion_id else wire.notes


async def award(client: GitLabClient, ref: MergeRequestRef, note_id: int, name: Award) -> None:
    """Our award emoji on a note of the merge request. GitLab answers 404 "... has already been
    taken ..." for an emoji we gave that note before: a job run again, and no failure."""
    url = ref.api_url(client.settings, f"/notes/{note_id}/award_emoji")
    response = await client.request("POST", url, json={"name": name})
    if 200 <= response.status < 300:
        return
    if response.status == 404 and b"has already been taken" in response.body:
        return
    raise status_error(response, anonymous=client.anonymous, read=False)
