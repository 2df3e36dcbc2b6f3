"""Dismissals and fixed threads on a GitLab merge request, end to end (specification §§15, 17): the
CLI's `review --post` on a first head, then on a new head, against the fake GitLab (notes,
discussions, awards, members, resolution with GitLab's rules), real git and the scripted
provider. A Developer's `thumbsdown` or `ignore` reply suppresses the finding on the re-review,
a Guest's does not; the discussion whose line changed and whose finding is gone is resolved,
one whose line did not change is not, one still reported is not. In the service, a Developer's
`thumbsdown` is stored for the project (`gitlab:group/project`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from pathlib import Path

import pytest

from pr_review_api.forge.base import DismissalQuery
from pr_review_api.forge.gitlab import GitLabForge
from tests.conftest import GITLAB_TOKEN
from tests.environment import Environment
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_threads import FakeThreads
from tests.fakes.provider_server import ScriptedProvider
from tests.fakes.provider_server import stop_turn as provider_stop_turn
from tests.forge.test_gitlab import ADDED, BASE, BOT, CONTEXT, IID, PATH, SETTINGS, review_cli
from tests.gitlab.discussions import BOT_ID, client_of, ref_of, started

pytestmark = pytest.mark.e2e

HEAD = {"src/service.py": "def save(w):\n    db.write(w)\n    validate(w)\n    return w\n"}
FIXED = {
    "src/service.py": "def save(w):\n    db.write(w)\n    validate(w, strict=True)\n    return w\n"
}
WRITE = {**ADDED, "severity": "medium", "title": "Unchecked write", "line": 2}
FIRST = {"summary": "Three problems.", "findings": [ADDED, CONTEXT, WRITE], "notes": []}
SECOND = {"summary": "One problem.", "findings": [WRITE], "notes": []}
DEV, GUEST = ("dev", 51), ("guest", 53)


def merge_request(fake: FakeGitLab, threads: FakeThreads) -> MergeRequestFixture:
    fake.users[GITLAB_TOKEN] = BOT
    mr = fake.merge_request(PATH, IID, base=BASE, head=HEAD, private=True)
    threads.members.add(PATH, user_id=BOT_ID, username=BOT, level=30)
    threads.members.add(PATH, user_id=DEV[1], username=DEV[0], level=30)
    threads.members.add(PATH, user_id=GUEST[1], username=GUEST[0], level=10)
    return mr


def push_new_head(fake: FakeGitLab, mr: MergeRequestFixture) -> str:
    """The author pushes a commit that rewrites line 3 (the added line's finding fixed)."""
    head = mr.project.commit(FIXED, mr.head_sha, "fix")
    mr.project.set_merge_request_head(IID, head)
    document = fake.documents[(mr.project.id, IID)]
    document["sha"] = head
    document["diff_refs"] = {**document["diff_refs"], "head_sha": head}
    return head


@pytest.mark.parametrize(
    "dismissal",
    [("thumbsdown", DEV[0], 1), ("ignore", DEV[0], 1), ("thumbsdown", GUEST[0], 0)],
)
def test_a_re_review_suppresses_dismissed_findings_and_resolves_fixed_threads(
    fake_gitlab: FakeGitLab,
    fake_gitlab_threads: FakeThreads,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    dismissal: tuple[str, str, int],
    environment: Environment,
) -> None:
    how, who, suppressed = dismissal  # (the way, by whom, suppressed on the re-review)
    threads, notes = fake_gitlab_threads, fake_gitlab_threads.notes
    mr = merge_request(fake_gitlab, threads)
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    scripted_provider.script(provider_stop_turn(FIRST))
    first = review_cli(mr)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["publication"]["inline_comments"] == 3
    assert threads.award_reads == []  # a first review reads no dismissal
    by_title = {n.body.split("\n", 1)[0]: n for n in notes.discussions(PATH, IID)}
    added, context, write = (
        by_title[f"**{f['severity']}** · {f['title']}"] for f in (ADDED, CONTEXT, WRITE)
    )
    if how == "thumbsdown":
        threads.award(write.id, "thumbsdown", who)
    else:
        notes.reply(PATH, IID, write.discussion_id or "", "/pr-review ignore", who)
    push_new_head(fake_gitlab, mr)
    scripted_provider.script(provider_stop_turn(SECOND))
    second = review_cli(mr)
    assert second.exit_code == 0, second.output
    publication = json.loads(second.stdout)["publication"]
    assert publication["status"] == "published"
    assert publication["suppressed"] == suppressed
    assert publication["duplicates_skipped"] == 1 - suppressed  # posted before, not dismissed
    assert publication["resolved"] == 1
    assert threads.resolutions == [(added.discussion_id, BOT, True)]
    resolved = {n.id for n in notes.of(PATH, IID) if n.resolved_by is not None}
    assert added.id in resolved
    assert not {context.id, write.id} & resolved
    # The awards read: our findings' first notes only, each at most once, within the budget.
    assert set(threads.award_reads) <= {added.id, context.id, write.id}
    assert len(threads.award_reads) == len(set(threads.award_reads))


class DictDismissals:
    """A `DismissedFindings` in memory."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], tuple[str, str | None, str]] = {}

    async def fingerprints(self, repository: str) -> set[str]:
        return {f for r, f in self.stored if r == repository}

    async def titles(self, repository: str, paths: Collection[str]) -> list[str]:
        return [t for (r, _), (t, p, _) in self.stored.items() if r == repository and p in paths]

    async def dismiss(
        self, repository: str, fingerprint: str, title: str, path: str | None, by: str
    ) -> None:
        self.stored.setdefault((repository, fingerprint), (title, path, by))


def test_the_service_stores_a_developers_thumbsdown_for_the_project(
    fake_gitlab: FakeGitLab, fake_gitlab_threads: FakeThreads, tmp_path: Path
) -> None:
    threads = fake_gitlab_threads
    fake_gitlab.merge_request("grp/sub/project", 3)
    threads.members.add("grp/sub/project", user_id=DEV[1], username=DEV[0], level=30)
    threads.members.add("grp/sub/project", user_id=GUEST[1], username=GUEST[0], level=10)
    kept, ignored = "ab" * 16, "cd" * 16
    threads.award(started(threads.notes, kept, title="Kept \\<b\\>").id, "thumbsdown", DEV[0])
    threads.award(started(threads.notes, ignored).id, "thumbsdown", GUEST[0])
    dismissals = DictDismissals()
    dismissals.stored[("gitlab:grp/sub/project", "ef" * 16)] = ("Earlier", "b.py", "dev")

    async def scenario() -> Collection[str]:
        async with client_of(fake_gitlab, tmp_path) as client:
            forge = GitLabForge(client.settings, client)
            info = ref_of(fake_gitlab).info
            asked = DismissalQuery(info, dismissals, None, reviewed_before=False, has_findings=True)
            return await forge.dismissed(asked)

    assert set(asyncio.run(scenario())) == {kept, "ef" * 16}
    assert dismissals.stored[("gitlab:grp/sub/project", kept)] == ("Kept <b>", "a.py", DEV[0])
