"""A headless Chromium driven through the DevTools protocol over a pipe, for the `/ui` tests
that must type into a form and click (which `--dump-dom` cannot do).

`--remote-debugging-pipe` makes Chromium read protocol messages from file descriptor 3 and
write its own to descriptor 4, each a JSON object ended by a NUL byte: no WebSocket library
is needed. One tab, attached in "flat" mode: commands carry its session id.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_ANSWER_DEADLINE_SECONDS = 60.0
_LOAD_DEADLINE_SECONDS = 60.0


class DevToolsError(AssertionError):
    """Chromium answered a command with an error, or went away."""


class Browser:
    """One tab of a headless Chromium; every request URL it sends is recorded."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int):
        self.process = process
        self._out = to_browser
        self._in = from_browser
        self._buffer = b""
        self._next_id = 0
        self.session = ""
        self.requested: list[str] = []  # every URL the page asked for, redirects included
        self._loaded = False

    def command(self, method: str, **params: Any) -> dict[str, Any]:
        """Send `method` to the tab (or to the browser before a tab is attached)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + _ANSWER_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            answer = self._receive()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
        raise DevToolsError(f"{method}: no answer")

    def open(self, url: str) -> None:
        """Go to `url` and wait until the page (after any redirect) has loaded."""
        self._loaded = False
        self.command("Page.navigate", url=url)
        self.wait_for_load()

    def wait_for_load(self) -> None:
        deadline = time.monotonic() + _LOAD_DEADLINE_SECONDS
        while not self._loaded and time.monotonic() < deadline:
            self._receive()
        if not self._loaded:
            raise DevToolsError("the page never finished loading")
        self._loaded = False

    def click(self, selector: str) -> None:
        """Click the element (a submit button: the form is sent, the next page loads)."""
        self._loaded = False
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")
        self.wait_for_load()

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field and type `text` as a keyboard would insert it."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.command("Input.insertText", text=text)

    def evaluate(self, expression: str) -> Any:
        """Run `expression` in the page (the protocol's, not a page script: no CSP applies)."""
        done = self.command("Runtime.evaluate", expression=expression, returnByValue=True)
        return done.get("result", {}).get("value")

    def location(self) -> str:
        return str(self.evaluate("location.href"))

    def html(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def cookies(self) -> list[dict[str, Any]]:
        cookies: list[dict[str, Any]] = self.command("Network.getCookies")["cookies"]
        return cookies

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._in, 65536)
            if not chunk:
                raise DevToolsError("Chromium closed its pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        method = message.get("method")
        if method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Network.requestWillBeSent":
            self.requested.append(message["params"]["request"]["url"])
        return message


def browser_environment(profile: Path) -> dict[str, str]:
    """The environment of a test's Chromium: its home and XDG folders inside its profile, so
    that nothing it writes (crash reports under ~/.config among them) lands in the user's home."""
    return {
        **os.environ,
        "HOME": str(profile),
        "XDG_CONFIG_HOME": str(profile / "config"),
        "XDG_CACHE_HOME": str(profile / "cache"),
    }


@contextmanager
def chromium(executable: str, profile: Path) -> Iterator[Browser]:
    """A headless Chromium with one blank tab, its page and network events enabled."""
    to_browser_read, to_browser = os.pipe()
    from_browser, from_browser_write = os.pipe()

    def child_descriptors() -> None:  # Chromium expects the pipe on descriptors 3 and 4
        os.dup2(to_browser_read, 3)
        os.dup2(from_browser_write, 4)

    process = subprocess.Popen(
        [
            executable,
            "--headless",
            "--no-sandbox",  # tests run as root in CI
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=browser_environment(profile),
        preexec_fn=child_descriptors,  # noqa: PLW1509 - only dup2, before exec
        pass_fds=(3, 4),  # kept open in the child: the dup2 targets above
    )
    os.close(to_browser_read)
    os.close(from_browser_write)
    browser = Browser(process, to_browser, from_browser)
    try:
        target = browser.command("Target.createTarget", url="about:blank")["targetId"]
        attached = browser.command("Target.attachToTarget", targetId=target, flatten=True)
        browser.session = attached["sessionId"]
        browser.command("Page.enable")
        browser.command("Network.enable")
        yield browser
    finally:
        os.close(to_browser)
        os.close(from_browser)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
