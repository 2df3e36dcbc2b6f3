"""What a Gitea or Forgejo webhook delivery asks for (specification §19), read from its bytes alone.

`read_delivery` is the whole reading, in the order that keeps a hostile sender out:

1. the signature, before anything else is read: Gitea signs the raw body with the hook's
   secret (HMAC-SHA256 in lower-case hex, services/webhook/deliver.go) and sends it as
   `X-Gitea-Signature`; Forgejo sends the same value as `X-Forgejo-Signature` too. One of
   them must match, compared in constant time (each is a proof of the secret on its own, and
   a server may one day sign one of them otherwise); else `InvalidSignature` (401);
2. the delivery's id (`X-Gitea-Delivery` or `X-Forgejo-Delivery`, a UUID) and kind:
   `X-Gitea-Event-Type` (or Forgejo's) names the precise event (`pull_request_sync`,
   `pull_request_comment`, ...), `X-Gitea-Event` only its family (`pull_request`,
   `issue_comment`; modules/webhook/type.go's `Event()`), so the precise one is read first;
3. the body, as one strict JSON object, then the fields we need, each of its type
   (modules/structs/hook.go: `PullRequestPayload`, `IssueCommentPayload`).

What it asks for:

    pull_request, pull_request_sync, `opened`, `reopened`, `synchronized` (new commits),
    pull_request_label               `edited` when the title or the base branch changed, and
                                     `label_updated`, `label_cleared` (the skip rules read
                                     them: specification §16): a review of an open, non-draft pull
                                     request
    pull_request_comment,            a comment `created` on a pull request (`is_pull`) by a
    issue_comment                    user: a command (specification §15)

Everything else, well formed, is `None` (ignored). The pull request is named by OUR
`GITEA_SERVER_URL`, the payload's `repository.full_name` (each half checked against Gitea's
name rules first) and its number, and the URL built from them must pass
`parse_pull_request_url`; the payload's own URLs are never read. A field we need that is
missing or of the wrong type makes the delivery `InvalidRequest`, with a fixed sentence; no
other exception leaves this module, whatever the bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from pr_review_api.errors import InvalidSignature
from pr_review_api.gitea.urls import (
    MAX_INDEX,
    PullRequestRef,
    is_valid_owner,
    is_valid_repo_name,
    parse_pull_request_url,
)
from pr_review_api.http.json_fields import Fields
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.settings import Settings

SIGNATURE_HEADERS = ("x-gitea-signature", "x-forgejo-signature")
# The precise kind first (`pull_request_sync`), then the family (`pull_request`).
EVENT_HEADERS = ("x-gitea-event-type", "x-forgejo-event-type", "x-gitea-event", "x-forgejo-event")
DELIVERY_HEADERS = ("x-gitea-delivery", "x-forgejo-delivery")
PULL_REQUEST_KINDS = frozenset({"pull_request", "pull_request_sync", "pull_request_label"})
COMMENT_KINDS = frozenset({"pull_request_comment", "issue_comment"})
REVIEWED_ACTIONS = frozenset({"opened", "reopened", "synchronized"})
# Labels added or removed (`pull_request_label`): the skip rules read them (specification §16).
LABEL_ACTIONS = frozenset({"label_updated", "label_cleared"})
# What an `edited` may change that the skip rules read (specification §16): ChangesPayload's fields.
SKIP_INPUT_CHANGES = ("title", "ref")
MAX_COMMENT_CHARS = 65_536  # a command is its first words; Gitea stores up to a LONGTEXT
MAX_LOGIN_CHARS = 255
MAX_ID = 2**63 - 1  # ids are int64
_DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,64}", re.ASCII)
_KIND = re.compile(r"[a-z_]{1,64}", re.ASCII)  # Gitea's event types; anything else is no kind
_DELIVERY = Fields("The delivery is not a well-formed Gitea webhook delivery.")
_PULL_REQUEST_EVENT = Fields("The delivery is not a well-formed pull request event.")
_COMMENT_EVENT = Fields("The delivery is not a well-formed comment event.")
_BAD_SIGNATURE = "The webhook delivery's X-Gitea-Signature is missing or not valid."


@dataclass(frozen=True)
class PullRequestPush:
    """A pull request to review at `head_sha` (None when the payload named no head)."""

    ref: PullRequestRef
    head_sha: str | None
    action: str


@dataclass(frozen=True)
class PullRequestComment:
    """A comment created on a pull request, as its delivery gave it."""

    ref: PullRequestRef
    comment_id: int
    body: str
    author: str
    author_id: int
    # The pull request's author (who may ask questions without write access), when given.
    pull_request_author: str | None


@dataclass(frozen=True)
class Delivery:
    """A delivery whose signature matched: its id, its kind and what it asks (None: nothing)."""

    delivery_id: str | None
    kind: str | None
    asks: PullRequestPush | PullRequestComment | None


def verify_signature(body: bytes, headers: Mapping[str, str], secret: SecretStr) -> None:
    """Raise `InvalidSignature` unless a signature header is the body's HMAC-SHA256 under
    `secret`, in hex (each compared in constant time)."""
    expected = hmac.new(secret.get_secret_value().encode(), body, hashlib.sha256).hexdigest()
    given = [headers[name] for name in SIGNATURE_HEADERS if name in headers]
    valid = [
        hmac.compare_digest(expected.encode("ascii"), value.strip().lower().encode("utf-8"))
        for value in given
    ]
    if not any(valid):
        raise InvalidSignature(_BAD_SIGNATURE)


def read_delivery(
    body: bytes, headers: Mapping[str, str], secret: SecretStr, settings: Settings
) -> Delivery:
    """The delivery (see the module docstring). `headers` maps lower-case names to the value
    of each header sent once (a repeated header is the route's to refuse)."""
    verify_signature(body, headers, secret)
    delivery = next((headers[name] for name in DELIVERY_HEADERS if name in headers), None)
    if delivery is not None and _DELIVERY_ID.fullmatch(delivery) is None:
        raise _DELIVERY.invalid()
    kind = next((headers[name].strip() for name in EVENT_HEADERS if name in headers), None)
    if kind is not None and _KIND.fullmatch(kind) is None:
        kind = None  # never a label or a log line made of what a sender typed
    if kind not in PULL_REQUEST_KINDS and kind not in COMMENT_KINDS:
        return Delivery(delivery, kind, None)
    event = parse_event(body)
    if kind in PULL_REQUEST_KINDS:
        return Delivery(delivery, kind, pull_request_push(event, settings))
    return Delivery(delivery, kind, pull_request_comment(event, settings))


def parse_event(body: bytes) -> dict[str, Any]:
    """The body as one strict JSON object; `InvalidRequest` otherwise."""
    try:
        event = loads_strict(body)
    except (StrictJSONError, ValueError, RecursionError):
        raise _DELIVERY.invalid() from None
    if not isinstance(event, dict):
        raise _DELIVERY.invalid()
    return event


def pull_request_push(event: dict[str, Any], settings: Settings) -> PullRequestPush | None:
    """The review a pull-request delivery asks for, or None; `InvalidRequest` when malformed."""
    fields = _PULL_REQUEST_EVENT
    action = fields.required(event, "action", str)
    if action not in REVIEWED_ACTIONS and action not in LABEL_ACTIONS and action != "edited":
        return None
    pull = fields.json_object(event.get("pull_request"))
    ref = _reference(event.get("repository"), event.get("number"), settings, fields)
    head = fields.sha(fields.json_object(pull.get("head") or {}), "sha")
    state = fields.optional(pull, "state", str)
    if fields.optional(pull, "draft", bool) is True or state not in (None, "open"):
        return None  # a draft is reviewed once it is marked ready (an `edited` of its title)
    if action == "edited" and not _skip_inputs_changed(event.get("changes")):
        return None  # the description changed: nothing the review reads
    return PullRequestPush(ref, head, action)


def pull_request_comment(event: dict[str, Any], settings: Settings) -> PullRequestComment | None:
    """The comment a comment delivery carries when a person created it on a pull request, or
    None; `InvalidRequest` when malformed."""
    fields = _COMMENT_EVENT
    if fields.required(event, "action", str) != "created":
        return None  # an edited or deleted comment: its command was read when it was made
    issue = fields.json_object(event.get("issue"))
    is_pull = fields.optional(event, "is_pull", bool)
    if not is_pull and not isinstance(issue.get("pull_request"), dict):
        return None  # a comment on an issue
    comment = fields.json_object(event.get("comment"))
    body = fields.required(comment, "body", str)
    user = fields.json_object(comment.get("user"))
    author = _login(user, fields)
    author_id = user.get("id")
    if not isinstance(author_id, int) or isinstance(author_id, bool) or author_id > MAX_ID:
        raise fields.invalid()
    if author_id <= 0:
        return None  # Gitea's own users (the ghost, the Actions bot) have ids below one
    opener = issue.get("user")
    ref = _reference(event.get("repository"), issue.get("number"), settings, fields)
    return PullRequestComment(
        ref=ref,
        comment_id=fields.positive_int(comment.get("id"), MAX_ID),
        body=body[:MAX_COMMENT_CHARS],
        author=author,
        author_id=author_id,
        pull_request_author=_login(opener, fields) if opener is not None else None,
    )


def _skip_inputs_changed(changes: object) -> bool:
    return isinstance(changes, dict) and any(
        isinstance(changes.get(name), dict) for name in SKIP_INPUT_CHANGES
    )


def _reference(
    repository: object, number: object, settings: Settings, fields: Fields
) -> PullRequestRef:
    """The pull request on OUR server that the repository's full name and the number name."""
    full_name = fields.required(fields.json_object(repository), "full_name", str)
    index = fields.positive_int(number, MAX_INDEX)
    owner, _, name = full_name.partition("/")
    if not is_valid_owner(owner) or not is_valid_repo_name(name):
        raise fields.invalid()
    if settings.gitea_server_url is None:
        raise fields.invalid()
    url = f"{settings.gitea_server_url}/{full_name}/pulls/{index}"
    ref = fields.parsed(parse_pull_request_url, url, settings)
    if (ref.owner, ref.repo, ref.number) != (owner, name, index):  # normalised something
        raise fields.invalid()
    return ref


def _login(user: object, fields: Fields) -> str:
    login = fields.required(fields.json_object(user), "login", str)
    if not 0 < len(login) <= MAX_LOGIN_CHARS or not login.isprintable():
        raise fields.invalid()
    return login
