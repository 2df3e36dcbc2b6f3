"""The HTTP service: a thin FastAPI shell over `run_review()` (specification §5).

The parts, each in its own module:

    middleware    AccessLog: one structured line per request; an unexpected exception
                  becomes the fixed 500 `internal_error` body there
    routes        /v1 (a router whose dependency checks the service key first), /healthz,
                  /docs (behind the keys when set); /openapi.json is FastAPI's, public
    auth          the bearer dependency (constant-time compare, `serviceKey` in OpenAPI)
    body          the review body: capped, `application/json`, strict JSON, the schema
    dependencies  settings, model client, review slots and the reviewer, as `Depends`
    errors        `error_response()`: the one place a `ReviewError` becomes an answer
    server        how `pr-review serve` runs it: timeouts, a connection cap, quiet EMFILE
    metrics_route GET /metrics (specification §18), behind the keys when set
    hosts         without keys, only loopback and PR_REVIEW_ALLOWED_HOSTS `Host` names are
                  answered (421 before routing; `server_config` puts it in front)
    ui, ui_session  /ui's pages; a browser's sign-in with a key, its signed session cookie,
                  and the same-origin check of every /ui form

Keys and tokens never reach a log line or a response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from pr_review_api import __version__
from pr_review_api.forge.select import open_clients
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.workspace import repository_store
from pr_review_api.metrics import Metrics
from pr_review_api.service.dependencies import QUEUE_STATE_KEY, ReviewSlots
from pr_review_api.service.errors import install_error_handlers
from pr_review_api.service.metrics_route import install_metrics_route
from pr_review_api.service.middleware import AccessLog
from pr_review_api.service.routes import add_routes
from pr_review_api.settings import Settings, load_settings


def create_app(settings: Settings | None = None, *, metrics: Metrics | None = None) -> FastAPI:
    """The service, configured by `settings` (read from the environment when not given).

    `metrics` counts what this application does (a fresh `Metrics` when not given); `serve`
    passes one that also reads its embedded worker's samples (pr_review_api.metrics)."""
    settings = settings if settings is not None else load_settings()
    metrics = metrics if metrics is not None else Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One pooled provider client for every review; closed after the last one finished.
        async with ProviderClient(settings, metrics=metrics) as model:
            app.state.model = model
            # One repository store (indexes, readers, search text, git threads) per process.
            with repository_store(settings) as store:
                app.state.store = store
                async with open_clients(settings) as forges:
                    app.state.forges = forges
                    yield

    app = FastAPI(
        title="pr-review",
        version=__version__,
        summary=(
            "Review GitHub, Gitea and Forgejo pull requests and GitLab merge requests with a "
            "language model through read-only tools."
        ),
        lifespan=lifespan,
        docs_url=None,  # served by routes.py, behind the service keys when they are set
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.slots = ReviewSlots(settings.pr_review_max_concurrent_reviews)
    install_error_handlers(app)
    app.add_middleware(AccessLog)
    add_routes(app, secured=bool(settings.pr_review_api_keys))
    install_metrics_route(app, secured=bool(settings.pr_review_api_keys))
    install_job_routes(app, settings)  # specification §11: only when a database is configured
    return app


def install_job_routes(app: FastAPI, settings: Settings) -> None:
    """The job routes, the webhook receivers (GitHub's, GitLab's, Gitea's), the `/ui` pages
    (which read the same records) and the queue's lifespan, when the settings name a database
    (`pr-review serve` always does: an embedded one without `PR_REVIEW_DATABASE_URL`). The queue's
    connection pool opens in the application's lifespan and migrations are applied then."""
    if settings.pr_review_database_url is None:
        return
    # Imported here: the queue's libraries (and the pages' templates) load only with a database.
    from pr_review_api.jobs.queue import JobQueue  # noqa: PLC0415
    from pr_review_api.service.gitea_webhooks import gitea_webhook_router  # noqa: PLC0415
    from pr_review_api.service.gitlab_webhooks import gitlab_webhook_router  # noqa: PLC0415
    from pr_review_api.service.jobs_routes import jobs_router  # noqa: PLC0415
    from pr_review_api.service.ui import ui_router  # noqa: PLC0415
    from pr_review_api.service.ui_learnings import learnings_router  # noqa: PLC0415
    from pr_review_api.service.ui_session import install_sign_in_handler  # noqa: PLC0415
    from pr_review_api.service.webhooks import webhook_router  # noqa: PLC0415

    @asynccontextmanager
    async def lifespan(application: FastAPI) -> AsyncIterator[None]:
        queue = JobQueue(settings)
        try:
            async with queue.opened():
                setattr(application.state, QUEUE_STATE_KEY, queue)
                yield
        finally:
            setattr(application.state, QUEUE_STATE_KEY, None)

    router = jobs_router(secured=bool(settings.pr_review_api_keys))
    router.lifespan_context = lifespan
    app.include_router(router)
    app.include_router(ui_router())  # specification §18
    app.include_router(learnings_router())  # specification §20
    install_sign_in_handler(app)
    if settings.pr_review_webhook_secret is not None:
        app.include_router(webhook_router())
    if settings.pr_review_gitlab_webhook_secret is not None:  # specification §17
        app.include_router(gitlab_webhook_router())
    # specification §19: a secret alone routes nothing while no Gitea server is configured.
    if settings.pr_review_gitea_webhook_secret is not None and settings.gitea_server_url:
        app.include_router(gitea_webhook_router())
