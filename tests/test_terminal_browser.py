"""The person's terminal in the page, in a real headless Chromium on the real server (the local
sandbox under bubblewrap, a bash on a PTY in the conversation's session) and the fake model: typed
keys echo; the person curls the server the agent started in the background; a resize of the
window changes `stty size`; a reload attaches again and shows the scrollback; two terminals are
independent, and each conversation shows its own (another one opens none by itself); a 24-bit
colour shows; Send to agent fills the composer and sends nothing; on a phone the key row sends
Ctrl-C and the arrows; the processes panel lists the terminal with what runs in it. The page's
Content-Security-Policy holds throughout: a refused inline style is a console error, which fails
the test (tests/kit/browser.py open_page)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from tests.fake_llm import Call, Reply
from tests.kit.browser import Served, open_page, send
from tests.kit.waits import wait_until

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
READY = ["#reconnect-banner[data-state=connected]"]
SCREEN = "[data-testid=terminal-screen]:not([hidden])"
WAIT = 30

pytestmark = [
    pytest.mark.usefixtures("in_bubblewrap"),
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.server(
        env={"AGENT_SANDBOX": "local"}, files={"site/marker.txt": "served-by-the-agent\n"}
    ),
]


def start_conversation(page: Any, served: Served, *calls: Call) -> None:
    """A first message makes the conversation (the agent runs `calls`), then the panel opens."""
    served[1].script(*([Reply(tool_calls=list(calls))] if calls else []), Reply(content="Done."))
    send(page, "start")
    page.wait_for_selector(".assistant-message:has-text('Done.')", state="attached")
    page.click("[data-testid=terminal-toggle]")
    shows(page, "$")  # the shell's prompt


def screen(page: Any) -> str:
    """The rows the shown terminal shows."""
    return str(page.locator(f"{SCREEN} .xterm-rows").inner_text())


def flat(page: Any) -> str:
    """The rows as one line: a long line the terminal wraps is whole again."""
    return screen(page).replace("\n", "")


def shows(page: Any, text: str) -> None:
    wait_until(lambda: text in flat(page), WAIT, f"{text!r} in the terminal",
               details=lambda: screen(page)[-600:])  # fmt: skip


def type_in(page: Any, text: str) -> None:
    """Keys typed into the shown terminal, as a person types them."""
    page.click(SCREEN)
    page.keyboard.type(text)


def run(page: Any, command: str, marker: str) -> None:
    """Type `command` (which prints `marker`) and wait for its output."""
    type_in(page, command + "\n")
    shows(page, marker)


def stty_size(page: Any, tag: str) -> tuple[int, int]:
    """The shell's terminal size (rows, columns), as `stty size` says it."""
    type_in(page, f"echo {tag}=$(stty size | tr ' ' x)=\n")
    said = re.compile(rf"^{tag}=(\d+)x(\d+)=$", re.MULTILINE)
    found = wait_until(lambda: said.search(screen(page)), WAIT, "the size")
    return int(found[1]), int(found[2])


def test_the_terminal_beside_the_agents_server(browser: Any, served: Served) -> None:
    server_cmd = "cd site && exec python3 -m http.server 8765 --bind 127.0.0.1"
    with open_page(browser, served, ready=READY, viewport=DESKTOP) as page:
        start_conversation(
            page, served, Call("run_command", {"command": server_cmd, "background": True})
        )
        assert page.is_hidden("[data-testid=terminal-keys]"), "the key row is a phone's"
        run(page, "echo hi-$((6*7))", "hi-42")
        type_in(page, "curl -s --retry 20 --retry-connrefused http://127.0.0.1:8765/marker.txt\n")
        shows(page, "served-by-the-agent")

        before = stty_size(page, "one")
        page.set_viewport_size({"width": 1000, "height": 700})
        tries = itertools.count()
        wait_until(lambda: stty_size(page, f"two{next(tries)}") != before, WAIT, "a new size")
        rows, cols = stty_size(page, "three")
        assert rows < before[0] and cols < before[1], (before, rows, cols)

        calls = len(served[1].chat_requests)
        page.click("[data-testid=terminal-send]")
        box = page.input_value("#message-input")
        assert "served-by-the-agent" in box and box.startswith("```"), box
        assert page.is_enabled("[data-testid=send-button]")
        assert len(served[1].chat_requests) == calls, "nothing went to the model"
        page.fill("#message-input", "")

        page.reload()
        page.wait_for_selector(f"{SCREEN} .xterm-rows", state="attached")
        shows(page, "three=")
        run(page, "echo back-$((1+1))", "back-2")


