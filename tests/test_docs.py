"""The README and docs/ stay true where a figure can drift or a pointer can break: every
relative link names a file of the repository, nothing points to a contract
document the repository does not ship, the corpus size is the number of case files, and the
README's "about N tests" is the number a whole run of that tier collects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pr_review_api.evaluation.corpus import CLEAN_KINDS, load_source
from pr_review_api.service.documents import ReviewRequest
from pr_review_api.service.webhooks import HANDLED_EVENTS, WEBHOOK_PATH
from tests.conftest import WHOLE_TIER

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = sorted(
    [README, *(ROOT / "docs").glob("*.md")]
    + [path for path in (ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md") if path.exists()]
)

# "about 2,400 tests" (the default run) and "about 2,300 tests in the fast tier".
ABOUT_TESTS = re.compile(r"about ([\d,]+) tests( in the fast tier)?")
# The figure is rounded to a hundred; the suite grows between edits of the README.
TOLERANCE = 0.10


def links(text: str) -> list[str]:
    """Every link target of a Markdown document."""
    found: list[str] = []

    def walk(tokens: list[Token]) -> None:
        for token in tokens:
            if token.type == "link_open":
                found.append(str(token.attrs["href"]))
            walk(token.children or [])

    walk(MarkdownIt().parse(text))
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_relative_link_names_a_file_of_the_repository(document: Path) -> None:
    broken = []
    for target in links(document.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if not path or re.match(r"^[a-z]+:", path):
            continue  # an anchor in the page, or a URL
        if not (document.parent / path).exists():
            broken.append(target)
    assert not broken, f"{document.name} links to files that do not exist: {broken}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_no_pointer_to_a_contract_the_repository_does_not_ship(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    assert not list(ROOT.glob("CONTRACT*"))  # if it ships one day, link to it instead
    assert "CONTRACT" not in text
    assert "seed/tool-calling.md" not in text


def test_the_corpus_size_in_the_docs_is_the_number_of_case_files() -> None:
    cases = load_source(ROOT / "eval")
    clean = sum(case.kind in CLEAN_KINDS for case in cases)
    readme = " ".join(README.read_text(encoding="utf-8").split())  # lines joined
    assert f"({len(cases)} cases of real open-source code" in readme
    eval_doc = " ".join((ROOT / "docs" / "eval.md").read_text(encoding="utf-8").split())
    corpus = f"{len(cases)} cases: {len(cases) - clean} planted defects"
    assert corpus in eval_doc
    assert f"and {clean} clean changes" in eval_doc


def test_the_readme_names_about_the_number_of_tests_of_each_tier() -> None:
    figures = [
        ("fast" if fast else "default", int(number.replace(",", "")))
        for number, fast in ABOUT_TESTS.findall(README.read_text(encoding="utf-8"))
    ]
    assert {tier for tier, _ in figures} == {"default", "fast"}
    if not WHOLE_TIER:
        pytest.skip("checked in a whole run of a tier: `uv run pytest` or `uv run pytest --fast`")
    for tier, stated in figures:
        if tier not in WHOLE_TIER:
            continue
        collected = WHOLE_TIER[tier]
        assert abs(collected - stated) <= TOLERANCE * stated, (
            f"README.md says about {stated:,} tests for the {tier} run; it collects {collected:,}"
        )


def test_the_api_doc_names_every_field_of_the_review_request() -> None:
    [row] = [
        line
        for line in (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `POST /v1/reviews` |")
    ]
    body = row[row.index("{") : row.index("}")]
    assert re.findall(r'"([a-z_]+)"', body) == list(ReviewRequest.model_fields)


# --- the GitHub App (docs/service.md, docs/github-app-manifest.json) ---------------------------

# What the service does with each permission; the module that needs it says why.
APP_PERMISSIONS = {
    "pull_requests": "write",  # github/publish.py, github/comments.py, github/resolve.py
    "contents": "read",  # github/git_http.py: the code, over git
    "checks": "write",  # github/checks.py: the merge gate's check run
    "statuses": "write",  # github/checks.py: the gate's commit status fallback
    "issues": "write",  # issue_comment deliveries; replies and reactions on them
    "metadata": "read",  # mandatory; github/comments.py: who may give a command
}
# The permission GitHub asks of an App before it may subscribe to each event.
EVENT_PERMISSION = {
    "check_run": "checks",
    "pull_request": "pull_requests",
    "pull_request_review_comment": "pull_requests",
    "issue_comment": "issues",
}
APP_WORDS = {
    "pull_requests": "Pull requests",
    "contents": "Contents",
    "checks": "Checks",
    "statuses": "Commit statuses",
    "issues": "Issues",
    "metadata": "Metadata",
}


def test_the_app_manifest_subscribes_to_every_event_the_webhook_handles() -> None:
    manifest = json.loads((ROOT / "docs" / "github-app-manifest.json").read_text())
    assert sorted(manifest["default_events"]) == sorted(HANDLED_EVENTS)
    assert manifest["default_permissions"] == APP_PERMISSIONS
    for event in manifest["default_events"]:
        assert manifest["default_permissions"][EVENT_PERMISSION[event]] in ("read", "write")
    assert manifest["hook_attributes"]["url"].endswith(WEBHOOK_PATH)
    assert manifest["public"] is False


def test_the_app_setup_in_the_docs_names_the_manifests_events_and_permissions() -> None:
    service = " ".join((ROOT / "docs" / "service.md").read_text(encoding="utf-8").split())
    for name, access in APP_PERMISSIONS.items():
        words = "Read and write" if access == "write" else "Read-only"
        assert f"| {APP_WORDS[name]} | {words} |" in service, name
    for event in HANDLED_EVENTS:
        assert f"**{event.replace('_', ' ').capitalize()}**" in service, event
