"""What a GitLab webhook delivery asks for (specification §17), read from its payload alone.

Two hooks matter, each read here into a neutral value, never trusted further than that:

    Merge Request Hook  `open`, `reopen`, or an `update` that moved the head (GitLab sends
                        `object_attributes.oldrev` only when commits were pushed), took the
                        merge request out of draft, or changed what the skip rules read
                        (`changes.title`, `changes.labels`, `changes.target_branch`: specification
                        §16, the rules evaluated again on the same head); a draft (`draft`, or
                        the older `work_in_progress`) or a merge request that is not open asks
                        for nothing
    Note Hook           a note created by a person on a merge request (a command, specification §15)

The merge request is named by OUR `GITLAB_SERVER_URL`, the payload's `project.path_with_namespace`
(each segment checked against GitLab's path rules first, so no `..`, `?`, `#` or
`/-/merge_requests/` can smuggle in another merge request) and its iid, and the URL built from
them must then pass `parse_merge_request_url`; the payload's own URLs (`url`, `web_url`) are
never read. A field we need that is missing or of the wrong type makes the delivery
`invalid_request`; anything that is well formed but asks for nothing is `None` (ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pr_review_api.gitlab.urls import (
    MAX_IID,
    MAX_NAMESPACE_DEPTH,
    MergeRequestRef,
    is_valid_segment,
    parse_merge_request_url,
)
from pr_review_api.http.json_fields import Fields
from pr_review_api.settings import Settings

MERGE_REQUEST_HOOK = "Merge Request Hook"
NOTE_HOOK = "Note Hook"
OPENING_ACTIONS = frozenset({"open", "reopen"})
# What an `update` without a new head may change that the skip rules read (specification §16).
SKIP_INPUT_CHANGES = ("title", "labels", "target_branch")
# GitLab's own length limit of a note is 1,000,000 characters; a command is its first words.
MAX_NOTE_CHARS = 65_536
MAX_USERNAME_CHARS = 255
MAX_PATH_CHARS = 4096
MAX_ID = 2**63 - 1  # note and user ids are bigint columns (gitlab.com's notes passed 2**31)
DISCUSSION_ID = re.compile(r"[0-9a-f]{1,64}", re.ASCII)  # a path piece of our reply's URL
# Users GitLab makes for tokens and its own features: a project or group access token's bot
# (`project_12_bot_<hex>`, `group_3_bot`), and the instance's internal bots.
_TOKEN_BOT = re.compile(r"(?:project|group)_[0-9]+_bot(?:_[0-9a-f]+)?", re.ASCII)
_INTERNAL_BOTS = frozenset(
    {
        "alert-bot",
        "support-bot",
        "visual-review-bot",
        "ghost",
        "gitlab-admin-bot",
        "gitlab-security-bot",
        "automation-bot",
        "gitlab-llm-bot",
        "duo-developer",
    }
)
# The delivery is `invalid_request` with one of these fixed sentences (never its content).
_MERGE_REQUEST_EVENT = Fields("The delivery is not a well-formed merge request event.")
_NOTE_EVENT = Fields("The delivery is not a well-formed note event.")


@dataclass(frozen=True)
class MergeRequestPush:
    """A merge request to review at `head_sha` (None when the payload gave no last commit)."""

    ref: MergeRequestRef
    head_sha: str | None


@dataclass(frozen=True)
class MergeRequestNote:
    """A note created on a merge request, as its delivery gave it."""

    ref: MergeRequestRef
    note_id: int
    body: str
    author: str
    author_id: int
    # The note's discussion, when it is a reply or a thread's start (`DiscussionNote`, or
    # `DiffNote` on a line); a standalone note is answered with a note of our own.
    discussion_id: str | None
    head_sha: str | None
    # The merge request's author (who may ask questions without Developer access), and
    # whether GitLab's payload flags the note's author as a bot (`user.bot`).
    merge_request_author_id: int | None = None
    by_bot: bool = False

    @property
    def in_discussion(self) -> bool:
        """A reply in a discussion (or its first note): where `ignore` and questions count."""
        return self.discussion_id is not None

    def command(self, kind: str, text: str) -> dict[str, Any]:
        """The job's `command` column: this note and what it asks (jobs/commands.py's shape
        for the fields both forges have)."""
        return {
            "forge": "gitlab",
            "comment_id": self.note_id,
            "body": self.body,
            "author": self.author,
            "author_id": self.author_id,
            "merge_request_author_id": self.merge_request_author_id,
            "discussion_id": self.discussion_id,
            "kind": kind,
            "text": text,
            "force": kind == "review",
        }


def is_bot(username: str) -> bool:
    """Whether a GitLab user is a bot by its username (GitLab's payloads carry no flag)."""
    lowered = username.lower()
    return (
        lowered.endswith(("[bot]", "-bot", "_bot"))
        or lowered in _INTERNAL_BOTS
        or _TOKEN_BOT.fullmatch(lowered) is not None
        or lowered.startswith("service_account_")
    )


def merge_request_push(event: dict[str, Any], settings: Settings) -> MergeRequestPush | None:
    """The review a `Merge Request Hook` asks for, or None; `InvalidRequest` when malformed."""
    if event.get("object_kind", "merge_request") != "merge_request":
        return None
    attributes = _MERGE_REQUEST_EVENT.json_object(event.get("object_attributes"))
    action = _MERGE_REQUEST_EVENT.optional(attributes, "action", str)
    if action not in OPENING_ACTIONS and action != "update":
        return None
    state = _MERGE_REQUEST_EVENT.optional(attributes, "state", str)
    draft = _MERGE_REQUEST_EVENT.optional(attributes, "draft", bool)
    old_draft = _MERGE_REQUEST_EVENT.optional(attributes, "work_in_progress", bool)
    oldrev = _MERGE_REQUEST_EVENT.sha(attributes, "oldrev")
    ref = _reference(event.get("project"), attributes.get("iid"), settings, _MERGE_REQUEST_EVENT)
    head = _head(attributes.get("last_commit"), _MERGE_REQUEST_EVENT)
    if draft is True or old_draft is True or state not in (None, "opened"):
        return None  # a draft is reviewed once it is marked ready
    changes = event.get("changes")
    if action == "update" and oldrev is None and not _asks_again(changes):
        return None  # an assignee or the description changed: nothing the review reads
    return MergeRequestPush(ref, head)


def _asks_again(changes: object) -> bool:
    """Whether an update that did not move the head asks for the review: out of draft, or a
    change of the title, labels or target branch (the skip rules are evaluated again)."""
    if _marked_ready(changes):
        return True
    return isinstance(changes, dict) and any(
        isinstance(changes.get(name), dict) for name in SKIP_INPUT_CHANGES
    )


def merge_request_note(event: dict[str, Any], settings: Settings) -> MergeRequestNote | None:
    """The note a `Note Hook` carries when a person created it on a merge request, or None;
    `InvalidRequest` when malformed."""
    if event.get("object_kind", "note") != "note":
        return None
    attributes = _NOTE_EVENT.json_object(event.get("object_attributes"))
    if _NOTE_EVENT.optional(attributes, "noteable_type", str) != "MergeRequest":
        return None  # a note on an issue, a commit or a snippet
    if _NOTE_EVENT.optional(attributes, "system", bool) is True:
        return None  # "added 1 commit", "approved this merge request": GitLab's own notes
    if _NOTE_EVENT.optional(attributes, "action", str) not in (None, "create"):
        return None  # an edited note: its command was read when it was created
    body = _NOTE_EVENT.required(attributes, "note", str)
    note_id = _NOTE_EVENT.positive_int(attributes.get("id"), MAX_ID)
    user = _NOTE_EVENT.json_object(event.get("user"))
    author = _NOTE_EVENT.required(user, "username", str)
    if not 0 < len(author) <= MAX_USERNAME_CHARS:
        raise _NOTE_EVENT.invalid()
    author_id = _NOTE_EVENT.positive_int(user.get("id"), MAX_ID)
    by_bot = _NOTE_EVENT.optional(user, "bot", bool) is True
    merge_request = _NOTE_EVENT.json_object(event.get("merge_request"))
    opener = merge_request.get("author_id")
    opener_id = None if opener is None else _NOTE_EVENT.positive_int(opener, MAX_ID)
    ref = _reference(event.get("project"), merge_request.get("iid"), settings, _NOTE_EVENT)
    discussion = _NOTE_EVENT.optional(attributes, "discussion_id", str)
    kind = _NOTE_EVENT.optional(attributes, "type", str)
    in_thread = kind in ("DiscussionNote", "DiffNote")
    if discussion is not None and DISCUSSION_ID.fullmatch(discussion) is None:
        raise _NOTE_EVENT.invalid()
    return MergeRequestNote(
        ref=ref,
        note_id=note_id,
        body=body[:MAX_NOTE_CHARS],
        author=author,
        author_id=author_id,
        discussion_id=discussion if in_thread else None,
        head_sha=_head(merge_request.get("last_commit"), _NOTE_EVENT),
        merge_request_author_id=opener_id,
        by_bot=by_bot,
    )


def _reference(project: object, iid: object, settings: Settings, fields: Fields) -> MergeRequestRef:
    """The merge request on OUR server that the project's path and the iid name."""
    path = fields.required(fields.json_object(project), "path_with_namespace", str)
    number = fields.positive_int(iid, MAX_IID)
    segments = path.split("/")
    if (
        len(path) > MAX_PATH_CHARS
        or not 2 <= len(segments) <= MAX_NAMESPACE_DEPTH + 1
        or not all(is_valid_segment(segment) for segment in segments)
    ):
        raise fields.invalid()
    url = f"{settings.gitlab_server_url}/{path}/-/merge_requests/{number}"
    ref = fields.parsed(parse_merge_request_url, url, settings)
    if ref.project_path != path or ref.number != number:  # the parser normalised something
        raise fields.invalid()
    return ref


def _head(last_commit: object, fields: Fields) -> str | None:
    if last_commit is None:
        return None
    sha = fields.sha(fields.json_object(last_commit), "id")
    if sha is None:
        raise fields.invalid()
    return sha


def _marked_ready(changes: object) -> bool:
    """Whether the update took the merge request out of draft (`changes.draft` true -> false)."""
    if not isinstance(changes, dict):
        return False
    for name in ("draft", "work_in_progress"):
        change = changes.get(name)
        if (
            isinstance(change, dict)
            and change.get("previous") is True
            and change.get("current") is False
        ):
            return True
    return False
