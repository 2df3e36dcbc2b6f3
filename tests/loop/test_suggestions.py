"""specification §14's checks of a suggestion: each rule drops the suggestion with one fixed note,
never the finding or the review; off, a suggestion is an unknown field as in section 8."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pr_review_api.cli.commands import main
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop import suggestions, syntax_process
from pr_review_api.loop.final_review import (
    FINAL_REVIEW_SCHEMA,
    FinalReviewRejected,
    final_review_schema,
    parse_final_review,
    review_schema_json,
)
from pr_review_api.loop.prompts import system_prompt
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.suggestions import RULES, HeadText, dropped_note
from pr_review_api.loop.syntax_process import Counts, SyntaxProcess
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import FinalReview, Suggestion
from pr_review_api.settings import MAX_SYNTAX_CHECK_MEMORY, load_settings
from tests import builders
from tests.builders import suggestion
from tests.gitrepo import FILE, GitRepo

SERVICE = "def save(user):\n    validate(user)\n    store(user)\n    return user\n"
CRLF = "a = 1\r\nb = 2\r\n"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> PinnedRepository:
    repo = GitRepo(tmp_path_factory.mktemp("suggest") / "repo")
    base = repo.commit_files({"src/service.py": "pass\n"})
    head = repo.commit_tree(
        {
            "src/service.py": (FILE, SERVICE.encode()),
            "src/long.txt": (FILE, "".join(f"line {n}\n" for n in range(1, 121)).encode()),
            "src/crlf.py": (FILE, CRLF.encode()),
            "src/broken.py": (FILE, b"def f(:\n    pass\n"),
            "src/image.bin": (FILE, b"\0\1\2\n\n"),
        },
        parent=base,
    )
    return PinnedRepository.open(repo.git_dir, base, head)


finding = partial(
    builders.finding,
    title="Stored before validation",
    path="src/service.py",
    line=2,
    explanation="x",
    evidence="x",
    recommendation="x",
    suggestion=None,
)


def parsed(repository: PinnedRepository, *findings: dict[str, Any]) -> FinalReview:
    content = json.dumps({"summary": "s", "findings": list(findings), "notes": ["kept"]})
    return parse_final_review(content, repository, suggestions=True)


def test_a_good_suggestion_is_kept_and_adds_no_note(repository: PinnedRepository) -> None:
    review = parsed(repository, finding(suggestion=suggestion(2, 3, "    store(validate(user))")))
    assert review.findings[0].offered() == Suggestion(
        start_line=2, end_line=3, replacement="    store(validate(user))"
    )
    assert review.notes == ["kept"]


def test_every_finding_carries_the_field_when_on(repository: PinnedRepository) -> None:
    without = finding()
    del without["suggestion"]
    review = parsed(repository, without, finding(suggestion=None))
    documents = review.model_dump(mode="json")["findings"]
    assert [d["suggestion"] for d in documents] == [None, None]
    assert review.notes == ["kept"]


@pytest.mark.parametrize(
    ("suggested", "rule", "overrides"),
    [
        (suggestion(2, 5, "x"), "range", {}),  # past the end of a 4-line file
        (suggestion(3, 2, "x"), "range", {"line": 2}),  # end before start
        (suggestion(1, 51, "x"), "range", {"path": "src/long.txt", "line": 1}),  # 51 lines
        (suggestion(1, 1, "x"), "range", {"path": "src/image.bin", "line": 1}),  # not text
        (suggestion(2, 2, "y" * 8193), "size", {}),
        (suggestion(2, 3, "    validate(user)\n    store(user)"), "unchanged", {}),
        (suggestion(3, 4, "    return store(user)"), "line", {"line": 2}),
        (suggestion(2, 2, "    validate(user"), "syntax", {}),
        (suggestion(1, 1, "def save(user)"), "syntax", {"line": 1}),
    ],
)
def test_each_rule_drops_the_suggestion_with_one_fixed_note(
    repository: PinnedRepository, suggested: dict[str, Any], rule: str, overrides: dict[str, Any]
) -> None:
    other = finding(suggestion=suggestion(4, 4, "    return None"), line=4)
    review = parsed(repository, other, finding(suggestion=suggested, **overrides))
    assert review.findings[0].offered() is not None  # the other finding's stays
    assert review.findings[1].offered() is None
    assert review.findings[1].title == "Stored before validation"  # the finding stands
    assert review.notes == ["kept", dropped_note(2, rule)]
    assert "finding 2" in review.notes[1]
    assert RULES[rule] in review.notes[1]


def test_fifty_lines_are_allowed(repository: PinnedRepository) -> None:
    review = parsed(
        repository, finding(suggestion=suggestion(1, 50, "one line"), path="src/long.txt", line=7)
    )
    assert review.findings[0].offered() is not None


def test_a_null_line_needs_no_range(repository: PinnedRepository) -> None:
    review = parsed(
        repository, finding(suggestion=suggestion(3, 3, "    store(user)  # checked"), line=None)
    )
    assert review.findings[0].offered() is not None


def test_deleting_lines_is_a_suggestion(repository: PinnedRepository) -> None:
    review = parsed(repository, finding(suggestion=suggestion(2, 2, "")))
    assert review.findings[0].offered() == Suggestion(start_line=2, end_line=2, replacement="")


def test_a_file_that_did_not_parse_may_stay_no_worse(repository: PinnedRepository) -> None:
    review = parsed(
        repository, finding(suggestion=suggestion(2, 2, "    return 1"), path="src/broken.py")
    )
    assert review.findings[0].offered() is not None


def test_a_fix_that_repairs_the_parse_is_kept(repository: PinnedRepository) -> None:
    review = parsed(
        repository, finding(suggestion=suggestion(1, 1, "def f():"), path="src/broken.py", line=1)
    )
    assert review.findings[0].offered() is not None


def test_crlf_lines_compare_and_apply_in_the_files_own_endings(
    repository: PinnedRepository,
) -> None:
    same = parsed(
        repository, finding(suggestion=suggestion(1, 1, "a = 1"), path="src/crlf.py", line=1)
    )
    assert same.notes == ["kept", dropped_note(1, "unchanged")]
    head = HeadText.of(CRLF)
    applied = head.applied(Suggestion(start_line=2, end_line=2, replacement="b = 3\nc = 4"))
    assert applied == "a = 1\r\nb = 3\r\nc = 4\r\n"


def test_a_malformed_suggestion_fails_the_schema(repository: PinnedRepository) -> None:
    with pytest.raises(FinalReviewRejected) as caught:
        parsed(repository, finding(suggestion={"start_line": 1, "end_line": 1, "replacement": 3}))
    assert "findings.0.suggestion" in str(caught.value)
    with pytest.raises(FinalReviewRejected) as unknown:
        parsed(repository, finding(suggestion={**suggestion(1, 1, "x"), "why": "x"}))
    assert 'unknown field "why"' not in str(unknown.value)  # not a name of ours


def test_off_a_suggestion_is_an_unknown_field_as_in_section_8(
    repository: PinnedRepository,
) -> None:
    content = json.dumps({"summary": "s", "findings": [finding(suggestion=None)], "notes": []})
    with pytest.raises(FinalReviewRejected) as caught:
        parse_final_review(content, repository)
    assert str(caught.value) == "The final review has an unknown field at findings.0."
    without = finding()
    del without["suggestion"]
    review = parse_final_review(
        json.dumps({"summary": "s", "findings": [without], "notes": []}), repository
    )
    assert "suggestion" not in review.model_dump(mode="json")["findings"][0]


def test_off_the_schema_and_prompt_are_section_8s() -> None:
    assert final_review_schema() is FINAL_REVIEW_SCHEMA
    assert review_schema_json() == json.dumps(FINAL_REVIEW_SCHEMA, indent=2)
    assert "suggestion" not in review_schema_json()
    assert "suggestion" not in system_prompt()
    assert system_prompt() == system_prompt(suggestions=False)


def test_on_the_schema_and_prompt_offer_the_field() -> None:
    schema = final_review_schema(suggestions=True)
    items = schema["findings"] if "findings" in schema else schema["properties"]["findings"]
    properties = items["items"]["properties"]
    assert set(properties["suggestion"]["anyOf"][1]["properties"]) == {
        "start_line",
        "end_line",
        "replacement",
    }
    assert "suggestion" not in items["items"]["required"]
    assert "suggestion" not in FINAL_REVIEW_SCHEMA["properties"]["findings"]["items"]["properties"]
    prompt = system_prompt(suggestions=True)
    assert '"suggestion"' in prompt
    assert prompt.endswith(review_schema_json(suggestions=True))


def test_the_schema_command_follows_the_setting() -> None:
    runner = CliRunner()
    env = {"REVIEW_SUGGESTIONS": "true"}
    on = runner.invoke(main, ["schema", "review"], env=env, catch_exceptions=False)
    assert on.exit_code == 0
    assert json.loads(on.output) == final_review_schema(suggestions=True)
    off = runner.invoke(main, ["schema", "review"], env={"REVIEW_SUGGESTIONS": "false"})
    assert off.output == review_schema_json() + "\n"


def test_parses_past_the_reviews_budget_drop_the_suggestion(
    repository: PinnedRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(suggestions, "MAX_SYNTAX_CHECK_SECONDS", -1.0)
    review = parsed(
        repository,
        finding(suggestion=suggestion(2, 2, "    validate(user)  # first")),
        finding(suggestion=suggestion(3, 3, "    store(user)  # again"), line=3),
        finding(
            suggestion=suggestion(1, 1, "line one"), path="src/long.txt", line=1
        ),  # not parsed: kept
    )
    assert [f.offered() is None for f in review.findings] == [True, True, False]
    assert review.notes == ["kept", dropped_note(1, "syntax_time"), dropped_note(2, "syntax_time")]


def test_a_file_the_child_cannot_parse_drops_its_suggestions_only(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 256 KiB of one-letter lines: a tree of about 80 MB, past a 64 MiB address space.
    monkeypatch.setattr(syntax_process, "MAX_SYNTAX_CHECK_MEMORY", 64 * 1024 * 1024)
    base = repo.commit_files({"README": "x\n"})
    head = repo.commit_files({"src/dense.py": "a\n" * (128 * 1024), "src/service.py": SERVICE})
    review = parse_final_review(
        json.dumps(
            {
                "summary": "s",
                "findings": [
                    finding(suggestion=suggestion(1, 1, "b"), path="src/dense.py", line=1),
                    finding(suggestion=suggestion(2, 2, "    validate(user)  # first")),
                    finding(suggestion=suggestion(5, 5, "c"), path="src/dense.py", line=5),
                ],
                "notes": [],
            }
        ),
        PinnedRepository.open(repo.git_dir, base, head),
        suggestions=True,
    )
    assert [f.offered() is None for f in review.findings] == [True, False, True]
    assert review.notes == [dropped_note(1, "syntax_time"), dropped_note(3, "syntax_time")]


def test_the_syntax_proof_runs_on_a_worker_thread(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files({"src/service.py": "pass\n"})
    head = repo.commit_files({"src/service.py": SERVICE})
    threads: list[str] = []
    real = SyntaxProcess.errors

    def recording(process: SyntaxProcess, *args: Any) -> Counts:
        threads.append(threading.current_thread().name)
        return real(process, *args)

    monkeypatch.setattr(SyntaxProcess, "errors", recording)
    reply = {
        "summary": "s",
        "findings": [finding(suggestion=suggestion(2, 3, "    store(validate(user))"))],
    }
    model = ScriptedModel(stop_turn({**reply, "notes": []}))
    settings = load_settings(
        opencode_api_key="key", review_suggestions=True, pr_review_cache_dir=tmp_path / "c"
    )
    target = LocalTarget(repo.path, base, head)
    result = asyncio.run(run_review(target, settings, ReviewOptions(model=model)))
    assert result.review.findings[0].offered() is not None
    assert threads
    assert threading.main_thread().name not in threads


# Checks four files of dense code in a fresh interpreter and prints its peak RSS and its
# children's, in KiB, then how many suggestions were kept. Its own peak is VmHWM, the peak of
# its own address space: Linux carries ru_maxrss across exec, so that figure would include the
# forking test process (a pytest worker holding hundreds of megabytes after a long run).
_PEAK = """
import json, resource, sys
from pathlib import Path
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.loop.final_review import parse_final_review
git_dir, base, head, reply = sys.argv[1:]
repository = PinnedRepository.open(Path(git_dir), base, head)
review = parse_final_review(Path(reply).read_text(), repository, suggestions=True)
kept = sum(finding.offered() is not None for finding in review.findings)
status = Path("/proc/self/status").read_text().splitlines()
own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([own, children, kept, review.notes]))
"""


@pytest.mark.e2e
def test_the_memory_of_the_syntax_proof_is_bounded(repo: GitRepo, tmp_path: Path) -> None:
    # 256 KiB of one-letter lines parses to a tree of about 80 MB: four such files held at
    # once took over 300 MB in the review's own process (docs/performance.md; scaled down
    # from 14 MiB).
    dense = "a\n" * (128 * 1024)
    names = [f"src/dense{n}.py" for n in range(4)]
    base = repo.commit_files({"README": "x\n"})
    head = repo.commit_files(dict.fromkeys(names, dense))
    findings = [finding(suggestion=suggestion(10, 10, "b"), path=name, line=10) for name in names]
    reply = tmp_path / "reply.json"
    reply.write_text(json.dumps({"summary": "s", "findings": findings, "notes": []}))
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(repo.git_dir), base, head, str(reply)],
        capture_output=True,
        check=True,
    )
    own, children, kept, notes = json.loads(done.stdout)
    assert (kept, notes) == (4, [])  # every file parsed: none dropped for time or memory
    # An interpreter with the review's modules, and one file's text.
    assert own < 200 * 1024, (own, children)
    assert children <= MAX_SYNTAX_CHECK_MEMORY // 1024  # the child's limit held
