"""The terminal session: `-p` runs one task; the interactive loop reads prompts and the slash
commands in HELP (`/status`, `/undo`, `/mcp`, ...)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Protocol, TextIO, TypeVar

from cli.commands import COMMANDS
from cli.painter import BOLD, YELLOW
from cli.printer import PROMPT
from cli.terminal import CliTerminal
from protocol.events import DoneReason
from utils.disk import DiskFull
from utils.errors import AgentError, NotConfigured, NotFound

EXIT_CODES: dict[DoneReason, int] = {
    "complete": 0,
    "error": 1,
    "max_iterations": 3,
    "cancelled": 130,
    "budget": 5,
    "loop": 6,
    "interrupted": 1,  # the server stopped while the task ran (cli --server)
}
EXIT_DECLINED = 4  # `-p`: the task ended, but without an action it needed


def demo_banner(terminal: CliTerminal) -> str:
    """The line saying the demo model answers, with what to try; "" for a real model."""
    if terminal.services.provider.name != "demo":
        return ""
    from model.demo_scripts import demo_suggestions

    head = terminal.printer.paint("DEMO", YELLOW, BOLD)
    return (
        f"{head} · a scripted model plays a few tasks: no API key, no network; the tools "
        f"are real and work on this workspace.\nTry: {' · '.join(demo_suggestions())}\n"
    )


SET_IT_HERE = "Or set it here: /config api_key KEY (and /model NAME); no restart needed."
TRY_THE_DEMO = (
    "No key yet? `make demo DEMO_FRONT=cli` tries a scripted model on a sample workspace "
    "(no key, no network; `make demo` for the page)."
)


def run_once(terminal: CliTerminal, prompt: str) -> int:
    """`main.py cli -p`: one task, then an exit code and a one-line reason on failure."""
    if not terminal.json_mode:
        terminal.err.write(demo_banner(terminal))
    try:
        reason = terminal.run_foreground(prompt)
    except NotFound as exc:  # an unknown skill or agent
        terminal.err.write(f"error: {exc}\n")
        return 2
    except NotConfigured as exc:
        terminal.err.write(f"error: {exc}\n{TRY_THE_DEMO}\n")
        return 2
    except DiskFull as exc:  # the message was not kept
        terminal.err.write(f"error: {exc.code}: {exc}\n")
        return EXIT_CODES["error"]
    return task_exit(terminal, reason)


class TaskOutcome(Protocol):
    """What a terminal (local or remote) knows of its last task, for `-p`'s exit."""

    err: TextIO
    declined: list[str]
    last_error: str

    @property
    def conversation_id(self) -> str | None: ...

    @property
    def iteration(self) -> int: ...


def task_exit(terminal: TaskOutcome, reason: DoneReason) -> int:
    """`-p`'s last lines (the conversation, and why the task failed) and its exit code."""
    terminal.err.write(f"conversation: {terminal.conversation_id}\n")
    if reason == "complete" and terminal.declined:
        terminal.err.write(f"error: declined: {'; '.join(terminal.declined)}\n")
        return EXIT_DECLINED
    if reason != "complete":
        detail = {
            "error": terminal.last_error or "the task failed",
            "max_iterations": f"stopped after {terminal.iteration} model calls, the agent's "
            "max_iterations",
            "cancelled": "cancelled",
            "budget": terminal.last_error or "stopped: a budget is used up",
            "loop": terminal.last_error or "stopped: the model repeated itself",
            "interrupted": terminal.last_error or "the server stopped while the task ran",
        }[reason]
        terminal.err.write(f"error: {detail}\n")
    return EXIT_CODES[reason]


def repl(terminal: CliTerminal) -> int:
    """The interactive session."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    provider = terminal.services.provider
    # The model client (the `openai` import) is built while the first prompt is typed.
    threading.Thread(target=terminal.services.warm_up, name="warm-up", daemon=True).start()
    terminal.out.write(
        f"Workspace Agent — {terminal.services.workspace.root}\n"
        f"{provider.name} · {provider.model} · /help for commands\n" + demo_banner(terminal)
    )
    if not provider.configured:
        terminal.err.write(f"{provider.problem}\n{SET_IT_HERE}\n{TRY_THE_DEMO}\n")
    return prompt_loop(terminal, COMMANDS, lambda line: _run_prompt(terminal, line))


def _run_prompt(terminal: CliTerminal, line: str) -> None:
    try:
        terminal.run_foreground(line)
    except NotFound as exc:  # an unknown skill or agent
        terminal.err.write(f"{exc}\n")
    except (NotConfigured, DiskFull) as exc:
        terminal.err.write(f"error: {exc}\n")


class Console(Protocol):
    out: TextIO
    err: TextIO


C = TypeVar("C", bound=Console)
Commands = Mapping[str, Callable[[C, str], str]]


def prompt_loop(
    terminal: C,
    commands: Commands[C],
    run_prompt: Callable[[str], None],
    read_line: Callable[[], str] = lambda: input(PROMPT),
) -> int:
    """Read prompts and slash commands until /quit or Ctrl-D (local and remote sessions)."""
    while True:
        try:
            line = read_line().strip()
        except EOFError:
            terminal.out.write("\n")
            return 0
        except KeyboardInterrupt:
            terminal.out.write("\n")
            continue
        if not line:
            continue
        if line.startswith("/") and not line.startswith("/skill "):
            if not dispatch(terminal, line, commands):
                return 0
            continue
        run_prompt(line)
        terminal.out.write("\n")


def run_command(terminal: CliTerminal, line: str) -> bool:
    """Run one slash command; False means quit."""
    return dispatch(terminal, line, COMMANDS)


def dispatch(terminal: C, line: str, commands: Commands[C]) -> bool:
    """Run one slash command of `commands`; False means quit."""
    name, _, arg = line[1:].partition(" ")
    arg, out = arg.strip(), terminal.out
    if name in ("quit", "exit", "q"):
        return False
    handler = commands.get(name)
    if handler is None:
        out.write(f"unknown command /{name}; /help lists them\n")
        return True
    try:
        out.write(handler(terminal, arg).rstrip("\n") + "\n")
    except (AgentError, ValueError) as exc:  # a refusal, or a command's usage
        terminal.err.write(f"{exc}\n")
    return True
