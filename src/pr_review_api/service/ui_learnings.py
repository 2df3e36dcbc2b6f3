"""`/ui/learnings/{repository}`: a repository's learnings (CONTRACT 20), for people.

    GET  /ui/learnings/{repository}                  the learnings, newest first, and a form
    POST /ui/learnings/{repository}                  add one (`text`), then back to the page
    POST /ui/learnings/{repository}/{id}/remove      remove one, then back to the page

`{repository}` is the tables' key: `owner/repo` on GitHub, `gitlab:group/project` on GitLab.
The router sits behind the same guard as every /ui page (`service.auth`, given by the app);
each POST is also refused unless the browser says it comes from this service's own pages
(`Sec-Fetch-Site: same-origin`, or an `Origin`/`Referer` on the request's own host), so another
site cannot make a signed-in browser add or remove one. Texts reach the page through Jinja2
with autoescape on, never as markup; the form's body is read capped.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from pr_review_api.errors import InvalidRequest
from pr_review_api.jobs.learnings import DatabaseLearnings, is_repository_key
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.service.auth import require_service_key
from pr_review_api.service.body import read_capped
from pr_review_api.service.dependencies import get_jobs
from pr_review_api.service.ui import HEADERS, _page, _ui_path

MAX_FORM_BYTES = 8 * 1024
_FOREIGN = "The form must be sent from this service's own pages."


def learnings_router(*, secured: bool) -> APIRouter:
    """The learnings pages; with `secured`, each requires what every /ui page requires."""
    dependencies = [Depends(require_service_key)] if secured else []
    router = APIRouter(prefix="/ui/learnings", dependencies=dependencies, include_in_schema=False)

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
            action=f"{_ui_path(request)}/learnings/{key}",
            learnings=[item.document() for item in found],
        )

    @router.post("/{repository:path}")
    async def change(
        request: Request, repository: str, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> Response:
        _same_origin(request)
        table = DatabaseLearnings(queue.connector.pool.connection)
        key, _, tail = repository.partition("/-/")  # "<key>/-/<id>/remove"
        if not tail:
            key = _key(key)
            text = _field(await read_capped(request, MAX_FORM_BYTES), "text")
            if await table.add(key, text, "ui") is None:
                raise InvalidRequest("A learning is 1-500 characters, with no control character.")
        else:
            key = _key(key)
            number, _, verb = tail.partition("/")
            if verb != "remove" or not number.isdigit() or len(number) > 18:
                raise InvalidRequest("Not a learning to remove.")
            await table.remove(int(number), key)
        return RedirectResponse(
            f"{_ui_path(request)}/learnings/{key}", status_code=303, headers=HEADERS
        )

    return router


def _key(repository: str) -> str:
    if not is_repository_key(repository):
        raise InvalidRequest("The repository must be owner/repo, or gitlab:group/project.")
    return repository.lower()


def _field(body: bytes, name: str) -> str:
    try:
        values: dict[str, list[str]] = parse_qs(body.decode("utf-8"), strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("The form is not valid.") from None
    found = values.get(name, [])
    if len(found) != 1:
        raise InvalidRequest("The form is not valid.")
    return found[0]


def _same_origin(request: Request) -> None:
    """Refuse a POST that a browser says came from another site (see the module docstring)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site != "same-origin":
            raise InvalidRequest(_FOREIGN)
        return
    host = request.headers.get("host", "")
    for name in ("origin", "referer"):
        given: Any = request.headers.get(name)
        if given:
            try:
                netloc = urlsplit(given).netloc
            except ValueError:
                netloc = ""
            if netloc.lower() != host.lower():
                raise InvalidRequest(_FOREIGN)
            return
    raise InvalidRequest(_FOREIGN)
