"""Headless Chromium for the browser tests: Debian's chromium, driven by playwright."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import FakeLLM
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from tests.kit.waits import SLOWNESS

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"  # screenshots the tests take
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# As root in a container, without the network: no sandbox, GPU, QUIC or background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def patience(seconds: float) -> float:
    """A playwright timeout in ms: `seconds` with room for a loaded machine (TEST_SLOWNESS)."""
    return seconds * 1000 * SLOWNESS


def new_context(browser: Any, **options: Any) -> Any:
    """A browser context whose every page waits up to 15 s × TEST_SLOWNESS for a condition
    (playwright's waits, clicks, fills and navigations)."""
    context = browser.new_context(**options)
    context.set_default_timeout(patience(15))
    return context


def require_chromium() -> Any:
    """playwright's sync API; skips the calling test module when Chromium or playwright is
    missing (call it at module level)."""
    if CHROMIUM is None:
        pytest.skip(
            "no Chromium on this machine (make test installs Debian's chromium where "
            "apt-get is allowed)",
            allow_module_level=True,
        )
    return pytest.importorskip("playwright.sync_api")


class SharedChromium:
    """One headless Chromium for every browser module of a pytest process: a launch (its
    driver and its browser) costs seconds on a loaded machine, thirty times over.

    Between its calls, sync playwright leaves its event loop marked as the thread's running
    one, and asyncio.run() refuses to start under it: `lend` marks it for a module's use and
    clears the mark after, so the modules between run as if no browser were open."""

    def __init__(self, playwright: Any) -> None:
        self._playwright = playwright
        self._driver: Any = None
        self._browser: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @contextlib.contextmanager
    def lend(self) -> Iterator[Any]:
        """The browser for one module (launched again if it went); the contexts it leaves
        are closed."""
        if self._loop is not None:
            asyncio._set_running_loop(self._loop)  # as playwright's last call left it
        try:
            if self._browser is None or not self._browser.is_connected():
                self._launch()
            yield self._browser
            for context in self._browser.contexts:
                context.close()
        finally:
            asyncio._set_running_loop(None)

    def _launch(self) -> None:
        self.close()
        self._driver = self._playwright.sync_playwright().start()
        self._loop = asyncio._get_running_loop()
        self._browser = self._driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def close(self) -> None:
        """Close the browser and its driver (at the end of the session)."""
        if self._driver is None:
            return
        asyncio._set_running_loop(self._loop)
        with contextlib.suppress(Exception):  # a browser that crashed is closed already
            self._browser.close()
        self._driver.stop()
        self._driver = self._browser = self._loop = None
        asyncio._set_running_loop(None)


def collect_errors(page: Any) -> list[str]:
    """The page's console errors and uncaught exceptions, as they happen."""
    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def send(page: Any, text: str) -> None:
    """Type a message in the composer and send it with Enter, once the page has started and
    connected (before, on a slow machine, Enter would only add a line to the box)."""
    page.wait_for_selector("#reconnect-banner[data-state]", state="attached")
    page.fill("#message-input", text)
    page.press("#message-input", "Enter")


AGENTS_LOADED = '[data-testid=agent-list] [data-agent="general"]'  # get_status has answered


def pick_agent(page: Any, name: str) -> None:
    """Choose the agent of the next message in the composer's picker, as a user does."""
    option = f'[data-testid=agent-list] [data-agent="{name}"]'
    page.wait_for_selector(option, state="attached")
    page.click("[data-testid=agent-button]")
    page.click(option)


def chosen_agent(page: Any) -> str | None:
    """The agent the composer's picker shows as chosen."""
    return page.get_attribute("#agent-control", "data-value")


Served = tuple[ServerProcess, FakeLLM, Path]  # the server, its fake model, its workspace


@contextlib.contextmanager
def open_page(
    browser: Any,
    served: Served,
    *,
    ready: list[str],
    setup: Callable[[Any], None] | None = None,
    tolerated: str | None = None,
    path: str = "/",
    **context_options: Any,
) -> Iterator[Any]:
    """The server's page at `path` (the workspace's by default) in a fresh browser context,
    once every `ready` selector shows.

    `setup(context)` runs before the page opens. Afterwards the page must have logged no
    console error (but those containing `tolerated`) and the fake must have no scripted
    reply left."""
    server, fake, _ = served
    context = new_context(browser, **context_options)
    if setup is not None:
        setup(context)
    page = context.new_page()
    errors = collect_errors(page)
    page.goto(f"{server.url}{path}?token={TOKEN}")
    for selector in ready:
        page.wait_for_selector(selector, state="attached")
    yield page
    context.close()
    left = fake.drop_script()  # not left to answer the next test's calls
    unexpected = [error for error in errors if tolerated is None or tolerated not in error]
    assert unexpected == [], unexpected
    assert left == 0, "a scripted reply was left unused"
