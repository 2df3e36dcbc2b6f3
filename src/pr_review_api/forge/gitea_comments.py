"""A Gitea (or Forgejo) pull request's command behind the comments seam (specification §15 on
Gitea, section 19): gitea/comments.py's requests.

- `help`: the list of commands where the command was: a reply in one of our findings'
  conversations is answered in it, as a question is; any other command is a comment on the
  pull request (whose own conversation is flat on Gitea: a comment there is in place).
- `ignore`: one `+1` reaction on the command's comment, no text; the repository's key in the
  dismissals table is `gitea:owner/repo`.
- over the answers' hourly limit: one `eyes` reaction.
- an answer: one reply in the finding's conversation (a one-comment review on its path and
  line, which Gitea shows in that conversation; a comment on the pull request naming the path
  and line once the head moved), its text made inert for Gitea (gitea/markdown.py) and marked
  with the question's comment id.

One of our findings' threads: the conversation on a line whose first comment is ours (our
`GET /user` login) and carries a finding's marker, the command a reply in it. The command is
the comment its delivery carried (`review_jobs.command`, written by service/gitea_webhooks.py;
never fetched again); our own comments and `[bot]` authors are ignored again, as a job may
have been queued by an older version.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from pr_review_api.forge.comments import (
    ClientComments,
    Command,
    CommandFinding,
    FindingThread,
)
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.comments import (
    LineThread,
    answered_on_the_pull_request,
    current_head,
    find_thread,
    post_comment,
    post_line_reply,
    react,
)
from pr_review_api.gitea.markdown import code_span, escape
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.publishing.markers import answer_marker, shown_title

GITEA_HELP_TEXT = "\n".join(
    [
        "pr-review commands (a comment that starts with `/pr-review`, or a mention of this "
        "account), from a collaborator with write access:",
        "",
        "- `review`: review the pull request's current head again and publish it; findings "
        "already posted are not repeated.",
        "- `ignore` (a reply in one of our findings' conversations): dismiss the finding in "
        "this repository; it is not posted again.",
        "- `remember <text>` (1-500 characters): a learning for every later review of this "
        "repository; `forget <id>` removes one (the ids are on the service's /ui page).",
        "- `help`: this list.",
        "- anything else, as a reply in one of our findings' conversations: a question about "
        "the finding, answered there (the pull request's author may ask too).",
    ]
)


@dataclass(frozen=True)
class _Comment:
    comment_id: int
    author: str
    text: str


def _comment(command: dict[str, Any]) -> _Comment | None:
    comment_id, author, text = command.get("comment_id"), command.get("author"), command.get("text")
    if not isinstance(author, str) or not isinstance(text, str):
        return None
    if not isinstance(comment_id, int) or isinstance(comment_id, bool) or comment_id <= 0:
        return None  # it becomes a piece of our reaction's URL: never anything but an id
    return _Comment(comment_id, author, text)


class GiteaComments(ClientComments[GiteaClient]):
    """A pull request's command, through `gitea` (GITEA_TOKEN's client: Gitea has no App
    installations)."""

    def __init__(self, gitea: GiteaClient, ref: PullRequestRef, command: dict[str, Any]) -> None:
        super().__init__(gitea, ref.dismissals_key)
        self.ref = ref
        self._comment = _comment(command)
        self._login = ""
        self._thread: LineThread | None = None

    async def command(self) -> Command | None:
        self._login = await self.client.login()
        comment = self._comment
        if comment is None or comment.author.lower().endswith("[bot]"):
            return None
        if comment.author.lower() == self._login.lower():
            return None
        return Command(comment.author, comment.text)

    async def help(self) -> None:
        comment = self._known()
        thread = await find_thread(self.client, self.ref, comment.comment_id, self._login)
        if thread is None or thread.comments[0].id == comment.comment_id:
            await post_comment(self.client, self.ref, GITEA_HELP_TEXT)
        else:
            await self._reply(thread, GITEA_HELP_TEXT)

    async def our_finding(self) -> CommandFinding | None:
        """The finding whose conversation the command replied in (see the module docstring)."""
        comment = self._known()
        thread = await find_thread(self.client, self.ref, comment.comment_id, self._login)
        if thread is None or thread.comments[0].id == comment.comment_id:
            return None
        fingerprint = thread.finding(self._login)
        if fingerprint is None:
            return None
        self._thread = thread
        first = thread.comments[0]
        return CommandFinding(
            fingerprint=fingerprint,
            # Our escaping undone: Gitea's is character references and word joiners.
            title=html.unescape(shown_title(first.body)),
            path=thread.path,
            body=first.body,
            line=thread.line,
            head=thread.head,
        )

    async def thread(self) -> FindingThread:
        question = self._known().comment_id
        thread = self._found()
        answered = question in thread.answers(self._login)
        if not answered:
            # After a new head our answer is a comment on the pull request: look there too.
            answers = await answered_on_the_pull_request(self.client, self.ref, self._login)
            answered = question in answers
        return FindingThread(
            answered=answered,
            earlier=[(c.author, c.body) for c in thread.comments[1:] if c.id < question],
        )

    async def acknowledge_dismissal(self) -> None:
        await react(self.client, self.ref, self._known().comment_id, "+1")

    async def hold_off(self) -> None:
        await react(self.client, self.ref, self._known().comment_id, "eyes")

    def comment_url(self, change_url: str) -> str | None:
        return f"{change_url}#issuecomment-{self._known().comment_id}"

    async def post_answer(self, text: str) -> int | None:
        body = escape(text) + "\n\n" + answer_marker(self._known().comment_id)
        return await self._reply(self._found(), body)

    async def _reply(self, thread: LineThread, body: str) -> int | None:
        """`body` in the thread's conversation while the head is the one it was posted on;
        after a new head the line may be off the diff: a comment naming the path and line."""
        head = await current_head(self.client, self.ref)
        if head == thread.head:
            return await post_line_reply(self.client, self.ref, head, thread, body)
        where = f"On {code_span(thread.path)}, line {thread.line}:\n\n"
        return await post_comment(self.client, self.ref, where + body)

    def _known(self) -> _Comment:
        assert self._comment is not None, "command() said None: nothing to answer"
        return self._comment

    def _found(self) -> LineThread:
        assert self._thread is not None, "our_finding() said None: no thread to answer in"
        return self._thread
