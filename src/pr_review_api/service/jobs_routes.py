"""`POST /v1/review-jobs`, `GET /v1/review-jobs` (a page of jobs, service/job_listing.py) and
`GET /v1/review-jobs/{id}` (specification §11).

`service.app.install_job_routes` adds them, with the webhook receiver and the `/ui` pages,
when the settings name a database. Every job route needs a service key when keys are set.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from pr_review_api.errors import InvalidRequest, JobNotFound
from pr_review_api.forge.urls import parse_change_url
from pr_review_api.jobs.admin import list_jobs
from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import PullRequestJob
from pr_review_api.service.auth import require_service_key
from pr_review_api.service.body import json_body
from pr_review_api.service.dependencies import get_jobs, get_settings
from pr_review_api.service.documents import CHANGE_URL_DESCRIPTION, ERROR_RESPONSES
from pr_review_api.service.errors import ContractJSONResponse
from pr_review_api.service.job_listing import (
    LISTING_PARAMETERS,
    JobPageDocument,
    page_document,
    parse_listing_query,
)
from pr_review_api.settings import Settings

MAX_JOB_REQUEST_BYTES = 64 * 1024


class ReviewJobRequest(BaseModel):
    """The body of `POST /v1/review-jobs`: no other fields, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pull_request_url: str = Field(description=CHANGE_URL_DESCRIPTION)
    post: bool = Field(default=False, description="Publish the review on the pull request.")


def jobs_router(*, secured: bool) -> APIRouter:
    """The job routes; with `secured`, each requires a service key."""
    dependencies = [Depends(require_service_key)] if secured else []
    router = APIRouter(prefix="/v1", dependencies=dependencies)

    @router.post("/review-jobs", status_code=202, response_model=None, summary="Queue a review")
    async def create_job(
        request: Request,
        settings: Annotated[Settings, Depends(get_settings)],
        queue: Annotated[JobQueue, Depends(get_jobs)],
    ) -> Response:
        body = await json_body(request, ReviewJobRequest, MAX_JOB_REQUEST_BYTES)
        ref = parse_change_url(body.pull_request_url, settings)
        job = PullRequestJob(
            url=ref.url, owner=ref.owner, repo=ref.repo, number=ref.number, post=body.post
        )
        enqueued = await queue.enqueue(job, source="api")
        return ContractJSONResponse(
            {"job_id": str(enqueued.job_id), "status": enqueued.status}, status_code=202
        )

    @router.get(
        "/review-jobs",
        response_model=None,
        summary="Review jobs, newest first",
        openapi_extra={"parameters": LISTING_PARAMETERS},
        responses={
            200: {"model": JobPageDocument, "description": "A page of jobs."},
            401: ERROR_RESPONSES[401],
            422: {**ERROR_RESPONSES[422], "description": "`invalid_request`: a bad query."},
            503: ERROR_RESPONSES[503],
        },
    )
    async def list_review_jobs(
        request: Request, queue: Annotated[JobQueue, Depends(get_jobs)]
    ) -> Response:
        # Read from the raw query: FastAPI's parameters would accept repeats and unknown names.
        where, limit = parse_listing_query(request.scope.get("query_string", b""))
        page = await list_jobs(queue, where, limit)
        if page is None:
            raise InvalidRequest("cursor is not a cursor this listing gave.")
        return ContractJSONResponse(page_document(page, where, limit))

    @router.get("/review-jobs/{job_id}", response_model=None, summary="A review job")
    async def get_job(job_id: str, queue: Annotated[JobQueue, Depends(get_jobs)]) -> Response:
        try:
            parsed = uuid.UUID(job_id)
        except ValueError:
            raise JobNotFound() from None
        record = await queue.get(parsed)
        if record is None:
            raise JobNotFound()
        return ContractJSONResponse(record.document())

    return router
