"""Webhook deliveries as Gitea sends them (modules/structs/hook.go's `PullRequestPayload` and
`IssueCommentPayload`, services/webhook/deliver.go's headers), signed with a test secret."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SECRET = "gitea-hook-secret-d41c"
HEAD = "b" * 40
DELIVERY = "6f1d1d2e-8a7c-4d55-9d0e-2f5b7c1e9a01"


def repository(full_name: str = "acme/widget") -> dict[str, Any]:
    owner, name = full_name.split("/")
    return {
        "id": 1,
        "owner": {"id": 2, "login": owner},
        "name": name,
        "full_name": full_name,
        "html_url": f"https://elsewhere.example/{full_name}",
        "private": False,
    }


def pull_request_event(action: str = "opened", number: int = 3, **pull: Any) -> dict[str, Any]:
    document = {
        "id": 10_003,
        "number": number,
        "user": {"id": 7, "login": "alice"},
        "title": "A change",
        "body": "Please review.",
        "state": "open",
        "draft": False,
        "html_url": "https://elsewhere.example/acme/widget/pulls/99",
        "base": {"label": "main", "ref": "main", "sha": "a" * 40},
        "head": {"label": "feature", "ref": "feature", "sha": HEAD},
    }
    document.update(pull)
    return {
        "action": action,
        "number": number,
        "pull_request": document,
        "repository": repository(),
        "sender": {"id": 7, "login": "alice"},
        "commit_id": "",
    }


def comment_event(
    body: str = "/pr-review review", *, action: str = "created", is_pull: bool = True
) -> dict[str, Any]:
    return {
        "action": action,
        "issue": {
            "id": 50,
            "number": 3,
            "user": {"id": 7, "login": "alice"},
            "title": "A change",
            "pull_request": {"merged": False} if is_pull else None,
        },
        "comment": {
            "id": 901,
            "html_url": "https://elsewhere.example/acme/widget/pulls/3#issuecomment-901",
            "user": {"id": 8, "login": "bob"},
            "body": body,
        },
        "repository": repository(),
        "sender": {"id": 8, "login": "bob"},
        "is_pull": is_pull,
    }


def sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery(
    event: dict[str, Any] | bytes, kind: str, family: str, *, forgejo: bool = False
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of a signed delivery (lower-case names, as a route passes them)."""
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    signature = sign(body)
    headers = {
        "x-gitea-delivery": DELIVERY,
        "x-gitea-event": family,
        "x-gitea-event-type": kind,
        "x-gitea-signature": signature,
        "x-hub-signature-256": f"sha256={signature}",
    }
    if forgejo:
        headers.update(
            {
                "x-forgejo-delivery": DELIVERY,
                "x-forgejo-event": family,
                "x-forgejo-event-type": kind,
                "x-forgejo-signature": signature,
            }
        )
    return body, headers
