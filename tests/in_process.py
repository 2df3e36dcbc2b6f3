"""The real application in this process, its lifespan run, driven over ASGI: how a test asks
the HTTP API without a server (tests/jobs/test_jobs.py's `service` is the one with the jobs'
origin, `http://service`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real app made with `settings`, its lifespan entered."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=60
        ) as client:
            yield client
