"""The markers in our reviews and comments, and who is trusted to have written them.

`<!-- pr-review:head=<sha> -->` says which head a review reviewed; `<!-- pr-review:finding=<fp>
-->` says which finding a review, a body entry or an inline comment carries. Markers are read
only from reviews and comments whose author is the publishing identity (specification §10):
anyone can write the same text in a comment of their own, and it must change nothing. Model
text can never contain a marker of ours: `markdown.escape` turns its `<` into `\\<`, and the
pattern below refuses a marker preceded by a backslash. A suggestion's replacement, which a
code block shows exactly, is never posted raw when it holds one (`holds_marker`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel

from pr_review_api.output.inert_markdown import WORD_JOINER

_MARKER = re.compile(r"(?<!\\)<!-- pr-review:(head|finding)=([0-9a-f]{16,64}) -->")
_FINDING = re.compile(r"(?<!\\)<!-- pr-review:finding=([0-9a-f]{16,64}) -->")
_ANSWER = re.compile(r"(?<!\\)<!-- pr-review:answer=([0-9]{1,20}) -->")
_ESCAPED = re.compile(r"\\(.)")
MAX_TITLE_CHARS = 300
# The first line of our full review (publishing/layout.py); a later head's review never has it.
SUMMARY_HEADING = "### pr-review"


def holds_marker(text: str) -> bool:
    """Whether raw text (a suggestion's replacement, shown unescaped in a code block) would
    read as one of our markers: such text is never posted raw."""
    return _MARKER.search(text) is not None


def head_marker(sha: str) -> str:
    return f"<!-- pr-review:head={sha} -->"


def finding_marker(fingerprint: str) -> str:
    return f"<!-- pr-review:finding={fingerprint} -->"


def answer_marker(question_id: int) -> str:
    """What our answer carries: the question's id (a job run twice answers once)."""
    return f"<!-- pr-review:answer={question_id} -->"


def finding_in(body: str) -> str | None:
    """The fingerprint of the finding one of our comments or notes carries, if any."""
    found = _FINDING.search(body)
    return None if found is None else found.group(1)


def answered_in(body: str) -> set[int]:
    """The ids of the questions one of our comments or notes answers."""
    return {int(found) for found in _ANSWER.findall(body)}


def shown_title(body: str) -> str:
    """A finding's title as our comment's first line shows it (`**sev** · title`), our
    escaping undone (backslashes, word joiners) on either forge."""
    first = body.strip().split("\n", 1)[0]
    shown = first.split(" · ", 1)[1] if " · " in first else first
    return _ESCAPED.sub(r"\1", shown).replace(WORD_JOINER, "")[:MAX_TITLE_CHARS]


class MarkedPost(BaseModel):
    """A comment or note as a forge lists it, with what its text (`body`) carries; each forge's
    model of it adds its own fields."""

    body: str = ""

    def finding_fingerprint(self) -> str | None:
        """The fingerprint of the finding it carries (`finding_in`)."""
        return finding_in(self.body)

    def answers(self) -> set[int]:
        """The ids of the questions it answers, when it is one of ours (`answered_in`)."""
        return answered_in(self.body)

    def finding_title(self) -> str:
        """The finding's title as its first line shows it (`shown_title`)."""
        return shown_title(self.body)


@dataclass(frozen=True)
class Post:
    """A review or comment as listed by the API: who wrote it, its text, where it lives."""

    author: str | None
    body: str
    review_id: int | None = None
    url: str | None = None
    order: int = 0  # position in the listing (reviews come oldest first)
    # A review comment's anchor: its file, its line (at the head, else where it was posted)
    # and whether it replies in a thread; None and False for a review.
    path: str | None = None
    line: int | None = None
    reply: bool = False


@dataclass
class PriorState:
    """What our own earlier posts on the pull request say."""

    heads: list[tuple[str, int | None, str | None]] = field(default_factory=list)
    fingerprints: set[str] = field(default_factory=set)
    complete: bool = True  # every review was read, or the walk stopped at this head's
    # Our first full review, where the summary is kept current (github/summary.py).
    summary: Post | None = None
    # Our top-level review comments that carry a finding's marker (each opens a thread).
    finding_comments: list[Post] = field(default_factory=list)

    def review_of(self, head_sha: str) -> tuple[int | None, str | None] | None:
        """(review id, URL) of our newest review that carries `head_sha`'s marker, or None:
        a head with new findings has its own review, a head with none only our first one."""
        for sha, review_id, url in reversed(self.heads):
            if sha == head_sha:
                return review_id, url
        return None

    @property
    def last_head(self) -> str | None:
        """The head our most recent review reviewed.

        Once our first review was rewritten for a later head (github/summary.py), its head
        markers are appended in the order the heads were reviewed, and its last is the newest
        (should that rewrite have failed, the one before: an ancestor still). Before that,
        every review of ours reviewed one head, and the newest review's is the last."""
        if self.summary is not None:
            marked, _ = ordered_markers(self.summary.body)
            if len(marked) > 1:
                return marked[-1]
        return self.heads[-1][0] if self.heads else None


def marked_heads(body: str) -> set[str]:
    """The heads whose marker `body` carries (whoever wrote it: the caller checks)."""
    return {
        value
        for kind, value in _MARKER.findall(body)
        if kind == "head" and len(value) == 40  # a full SHA-1
    }


def ordered_markers(body: str) -> tuple[list[str], list[str]]:
    """The head and the finding markers of `body`, each in order of first appearance."""
    heads: dict[str, None] = {}
    findings: dict[str, None] = {}
    for kind, value in _MARKER.findall(body):
        if kind == "finding":
            findings[value] = None
        elif len(value) == 40:
            heads[value] = None
    return list(heads), list(findings)


def read_markers(posts: Iterable[Post], login: str, *, reviews: bool) -> PriorState:
    """The markers of the posts written by `login` (case-insensitive, as GitHub logins are);
    `posts` come oldest first."""
    state = PriorState()
    ours = login.lower()
    for post in posts:
        if post.author is None or post.author.lower() != ours:
            continue
        heads, findings = ordered_markers(post.body)
        state.fingerprints.update(findings)
        if not reviews:
            if findings and not post.reply and post.path is not None:
                state.finding_comments.append(post)
            continue
        state.heads += [(sha, post.review_id, post.url) for sha in heads]
        if heads and state.summary is None and post.body.startswith(SUMMARY_HEADING + "\n"):
            state.summary = post
    return state
