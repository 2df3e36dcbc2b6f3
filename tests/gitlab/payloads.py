"""GitLab webhook payloads as GitLab sends them (the documented examples' shapes, trimmed to
what varies between tests plus the fields a hostile sender would tamper with)."""

from __future__ import annotations

from typing import Any

HEAD = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"
OLDREV = "0b4bc9a49b562e85de7cc9e834518ea6828729b9"
PROJECT = "acme/platform/widget"
AUTHOR_ID = 51


def _project(path: str) -> dict[str, Any]:
    return {
        "id": 15,
        "name": path.rsplit("/", 1)[-1],
        "web_url": f"https://evil.example/{path}",
        "path_with_namespace": path,
        "default_branch": "main",
    }


def merge_request_hook(  # noqa: PLR0913  (one keyword per field a test varies)
    action: str = "open",
    *,
    iid: object = 7,
    path: object = PROJECT,
    head: object = HEAD,
    oldrev: object = None,
    draft: object = False,
    state: object = "opened",
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "id": 99,
        "iid": iid,
        "action": action,
        "state": state,
        "draft": draft,
        "work_in_progress": draft,
        "title": "Speed up the widget",
        "source_branch": "feature",
        "target_branch": "main",
        "last_commit": {"id": head, "message": "fix", "url": "https://evil.example/commit"},
        # Never read: the merge request is named by OUR server, the project's path and the iid.
        "url": "https://evil.example/acme/other/-/merge_requests/1",
    }
    if oldrev is not None:
        attributes["oldrev"] = oldrev
    project = _project(path) if isinstance(path, str) else {"path_with_namespace": path}
    return {
        "object_kind": "merge_request",
        "event_type": "merge_request",
        "user": {"id": 1, "name": "Alice", "username": "alice"},
        "project": project,
        "object_attributes": attributes,
        "changes": changes or {},
        "repository": {"name": "widget", "url": "git@evil.example:acme/widget.git"},
    }


def note_hook(  # noqa: PLR0913  (one keyword per field a test varies)
    note: str = "/pr-review review",
    *,
    username: str = "alice",
    user_id: int = AUTHOR_ID,
    note_id: int = 1244,
    iid: object = 7,
    path: str = PROJECT,
    noteable_type: str = "MergeRequest",
    note_type: str | None = None,
    discussion_id: str = "6a9c1750b37d513a43987b574953fceb50b03ce7",
    system: bool = False,
) -> dict[str, Any]:
    return {
        "object_kind": "note",
        "event_type": "note",
        "user": {"id": user_id, "name": username.title(), "username": username},
        "project_id": 15,
        "project": _project(path),
        "object_attributes": {
            "id": note_id,
            "note": note,
            "noteable_type": noteable_type,
            "author_id": user_id,
            "system": system,
            "type": note_type,
            "discussion_id": discussion_id,
            "action": "create",
            "url": "https://evil.example/acme/widget/-/merge_requests/7#note_1244",
        },
        "merge_request": {
            "id": 99,
            "iid": iid,
            "author_id": 77,
            "state": "opened",
            "last_commit": {"id": HEAD},
        },
    }
