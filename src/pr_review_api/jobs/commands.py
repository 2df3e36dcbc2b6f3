"""Commands in comments (specification §15): what a comment delivery asks for, read from the
delivery alone (its body is never fetched again, so an edit after delivery changes nothing).

A comment is addressed to us when its first word is `@<our login>` (an App's `<slug>[bot]` is
mentioned as `@<slug>`) or `/pr-review`. What follows: `review`, `ignore`, `help`, or anything
else, which is a question when the comment is a reply in a review comment's thread. Who may ask
what is decided with the permission API (service/webhooks.py), never here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pr_review_api.jobs.learnings import valid_text
from pr_review_api.jobs.records import JobKind

COMMAND_PREFIX = "/pr-review"
MAX_BODY_CHARS = 65_536


@dataclass(frozen=True)
class Comment:
    """A created comment, as its delivery gave it."""

    comment_id: int
    body: str
    author: str
    pull_author: str | None
    review_comment: bool  # a pull_request_review_comment (else an issue_comment)
    in_reply_to_id: int | None
    commit_id: str | None = None

    def command(self, kind: JobKind, text: str) -> dict[str, Any]:
        """The job's `command` column: this comment and what it asks."""
        return {**asdict(self), "kind": kind, "text": text, "force": kind == "review"}


def addressed_text(body: str, login: str) -> str | None:
    """What follows the address, or None when the comment is not addressed to us."""
    words = body.strip().split(maxsplit=1)
    if not words:
        return None
    first = words[0].lower()
    names = {login.lower(), login.lower().removesuffix("[bot]")}
    if first != COMMAND_PREFIX and first not in {f"@{name}" for name in names}:
        return None
    return words[1].strip() if len(words) > 1 else ""


def addressed_command(
    body: str, author: str, login: str, kind_of: Callable[[str], JobKind | None]
) -> tuple[str, JobKind] | None:
    """What a comment by `author` asks us (`login`) for, its text and the job `kind_of` reads
    in it; None when the comment is ours, is not addressed to us, or asks for nothing we do."""
    if author.lower() == login.lower():
        return None
    text = addressed_text(body, login)
    kind = None if text is None else kind_of(text)
    if text is None or kind is None:
        return None
    return text, kind


KNOWLEDGE_WORDS = ("remember", "forget")
# What a command may ask anywhere on a change; `ignore` and questions only in a thread.
ANYWHERE: dict[str, JobKind] = {"review": "review", "help": "help"}


def is_knowledge_command(text: str) -> bool:
    """Whether the command's first word is `remember` or `forget`: it is then that command or
    nothing (a bad one is ignored, never read as a question)."""
    words = text.split(maxsplit=1)
    return bool(words) and words[0].lower() in KNOWLEDGE_WORDS


def knowledge_kind(text: str) -> JobKind | None:
    """`remember <text>` or `forget <id>` (specification §20), anywhere on a change and on every
    forge; None for anything else. A text that quotes (a line starting with `>`: someone else's
    words) is no learning; neither is one the table would refuse (jobs/learnings.py)."""
    words = text.split(maxsplit=1)
    if len(words) != 2:
        return None
    word, rest = words[0].lower(), words[1].strip()
    if word == "remember":
        quoted = any(line.lstrip().startswith(">") for line in rest.split("\n"))
        return None if quoted or valid_text(rest) is None else "remember"
    if word == "forget" and forgotten_id(rest) is not None:
        return "forget"
    return None


def forgotten_id(text: str) -> int | None:
    """The id `forget` names: a positive number of at most 18 digits, alone."""
    word = text.strip().removeprefix("#")
    if not word.isascii() or not word.isdigit() or len(word) > 18 or int(word) == 0:
        return None
    return int(word)


def learning_text(text: str) -> str:
    """What follows `remember`."""
    return text.split(maxsplit=1)[1].strip()


def kind_of(text: str, comment: Comment) -> JobKind | None:
    """The job a command asks for; None when it asks for nothing we do."""
    return command_kind(
        text, in_thread=comment.review_comment and comment.in_reply_to_id is not None
    )


def command_kind(text: str, *, in_thread: bool) -> JobKind | None:
    """The job a command's text asks for on every forge; None when it asks for nothing we do.
    `remember`, `forget`, `review` and `help` anywhere on the change; `ignore` and a question
    only as a reply in a thread (`in_thread`: where one of our findings may be)."""
    if is_knowledge_command(text):
        return knowledge_kind(text)
    word = text.lower()
    if word in ANYWHERE:
        return ANYWHERE[word]
    if not in_thread or not text:
        return None
    return "dismiss" if word == "ignore" else "answer"


def comment_of(event_name: str, event: dict[str, Any]) -> Comment | None:  # noqa: PLR0911
    """The comment of an `issue_comment` (on a pull request) or `pull_request_review_comment`
    delivery with action `created`; None for anything else."""
    if event.get("action") != "created":
        return None
    raw = event.get("comment")
    if not isinstance(raw, dict):
        return None
    if event_name == "issue_comment":
        issue = event.get("issue")
        if not isinstance(issue, dict) or not isinstance(issue.get("pull_request"), dict):
            return None
        owner_of_pull = _login(issue.get("user"))
        review_comment = False
    elif event_name == "pull_request_review_comment":
        owner_of_pull = _login(_dict(event.get("pull_request")).get("user"))
        review_comment = True
    else:
        return None
    comment_id, body, author = raw.get("id"), raw.get("body"), _login(raw.get("user"))
    if not isinstance(comment_id, int) or not _positive(comment_id):
        return None
    if not isinstance(body, str) or author is None:
        return None
    reply_to = raw.get("in_reply_to_id")
    commit = raw.get("commit_id")
    return Comment(
        comment_id=comment_id,
        body=body[:MAX_BODY_CHARS],
        author=author,
        pull_author=owner_of_pull,
        review_comment=review_comment,
        in_reply_to_id=reply_to if review_comment and _positive(reply_to) else None,
        commit_id=commit if isinstance(commit, str) else None,
    )


def pull_number(event_name: str, event: dict[str, Any]) -> int | None:
    holder = _dict(event.get("issue" if event_name == "issue_comment" else "pull_request"))
    number = holder.get("number")
    return number if _positive(number) else None


def is_bot(login: str) -> bool:
    return login.lower().endswith("[bot]")


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _login(user: object) -> str | None:
    login = _dict(user).get("login")
    return login if isinstance(login, str) and 0 < len(login) <= 100 else None


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
