"""The endpoints: `POST /v1/reviews`, `GET /healthz`, and the interactive docs at `/docs`.

Every /v1 route sits on one router whose dependency checks the service key (when keys are
set) before anything else runs, the body included. `/openapi.json` stays public, as the
contract says: it is the published interface, holds no secret, and clients generate code
from it. `/docs` (Swagger UI) sits behind the keys like /v1, since it is a console that
sends requests. Its script, style sheet and icon come from the package (`fastapi-offline`
ships Swagger UI's files), served under `/docs/assets`, so the page works on a machine
without internet; they are the library's public files, served without a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import fastapi_offline
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.run import ReviewOptions
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import ReviewResult
from pr_review_api.service.auth import require_service_key
from pr_review_api.service.body import review_request
from pr_review_api.service.dependencies import (
    Reviewer,
    ReviewSlots,
    get_model,
    get_reviewer,
    get_settings,
    get_slots,
)
from pr_review_api.service.documents import ERROR_RESPONSES, Health, ReviewRequest
from pr_review_api.service.errors import ContractJSONResponse
from pr_review_api.settings import Settings

_REVIEW_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": ReviewResult, "description": "A validated review."},
    **ERROR_RESPONSES,
}
# The body is read by `review_request` (after the key check, capped, strict JSON), so
# FastAPI does not see a body parameter; the document declares it here.
_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": ReviewRequest.model_json_schema()}},
    }
}


DOCS_ASSETS_PATH = "/docs/assets"
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
# No request to the public validator for its badge: the page talks to this service only.
_SWAGGER_PARAMETERS: dict[str, Any] = {"validatorUrl": None}


def v1_router(*, secured: bool) -> APIRouter:
    """The /v1 routes; with `secured`, each one requires a service key."""
    dependencies = [Depends(require_service_key)] if secured else []
    router = APIRouter(prefix="/v1", dependencies=dependencies)

    @router.post(
        "/reviews",
        response_model=None,
        responses=_REVIEW_RESPONSES,
        summary="Review a pull request",
        openapi_extra=_REQUEST_BODY,
    )
    async def create_review(
        body: Annotated[ReviewRequest, Depends(review_request)],
        settings: Annotated[Settings, Depends(get_settings)],
        model: Annotated[ModelClient | None, Depends(get_model)],
        slots: Annotated[ReviewSlots, Depends(get_slots)],
        reviewer: Annotated[Reviewer, Depends(get_reviewer)],
    ) -> Response:
        with slots.hold():
            target = ChangeTarget(body.pull_request_url)
            # specification §10: no write request is ever made without `post`.
            options = ReviewOptions(post=body.post, include_trace=body.include_trace, model=model)
            result = await reviewer(target, settings, options)
        return ContractJSONResponse(result.model_dump(mode="json"))

    return router


def add_routes(app: FastAPI, *, secured: bool) -> None:
    """All the service's routes on `app`."""
    app.include_router(v1_router(secured=secured))

    @app.get("/healthz", response_model=Health, summary="Liveness")
    async def healthz() -> Health:
        return Health(status="ok")

    docs_dependencies = [Depends(require_service_key)] if secured else []

    @app.get("/docs", include_in_schema=False, dependencies=docs_dependencies)
    async def docs(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        assets = root + DOCS_ASSETS_PATH
        return get_swagger_ui_html(
            openapi_url=root + "/openapi.json",
            title="pr-review API",
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
            swagger_ui_parameters=_SWAGGER_PARAMETERS,
        )

    app.mount(DOCS_ASSETS_PATH, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")
