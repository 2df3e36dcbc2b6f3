"""The suggestion check's case for `bench.syntax --review`: the memory of a review's syntax
proof, and a deadline that holds after the input is read (see bench/syntax.py)."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path

from tests.fakes.provider_server import RecordedRequest, Responder, Scripted, stop_turn

from bench.common import git, git_text
from bench.harness import scripted_provider
from bench.oneshot import child_env, cli_command
from pr_review_api.loop.syntax import ParseTooSlow, syntax_errors
from pr_review_api.loop.syntax_process import SyntaxProcess
from pr_review_api.settings import MAX_SOURCE_FILE_BYTES

FILES = 14
SUGGESTED_LINE = 101
# 1 MiB of JavaScript array: seconds of parsing, most of them after the last byte is read.
SLOW_JAVASCRIPT = b"var x = [" + b"1," * (512 * 1024 - 8) + b"];\n"


def one_mib(source: bytes, number: int) -> bytes:
    """`source` under a first line that tells the files apart, cut at a line within 1 MiB."""
    data = f"# file {number}\n".encode() + source
    return data[: data.rfind(b"\n", 0, MAX_SOURCE_FILE_BYTES) + 1]


def changed_repository(root: Path, source: bytes) -> tuple[Path, str, str]:
    """A repository whose head adds FILES files of 1 MiB of `source`: (path, base, head)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("bench\n")
    git(root, "add", "README")
    git(root, "commit", "-q", "-m", "base")
    base = git_text(root, "rev-parse", "HEAD")
    for number in range(FILES):
        (root / f"big{number}.py").write_bytes(one_mib(source, number))
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "head")
    return root, base, git_text(root, "rev-parse", "HEAD")


def final_review(root: Path, suggestions: bool) -> dict[str, object]:
    """One finding a file, each with a suggestion that appends a comment to a line (without
    the setting, the same findings without the field, as the schema then requires)."""
    findings = []
    for number in range(FILES):
        lines = (root / f"big{number}.py").read_text().split("\n")
        line = lines[SUGGESTED_LINE - 1]
        suggestion = {
            "start_line": SUGGESTED_LINE,
            "end_line": SUGGESTED_LINE,
            "replacement": f"{line}  # checked",
        }
        findings.append(
            {
                "severity": "low",
                "title": "A line to comment",
                "explanation": "bench",
                "path": f"big{number}.py",
                "line": SUGGESTED_LINE,
                "evidence": "bench",
                "recommendation": "bench",
                **({"suggestion": suggestion} if suggestions else {}),
            }
        )
    return {"summary": "bench", "findings": findings, "notes": []}


def replying(reply: Scripted) -> Responder:
    """A responder that answers every request with `reply`."""

    def respond(_request: RecordedRequest) -> Scripted:
        return reply

    return respond


def _tree_rss_kib(root_pid: int) -> int:
    """The summed VmRSS of a process and its descendants, in KiB (0 once it is gone)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        parents[int(entry.name)] = int(fields.get("PPid", "0"))
        rss[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, pending = 0, [root_pid]
    while pending:
        pid = pending.pop()
        total += rss.get(pid, 0)
        pending.extend(child for child, parent in parents.items() if parent == pid)
    return total


def run_review(root: Path, base: str, head: str, suggestions: bool, url: str) -> str:
    """One `pr-review review --repo` process: its peak RSS and what it kept, as a line."""
    env = child_env(url, root.parent / "cache", root.parent)
    env["REVIEW_SUGGESTIONS"] = "true" if suggestions else "false"
    argv = [*cli_command(), "review", "--repo", str(root), "--base", base, "--head", head]
    output = root.parent / "review.json"
    started = time.perf_counter()
    with output.open("wb") as sink:
        pid = os.posix_spawn(
            argv[0],
            [*argv, "--format", "json"],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, sink.fileno(), 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
        peak = 0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _tree_rss_kib(pid))
                done.wait(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        _, status, usage = os.wait4(pid, 0)
        done.set()
        sampler.join()
    wall = time.perf_counter() - started
    review = json.loads(output.read_text() or "{}").get("review") or {}
    findings = review.get("findings", [])
    kept = sum(1 for finding in findings if finding.get("suggestion"))
    return (
        f"suggestions {'on ' if suggestions else 'off'}: exit {os.waitstatus_to_exitcode(status)}, "
        f"peak RSS of the process tree {peak / 1024:.0f} MB, of its largest process "
        f"{usage.ru_maxrss / 1024:.0f} MB; {len(findings)} findings, {kept} suggestions kept, "
        f"{len(review.get('notes', []))} notes; {wall:.1f} s"
    )


def review_memory(stdlib: bytes) -> None:
    """The suggestion check's case with each kind of 1 MiB Python file, suggestions on and off."""
    kinds = {"standard library": stdlib, "one-letter lines": b"a\n" * (512 * 1024)}
    for kind, source in kinds.items():
        with tempfile.TemporaryDirectory(prefix="pr-review-bench-syntax-") as scratch:
            root, base, head = changed_repository(Path(scratch) / "repo", source)
            print(f"{FILES} changed files of 1 MiB of Python ({kind}):")
            for suggestions in (True, False):
                reply = stop_turn(final_review(root, suggestions))
                with scripted_provider(replying(reply)) as provider:
                    print("  " + run_review(root, base, head, suggestions, provider.base_url))


def slow_javascript() -> None:
    """The 1 MiB JavaScript array with a 1 s budget, in this process and in the child."""
    started = time.monotonic()
    try:
        syntax_errors("javascript", SLOW_JAVASCRIPT, started + 1.0)
        outcome = "parsed"
    except ParseTooSlow:
        outcome = "stopped"
    print(
        f"1 MiB JavaScript, 1 s budget, in process: {outcome} after "
        f"{time.monotonic() - started:.2f} s"
    )
    started = time.monotonic()
    with SyntaxProcess(started + 1.0) as parser:
        counts = parser.errors("javascript", SLOW_JAVASCRIPT, [])
    print(
        f"1 MiB JavaScript, 1 s budget, child process: {counts[0]} errors (None: stopped) "
        f"after {time.monotonic() - started:.2f} s"
    )
    started = time.monotonic()
    errors = syntax_errors("javascript", SLOW_JAVASCRIPT)
    print(f"the same without a budget: {errors} errors in {time.monotonic() - started:.2f} s")
