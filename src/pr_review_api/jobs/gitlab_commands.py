"""The worker's side of a command in a merge request's note (CONTRACT 15 on GitLab, section 17).

A `review` command is the review job every forge runs (jobs/runner.py, forced past a head
already published). Here, what jobs/conversation.py does for GitHub, in GitLab's terms:

- `help`: one note listing the commands, in the discussion the command was written in (a
  standalone note is answered with a note on the merge request).
- `dismiss` (`ignore` in one of our findings' discussions): the finding's fingerprint is stored
  for the project (`gitlab:group/project` in the dismissals table); one `thumbsup` award emoji
  on the `ignore` note, no text.
- `answer` (any other text there): one reply in the discussion from the answer loop
  (loop/answer.py) at the head the finding was posted on, its text made inert for GitLab
  (gitlab/markdown.py: no reference, no mention, no quick action). At most
  PR_REVIEW_MAX_ANSWERS_PER_HOUR answers a merge request per hour; over it, one `eyes` award.

One of our findings' discussions: its first note is ours (our `GET /user` username) and carries
a finding's marker. Every job runs from the note its delivery carried (`review_jobs.command`,
written by service/gitlab_webhooks.py; never fetched again); our own notes and bots are ignored
again, as a job may have been queued by an older version. Our answers carry the question's note
id, and the discussion is read before answering: a job run again answers once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pr_review_api.git.store import RepositoryStore
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.conversation import (
    DiscussionNote,
    answer_marker,
    award,
    discussion_notes,
    post_note,
)
from pr_review_api.gitlab.hooks import DISCUSSION_ID, is_bot
from pr_review_api.gitlab.markdown import escape
from pr_review_api.gitlab.note_text import defused
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.jobs.dismissals import Connections, DatabaseDismissals, Dismissal
from pr_review_api.jobs.records import JobRecord, answers_in_the_last_hour
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.answer import Question, answer_at
from pr_review_api.output.inert_markdown import WORD_JOINER
from pr_review_api.settings import Settings

GITLAB_HELP_TEXT = "\n".join(
    [
        "pr-review commands (a note that starts with `/pr-review`, or a mention of this "
        "account), from a member with the Developer role or higher:",
        "",
        "- `review`: review the merge request's current head again and publish it; findings "
        "already posted are not repeated.",
        "- `ignore` (a reply in one of our findings' threads): dismiss the finding in this "
        "project; it is not posted again.",
        "- `help`: this list.",
        "- anything else, as a reply in one of our findings' threads: a question about the "
        "finding, answered in the thread (the merge request's author may ask too).",
    ]
)
_ESCAPED = re.compile(r"\\(.)")
MAX_TITLE_CHARS = 300


@dataclass(frozen=True)
class GitLabConversation:
    """What a merge request's command job needs from its worker: the database (dismissals, the
    answers' hourly count), the repository store and the model (tests pass a scripted one)."""

    connections: Connections
    dismissals: DatabaseDismissals
    store: Callable[[], RepositoryStore]
    model: ModelClient | None = None


@dataclass(frozen=True)
class _Note:
    note_id: int
    author: str
    discussion_id: str | None
    text: str


def _note(command: dict[str, Any]) -> _Note | None:
    note_id, author = command.get("comment_id"), command.get("author")
    discussion, text = command.get("discussion_id"), command.get("text")
    if not isinstance(author, str) or not isinstance(text, str):
        return None
    if not isinstance(note_id, int) or isinstance(note_id, bool) or note_id <= 0:
        return None
    if discussion is not None and (
        not isinstance(discussion, str) or DISCUSSION_ID.fullmatch(discussion) is None
    ):
        return None  # it becomes a piece of our reply's URL: never anything but an id
    return _Note(note_id, author, discussion, text)


