"""The GitLab requests of the review conversation (CONTRACT 15 on a merge request, section 17).

Who may ask: the user's access level on the project, inherited from its groups included
(`GET /projects/:id/members/all/:user_id`), Developer (30) or higher; a user who is not a
member (404) may not. Never the note's own claims. The answers are cached briefly by the owner
of an `AccessLevels` (the webhook route keeps one for its life).

Our replies: a note on the merge request, or a note in the discussion the command was written
in. Every request goes through the job's `GitLabClient`.
"""

from __future__ import annotations

import time
from typing import Any

from pr_review_api.errors import GitLabUnavailable
from pr_review_api.gitlab.client import GitLabClient, status_error
from pr_review_api.gitlab.urls import MergeRequestRef

DEVELOPER_ACCESS = 30  # GitLab's Developer role; Maintainer is 40, Owner 50
ACCESS_TTL_SECONDS = 60.0
MAX_ACCESS_ENTRIES = 4096
MAX_MEMBER_BYTES = 64 * 1024


class AccessLevels:
    """`may_ask` with a cache of the answers, per project and user, for `ACCESS_TTL_SECONDS`."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, int], tuple[float, bool]] = {}

    async def may_ask(self, client: GitLabClient, ref: MergeRequestRef, user_id: int) -> bool:
        """Whether the user has Developer (30) or higher access to the merge request's project.
        An answer GitLab does not give (a 401 or 403 to our token) is a no; a GitLab that
        fails is `GitLabUnavailable`."""
        key = (ref.project_path.lower(), user_id)
        now = time.monotonic()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        allowed = await _may_ask(client, ref, user_id)
        if len(self._answers) >= MAX_ACCESS_ENTRIES:
            self._answers.clear()
        self._answers[key] = (now + ACCESS_TTL_SECONDS, allowed)
        return allowed


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