def test_two_terminals_are_independent_and_follow_their_conversation(
    browser: Any, served: Served
) -> None:
    with open_page(browser, served, ready=READY, viewport=DESKTOP) as page:
        start_conversation(page, served)
        run(page, "FIRST=only-here; echo set-$FIRST", "set-only-here")
        run(page, r"printf '\e[38;2;255;0;0mRED%s\e[0m\n' -24", "RED-24")  # a 24-bit colour
        red = f"{SCREEN} .xterm-rows span:text-is('RED-24')"
        colour = page.eval_on_selector(red, "cell => getComputedStyle(cell).color")
        assert colour == "rgb(255, 0, 0)", "a cell's style is refused by the CSP"
        first = page.get_attribute(SCREEN, "data-terminal")
        page.click("[data-testid=terminal-new]")
        wait_until(lambda: page.get_attribute(SCREEN, "data-terminal") not in (None, first),
                   WAIT, "the second terminal")  # fmt: skip
        second = page.get_attribute(SCREEN, "data-terminal")
        run(page, "echo second-${FIRST:-unset}", "second-unset")
        assert "set-only-here" not in screen(page)

        page.click(f'.terminal-tab[data-terminal="{first}"] .terminal-tab-name')
        shows(page, "set-only-here")
        assert "second-unset" not in screen(page)
        page.click(f'.terminal-tab[data-terminal="{second}"] [data-testid=terminal-close]')
        page.wait_for_selector(f'.terminal-tab[data-terminal="{second}"]', state="detached")
        assert page.get_attribute(SCREEN, "data-terminal") == first

        cid = page.evaluate("decodeURIComponent(location.hash.slice(3))")  # #c=CID
        page.click("[data-testid=new-conversation]")
        page.wait_for_selector("[data-testid=terminal-error]:has-text('send a first message')")
        assert page.locator("[data-testid=terminal-screen]").count() == 0
        page.click(f'.conv-item[data-conversation-id="{cid}"]')
        shows(page, "set-only-here")  # attached again, with its scrollback
        assert page.locator("[data-testid=terminal-screen]").count() == 1


def test_the_processes_panel_lists_the_terminal_with_what_runs_in_it(
    browser: Any, served: Served
) -> None:
    with open_page(browser, served, ready=READY, viewport=DESKTOP) as page:
        start_conversation(page, served)
        run(page, "echo waiting-$((2*5)); sleep 302", "waiting-10")
        page.reload()  # the panel lists the conversation's processes as it opens
        row = "#processes-panel [data-kind=terminal][data-state=running]"
        page.wait_for_selector(f"{row} [data-role=state]:text('running sleep 302')")
        assert page.text_content(f"{row} .process-command") == "Your terminal"
        assert page.locator(f"{row} button").count() == 0  # neither stopped nor restarted here


def test_on_a_phone_the_key_row_sends_ctrl_c_and_arrows(browser: Any, served: Served) -> None:
    with open_page(
        browser, served, ready=READY, viewport=PHONE, is_mobile=True, has_touch=True
    ) as page:
        start_conversation(page, served)
        keys = page.locator("[data-testid=terminal-keys]")
        assert keys.is_visible()
        width = page.evaluate("document.documentElement.clientWidth")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= width

        run(page, "sleep 100; echo slept-$((2*3))", "sleep 100")
        keys.locator("[data-key=Ctrl]").tap()
        assert keys.locator("[data-key=Ctrl]").get_attribute("aria-pressed") == "true"
        page.keyboard.type("c")
        run(page, "echo status-$?", "status-130")
        assert "slept-6" not in flat(page)

        run(page, "echo arrow-$((3+4))", "arrow-7")
        keys.locator("[data-key=Up]").tap()
        keys.locator("[data-key=Left]").tap()
        keys.locator("[data-key=Left]").tap()
        page.keyboard.type("0")
        page.keyboard.press("Enter")
        shows(page, "arrow-43")
