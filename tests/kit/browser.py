"""Headless Chromium for the browser tests: Debian's chromium, driven by playwright."""

from __future__ import annotations

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


@contextlib.contextmanager
def chromium(playwright: Any) -> Iterator[Any]:
    """A launched headless Chromium, closed afterwards."""
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


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
    **context_options: Any,
) -> Iterator[Any]:
    """The workspace page in a fresh browser context, once every `ready` selector shows.

    `setup(context)` runs before the page opens. Afterwards the page must have logged no
    console error (but those containing `tolerated`) and the fake must have no scripted
    reply left."""
    server, fake, _ = served
    context = new_context(browser, **context_options)
    if setup is not None:
        setup(context)
    page = context.new_page()
    errors = collect_errors(page)
    page.goto(f"{server.url}/?token={TOKEN}")
    for selector in ready:
        page.wait_for_selector(selector, state="attached")
    yield page
    context.close()
    left = fake.drop_script()  # not left to answer the next test's calls
    unexpected = [error for error in errors if tolerated is None or tolerated not in error]
    assert unexpected == [], unexpected
    assert left == 0, "a scripted reply was left unused"
