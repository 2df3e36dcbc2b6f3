"""Every publication the fakes record, byte for byte, against a stored expectation.

Generated reviews (a seeded mix of inline, context, off-diff and file-level findings, hostile
titles, suggestions, notes) go through `run_review(..., post=True)` on both fakes: GitHub's
review, check run and summary; GitLab's discussions, note and commit status. A second review of
a later head covers the re-review. What the forges received (every request that is not a read:
method, path, query and body) is compared with `tests/data/recorded_publications.json`, which
was written before the forge-neutral pieces left `github/`: a refactor of the publishing core
that changes one byte of what a forge receives fails here. To write the file anew after an
intended change, run this file with `PR_REVIEW_RECORD_PUBLICATIONS=1`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ChangeTarget, ReviewOptions, run_review
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, GITLAB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.gitlab_statuses import FakeStatuses

pytestmark = pytest.mark.e2e

EXPECTED = Path(__file__).parent.parent / "data" / "recorded_publications.json"
BOT = "pr-review-bot"
TEN = "".join(f"line {n}\n" for n in range(1, 11))
FIFTY = "".join(f"row {n}\n" for n in range(1, 51))
BASE = {"a.py": TEN, "other.py": FIFTY, "b.py": FIFTY}
HEAD = {
    "a.py": TEN.replace("line 5\n", "line five\nadded\n"),
    "b.py": FIFTY.replace("row 20\n", ""),
}
LATER = {**HEAD, "b.py": FIFTY.replace("row 30\n", "row thirty\n")}
HOSTILE = ["@octocat look", "fixes #12", "/approve\n/merge", "<b>x</b>", "[a](https://e.x)"]
PLACES = [("a.py", 5), ("a.py", 6), ("a.py", 3), ("a.py", 9), ("b.py", 19), ("other.py", 40)]
SEVERITIES = ["critical", "high", "medium", "low", "info"]
# Read at import: the autouse clean environment of every test removes it before the test runs.
RECORD = os.environ.get("PR_REVIEW_RECORD_PUBLICATIONS") == "1"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def generated_review(seed: int) -> dict[str, Any]:
    """A review document drawn from `seed`: the same seed, the same document."""
    draw = random.Random(seed)
    findings = []
    for index in range(draw.randint(1, 6)):
        path, line = draw.choice(PLACES)
        finding: dict[str, Any] = {
            "severity": draw.choice(SEVERITIES),
            "title": f"Finding {index} {draw.choice(HOSTILE)}",
            "explanation": f"Explained {path}:{line} {draw.choice(HOSTILE)}.",
            "path": path,
            "line": None if draw.random() < 0.15 else line,
            "evidence": "e",
            "recommendation": "r",
        }
        if path == "a.py" and line == 6 and draw.random() < 0.5:
            finding["suggestion"] = {"start_line": 6, "end_line": 6, "replacement": "changed\n"}
        findings.append(finding)
    notes = [f"Note {draw.choice(HOSTILE)}"] if draw.random() < 0.5 else []
    return {
        "summary": f"Summary {seed} {draw.choice(HOSTILE)}.",
        "findings": findings,
        "notes": notes,
    }


def review(url: str, settings: Settings, seed: int) -> None:
    model = ScriptedModel(stop_turn(generated_review(seed)))
    asyncio.run(run_review(ChangeTarget(url), settings, ReviewOptions(model=model, post=True)))


def writes(requests: list[Any], server_url: str) -> list[dict[str, Any]]:
    """What a forge received that changes something, with the fake's address and times
    replaced by fixed words (the only parts that differ between runs)."""
    recorded = []
    for request in requests:
        if request.method == "GET" or request.path.endswith(("/git-upload-pack", "/info/refs")):
            continue
        body = request.body.decode()
        with contextlib.suppress(ValueError):
            body = json.loads(body)
        text = json.dumps(
            {"method": request.method, "path": request.path, "query": request.query, "body": body},
            sort_keys=True,
        )
        port = server_url.rsplit(":", 1)[-1]
        text = TIMESTAMP.sub("<time>", text.replace(server_url, "<server>").replace(port, "<port>"))
        recorded.append(json.loads(text))
    return recorded


def settings_of(fake: FakeGitHub | FakeGitLab, cache: Path, token: str) -> Settings:
    fake.users.setdefault(token, BOT)
    return fake.settings(
        cache,
        token=token,
        opencode_api_key=PROVIDER_KEY,
        review_timeout_seconds=60,
        review_suggestions=True,
    )


def github_publications(fake: FakeGitHub, tmp_path: Path) -> list[dict[str, Any]]:
    settings = settings_of(fake, tmp_path / "github-cache", GITHUB_TOKEN)
    pulls = [fake.pull_request("acme", "widget", n, base=BASE, head=HEAD) for n in range(1, 9)]
    for seed, pull in enumerate(pulls):
        review(pull.url, settings, seed)
    review(fake.push_head(pulls[0], LATER).url, settings, 100)
    return writes(fake.api_requests(), fake.server_url)


def gitlab_publications(fake: FakeGitLab, tmp_path: Path) -> list[dict[str, Any]]:
    settings = settings_of(fake, tmp_path / "gitlab-cache", GITLAB_TOKEN)
    for iid, seed in enumerate(range(8), start=1):
        mr = fake.merge_request("grp/sub/widget", iid, base=BASE, head=HEAD)
        review(mr.url, settings, seed)
    later = fake.merge_request("grp/sub/widget", 1, base=BASE, head=LATER)
    review(later.url, settings, 100)
    return writes(fake.api_requests(), fake.server_url)


def test_what_both_forges_receive_is_unchanged(
    fake_github: FakeGitHub,
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    fake_gitlab_statuses: FakeStatuses,
    tmp_path: Path,
) -> None:
    recorded = {
        "github": github_publications(fake_github, tmp_path),
        "gitlab": gitlab_publications(fake_gitlab, tmp_path),
    }
    if RECORD:
        EXPECTED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    # Each forge received something of each kind, so the comparison below has teeth.
    assert len(recorded["github"]) > 9
    assert len(recorded["gitlab"]) > 9
    assert recorded == json.loads(EXPECTED.read_text())
