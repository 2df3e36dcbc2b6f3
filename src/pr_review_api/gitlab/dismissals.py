"""Findings dismissed on a merge request itself (specification §15 on GitLab, section 17).

GitLab's counterpart of GitHub's `-1` reaction is a `thumbsdown` award emoji on the first note
of one of our findings' discussions (gitlab/discussions.py). GitLab sends no webhook for an
award, and its notes listing carries none: the awards are read per note
(`GET .../notes/:note_id/award_emoji`) when the merge request is next reviewed, only for our
findings' first notes, and only for the `MAX_AWARD_READS` most recent of them (the request
budget of one review), at most `AWARD_READ_CONCURRENCY` at a time. A note whose awards GitLab
does not give is read again at the next review.

An award counts when its user is not us, not a bot (gitlab/hooks.py's rule), and has Developer
(30) or higher access to the project (`AccessLevels`, gitlab/comments.py: the same check,
and cache, as an `ignore` reply's). In the service, each one is stored in the project's
dismissals (forge/gitlab.py); outside it (the CLI, a GitLab CI job: no database),
`dismissed_on_merge_request` also reads the `ignore` replies in our discussions, and the
fingerprints found are suppressed on this merge request's re-review.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import AccessLevels
from pr_review_api.gitlab.discussions import FindingDiscussion, finding_discussions
from pr_review_api.gitlab.hooks import is_bot
from pr_review_api.gitlab.urls import MergeRequestRef

MAX_AWARD_READS = 100  # our most recent findings' notes whose awards one review reads
AWARD_READ_CONCURRENCY = 4
MAX_AWARD_PAGES = 3  # of 100 awards a note: the first page and the two newest
DISMISSING_AWARD = "thumbsdown"
COMMAND_PREFIX = "/pr-review"


class _AwardUser(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    id: int
    username: str


class _AwardWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    user: _AwardUser


async def thumbs_down(
    gitlab: GitLabClient,
    ref: MergeRequestRef,
    discussions: Sequence[FindingDiscussion],
    access: AccessLevels,
) -> list[tuple[FindingDiscussion, str]]:
    """Our findings' discussions whose first note has a `thumbsdown` by a Developer (or
    higher) who is neither us nor a bot, each with that user (the first such one)."""
    username = (await gitlab.username()).lower()
    recent = list(discussions[-MAX_AWARD_READS:])
    limit = asyncio.Semaphore(AWARD_READ_CONCURRENCY)

    async def read(discussion: FindingDiscussion) -> list[tuple[int, str]]:
        async with limit:
            return await _thumbs_down_by(gitlab, ref, discussion.first.id)

    awarded = await asyncio.gather(*(read(discussion) for discussion in recent))
    found: list[tuple[FindingDiscussion, str]] = []
    for discussion, users in zip(recent, awarded, strict=True):
        for user_id, user in users:
            if user.lower() == username or is_bot(user):
                continue
            if await access.may_ask(gitlab, ref, user_id):
                found.append((discussion, user))
                break
    return found


async def _thumbs_down_by(
    gitlab: GitLabClient, ref: MergeRequestRef, note_id: int
) -> list[tuple[int, str]]:
    """(user id, username) of the note's `thumbsdown` awards; none when GitLab does not give
    them (read again at the next review). GitLab lists awards oldest first, with no filter:
    a note with more than a page of them is read at both ends (`GitLabClient.paginated`), so
    a flood of other awards, before or after, does not hide a writer's `thumbsdown`."""
    url = ref.api_url(gitlab.settings, f"/notes/{note_id}/award_emoji")
    try:
        listed, _ = await gitlab.paginated(url, max_pages=MAX_AWARD_PAGES, ends=True)
    except (GitLabUnavailable, PullRequestNotFound):
        return []
    users: list[tuple[int, str]] = []
    for item in listed:
        try:
            award = _AwardWire.model_validate(item)
        except ValidationError:
            continue
        if award.name == DISMISSING_AWARD:
            users.append((award.user.id, award.user.username))
    return users


def asks_ignore(body: str, username: str) -> bool:
    """`/pr-review ignore` or `@<our username> ignore`, as the Note Hook reads the command."""
    words = body.strip().lower().split()
    name = username.lower()
    names = {COMMAND_PREFIX, f"@{name}", f"@{name.removesuffix('[bot]')}"}
    return len(words) == 2 and words[0] in names and words[1] == "ignore"


async def dismissed_on_merge_request(
    gitlab: GitLabClient, ref: MergeRequestRef, access: AccessLevels
) -> set[str]:
    """Outside service mode, the fingerprints dismissed on this merge request itself: an
    `ignore` reply, or a `thumbsdown` on the first note, by a Developer (or higher) in one of
    our findings' discussions (specification §15)."""
    username = await gitlab.username()
    discussions = await finding_discussions(gitlab, ref)
    found: set[str] = set()
    for discussion in discussions:
        for reply in discussion.replies:
            author, author_id = reply.username, reply.author_id
            if reply.system or author is None or author_id is None:
                continue
            if author.lower() == username.lower() or is_bot(author):
                continue
            if asks_ignore(reply.body, username) and await access.may_ask(gitlab, ref, author_id):
                found.add(discussion.fingerprint)
                break
    unread = [discussion for discussion in discussions if discussion.fingerprint not in found]
    for discussion, _ in await thumbs_down(gitlab, ref, unread, access):
        found.add(discussion.fingerprint)
    return found
