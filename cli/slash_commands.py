"""The terminal's slash commands, one table for the local and the remote terminal: each
command's name, arguments and help, which terminals offer it and, where both do the same, what
it does. A terminal supplies the rest (cli/commands.py, cli/remote_commands.py); `/help` is
made from the table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from cli.budget import continue_command
from cli.command_texts import APPROVAL_MEANING, APPROVAL_MODES, choice
from cli.config_command import config_command, model_command
from protocol.options import MAX_ATTACHMENTS, MAX_FOCUS

Front = Literal["local", "remote"]
T = TypeVar("T")
Handler = Callable[[T, str], str]  # (the terminal, the argument) -> what to print
QUIT = ("quit", "exit", "q")  # the prompt loop's own: it ends on them
HELP_COLUMN = 24  # where /help's texts start
INLINE_USAGE = 25  # a longer usage has its text on the next line


class Switches(Protocol):
    """What the shared commands change of a terminal, local or remote."""

    mode: Any  # the local terminal's Mode; the remote one's, None until chosen
    approval: Any  # the same of the approval mode
    attachments: list[Any]  # for the next message

    def set_focus(self, path: str, focused: bool) -> list[str]: ...

    def attach(self, path: str) -> str:
        """Attach the file at `path` to the next message; says which (its path, ...)."""
        ...

    def attached(self) -> list[str]:
        """The files attached to the next message, as `attach` said each."""
        ...

    def revoke(self, tool: str) -> bool:
        """Ask again before `tool`; False when it was not always allowed."""
        ...

    def approvals(self) -> tuple[str, list[str], str]:
        """The approval mode the next task runs in, the tools always allowed, and where
        ("session", "conversation")."""
        ...

    def user_settings(self, changes: dict[str, Any] | None = None) -> dict[str, Any]:
        """The user's settings (cli/config_command.py), after `changes` when given."""
        ...


def _mode(t: Switches, arg: str) -> str:
    t.mode = choice(arg, ("fast", "thinking"), "mode")
    return f"mode: {t.mode}"


def _approval(t: Switches, arg: str) -> str:
    verb, _, name = arg.partition(" ")
    if verb == "revoke":
        tool = name.strip()
        if not tool:
            raise ValueError("usage: /approval revoke NAME (/approval lists them)")
        if not t.revoke(tool):
            raise ValueError(f"{tool} is not always allowed (/approval lists them)")
        return f"{tool} asks again before it runs"
    if arg:
        t.approval = choice(arg, APPROVAL_MODES, "approval")
    mode, allowed, where = t.approvals()
    return (
        f"approval: {mode} ({APPROVAL_MEANING[mode]})\n"
        f"always allowed in this {where}: {', '.join(allowed) or 'none'}"
        + ("\n/approval revoke NAME asks again before one" if allowed else "")
    )


def _focus(t: Switches, arg: str) -> str:
    return f"focus: {', '.join(t.set_focus(_path(arg, 'focus'), True))}"


def _unfocus(t: Switches, arg: str) -> str:
    return f"focus: {', '.join(t.set_focus(_path(arg, 'unfocus'), False)) or 'none'}"


def _path(arg: str, command: str) -> str:
    if not arg:
        raise ValueError(f"usage: /{command} PATH")
    return arg


def _attach(t: Switches, arg: str) -> str:
    if not arg:
        return "\n".join(f"  {shown}" for shown in t.attached()) or (
            "no files attached; /attach PATH sends one with your next message"
        )
    if len(t.attachments) >= MAX_ATTACHMENTS:
        raise ValueError(f"at most {MAX_ATTACHMENTS} files go with one message")
    return f"attached {t.attach(arg)}; it goes with your next message"


def _detach(t: Switches, _: str) -> str:
    dropped, t.attachments = len(t.attachments), []
    return f"{dropped} attached file{'' if dropped == 1 else 's'} dropped"


@dataclass(frozen=True)
class SlashCommand:
    """One command: `/NAME ARGUMENTS`, what /help says of it ("" when another command's line
    tells of it) and its further /help lines; `shared` does it in both terminals."""

    name: str
    arguments: str = ""
    help: str = ""
    more: tuple[tuple[str, str], ...] = ()  # (usage, text)
    fronts: tuple[Front, ...] = ("local", "remote")
    shared: Handler[Any] | None = None


