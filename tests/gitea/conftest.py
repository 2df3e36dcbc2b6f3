"""Fixtures for the Gitea tests: GitHub's process recorder, shared (the fetch is one cache)."""

from __future__ import annotations

from tests.github.conftest import launches

__all__ = ["launches"]
