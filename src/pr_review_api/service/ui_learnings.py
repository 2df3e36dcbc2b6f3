"""`/ui/learnings/{repository}`: a repository's learnings (specification §20), for people.

    GET  /ui/learnings/{repository}                  the learnings, newest first, and a form
    POST /ui/learnings/{repository}                  add one (`text`), then back to the page
    POST /ui/learnings/{repository}/{id}/remove      remove one, then back to the page

`{repository}` is the tables' key: `owner/repo` on GitHub, `gitlab:group/project` on GitLab.
The router sits behind the same guards as every /ui page (`service.ui_session`): a key or a
signed-in browser when keys are set, and every POST only from this service's own pages, so
another site cannot make a signed-in browser add or remove one. Texts reach the page through
Jinja2 with autoescape on, never as markup; the form is read capped.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pr_review_api.errors import InvalidRequest
from pr_review_api.jobs.learnings import DatabaseLearnings, is_repository_key
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.service.body import form_body
from pr_review_api.service.dependencies import get_jobs
from pr_review_api.service.ui import HEADERS, _page
from pr_review_api.service.ui_session import require_same_origin, require_ui_access, ui_path

MAX_FORM_BYTES = 8 * 1024


def learnings_router() -> APIRouter:
    """The learnings pages, guarded as every /ui page is."""
    guards = [Depends(require_ui_access), Depends(require_same_origin)]
    router = APIRouter(prefix="/ui/learnings", dependencies=guards, include_in_schema=False)

    @router.get("/{repository:path}")
    async def learnings_page(
        request: Request, repository: str, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> HTMLResponse:
        key = _key(repository)
        found = await DatabaseLearnings(queue.connector.pool.connection).listed(key)
        return _page(
            request,
            "learnings.html",
            repository=key,
            action=f"{ui_path(request)}/learnings/{key}",
            learnings=[item.document() for item in found],
        )

    @router.post("/{repository:path}")
    async def change(
        request: Request, repository: str, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> Response:
        table = DatabaseLearnings(queue.connector.pool.connection)
        key, _, tail = repository.partition("/-/")  # "<key>/-/<id>/remove"
        if not tail:
            key = _key(key)
            text = _field(await form_body(request, MAX_FORM_BYTES), "text")
            if await table.add(key, text, "ui") is None:
                raise InvalidRequest("A learning is 1-500 characters, with no control character.")
        else:
            key = _key(key)
            number, _, verb = tail.partition("/")
            if verb != "remove" or not number.isdigit() or len(number) > 18:
                raise InvalidRequest("Not a learning to remove.")
            await table.remove(int(number), key)
        return RedirectResponse(
            f"{ui_path(request)}/learnings/{key}", status_code=303, headers=HEADERS
        )

    return router


def _key(repository: str) -> str:
    if not is_repository_key(repository):
        raise InvalidRequest("The repository must be owner/repo, or gitlab:group/project.")
    return repository.lower()


def _field(fields: dict[str, str], name: str) -> str:
    if set(fields) != {name}:
        raise InvalidRequest("The form is not valid.")
    return fields[name]
