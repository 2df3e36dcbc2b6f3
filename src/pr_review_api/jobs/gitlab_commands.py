"""The worker's side of a command in a merge request's note (CONTRACT 15 on GitLab, section 17).

A `review` command is the review job every forge runs (jobs/runner.py, forced past a head
already published). Here: `help`, one note listing the commands, in the discussion the command
was written in (a standalone note is answered with a note on the merge request). It runs from
the note its delivery carried (`review_jobs.command`, written by service/gitlab_webhooks.py);
our own notes and bots are ignored again, as a job may have been queued by an older version.

Answers in a finding's discussion (`ignore`, questions) are not taken on GitLab: the webhook
ignores them, and a record of such a kind that still reaches a worker is `ignored`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.conversation import post_note
from pr_review_api.gitlab.hooks import DISCUSSION_ID, is_bot
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.jobs.records import JobRecord
from pr_review_api.settings import Settings

GITLAB_HELP_TEXT = "\n".join(
    [
        "pr-review commands (a note that starts with `/pr-review`, or a mention of this "
        "account), from a member with the Developer role or higher:",
        "",
        "- `review`: review the merge request's current head again and publish it; findings "
        "already posted are not repeated.",
        "- `help`: this list.",
    ]
)


@dataclass(frozen=True)
class _Note:
    author: str
    discussion_id: str | None


def _note(command: dict[str, Any]) -> _Note | None:
    author, discussion = command.get("author"), command.get("discussion_id")
    if not isinstance(author, str):
        return None
    if discussion is not None and (
        not isinstance(discussion, str) or DISCUSSION_ID.fullmatch(discussion) is None
    ):
        return None  # it becomes a piece of our reply's URL: never anything but an id
    return _Note(author, discussion)


async def run_gitlab_command(record: JobRecord, settings: Settings) -> dict[str, Any]:
    """One command job of a merge request's note (not `review`) -> its result document."""
    ref = parse_merge_request_url(record.pull_request_url, settings)
    note = _note(record.command or {})
    async with GitLabClient(settings) as gitlab:
        username = await gitlab.username()
        if note is None or is_bot(note.author) or note.author.lower() == username.lower():
            return _outcome(record.kind, "ignored")
        if record.kind != "help":
            return _outcome(record.kind, "ignored")
        await post_note(gitlab, ref, GITLAB_HELP_TEXT, discussion_id=note.discussion_id)
    return _outcome("help", "replied")


def _outcome(kind: str, outcome: str) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome}
