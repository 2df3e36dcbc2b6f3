"""`/ui`: pages for people (CONTRACT section 18), server-rendered, no JavaScript.

    /ui                                              recent jobs (the listing's filters and
                                                     pages, as GET /v1/review-jobs reads them)
    /ui/jobs/{id}                                    one job: its review's findings, coverage,
                                                     notes, and the trace's rounds when kept
    /ui/repositories/{owner}/{repo}/dismissals       the repository's dismissed findings

Guarded by the service keys exactly like /v1 (`service.auth`). Every value reaches the page
through Jinja2 with autoescape on: model and repository text is always text, never markup. No
model text becomes a link: the only links are our own pages, the pull request's canonical URL
and the published review's URL, and a URL becomes a link only when its scheme is http or
https. Each page also forbids scripts, frames and foreign form targets in its
Content-Security-Policy, so a mistake in a template still could not run one.
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from pr_review_api import __version__
from pr_review_api.errors import InvalidRequest, JobNotFound
from pr_review_api.forge.urls import is_repository_name
from pr_review_api.jobs.admin import list_jobs
from pr_review_api.jobs.dismissals import DatabaseDismissals, repository_key
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import JobFilter, JobRecord
from pr_review_api.jobs.summary import JobSummary
from pr_review_api.model import SEVERITIES
from pr_review_api.service.auth import require_service_key
from pr_review_api.service.dependencies import get_jobs
from pr_review_api.service.job_listing import parse_listing_query

UI_PAGE_SIZE = 50
_HEAD_CHARS = 12
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
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
    """The repository's dismissed findings (CONTRACT 15: `ignore` in one of our threads),
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


def ui_router(*, secured: bool) -> APIRouter:
    """The pages; with `secured`, each requires a service key, as /v1 does."""
    dependencies = [Depends(require_service_key)] if secured else []
    router = APIRouter(prefix="/ui", dependencies=dependencies, include_in_schema=False)

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
            older = _ui_path(request) + "?" + _query(where, limit, page.next_after)
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


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    html = templates.get_template(name).render(
        ui=_ui_path(request), version=__version__, severities=SEVERITIES, **context
    )
    return HTMLResponse(html, headers=HEADERS)


def _ui_path(request: Request) -> str:
    return str(request.scope.get("root_path", "")) + "/ui"


def _query(where: JobFilter, limit: int, after: uuid.UUID) -> str:
    query: dict[str, str] = {}
    if where.owner is not None and where.repo is not None:
        query["repository"] = f"{where.owner}/{where.repo}"
    if where.status is not None:
        query["status"] = where.status
    return urlencode({**query, "limit": str(limit), "cursor": str(after)})


def _job_row(request: Request, record: JobRecord) -> dict[str, Any]:
    summary = JobSummary.of(record)
    return {
        "id": str(record.id),
        "page": f"{_ui_path(request)}/jobs/{record.id}",
        "pull_request": f"{record.owner}/{record.repo}#{record.number}",
        "pull_request_link": safe_link(record.pull_request_url),
        "head": (record.head_sha or "")[:_HEAD_CHARS],
        "status": record.status,
        "created": record.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "severities": summary.severities,
        "findings": summary.findings,
        "tokens": summary.total_tokens,
        "duration": summary.duration_text(),
        "error_code": summary.error_code,
        "publication_status": summary.publication_status,
        "published_link": safe_link(summary.published_url),
        "published_url": summary.published_url,
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
        # CONTRACT 21, when the review has them.
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