async def run_gitlab_command(
    record: JobRecord, settings: Settings, conversation: GitLabConversation
) -> dict[str, Any]:
    """One command job of a merge request's note (not `review`) -> its result document."""
    ref = parse_merge_request_url(record.pull_request_url, settings)
    note = _note(record.command or {})
    async with GitLabClient(settings) as gitlab:
        username = await gitlab.username()
        if note is None or is_bot(note.author) or note.author.lower() == username.lower():
            return _outcome(record.kind, "ignored")
        job = _Job(record, ref, note, gitlab, username)
        if record.kind == "help":
            await post_note(gitlab, ref, GITLAB_HELP_TEXT, discussion_id=note.discussion_id)
            return _outcome("help", "replied")
        if record.kind == "dismiss":
            return await _dismiss(job, conversation)
        if record.kind == "answer":
            return await _answer(job, settings, conversation)
    return _outcome(record.kind, "ignored")


@dataclass(frozen=True)
class _Job:
    record: JobRecord
    ref: MergeRequestRef
    note: _Note
    gitlab: GitLabClient
    username: str

    async def our_discussion(self) -> list[DiscussionNote] | None:
        """The notes of the command's discussion when it is one of our findings' (its first
        note ours, with a finding's marker) and the command is a reply in it; else None."""
        if self.note.discussion_id is None:
            return None
        notes = await discussion_notes(self.gitlab, self.ref, self.note.discussion_id)
        if not notes or notes[0].id == self.note.note_id:
            return None
        first = notes[0]
        author = first.username or ""
        if author.lower() != self.username.lower() or first.finding_fingerprint() is None:
            return None
        return notes


async def _dismiss(job: _Job, conversation: GitLabConversation) -> dict[str, Any]:
    notes = await job.our_discussion()
    if notes is None:
        return _outcome("dismiss", "not_our_finding")
    finding = notes[0]
    fingerprint = finding.finding_fingerprint()
    assert fingerprint is not None
    await conversation.dismissals.add(
        Dismissal(
            repository=job.ref.dismissals_key,
            fingerprint=fingerprint,
            title=finding_title(finding.body),
            path=finding.path(),
            dismissed_by=job.note.author,
        )
    )
    await award(job.gitlab, job.ref, job.note.note_id, "thumbsup")
    return {**_outcome("dismiss", "dismissed"), "fingerprint": fingerprint}


async def _answer(
    job: _Job, settings: Settings, conversation: GitLabConversation
) -> dict[str, Any]:
    notes = await job.our_discussion()
    if notes is None:
        return _outcome("answer", "not_our_finding")
    ours = job.username.lower()
    if any((n.username or "").lower() == ours and job.note.note_id in n.answers() for n in notes):
        return _outcome("answer", "answered")  # a run before this one posted it
    async with conversation.connections() as connection:
        answered = await answers_in_the_last_hour(connection, job.record.pr_key)
    if answered >= settings.pr_review_max_answers_per_hour:
        await award(job.gitlab, job.ref, job.note.note_id, "eyes")
        return _outcome("answer", "rate_limited")
    finding = notes[0]
    earlier = [
        (n.username or "", n.body) for n in notes[1:] if n.id < job.note.note_id and not n.system
    ]
    question = Question(
        finding=finding.body,
        path=finding.path(),
        line=finding.line(),
        earlier=earlier,
        asked_by=job.note.author,
        question=job.note.text,
    )
    answer = await answer_at(
        job.record.pull_request_url,
        finding.posted_head(),
        question,
        settings,
        None,
        conversation.store(),
        conversation.model,
        gitlab=job.gitlab,
    )
    body = defused(escape(answer.text)) + "\n\n" + answer_marker(job.note.note_id)
    reply_id = await post_note(job.gitlab, job.ref, body, discussion_id=job.note.discussion_id)
    return {
        **_outcome("answer", "answered"),
        "reply_id": reply_id,
        "answer": answer.model_dump(mode="json"),
    }


def finding_title(body: str) -> str:
    """The finding's title as our note's first line shows it (`**sev** · title`), GitLab's
    escaping undone (backslashes, word joiners)."""
    first = body.strip().split("\n", 1)[0]
    shown = first.split(" · ", 1)[1] if " · " in first else first
    return _ESCAPED.sub(r"\1", shown).replace(WORD_JOINER, "")[:MAX_TITLE_CHARS]


def _outcome(kind: str, outcome: str) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome}
