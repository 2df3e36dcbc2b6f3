"""Issues on the fake GitHub: `GET /repos/{owner}/{repo}/issues/{number}`, as GitHub answers it.

Every pull request is an issue there: a pull request's number answers an issue document with a
`pull_request` key (`url`, `html_url`, `diff_url`, `patch_url`, `merged_at`). An issue of a
repository in `FakeGitHub.hidden_repos` answers 404 (GitHub hides a private repository from a
token that may not read it), and so does a number that names nothing. `body` is null when empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.forge_server import RecordedRequest
    from tests.fakes.github_server import FakeGitHub, _Handler


def issues(fake: FakeGitHub, handler: _Handler, record: RecordedRequest, pieces: list[str]) -> bool:
    """Answer an issue's GET; False when the path is not one."""
    if len(pieces) != 6 or pieces[1] != "repos" or pieces[4] != "issues":
        return False
    if handler.command != "GET" or not pieces[5].isdigit():
        return False
    owner, repo, number = pieces[2], pieces[3], int(pieces[5])
    fake.issue_reads.append((owner, repo, number))
    key = (owner.lower(), repo.lower(), number)
    hidden = (owner.lower(), repo.lower()) in fake.hidden_repos
    found = fake.issues.get(key)
    pull = fake.pulls().get(key)
    if hidden or (found is None and pull is None):
        handler.send_json(record, 404, {"message": "Not Found", "status": "404"})
        return True
    api = f"{fake.api_url}/repos/{owner}/{repo}"
    document: dict[str, Any] = {
        "id": 7000 + number,
        "number": number,
        "url": f"{api}/issues/{number}",
        "html_url": f"{fake.server_url}/{owner}/{repo}/issues/{number}",
        "state": "open",
        "user": {"login": "octocat", "id": 1},
    }
    if found is not None:
        document |= {"title": found[0], "body": found[1] or None}
    else:
        document |= {
            "title": "A change",
            "body": "Please review.",
            "pull_request": {
                "url": f"{api}/pulls/{number}",
                "html_url": f"{fake.server_url}/{owner}/{repo}/pull/{number}",
                "diff_url": f"{fake.server_url}/{owner}/{repo}/pull/{number}.diff",
                "patch_url": f"{fake.server_url}/{owner}/{repo}/pull/{number}.patch",
                "merged_at": None,
            },
        }
    handler.send_json(record, 200, document)
    return True
