"""The pull request's metadata document (CONTRACT 3), validated before anything reaches git.

The SHAs must be full lower-case hex, the base branch a name `git check-ref-format --branch`
accepts (and no option), the number the one asked for; the title and body are cut to a bound.
Validation errors quote the body, so they are never chained.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.jsonutil import truncate_utf8

MAX_BRANCH_BYTES = 1024
MAX_TITLE_CHARS = 1024
MAX_BODY_BYTES = 64 * 1024
MAX_LOGIN_CHARS = 256
MAX_LABELS = 100
MAX_LABEL_CHARS = 256

_BRANCH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")

Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


@dataclass(frozen=True)
class PullRequestMetadata:
    """What the host says about a pull request. `title` and `body` are untrusted text."""

    base_sha: str
    head_sha: str
    base_ref: str  # a branch name, without refs/heads/
    title: str
    body: str
    # Who opened it, its labels and whether it is a draft: the skip rules of .pr-review.toml
    # (loop/policy.py, CONTRACT 16) read them.
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


class _BaseWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    ref: str
    sha: Sha


class _HeadWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    sha: Sha


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: str = ""


class _LabelWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = ""


class _PullWire(BaseModel):
    """The fields of GitHub's pull-request document that a review uses."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: int
    title: str
    body: str | None = None
    base: _BaseWire
    head: _HeadWire
    user: _UserWire | None = None
    labels: list[_LabelWire] = []
    draft: bool | None = None


def parse_metadata(data: bytes, ref: PullRequestRef) -> PullRequestMetadata:
    invalid = GitHubUnavailable("GitHub returned pull request data that is not valid.")
    try:
        wire = _PullWire.model_validate_json(data)
    except ValidationError:
        raise invalid from None  # the error quotes the body: never chain it
    if wire.number != ref.number or not is_valid_branch_name(wire.base.ref):
        raise invalid
    return PullRequestMetadata(
        base_sha=wire.base.sha,
        head_sha=wire.head.sha,
        base_ref=wire.base.ref,
        title=wire.title[:MAX_TITLE_CHARS],
        body=truncate_utf8(wire.body or "", MAX_BODY_BYTES),
        author=(wire.user.login if wire.user else "")[:MAX_LOGIN_CHARS],
        labels=tuple(label.name[:MAX_LABEL_CHARS] for label in wire.labels[:MAX_LABELS]),
        draft=bool(wire.draft),
    )
