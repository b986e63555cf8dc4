"""A real terminal for CLI tests: a private tmux server, its screen read with capture-pane."""

from __future__ import annotations

import builtins
import os
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import pytest

from tests.kit.waits import wait_until

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTH, HEIGHT = 120, 40


def needs_tmux() -> pytest.MarkDecorator:
    return pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One command in a 120x40 tmux window on a server of its own (`tmux -L NAME`)."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: Path) -> None:
        self.server = f"wa-test-{uuid.uuid4().hex[:10]}"
        self.env = {k: v for k, v in env.items() if k not in ("NO_COLOR", "TMUX")}
        self.env.setdefault("TERM", "xterm-256color")
        # The pane stays open after the command ends, showing its exit status.
        shell = f'{shlex.join(argv)}; echo "[exit $?]"; sleep 600'
        self._tmux(
            "new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-s", "t", shell, cwd=cwd
        )

    def _tmux(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.server, *args],
            env=self.env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        """Type `text` literally, then Enter."""
        self._tmux("send-keys", "-t", "t", "-l", text)
        self.keys("Enter")

    def screen(self, *, escapes: bool = False) -> str:
        """The visible screen and its scrollback; with `escapes`, colours as SGR sequences."""
        return self._tmux(
            "capture-pane", "-p", "-J", "-S", "-500", "-t", "t", *(["-e"] if escapes else [])
        )

    def cursor_row(self) -> int:
        """The cursor's row on the screen, 0 at the top."""
        return int(self._tmux("display-message", "-p", "-t", "t", "#{cursor_y}").strip())

    def wait_for(
        self, condition: Callable[[str], bool] | str, timeout: float = 20, *, escapes: bool = False
    ) -> str:
        """The screen once `condition` holds (a string: once it is on the screen)."""
        test = (lambda s: condition in s) if isinstance(condition, str) else condition
        screen = ""

        def shows() -> bool:
            nonlocal screen
            screen = self.screen(escapes=escapes)
            return test(screen)

        wait_until(
            shows,
            timeout,
            f"the screen to show {condition!r}" if isinstance(condition, str) else "the screen",
            every=0.05,
            details=lambda: f"the screen:\n{screen}",
        )
        return screen

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.server, "kill-server"],
            env=self.env,
            capture_output=True,
            timeout=10,
            check=False,
        )

    def __enter__(self) -> Tmux:
        return self

    def __exit__(
        self,
        exc_type: builtins.type[BaseException] | None,  # `type` here is Tmux.type
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI run: none of the developer's AGENT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env.update(extra)
    return env
