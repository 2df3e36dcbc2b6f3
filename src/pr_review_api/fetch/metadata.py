"""A change's metadata as every forge's parser leaves it (specification §3), and its limits.

The SHAs must be full lower-case hex, the base branch a name `git check-ref-format --branch`
accepts (and no option); the title, body, author and labels are cut to the bounds here.
github/, gitlab/ and gitea/'s `metadata` read their forge's document into it (`read_change`:
a validation error quotes the body, so it is never chained). A pull request's document is
one shape on GitHub and Gitea (Gitea's REST API follows GitHub's): `PullWire` holds the
fields both send alike, and each forge's subclass adds its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import ReviewError
from pr_review_api.jsonutil import truncate_utf8

MAX_BRANCH_BYTES = 1024
MAX_TITLE_CHARS = 1024
MAX_BODY_BYTES = 64 * 1024
MAX_LOGIN_CHARS = 256
MAX_LABELS = 100
MAX_LABEL_CHARS = 256
MAX_METADATA_RESPONSE_BYTES = 1024 * 1024  # decoded; the description is the large part

# A full lower-case SHA-1: the cache holds SHA-1 repositories (a SHA-256 one's 64 are refused).
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
W = TypeVar("W", bound=BaseModel)

_BRANCH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


@dataclass(frozen=True)
class PullRequestMetadata:
    """What the host says about a pull request. `title` and `body` are untrusted text."""

    base_sha: str
    head_sha: str
    base_ref: str  # a branch name, without refs/heads/
    title: str
    body: str
    # Who opened it, its labels and whether it is a draft: the skip rules of .pr-review.toml
    # (loop/policy.py, specification §16) read them.
    author: str = ""
    labels: tuple[str, ...] = ()
    draft: bool = False
    # GitLab's merge base (`diff_refs.base_sha`), which a discussion's position names; None
    # for a GitHub pull request.
    diff_base_sha: str | None = None


def is_valid_branch_name(name: str) -> bool:
    """Whether `git check-ref-format --branch` would accept `name`, and it cannot be an option.

    The rules of git-check-ref-format(1): no component starts with `.` or ends with `.lock`;
    no `..`, `@{`, `//`, control characters, space, `~ ^ : ? * [ \\`; no leading or trailing
    `/`, no trailing `.`; not `@`. For a branch also: not `HEAD` and no leading `-`.
    """
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if not name or size > MAX_BRANCH_BYTES or name in ("@", "HEAD") or name.startswith("-"):
        return False
    if _BRANCH_FORBIDDEN.search(name) or any(bad in name for bad in ("..", "@{", "//")):
        return False
    if name.startswith("/") or name.endswith(("/", ".")):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def bounded_metadata(  # noqa: PLR0913  (a change's fields, each as its forge's document has it)
    *,
    base_sha: str,
    head_sha: str,
    base_ref: str,
    title: str,
    body: str | None,
    author: str,
    labels: Iterable[str],
    draft: bool,
    diff_base_sha: str | None = None,
) -> PullRequestMetadata:
    """A forge's change document as the review reads it: the title, body, author and labels
    cut to this module's bounds, the same on every forge."""
    return PullRequestMetadata(
        base_sha=base_sha,
        head_sha=head_sha,
        base_ref=base_ref,
        title=title[:MAX_TITLE_CHARS],
        body=truncate_utf8(body or "", MAX_BODY_BYTES),
        author=author[:MAX_LOGIN_CHARS],
        labels=tuple(label[:MAX_LABEL_CHARS] for label in islice(labels, MAX_LABELS)),
        draft=draft,
        diff_base_sha=diff_base_sha,
    )


def read_change(data: bytes, wire: type[W], invalid: ReviewError) -> W:
    """A forge's change document read as `wire`, or `invalid` (never chained: a validation
    error quotes the body)."""
    try:
        return wire.model_validate_json(data)
    except ValidationError:
        raise invalid from None


class HeadWire(BaseModel):
    """A pull request's head: its commit."""

    model_config = ConfigDict(extra="ignore", strict=True)

    sha: Sha


class BranchWire(HeadWire):
    """A pull request's base (or head): its branch too."""

    ref: str


class UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: str = ""


class PullWire(BaseModel):
    """The fields of a pull request's document that GitHub and Gitea send alike; a forge's
    subclass adds its labels and whatever else it reads."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: int
    title: str
    body: str | None = None
    user: UserWire | None = None
    draft: bool | None = None
    base: BranchWire
    head: HeadWire

    def is_of(self, number: int) -> bool:
        """Whether this is the pull request `number`, on a base branch git accepts."""
        return self.number == number and is_valid_branch_name(self.base.ref)

    def metadata(
        self, labels: Iterable[str], diff_base_sha: str | None = None
    ) -> PullRequestMetadata:
        """The pull request's metadata, with its forge's `labels` and merge base."""
        return bounded_metadata(
            base_sha=self.base.sha,
            head_sha=self.head.sha,
            base_ref=self.base.ref,
            title=self.title,
            body=self.body,
            author=self.user.login if self.user else "",
            labels=labels,
            draft=bool(self.draft),
            diff_base_sha=diff_base_sha,
        )
