"""Run a command as the terminal's foreground process group, so that Ctrl-C reaches it alone.

make runs a recipe in make's own process group: a Ctrl-C at the agent's prompt, which the agent
handles, reaches make too, and make then ends with "make: *** [demo] Interrupt" however the
agent ends. In a group of its own that holds the terminal, the command gets Ctrl-C alone and
make only sees its exit status. Ctrl-Z stops the command and make together, and `fg` resumes
both. Without a terminal the command just runs.

Usage: python scripts/foreground.py COMMAND [ARG...]
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def _hand_terminal(tty: int, group: int) -> None:
    """Make `group` the terminal's foreground group (a background caller would get SIGTTOU)."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(tty, group)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def run(argv: list[str]) -> int:
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
        ours = os.tcgetpgrp(tty)
    except OSError:
        os.execvp(argv[0], argv)  # no terminal: nothing to take
    if ours != os.getpgrp():  # started in the background: leave the terminal alone
        os.execvp(argv[0], argv)
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        _hand_terminal(tty, os.getpgrp())
        os.close(tty)
        os.execvp(argv[0], argv)
    with contextlib.suppress(OSError):  # also here: no race with the child's own call
        os.setpgid(child, child)
    _hand_terminal(tty, child)
    try:
        while True:
            _, status = os.waitpid(child, os.WUNTRACED)
            if not os.WIFSTOPPED(status):
                code = os.waitstatus_to_exitcode(status)
                return code if code >= 0 else 128 - code  # killed by a signal: as a shell says
            _hand_terminal(tty, ours)  # Ctrl-Z: stop with it, as one job, until `fg`
            os.kill(0, signal.SIGSTOP)
            _hand_terminal(tty, child)
            os.killpg(child, signal.SIGCONT)
    finally:
        _hand_terminal(tty, ours)
        os.close(tty)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(run(sys.argv[1:]))
