"""The fake GitHub's comment-command endpoints (specification §15), as GitHub answers them:
collaborator permission, review comment replies (only to a top-level comment), issue comments,
reactions, and GraphQL review threads with the resolve mutation (it needs the thread's node
id). `tests/fakes/github_server.py` routes to them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.fakes.github_reviews import comment_now

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.github_server import FakeGitHub, _Handler


def comment_endpoints(  # noqa: C901, PLR0911, PLR0912  (one return per endpoint)
    fake: FakeGitHub, handler: _Handler, record: RecordedRequest, pieces: list[str], body: bytes
) -> bool:
    """The comment commands' endpoints (specification §15), as GitHub answers them; False when
    the path is none of them."""
    owner, repo, tail = pieces[2], pieces[3], pieces[4:]
    method = handler.command
    if (
        method == "GET"
        and len(tail) == 3
        and tail[0] == "collaborators"
        and tail[2] == "permission"
    ):
        fake.permission_requests += 1
        level = fake.permissions.get((owner, repo, tail[1]), "read")
        role = level
        permission = {"maintain": "write", "triage": "read"}.get(level, level)
        handler.send_json(record, 200, {"permission": permission, "role_name": role})
        return True
    if method == "GET" and len(tail) == 4 and tail[1] == "comments" and tail[3] == "reactions":
        query = dict(part.partition("=")[::2] for part in record.query.split("&") if part)
        listed = [
            {"id": n, "content": r["content"], "user": {"login": r["user"]}}
            for n, r in enumerate(fake.reactions)
            if r["on"] == tail[0]
            and str(r["comment_id"]) == tail[2]
            and query.get("content", r["content"]) == r["content"]
        ]
        handler.send_json(record, 200, listed)
        return True
    if method == "GET" and len(tail) == 3 and tail[:2] == ["pulls", "comments"]:
        found = comment_now(fake, int(tail[2])) if tail[2].isdigit() else None
        handler.send_json(record, 200 if found else 404, found or {"message": "Not Found"})
        return True
    payload = _payload(body) if method == "POST" else None
    author = handler._author(fake, record)
    if method == "POST" and len(tail) == 5 and tail[0] == "pulls" and tail[4] == "replies":
        key = (owner, repo, int(tail[1]))
        top = fake.review_comment(int(tail[3])) if tail[3].isdigit() else None
        if author is None:
            handler.send_json(record, 403, {"message": "Resource not accessible by integration"})
        elif top is None or top not in fake.review_comments.get(key, []):
            handler.send_json(record, 404, {"message": "Not Found"})
        elif "in_reply_to_id" in top or not isinstance(payload, dict):
            fake.reply_refusals += 1  # GitHub: a reply goes to a top-level review comment
            handler.send_json(record, 422, {"message": "Validation Failed"})
        else:
            created = fake.add_review_comment(
                owner, repo, key[2], author, payload["body"], top["id"]
            )
            handler.send_json(record, 201, created)
        return True
    if method == "POST" and len(tail) == 3 and tail[0] == "issues" and tail[2] == "comments":
        if author is None or not isinstance(payload, dict):
            handler.send_json(record, 403, {"message": "Resource not accessible by integration"})
            return True
        comment = {"id": fake._id(), "user": {"login": author}, "body": payload["body"]}
        fake.issue_comments.setdefault((owner, repo, int(tail[1])), []).append(comment)
        handler.send_json(record, 201, comment)
        return True
    if method == "POST" and len(tail) == 4 and tail[1] == "comments" and tail[3] == "reactions":
        if author is None or not isinstance(payload, dict):
            handler.send_json(record, 403, {"message": "Resource not accessible by integration"})
            return True
        if payload.get("content") not in REACTIONS:
            handler.send_json(record, 422, {"message": "Validation Failed"})
            return True
        reaction = {
            "on": tail[0],
            "comment_id": int(tail[2]),
            "content": payload["content"],
            "user": author,
        }
        known = reaction in fake.reactions
        if not known:
            fake.reactions.append(reaction)
        handler.send_json(record, 200 if known else 201, {"id": fake._id(), **reaction})
        return True
    return False


def graphql(fake: FakeGitHub, handler: _Handler, record: RecordedRequest, body: bytes) -> None:
    """GitHub's GraphQL endpoint, for the review threads of a pull request (a thread per
    top-level review comment, node id `PRRT_<its id>`) and `resolveReviewThread`, which needs
    a thread's node id."""
    payload = _payload(body)
    if handler._author(fake, record) is None:
        handler.send_json(record, 401, {"message": "Bad credentials"})
        return
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
        handler.send_json(record, 400, {"message": "Problems parsing JSON"})
        return
    query, variables = payload["query"], payload.get("variables") or {}
    if "resolveReviewThread" in query:
        node = str(variables.get("threadId", ""))
        top = node.removeprefix("PRRT_")
        found = (
            fake.review_comment(int(top)) if node.startswith("PRRT_") and top.isdigit() else None
        )
        if found is None or "in_reply_to_id" in found:
            handler.send_json(record, 200, {"errors": [{"message": f"Could not resolve {node}"}]})
            return
        fake.resolved_threads.add(node)
        thread = {"id": node, "isResolved": True}
        handler.send_json(record, 200, {"data": {"resolveReviewThread": {"thread": thread}}})
        return
    key = (variables.get("owner"), variables.get("repo"), variables.get("number"))
    comments = fake.review_comments.get(key, [])  # type: ignore[arg-type]
    nodes = [
        {
            "id": f"PRRT_{top['id']}",
            "isResolved": f"PRRT_{top['id']}" in fake.resolved_threads,
            "comments": {
                "nodes": [{"databaseId": top["id"]}]
                + [{"databaseId": c["id"]} for c in fake.replies_to(top["id"])]
            },
        }
        for top in comments
        if "in_reply_to_id" not in top and "path" in top
    ]
    threads = {"reviewThreads": {"nodes": nodes}}
    handler.send_json(record, 200, {"data": {"repository": {"pullRequest": threads}}})


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def _payload(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None
