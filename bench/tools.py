"""read_repository_file and inspect_git_diff, per call, against the git command each wraps.

References, measured in this run: `git cat-file blob <head>:<path>` for a read (one process,
the whole blob), and `git diff <merge-base> <head> [-- path]` for the diff. The file read is
the largest the change modifies (else the largest it adds, else the largest at the head).

    uv run python -m bench.tools [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV]
"""

from __future__ import annotations

from functools import partial

from bench.common import (
    Report,
    median_seconds,
    open_pinned,
    parser,
    repository_for,
    run_quietly,
    runs_for,
    sample_file,
)
from pr_review_api.tools import (
    DiffArguments,
    ReadFileArguments,
    inspect_git_diff,
    read_repository_file,
)


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=21, quick=5)
    pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
    # The largest changed file: a read of 400 lines is a full page.
    path = sample_file(pinned)
    total = read_repository_file(pinned, ReadFileArguments(path=path))["total_lines"]
    middle = max(1, total // 2)
    report = Report(f"read_repository_file and inspect_git_diff per call ({repo.describe()})", [])

    cat_file = median_seconds(
        partial(run_quietly, ["git", "cat-file", "blob", f"{repo.head_sha}:{path}"], repo.git_dir),
        runs,
    )
    for label, arguments in (
        ("read, first 400 lines of a changed file", ReadFileArguments(path=path)),
        (
            "read, 60 lines from the middle",
            ReadFileArguments(path=path, start_line=middle, end_line=middle + 60),
        ),
    ):
        ours = median_seconds(partial(read_repository_file, pinned, arguments), runs)
        report.add(label, ours, "git cat-file blob", cat_file)

    base = pinned.revisions.merge_base_sha
    for label, paths in (("diff, whole pull request", []), ("diff, one path", [path])):
        reference = median_seconds(
            partial(run_quietly, ["git", "diff", base, repo.head_sha, "--", *paths], repo.git_dir),
            runs,
        )
        ours = median_seconds(partial(inspect_git_diff, pinned, DiffArguments(paths=paths)), runs)
        report.add(label, ours, "git diff", reference)
    report.print()


if __name__ == "__main__":
    main()
