"""`/ui`: pages for people (specification §18), server-rendered, no JavaScript.

    /ui                                              recent jobs (the listing's filters and
                                                     pages, as GET /v1/review-jobs reads them)
    /ui/jobs/{id}                                    one job: its review's findings, coverage,
                                                     notes, and the trace's rounds when kept
    /ui/repositories/{owner}/{repo}/dismissals       the repository's dismissed findings
    /ui/sign-in, /ui/sign-out                        with keys set: a browser's session

Guarded by the service keys like /v1: a bearer key, or a browser signed in with one
(`service.ui_session`, which also checks that every form comes from our own pages). Every
value reaches the page through Jinja2 with autoescape on: model and repository text is always
text, never markup. No model text becomes a link: the only links are our own pages, the pull
request's canonical URL and the published review's URL, and a URL becomes a link only when its
scheme is http or https. Each page also forbids scripts, frames and foreign form targets in its
Content-Security-Policy, so a mistake in a template still could not run one.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from pr_review_api import __version__
from pr_review_api.errors import InvalidRequest, JobNotFound, Unauthorized
from pr_review_api.forge.urls import is_repository_name
from pr_review_api.jobs.admin import list_jobs
from pr_review_api.jobs.dismissals import DatabaseDismissals, repository_key
from pr_review_api.jobs.figures import JobFigures
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobFilter, JobRecord
from pr_review_api.model import SEVERITIES
from pr_review_api.service.auth import is_service_key, service_keys
from pr_review_api.service.body import form_body
from pr_review_api.service.dependencies import get_jobs, get_settings
from pr_review_api.service.errors import ERROR_CODE_KEY
from pr_review_api.service.job_listing import parse_listing_query
from pr_review_api.service.ui_session import (
    UI_SESSION_SECONDS,
    clear_session_cookie,
    next_page,
    require_same_origin,
    require_ui_access,
    set_session_cookie,
    sign_in_location,
    ui_path,
)
from pr_review_api.settings import Settings

UI_PAGE_SIZE = 50
MAX_FORM_BYTES = 16 * 1024  # a sign-in form; a later page's form may ask for more
_HEAD_CHARS = 12
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # No page address leaves for another site; "same-origin" rather than "no-referrer", under
    # which a browser sends `Origin: null` even with our own forms (service/ui_session.py).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

templates = Environment(
    loader=PackageLoader("pr_review_api.service", "templates"),
    autoescape=True,  # every template, whatever its name
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def safe_link(url: Any) -> str | None:
    """`url` when it may be a link (an absolute http or https URL), else None."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url


async def dismissed_findings(queue: JobQueue, owner: str, repo: str) -> list[dict[str, Any]]:
    """The repository's dismissed findings (specification §15: `ignore` in one of our threads),
    newest first, from the `dismissals` table."""
    dismissals = DatabaseDismissals(queue.connector.pool.connection)
    found = await dismissals.listed(repository_key(owner, repo))
    return [
        {
            "title": item.title,
            "path": item.path,
            "by": item.dismissed_by,
            "at": None if item.dismissed_at is None else item.dismissed_at.isoformat(),
            "reason": "ignore",
        }
        for item in found
    ]


def ui_router() -> APIRouter:
    """The pages (with keys set, each needs a key or a signed-in browser, service/ui_session),
    the sign-in and sign-out forms, and the same-origin check of every form sent to /ui."""
    router = APIRouter(dependencies=[Depends(require_same_origin)], include_in_schema=False)
    router.include_router(sign_in_router())
    router.include_router(pages_router())
    return router


def sign_in_router() -> APIRouter:
    """`/ui/sign-in` (the form, and the key it posts) and `/ui/sign-out`."""
    router = APIRouter(prefix="/ui")

    @router.get("/sign-in")
    async def sign_in_page(
        request: Request, settings: Annotated[Settings, Depends(get_settings)]
    ) -> Response:
        then = next_page(request, request.query_params.get("next"))
        if not settings.pr_review_api_keys:
            return RedirectResponse(then, status_code=303)  # no keys: nothing to sign in to
        return _sign_in_page(request, then, refused=False)

    @router.post("/sign-in")
    async def sign_in(
        request: Request, settings: Annotated[Settings, Depends(get_settings)]
    ) -> Response:
        form = await form_body(request, MAX_FORM_BYTES)
        then = next_page(request, form.get("next"))
        keys = service_keys(settings)
        if not keys:
            return RedirectResponse(then, status_code=303)
        if not is_service_key(form.get("key", "").strip().encode("utf-8"), keys):
            request.scope.setdefault("state", {})[ERROR_CODE_KEY] = Unauthorized.code
            page = _sign_in_page(request, then, refused=True)
            page.status_code = Unauthorized.status
            return page
        answer = RedirectResponse(then, status_code=303)
        set_session_cookie(answer, request, keys)
        return answer

    @router.post("/sign-out")
    async def sign_out(request: Request) -> Response:
        answer = RedirectResponse(sign_in_location(request, ui_path(request)), status_code=303)
        clear_session_cookie(answer, request)
        return answer

    return router


