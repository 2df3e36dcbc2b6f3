"""A pull request's command behind the comments seam (specification §15): github/comments.py's
requests, as jobs/comments.py made them before the seam.

- `help`: one reply listing the commands, in the review comment's thread (GitHub takes replies
  only to a top-level review comment), or a comment on the pull request.
- `ignore`: one `+1` reaction on the command's review comment, no text.
- over the answers' hourly limit: one `eyes` reaction.
- an answer: a reply in the finding's thread, its text escaped as a review's
  (output/inert_markdown.py) and marked with the question's id.

One of our findings: the top-level review comment the command replied to, ours (our login)
and carrying a finding's marker.
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
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import (
    Reaction,
    Repository,
    ReviewComment,
    comment,
    react,
    reply,
    review_comment,
    thread,
)
from pr_review_api.output.inert_markdown import escape
from pr_review_api.publishing.markers import answer_marker

HELP_TEXT = "\n".join(
    [
        "pr-review commands (a comment that starts with `/pr-review`, or a mention of this app):",
        "",
        "- `review`: review the current head again and publish it; findings already posted "
        "are not repeated.",
        "- `ignore` (a reply in one of our findings' threads): dismiss the finding in this "
        "repository; it is not posted again.",
        "- `remember <text>` (1-500 characters): a learning for every later review of this "
        "repository; `forget <id>` removes one (the ids are on the service's /ui page).",
        "- `help`: this list.",
        "- anything else, as a reply in one of our findings' threads: a question about the "
        "finding, answered in the thread.",
    ]
)


@dataclass(frozen=True)
class _Comment:
    """The command's comment, as its delivery gave it (jobs/commands.py's `Comment`)."""

    comment_id: int
    author: str
    review_comment: bool  # a pull_request_review_comment (else an issue_comment)
    in_reply_to_id: int | None


def _comment(command: dict[str, Any]) -> _Comment | None:
    try:
        str(command["body"])  # a command without its comment's body is not one
        return _Comment(
            comment_id=int(command["comment_id"]),
            author=str(command["author"]),
            review_comment=bool(command["review_comment"]),
            in_reply_to_id=command.get("in_reply_to_id"),
        )
    except (KeyError, TypeError, ValueError):
        return None


class GitHubComments(ClientComments[GitHubClient]):
    """A pull request's command, through `github` (the client of the job's identity)."""

    def __init__(
        self, github: GitHubClient, owner: str, repo: str, number: int, command: dict[str, Any]
    ) -> None:
        super().__init__(github, f"{owner}/{repo}")
        self.repository = Repository(owner, repo)
        self.number = number
        self._raw = command
        self._comment = _comment(command)
        self._login = ""
        self._finding: ReviewComment | None = None

    async def command(self) -> Command | None:
        self._login = await self.client.login()
        the_comment = self._comment
        if the_comment is None or _is_bot(the_comment.author):
            return None
        if the_comment.author == self._login:
            return None
        return Command(the_comment.author, str(self._raw.get("text") or ""))

    async def help(self) -> None:
        the_comment = self._known()
        top = the_comment.in_reply_to_id or the_comment.comment_id
        if the_comment.review_comment:
            await reply(self.client, self.repository, self.number, top, HELP_TEXT)
        else:
            await comment(self.client, self.repository, self.number, HELP_TEXT)

    async def our_finding(self) -> CommandFinding | None:
        top_id = self._known().in_reply_to_id
        if top_id is None:
            return None
        top = await review_comment(self.client, self.repository, top_id)
        if top is None or top.author != self._login or top.in_reply_to_id is not None:
            return None
        fingerprint = top.finding_fingerprint()
        if fingerprint is None:
            return None
        self._finding = top
        return CommandFinding(
            fingerprint=fingerprint,
            title=top.finding_title(),
            path=top.path,
            body=top.body,
            line=top.line or top.original_line,
            head=top.commit_id or top.original_commit_id,
        )

    async def thread(self) -> FindingThread:
        question_id = self._known().comment_id
        replies = await thread(self.client, self.repository, self.number, self._found().id)
        return FindingThread(
            answered=any(r.author == self._login and question_id in r.answers() for r in replies),
            earlier=[(r.author or "", r.body) for r in replies if r.id < question_id],
        )

    async def acknowledge_dismissal(self) -> None:
        await self._react("+1")

    def comment_url(self, change_url: str) -> str | None:
        the_comment = self._known()
        anchor = "discussion_r" if the_comment.review_comment else "issuecomment-"
        return f"{change_url}#{anchor}{the_comment.comment_id}"

    async def hold_off(self) -> None:
        await self._react("eyes")

    async def post_answer(self, text: str) -> int | None:
        body = escape(text) + "\n\n" + answer_marker(self._known().comment_id)
        return await reply(self.client, self.repository, self.number, self._found().id, body)

    async def _react(self, content: Reaction) -> None:
        the_comment = self._known()  # a learning's command may be a comment on the change
        await react(
            self.client,
            self.repository,
            the_comment.comment_id,
            content,
            review_comment=the_comment.review_comment,
        )

    def _known(self) -> _Comment:
        assert self._comment is not None, "command() said None: nothing to answer"
        return self._comment

    def _found(self) -> ReviewComment:
        assert self._finding is not None, "our_finding() first"
        return self._finding


def _is_bot(login: str) -> bool:
    return login.lower().endswith("[bot]")
