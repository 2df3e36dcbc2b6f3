"""The README's quick start, its own lines run as written (tests/quick_start.py reads them out
of the README): a fresh clone, `python3 -m venv`, pip installing uv into that venv, uv installing
the locked dependencies and running the review, then the tests.

Offline, as the whole suite: pip is served a wheel of the uv that runs this suite (no index),
uv reads the packages from the cache `uv sync` filled (UV_OFFLINE), the pull request is the
fake GitHub's and the model the scripted provider. The review's URL is the fake's, and the test
command runs one small test file instead of the suite: the commands are otherwise the README's.
The same two lines were run by hand, online, on a stock Debian 12 with only python3,
python3-venv and git (CHANGELOG.md records it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY, uv_cache_dir
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.quick_start import quick_start_commands

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "https://github.com/OWNER/REPO/pull/N"
REVIEW = {"summary": "One change, read.", "findings": [], "notes": []}


def uv_wheel(folder: Path) -> Path:
    """A wheel of the uv that runs this suite (`uv run` names it in UV): what pip would fetch
    from the index, its executable and its metadata."""
    uv = Path(os.environ.get("UV") or pytest.skip("run the suite with `uv run`, which sets UV"))
    binary = uv.resolve().read_bytes()
    version = subprocess.run(
        [str(uv), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    files = {
        f"uv-{version}.data/scripts/uv": binary,
        f"uv-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: uv\nVersion: {version}\n".encode()
        ),
        f"uv-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
        ),
    }
    record = [f"{name},sha256={digest(data)},{len(data)}" for name, data in files.items()]
    record.append(f"uv-{version}.dist-info/RECORD,,")
    files[f"uv-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"uv-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name)
            entry.external_attr = (stat.S_IFREG | 0o755) << 16  # pip keeps an executable
            archive.writestr(entry, data)
    return wheel


def digest(data: bytes) -> str:
    """A RECORD file's hash: urlsafe base64 of the SHA-256, without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fresh_machine(tmp_path: Path) -> dict[str, str]:
    """An environment with only `python3` (this interpreter), git and the system's tools on
    PATH, an empty HOME, pip without an index or the machine's pip configuration, and uv
    offline on the suite's cache."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    uv_wheel(wheels)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.executable).resolve())
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(tmp_path),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_OFFLINE": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": uv_cache_dir(),
    }


def run_line(line: str, clone: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_readmes_two_commands_review_and_test_in_a_fresh_clone(
    tmp_path: Path, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    review_line, test_line = quick_start_commands((ROOT / "README.md").read_text("utf-8"))
    clone = tmp_path / "pr-review"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    env = fresh_machine(tmp_path)
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "x = 0\n"}, head={"a.py": "x = 1\n"}
    )
    scripted_provider.script(stop_turn(json.dumps(REVIEW)))
    forge = {
        "GITHUB_SERVER_URL": fake_github.server_url,
        "GITHUB_API_URL": fake_github.api_url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "OPENCODE_BASE_URL": scripted_provider.base_url,
        "OPENCODE_API_KEY": PROVIDER_KEY,
    }

    assert PLACEHOLDER in review_line
    reviewed = run_line(review_line.replace(PLACEHOLDER, pull.url), clone, env | forge)
    assert reviewed.returncode == 0, reviewed.stderr[-3000:]
    assert "One change, read." in reviewed.stdout
    scripted_provider.assert_complete()
    assert (clone / ".uv" / "bin" / "uv").exists()  # uv came from pip, into the venv
    assert not (clone / ".venv" / "bin" / "pytest").exists()  # --no-dev: no test tools

    tested = run_line(f"{test_line} -q -n 0 tests/test_globs.py", clone, env)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout
    assert not git_status(clone)  # .uv/ and .venv/ are ignored: the clone stays clean


def git_status(clone: Path) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout


# --- on a stock Debian 12, online (slow) ---------------------------------------------------------

STOCK_PACKAGES = "python3,python3-venv,git"
# Inside the chroot, in a mount namespace of its own (the mounts vanish with it), as a new
# user with an empty home and nothing but the system's PATH.
IN_CHROOT = """
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/dev/shm"
exec chroot --userspec=newuser:newuser "$ROOT" /usr/bin/env -i HOME=/home/newuser \
    PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 $CERTS /bin/bash -c "cd ~/pr-review && $LINE"
"""


def in_stock_debian(root: Path, line: str) -> subprocess.CompletedProcess[str]:
    # A TLS-inspecting proxy's authority, when the host trusts one: pip and uv get the host's
    # bundle (Debian's own would not know it).
    certs = "PIP_CERT=/etc/ssl/host-ca.crt SSL_CERT_FILE=/etc/ssl/host-ca.crt"
    return subprocess.run(
        ["unshare", "--mount", "--fork", "bash", "-c", IN_CHROOT],
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "ROOT": str(root),
            "LINE": line,
            "CERTS": certs,
        },
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(
    os.geteuid() != 0 or not all(map(shutil.which, ("mmdebstrap", "unshare", "chroot"))),
    reason="needs root, mmdebstrap (apt-get install mmdebstrap) and Debian's mirror",
)
def test_the_readmes_two_commands_on_a_stock_debian_12(tmp_path: Path) -> None:
    """The README's lines, as written, on Debian 12 with only python3, python3-venv and git:
    the review runs (and stops for the key it was not given), the tests run (one file)."""
    review_line, test_line = quick_start_commands((ROOT / "README.md").read_text("utf-8"))
    root = tmp_path / "root"
    base = ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={STOCK_PACKAGES}"]
    subprocess.run(
        [*base, "bookworm", str(root)],
        check=True,
        timeout=1800,
    )
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", root / "etc" / "ssl" / "host-ca.crt")
    subprocess.run(["chroot", str(root), "useradd", "-m", "newuser"], check=True)
    clone = root / "home" / "newuser" / "pr-review"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    subprocess.run(["chroot", str(root), "chown", "-R", "newuser:", "/home/newuser"], check=True)

    reviewed = in_stock_debian(root, review_line)
    assert reviewed.returncode == 2, reviewed.stderr[-3000:]
    assert reviewed.stderr.rstrip().endswith(
        "error: OPENCODE_API_KEY is not set: export it or put it in .env in this folder. "
        "(configuration_error)"
    )
    tested = in_stock_debian(root, f"{test_line} -q -n 0 tests/test_globs.py")
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout
