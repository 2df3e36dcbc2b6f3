"""A merge request's command behind the comments seam (specification §15 on GitLab, section 17):
gitlab/comments.py's requests.

- `help`: one note listing the commands, in the discussion the command was written in (a
  standalone note is answered with a note on the merge request).
- `ignore`: one `thumbsup` award emoji on the command's note, no text; the project's key in
  the dismissals table is `gitlab:group/project`.
- over the answers' hourly limit: one `eyes` award.
- an answer: one reply in the discussion, its text made inert for GitLab (gitlab/markdown.py,
  gitlab/note_text.py: no reference, no mention, no quick action) and marked with the
  question's note id.

One of our findings' discussions: its first note is ours (our `GET /user` username) and
carries a finding's marker. The command is the note its delivery carried (`review_jobs.command`,
written by service/gitlab_webhooks.py; never fetched again); our own notes and bots are ignored
again, as a job may have been queued by an older version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pr_review_api.forge.comments import (
    ClientComments,
    Command,
    CommandFinding,
    FindingThread,
)
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.comments import (
    DiscussionNote,
    award,
    discussion_notes,
    post_note,
)
from pr_review_api.gitlab.hooks import DISCUSSION_ID, is_bot
from pr_review_api.gitlab.markdown import escape
from pr_review_api.gitlab.note_text import defused
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.publishing.markers import answer_marker

GITLAB_HELP_TEXT = "\n".join(
    [
        "pr-review commands (a note that starts with `/pr-review`, or a mention of this "
        "account), from a member with the Developer role or higher:",
        "",
        "- `review`: review the merge request's current head again and publish it; findings "
        "already posted are not repeated.",
        "- `ignore` (a reply in one of our findings' threads): dismiss the finding in this "
        "project; it is not posted again.",
        "- `remember <text>` (1-500 characters): a learning for every later review of this "
        "project; `forget <id>` removes one (the ids are on the service's /ui page).",
        "- `help`: this list.",
        "- anything else, as a reply in one of our findings' threads: a question about the "
        "finding, answered in the thread (the merge request's author may ask too).",
    ]
)


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


class GitLabComments(ClientComments[GitLabClient]):
    """A merge request's command, through `gitlab` (GITLAB_TOKEN's client: GitLab has no App
    installations)."""

    def __init__(self, gitlab: GitLabClient, ref: MergeRequestRef, command: dict[str, Any]) -> None:
        super().__init__(gitlab, ref.dismissals_key)
        self.ref = ref
        self._note = _note(command)
        self._username = ""
        self._notes: list[DiscussionNote] = []

    async def command(self) -> Command | None:
        self._username = await self.client.username()
        note = self._note
        if note is None or is_bot(note.author) or note.author.lower() == self._username.lower():
            return None
        return Command(note.author, note.text)

    async def help(self) -> None:
        discussion = self._known().discussion_id
        await post_note(self.client, self.ref, GITLAB_HELP_TEXT, discussion_id=discussion)

    async def our_finding(self) -> CommandFinding | None:
        """The first note of the command's discussion, when it is one of our findings' (ours,
        with a finding's marker) and the command is a reply in it."""
        note = self._known()
        if note.discussion_id is None:
            return None
        notes = await discussion_notes(self.client, self.ref, note.discussion_id)
        if not notes or notes[0].id == note.note_id:
            return None
        first = notes[0]
        author = first.username or ""
        fingerprint = first.finding_fingerprint()
        if author.lower() != self._username.lower() or fingerprint is None:
            return None
        self._notes = notes
        return CommandFinding(
            fingerprint=fingerprint,
            title=first.finding_title(),
            path=first.path(),
            body=first.body,
            line=first.line(),
            head=first.posted_head(),
        )

    async def thread(self) -> FindingThread:
        question_id, ours = self._known().note_id, self._username.lower()
        notes = self._notes
        return FindingThread(
            answered=any(
                (n.username or "").lower() == ours and question_id in n.answers() for n in notes
            ),
            earlier=[
                (n.username or "", n.body) for n in notes[1:] if n.id < question_id and not n.system
            ],
        )

    async def acknowledge_dismissal(self) -> None:
        await award(self.client, self.ref, self._known().note_id, "thumbsup")

    async def hold_off(self) -> None:
        await award(self.client, self.ref, self._known().note_id, "eyes")

    def comment_url(self, change_url: str) -> str | None:
        return f"{change_url}#note_{self._known().note_id}"

    async def post_answer(self, text: str) -> int | None:
        note = self._known()
        body = defused(escape(text)) + "\n\n" + answer_marker(note.note_id)
        return await post_note(self.client, self.ref, body, discussion_id=note.discussion_id)

    def _known(self) -> _Note:
        assert self._note is not None, "command() said None: nothing to answer"
        return self._note