TABLE = (
    SlashCommand("status", "", "model, mode, approval, iteration, context used/limit, focus files"),
    SlashCommand("mode", "fast|thinking", "switch the thinking policy", shared=_mode),
    SlashCommand(
        "model",
        "[NAME]",
        "show the model, or set the one the next task uses (saved in\nyour settings file)",
        shared=model_command,
    ),
    SlashCommand(
        "config",
        "[KEY VALUE]",
        "show your settings (provider, key, budgets, ...) and where each\n"
        "comes from, or set one; KEY --reset takes it out of the file",
        shared=config_command,
    ),
    SlashCommand(
        "approval",
        "[MODE]",
        "show the approval mode and the always-allowed tools, or set\nthe mode: auto|ask|read-only",
        more=(
            ("/approval revoke NAME", 'ask again before the tool NAME (allowed "always" earlier)'),
        ),
        shared=_approval,
    ),
    SlashCommand(
        "continue",
        "[--raise LIMIT]",
        "go on where the last task stopped; after a budget stopped it,\n"
        "--raise gives that budget a higher LIMIT for this task only",
        shared=continue_command,
    ),
    SlashCommand("new", "", "start a new conversation"),
    SlashCommand(
        "history",
        "[N|ID]",
        "list recent conversations, numbered; open one by its number\n"
        "or its id (the first characters only it starts with do)",
    ),
    SlashCommand(
        "focus",
        "PATH",
        f"keep a file's current content in every model call (at most {MAX_FOCUS})",
        shared=_focus,
    ),
    SlashCommand("unfocus", "PATH", "stop doing so", shared=_unfocus),
    SlashCommand(
        "attach",
        "[PATH]",
        "send a file (PDF, DOCX, XLSX, PPTX, CSV, text, image) with the next\n"
        "message: a workspace path, or one outside that is copied into uploads/;\n"
        "no PATH lists them; /detach drops them",
        shared=_attach,
    ),
    SlashCommand("detach", shared=_detach),
    SlashCommand("memory", "", "show the main and this conversation's memory"),
    SlashCommand(
        "export",
        "[md|json] [PATH]",
        "write this conversation (its current branch) to a file: Markdown\n"
        "(default) or the JSON of its records; PATH a new file or a folder\n"
        "(default: the current directory), never over an existing file",
    ),
    SlashCommand(
        "compact", "[INSTRUCTIONS]", "summarise the older turns now (optionally: what to keep)"
    ),
    SlashCommand(
        "undo",
        "[MESSAGE_ID] [--overwrite]",
        "put back the files the last task (or that message's task) changed;\n"
        "files changed since it stay as they are unless --overwrite",
    ),
    SlashCommand(
        "diff",
        "[conversation]",
        "what changed: git's diff (staged, not staged) in a git repository,\n"
        "else (or with `conversation`) every file this conversation changed",
    ),
    SlashCommand(
        "ps", "", "list this conversation's background processes: id, state, ports, command"
    ),
    SlashCommand("logs", "ID", "show the last output of background process ID"),
    SlashCommand("stop", "ID", "stop background process ID"),
    SlashCommand("agents", "", "list the agents; /agent NAME switches this conversation to one"),
    SlashCommand("agent", "[NAME]"),
    SlashCommand(
        "skills", "", "list the skills; /skill NAME [message] runs a task with that skill"
    ),
    SlashCommand("mcp", "[restart NAME]", "list the MCP servers and their tools, or reconnect one"),
    SlashCommand("help", "", "this list"),
    SlashCommand("quit", "", "leave (Ctrl-D too); Ctrl-C stops a running task"),
)


def help_text(front: Front) -> str:
    """`/help`: each command the terminal offers, its arguments and what it does."""
    rows = [
        row
        for command in TABLE
        if front in command.fronts
        for row in ((_usage(command), command.help), *command.more)
        if row[1]
    ]
    return "\n".join(_help_row(usage, text) for usage, text in rows)


def _usage(command: SlashCommand) -> str:
    return f"/{command.name} {command.arguments}".rstrip()


def _help_row(usage: str, text: str) -> str:
    first, *rest = text.split("\n")
    if len(usage) > INLINE_USAGE:
        head = f"{usage}\n{' ' * HELP_COLUMN}{first}"
    else:
        head = f"{usage.ljust(HELP_COLUMN - 2)}  {first}"
    return "\n".join([head, *(" " * HELP_COLUMN + line for line in rest)])


def commands_of(front: Front, own: Mapping[str, Handler[T]]) -> dict[str, Handler[T]]:
    """The terminal's commands by name: `own`, its implementation of each command the table
    offers it that none shares, and the shared ones; `/help` says what the table says."""
    offered = [c for c in TABLE if front in c.fronts and c.name not in QUIT]
    wanted = {c.name for c in offered if c.shared is None and c.name != "help"}
    if set(own) != wanted:
        raise ValueError(f"{front} commands: {sorted(set(own) ^ wanted)} do not fit the table")
    text = help_text(front)
    shared: dict[str, Handler[T]] = {c.name: c.shared for c in offered if c.shared is not None}
    return {c.name: own.get(c.name) or shared.get(c.name) or (lambda t, a: text) for c in offered}