def pages_router() -> APIRouter:
    """The pages for people, behind the keys when they are set."""
    router = APIRouter(prefix="/ui", dependencies=[Depends(require_ui_access)])

    @router.get("")
    async def recent_jobs(
        request: Request, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> HTMLResponse:
        # The filter form sends its empty fields too: an empty field means "any".
        raw = request.scope.get("query_string", b"")
        given = b"&".join(part for part in raw.split(b"&") if part and not part.endswith(b"="))
        where, limit = parse_listing_query(given, default_limit=UI_PAGE_SIZE)
        page = await list_jobs(queue, where, limit)
        if page is None:
            raise InvalidRequest("cursor is not a cursor this listing gave.")
        older = None
        if page.next_after is not None:
            older = ui_path(request) + "?" + _query(where, limit, page.next_after)
        return _page(
            request,
            "jobs.html",
            jobs=[_job_row(request, record) for record in page.jobs],
            older=older,
            repository=f"{where.owner}/{where.repo}" if where.owner else "",
            status=where.status or "",
        )

    @router.get("/jobs/{job_id}")
    async def job_page(
        request: Request, job_id: str, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> HTMLResponse:
        try:
            parsed = uuid.UUID(job_id)
        except ValueError:
            raise JobNotFound() from None
        record = await queue.get(parsed)
        if record is None:
            raise JobNotFound()
        return _page(request, "job.html", job=_job_view(request, record))

    @router.get("/repositories/{owner}/{repo}/dismissals")
    async def dismissals_page(
        request: Request, owner: str, repo: str, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> HTMLResponse:
        if not is_repository_name(owner, repo):
            raise InvalidRequest("The repository must be owner/repo.")
        return _page(
            request,
            "dismissals.html",
            repository=f"{owner}/{repo}",
            dismissals=await dismissed_findings(queue, owner, repo),
        )

    return router


def _sign_in_page(request: Request, then: str, *, refused: bool) -> HTMLResponse:
    hours = UI_SESSION_SECONDS // 3600
    return _page(request, "sign_in.html", then=then, refused=refused, session_hours=hours)


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    html = templates.get_template(name).render(
        ui=ui_path(request),
        version=__version__,
        severities=SEVERITIES,
        # A sign-out button on every page once keys are set (a bearer client ignores it).
        keys_set=bool(get_settings(request).pr_review_api_keys),
        **context,
    )
    return HTMLResponse(html, headers=HEADERS)


def _query(where: JobFilter, limit: int, after: uuid.UUID) -> str:
    query: dict[str, str] = {}
    if where.owner is not None and where.repo is not None:
        query["repository"] = f"{where.owner}/{where.repo}"
    if where.status is not None:
        query["status"] = where.status
    return urlencode({**query, "limit": str(limit), "cursor": str(after)})


def _job_row(request: Request, record: JobRecord) -> dict[str, Any]:
    figures = JobFigures.of(record)
    return {
        "id": str(record.id),
        "page": f"{ui_path(request)}/jobs/{record.id}",
        "pull_request": f"{record.owner}/{record.repo}#{record.number}",
        "pull_request_link": safe_link(record.pull_request_url),
        "head": (record.head_sha or "")[:_HEAD_CHARS],
        "status": record.status,
        "created": record.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "severities": figures.severities,
        "findings": figures.findings,
        "tokens": figures.total_tokens,
        "duration": figures.duration_text(),
        "error_code": figures.error_code,
        "publication_status": figures.publication_status,
        "published_link": safe_link(figures.published_url),
        "published_url": figures.published_url,
    }


def _job_view(request: Request, record: JobRecord) -> dict[str, Any]:
    document = record.result if isinstance(record.result, dict) else {}
    review = _mapping(document.get("review"))
    coverage = _mapping(document.get("coverage"))
    error = _mapping(document.get("error"))
    return {
        **_job_row(request, record),
        "head_full": record.head_sha,
        "attempts": record.attempts,
        "started": _moment(record.started_at),
        "finished": _moment(record.finished_at),
        "model": document.get("model"),
        "termination_reason": document.get("termination_reason"),
        "usage": _mapping(document.get("usage")),
        "rounds": document.get("rounds"),
        "tool_calls": document.get("tool_calls"),
        "error_message": error.get("message"),
        "summary": review.get("summary"),
        "findings_list": [f for f in _list(review.get("findings")) if isinstance(f, dict)],
        "notes": [note for note in _list(review.get("notes")) if isinstance(note, str)],
        # specification §21, when the review has them.
        "walkthrough": [e for e in _list(review.get("walkthrough")) if isinstance(e, dict)],
        "linked_issues": [i for i in _list(review.get("linked_issues")) if isinstance(i, dict)],
        "coverage": coverage or None,
        "not_inspected": [p for p in _list(coverage.get("not_inspected")) if isinstance(p, str)],
        "trace": [_round(turn) for turn in _list(document.get("trace")) if isinstance(turn, dict)],
    }


def _round(turn: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for call in _list(turn.get("tool_calls")):
        if isinstance(call, dict):
            arguments = json.dumps(call.get("arguments"), ensure_ascii=False, sort_keys=True)
            calls.append({**call, "arguments_text": arguments})
    return {**turn, "usage": _mapping(turn.get("usage")), "calls": calls}


def _moment(value: Any) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
