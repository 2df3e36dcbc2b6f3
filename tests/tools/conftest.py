"""One hostile repository for every tool test of the package (tests/hostile_repos.py)."""

from __future__ import annotations

import pytest

from pr_review_api.git.repository import PinnedRepository
from tests.hostile_repos import (
    HostileWorld,
    build_hostile_world,
)


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="package")
def pinned(world: HostileWorld) -> PinnedRepository:
    return world.pinned()
