"""loop/workspace.py: preparing a review of a new head of a repository already read starts as
few git processes as it can (issue 39): fifty pull requests arriving at once onto one base each
pay only for what is new in them, and still see the same base files, read by the same rules.
"""

from __future__ import annotations

import pytest

from pr_review_api.git.store import RepositoryStore
from pr_review_api.loop.guidance import BASE_FILES, MAX_INSTRUCTION_FILE_BYTES, repository_guidance
from pr_review_api.loop.repo_config import load_repo_config, read_base_files
from pr_review_api.loop.review import same_tree
from pr_review_api.loop.workspace import LocalTarget, Prepared, prepare_local, with_repo_config
from tests.gitrepo import GitRepo, git, started_git

BASE = {
    ".pr-review.toml": 'instructions = "Base rule."\n',
    "AGENTS.md": "Agents rule.\n",
    # Longer than 16 KiB: cut, as the model always saw it.
    ".github/copilot-instructions.md": "c" * (MAX_INSTRUCTION_FILE_BYTES + 100),
    "app.py": "x = 1\n",
}


def _prepared(repo: GitRepo, base: str, head: str, store: RepositoryStore) -> Prepared:
    prepared = with_repo_config(prepare_local(LocalTarget(repo.path, base, head), store))
    assert not same_tree(prepared)
    return prepared


def test_a_new_head_onto_a_known_base_starts_four_git_processes(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files(BASE, "base")
    first = repo.commit_files({"app.py": "x = 2\n"}, "first")
    git(repo.path, "checkout", "-q", "-b", "other", base)
    second = repo.commit_files({"app.py": "x = 3\n", "new.py": "y = 1\n"}, "second")
    with RepositoryStore(threads=1) as store:
        warm = _prepared(repo, base, first, store)
        started = started_git(monkeypatch)
        prepared = _prepared(repo, base, second, store)
    # The git directory, the new pair's merge base, the head's index derived from the known
    # one, the changed files. The base's files, the commits' names and trees: none.
    assert sorted(argv[1:3] for argv in started) == [
        ["diff", "--name-status"],
        ["diff", "--raw"],
        ["merge-base", base],
        ["rev-parse", "--absolute-git-dir"],
    ], started
    assert prepared.context.changed_files == [("M", "app.py"), ("A", "new.py")]
    # The same text reaches the model as when every file is read afresh, without a store.
    instructions = prepared.context.repository_instructions
    assert instructions == warm.context.repository_instructions
    git_dir = prepared.repository.git_dir
    loaded = load_repo_config(git_dir, base)
    assert prepared.repo_config == loaded
    files = read_base_files(git_dir, base, BASE_FILES)
    assert instructions == repository_guidance(loaded.config, ["app.py", "new.py"], files)
    assert instructions is not None
    assert "Base rule." in instructions
    assert "Agents rule." in instructions
    assert instructions.endswith("[cut at 16 KiB]")


def test_a_head_with_the_tree_of_its_merge_base_has_nothing_to_review(repo: GitRepo) -> None:
    base = repo.commit_files(BASE, "base")
    empty = repo.commit_files({}, "no change")  # a commit of its own, the base's tree
    with RepositoryStore(threads=1) as store:
        for head in (empty, base):  # base: the head is the merge base itself
            prepared = with_repo_config(prepare_local(LocalTarget(repo.path, base, head), store))
            assert same_tree(prepared)
            assert prepared.context.changed_files == []
