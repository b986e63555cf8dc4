"""`main.py cli --server URL`: the terminal on a running web workspace, through workspace_client.

The prompt loop, the slash commands' names and texts (cli/session.py) and the printer
(cli/printer.py) are the local session's; the conversations, tasks and approvals are the
server's, shared with its pages: a task started here streams in a page that follows the
conversation, one the page runs streams here once opened (`--conversation`, `/history`), and
an approval is answered in whichever window answers first.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import queue
import select
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit, urlunsplit

import simple_websocket

from cli.budget import continue_command
from cli.history import format_listing, pick_conversation
from cli.printer import DIM, YELLOW, EventPrinter
from cli.session import (
    APPROVAL_MEANING,
    APPROVAL_MODES,
    EXIT_CODES,
    HELP,
    agents_text,
    choice,
    mcp_text,
    prompt_loop,
    skills_text,
    task_exit,
)
from cli.streams import json_line, use_color
from cli.terminal import split_skill
from cli.undo import undo_dialog
from core.budgets import BudgetOverride
from core.events import ContextUsage, Done, DoneReason, Error, Event, Status, ToolEvent
from core.spend import spend_text
from history.store import ConversationNotFound
from modules.undo.restore import Conflict, UndoPreview, UndoResult
from workspace_client import Client, ConnectionRefused, Disconnected, Reloaded, WorkspaceError
from workspace_client.events import done_from_wire

ANY_CALL = "*"  # in RemoteTerminal._settled: the task ended, no call waits
MAX_FOCUS, MAX_ATTACHMENTS = 3, 10  # docs/protocol.md §4.1 send_message
NO_TOKEN = (
    "error: --server needs the web server's token: pass --token T, set AGENT_WEB_TOKEN, or give "
    "the URL the server printed at its start (…/?token=…); the server keeps it in "
    "DATA_DIR/web_token"
)


class RemoteTerminal:
    """A conversation of a web workspace in the terminal: prints its events as the local
    terminal does (or JSON lines) and asks its approvals here while pages may answer them too.

    `one_shot` (`-p`): only the final answer goes to `out`; everything else goes to `err`.
    """

    def __init__(
        self,
        client: Client,
        *,
        json_mode: bool = False,
        out: TextIO = sys.stdout,
        err: TextIO = sys.stderr,
        stdin: TextIO = sys.stdin,
        one_shot: bool = False,
        mode: str | None = None,
        approval: str | None = None,
        agent: str | None = None,
    ) -> None:
        self.client = client
        self.json_mode = json_mode
        self.out, self.err, self.stdin = out, err, stdin
        progress = err if one_shot else out
        self.printer = EventPrinter(
            out,
            err,
            progress=progress,
            color=use_color(out) and use_color(progress),
            final_only=one_shot,
        )
        self.conversation_id: str | None = None
        # what the next task runs with; None: the conversation's own, or the server's default
        self.mode, self.approval, self.agent = mode, approval, agent
        self.focus: list[str] = []  # the files a new conversation starts with in focus
        self.attachments: list[str] = []  # workspace paths, for the next message
        self.listed: list[str] = []  # the ids the last /history list numbered
        self.last_error = ""
        self.last_budget: dict[str, Any] | None = None
        self.declined: list[str] = []
        self.iteration = 0
        self.context: ContextUsage | None = None
        self._approvals: queue.Queue[ToolEvent | None] = queue.Queue()
        self._settled: set[str] = set()  # calls no longer waiting (answered, or the task ended)
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()  # a byte when a call is settled elsewhere

    # --- tasks ----------------------------------------------------------------------

    def run_foreground(
        self, text: str, budget_override: BudgetOverride | None = None
    ) -> DoneReason:
        """Send the message (`/skill NAME message` runs with that skill) and show its task until
        it ends; Ctrl-C cancels it. Raises WorkspaceError when the server refuses it."""
        skill, text = split_skill(text)
        options: dict[str, Any] = {
            key: value
            for key, value in (("mode", self.mode), ("approval", self.approval))
            if value is not None
        }
        if self.agent is not None:
            options["agent"] = self.agent
        if skill is not None:
            options["skill"] = skill
        if self.attachments:
            options["attachments"] = self.attachments
        if self.focus and self.conversation_id is None:
            options["focus"] = self.focus
        if budget_override is not None:
            options["budget_override"] = budget_override.model_dump(mode="json")
        started = self.client.send(text, self.conversation_id, **options)
        self.conversation_id = started.conversation_id
        self.attachments, self.focus = [], []
        return self.watch(started.conversation_id)

    def watch(self, conversation_id: str) -> DoneReason:
        """Print the conversation's task (the running one from its start, when it was not
        followed yet) until its end; approvals are asked here, Ctrl-C cancels it."""
        self.last_error, self.declined = "", []
        with self._lock:
            self._settled.clear()
        ends: list[DoneReason] = []

        def work() -> None:
            try:
                for event in self.client.events(conversation_id):
                    self._show(event)
                    if isinstance(event, Done) and event.depth is None:
                        ends.append(event.reason)
            except Disconnected as exc:
                self.last_error = f"disconnected: {exc}"
                self.err.write(f"error: {self.last_error}\n")
            finally:
                self._approvals.put(None)

        worker = threading.Thread(target=work, name="remote-task", daemon=True)
        worker.start()
        while True:
            try:
                request = self._approvals.get()  # Ctrl-C interrupts the wait
                if request is None:
                    break
                self._ask(request)
            except KeyboardInterrupt:
                with contextlib.suppress(WorkspaceError):  # not_running: it ended meanwhile
                    self.client.cancel(conversation_id)
        worker.join()
        if not self.json_mode:
            self.printer.finish()
        return ends[0] if ends else "error"

    def _show(self, event: Event) -> None:
        if isinstance(event, Error):
            self.last_error = f"{event.code}: {event.message}"
        elif isinstance(event, Status):
            self.iteration, self.context = event.iteration, event.context
        elif isinstance(event, Done) and event.depth is None:
            self.last_budget = event.budget
        if self.json_mode:
            self.out.write(json_line(event) + "\n")
            self.out.flush()
        elif isinstance(event, Reloaded):
            note = "reconnected: the server could not replay what was missed; /history shows it"
            self.err.write(self.printer.paint(note, DIM) + "\n")
        else:
            self.printer.render(event)
        if isinstance(event, ToolEvent) and event.phase == "approval":
            self._approvals.put(event)
        elif _settles(event):
            with self._lock:
                self._settled.add(event.call_id if isinstance(event, ToolEvent) else ANY_CALL)
            os.write(self._wake_w, b".")

    def _ask(self, request: ToolEvent) -> None:
        """The local terminal's prompt; a page that answers first ends it."""
        if not self.stdin.isatty():
            self.err.write(
                f"{request.tool} needs approval but there is no terminal to ask: declined.\n"
            )
            self._decline(
                request,
                f"{request.tool} needed approval and there was no terminal "
                "to ask (--approval auto runs such calls)",
            )
            return
        self.err.write(self.printer.approval_text(request))
        self.err.write("Allow? [y]es / [n]o / [a]lways for this tool: ")
        self.err.flush()
        answer = self._answer(request.call_id)
        if answer is None:
            self.err.write("\n" + self.printer.paint("answered in another window.", DIM) + "\n")
            return
        if not answer.endswith("\n"):  # Ctrl-C or Ctrl-D: the line was left open
            self.err.write("\n")
        answer = answer.strip().lower()
        if answer in ("y", "yes", "a", "always"):
            self._approve(request, True, always=answer in ("a", "always"))
            return
        self.err.write(self.printer.paint(f"declined: {request.tool} does not run.", YELLOW) + "\n")
        self.err.flush()
        self._decline(request, f"you declined {request.tool}")

    def _answer(self, call_id: str) -> str | None:
        """The line typed at the prompt; None once the call is settled elsewhere."""
        try:
            while True:
                with self._lock:
                    if call_id in self._settled or ANY_CALL in self._settled:
                        return None
                typed = self.stdin.fileno()
                ready, _, _ = select.select([typed, self._wake_r], [], [])
                if self._wake_r in ready:
                    os.read(self._wake_r, 4096)
                if typed in ready:
                    return self.stdin.readline()
        except KeyboardInterrupt:
            return ""

    def _decline(self, request: ToolEvent, why: str) -> None:
        self.declined.append(why)
        self._approve(request, False)

    def _approve(self, request: ToolEvent, approved: bool, *, always: bool = False) -> None:
        assert request.conversation_id is not None
        try:
            self.client.approve(request.conversation_id, request.call_id, approved, always=always)
        except WorkspaceError as exc:
            if exc.code != "not_waiting":
                raise
            self.err.write(self.printer.paint("it was answered in another window.", DIM) + "\n")

    # --- conversations --------------------------------------------------------------

    def open(self, conversation_id: str) -> dict[str, Any]:
        """Make the conversation this terminal's; its mode, approval and agent are the next
        task's. Returns the get_conversation answer."""
        conversation = self.client.get_conversation(conversation_id)
        self.conversation_id = conversation_id
        self.mode, self.approval = conversation["mode"], conversation["approval"]
        self.agent = conversation["agent"]
        self.focus, self.attachments = [], []
        return conversation

    def find(self, ref: str) -> str:
        rows = self.client.conversations()
        ids = {str(row["id"]) for row in rows}
        return pick_conversation(ref, rows, self.listed, ids.__contains__)


def _settles(event: Event) -> bool:
    """Whether the event shows a call no longer waits: it runs or has its result (someone
    answered), or the task ended."""
    if isinstance(event, ToolEvent):
        return event.phase in ("output", "result")
    return isinstance(event, Done) and event.depth is None


# --- the commands: the local session's names, texts and usage -----------------------


def _needs_conversation(t: RemoteTerminal) -> str:
    if t.conversation_id is None:
        raise ValueError("no conversation yet: send a message, or open one with /history")
    return t.conversation_id


def _status(t: RemoteTerminal, _: str) -> str:
    status = t.client.status(t.conversation_id)
    lines = [
        f"agent {t.agent or status['agent']} · provider {status['provider']} · model "
        f"{status['model']} · mode {t.mode or status['mode']} · approval "
        f"{t.approval or status['approval']}",
        f"server {t.client.url} · conversation {t.conversation_id or '(new)'} · iteration "
        f"{t.iteration}",
    ]
    if t.conversation_id is not None:
        conversation = t.client.get_conversation(t.conversation_id)
        used = t.context.used_tokens if t.context is not None else 0
        focus = ", ".join(conversation["focus"]) or "none"
        lines.append(
            f"context {used:,} / {conversation['context_limit']:,} tokens · focus: {focus}"
        )
        for scope in ("conversation", "today"):
            spent = done_from_wire({"reason": "complete", "usage": conversation["spend"][scope]})
            lines.append(f"{scope} {spend_text(spent.usage, spent.cost)}")
    sandbox = status["sandbox"]
    lines.append(f"sandbox {sandbox['kind']}:" + "".join(f"\n  {x}" for x in sandbox["isolation"]))
    return "\n".join(lines)


def _mode(t: RemoteTerminal, arg: str) -> str:
    t.mode = choice(arg, ("fast", "thinking"), "mode")
    return f"mode: {t.mode}"


def _approval(t: RemoteTerminal, arg: str) -> str:
    verb, _, name = arg.partition(" ")
    if verb == "revoke":
        if not name.strip():
            raise ValueError("usage: /approval revoke NAME (/approval lists them)")
        payload = {"conversation_id": _needs_conversation(t), "tool": name.strip()}
        try:
            t.client.call("revoke_approval", payload)
        except WorkspaceError as exc:
            if exc.code != "not_found":
                raise
            why = f"{name.strip()} is not always allowed (/approval lists them)"
            raise ValueError(why) from None
        return f"{name.strip()} asks again before it runs"
    if arg:
        t.approval = choice(arg, APPROVAL_MODES, "approval")
    status = t.client.status(t.conversation_id)
    approval = t.approval or status["approval"]
    allowed = ", ".join(status.get("always_allowed") or []) or "none"
    return (
        f"approval: {approval} ({APPROVAL_MEANING[approval]})\n"
        f"always allowed in this conversation: {allowed}"
        + ("\n/approval revoke NAME asks again before one" if allowed != "none" else "")
    )


def _new(t: RemoteTerminal, _: str) -> str:
    t.conversation_id, t.focus, t.attachments, t.iteration, t.context = None, [], [], 0, None
    return "new conversation"


def _history(t: RemoteTerminal, arg: str) -> str:
    if not arg:
        text, t.listed = format_listing(t.client.conversations())
        return text
    conversation = t.open(t.find(arg))
    title = conversation["conversation"].get("title") or "(untitled)"
    t.out.write(
        f"opened {t.conversation_id} ({title}): {len(conversation['messages'])} messages · "
        f"agent {t.agent}, mode {t.mode}, approval {t.approval}\n"
    )
    if not conversation["running"]:
        return ""
    t.out.write(t.printer.paint("a task runs in it: its stream follows (Ctrl-C stops it)", DIM))
    t.out.write("\n")
    assert t.conversation_id is not None
    t.watch(t.conversation_id)
    return ""


def _set_focus(t: RemoteTerminal, path: str, on: bool) -> list[str]:
    if not path:
        raise ValueError(f"usage: /{'focus' if on else 'unfocus'} PATH")
    if t.conversation_id is not None:
        op = "focus_file" if on else "unfocus_file"
        ack = t.client.call(op, {"conversation_id": t.conversation_id, "path": path})
        return list(ack["focus"])
    if on and path not in t.focus:
        if len(t.focus) >= MAX_FOCUS:
            raise ValueError(f"at most {MAX_FOCUS} files are in focus")
        t.client.read_file(path)  # not_found for a path that is no workspace file
        t.focus.append(path)
    elif not on:
        if path not in t.focus:
            raise ValueError(f"{path} is not in focus")
        t.focus.remove(path)
    return list(t.focus)


def _focus(t: RemoteTerminal, arg: str) -> str:
    return f"focus: {', '.join(_set_focus(t, arg, True))}"


def _unfocus(t: RemoteTerminal, arg: str) -> str:
    return f"focus: {', '.join(_set_focus(t, arg, False)) or 'none'}"


def _memory(t: RemoteTerminal, _: str) -> str:
    payload = {} if t.conversation_id is None else {"conversation_id": t.conversation_id}
    ack = t.client.call("get_memory", payload)
    return (
        f"main memory:\n{ack['main'] or '(empty)'}\n\n"
        f"this conversation's memory:\n{ack['task'] or '(empty)'}"
    )


def _undo(t: RemoteTerminal, arg: str) -> str:
    cid = _needs_conversation(t)

    def preview_of(message_id: str | None) -> UndoPreview:
        payload = {"conversation_id": cid} | ({"message_id": message_id} if message_id else {})
        ack = t.client.call("undo_preview", payload)
        return UndoPreview(
            task_id=ack["message_id"],
            files=[(f["path"], f["action"]) for f in ack["files"]],
            undone=ack["undone"],
            conflicts=[_conflict(c) for c in ack["conflicts"]],
        )

    def undo(message_id: str | None, overwrite: bool) -> UndoResult:
        task_id = message_id or preview_of(None).task_id
        ack = t.client.undo(cid, task_id, overwrite=overwrite or None)
        return UndoResult(
            task_id=task_id,
            restored=ack["restored"],
            removed=ack["removed"],
            skipped=ack["skipped"],
            message=ack["message"],
            conflicts=[_conflict(c) for c in ack["conflicts"]],
        )

    return undo_dialog(t.out, t.stdin, arg, preview_of, undo)


def _conflict(wire: dict[str, Any]) -> Conflict:
    return Conflict(wire["path"], wire["action"], wire["reason"], wire.get("later_message_id"))


def _agents(t: RemoteTerminal, _: str) -> str:
    status = t.client.status()
    problems = [(p["path"], p["message"]) for p in status["agent_problems"]]
    return agents_text(status["agents"], problems, t.agent or status["agent"])


def _agent(t: RemoteTerminal, arg: str) -> str:
    status = t.client.status()
    if not arg:
        return f"agent: {t.agent or status['agent']} (/agents lists them)"
    if arg not in {a["name"] for a in status["agents"]}:
        raise ValueError(f"no agent {arg!r} (/agents lists them)")
    t.agent = arg
    return f"agent: {t.agent}"


def _skills(t: RemoteTerminal, _: str) -> str:
    return skills_text(t.client.status()["skills"])


def _mcp(t: RemoteTerminal, arg: str) -> str:
    if arg.startswith("restart"):
        name = arg.removeprefix("restart").strip()
        try:
            t.client.call("mcp_restart_server", {"name": name})
        except WorkspaceError as exc:
            if exc.code != "not_found":
                raise
            raise ValueError(f"no MCP server {name!r}; /mcp lists them") from None
        return f"restarting {name}; /mcp shows when it is connected"
    status = t.client.status()["mcp"]
    return mcp_text(status, str(status.get("config") or "the server's DATA_DIR/mcp.json"))


def _compact(t: RemoteTerminal, arg: str) -> str:
    payload: dict[str, Any] = {"conversation_id": _needs_conversation(t)}
    if arg:
        payload["instructions"] = arg
    t.client.call("compact", payload)
    return "the server summarises the older turns now; /status shows the context after"


def _attach(t: RemoteTerminal, arg: str) -> str:
    if not arg:
        return "\n".join(f"  {path}" for path in t.attachments) or (
            "no files attached; /attach PATH sends one with your next message"
        )
    if len(t.attachments) >= MAX_ATTACHMENTS:
        raise ValueError(f"at most {MAX_ATTACHMENTS} files go with one message")
    local = Path(arg).expanduser()
    if local.is_file():  # a file of this machine: uploaded into the workspace's uploads/
        path = str(t.client.upload(local)["path"])
    else:
        try:
            path = str(t.client.read_file(arg)["path"])
        except WorkspaceError:
            raise ValueError(f"no such file here or in the server's workspace: {arg}") from None
    t.attachments.append(path)
    return f"attached {path}; it goes with your next message"


def _detach(t: RemoteTerminal, _: str) -> str:
    dropped, t.attachments = len(t.attachments), []
    return f"{dropped} attached file{'' if dropped == 1 else 's'} dropped"


Handler = Callable[[RemoteTerminal, str], str]


def _refusals_said(handler: Handler) -> Handler:
    """A command the server refuses prints its code and message, as a local refusal does."""

    @functools.wraps(handler)
    def run(t: RemoteTerminal, arg: str) -> str:
        try:
            return handler(t, arg)
        except (WorkspaceError, ConversationNotFound) as exc:
            raise ValueError(str(exc)) from None

    return run


COMMANDS: dict[str, Handler] = {
    name: _refusals_said(handler)
    for name, handler in {
        "status": _status,
        "continue": continue_command,
        "mode": _mode,
        "approval": _approval,
        "new": _new,
        "history": _history,
        "focus": _focus,
        "unfocus": _unfocus,
        "memory": _memory,
        "undo": _undo,
        "agents": _agents,
        "agent": _agent,
        "skills": _skills,
        "mcp": _mcp,
        "compact": _compact,
        "attach": _attach,
        "detach": _detach,
        "help": lambda t, a: HELP,
    }.items()
}


# --- main.py cli --server -----------------------------------------------------------


def run_remote(args: argparse.Namespace) -> int:
    """`main.py cli --server URL [--token T]`: exit 2 when it cannot connect."""
    url, token = _url_and_token(args.server, args.token)
    if not token:
        print(NO_TOKEN, file=sys.stderr)
        return 2
    try:
        client = Client(url, token)
    except ConnectionRefused as exc:
        if exc.code == "wrong_token":
            print(
                f"error: {url} refused the token: give the one in the URL the web server "
                "printed at its start (…/?token=…), or in its DATA_DIR/web_token",
                file=sys.stderr,
            )
        else:
            print(f"error: {url} refused the connection: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError, simple_websocket.ConnectionError) as exc:
        print(
            f"error: cannot reach a web workspace at {url} ({exc}): is `main.py web` running "
            "there?",
            file=sys.stderr,
        )
        return 2
    with client:
        terminal = RemoteTerminal(
            client,
            json_mode=args.json,
            one_shot=args.prompt is not None,
            mode=args.mode,
            approval=args.approval,
            agent=args.agent,
        )
        try:
            conversation = args.conversation and terminal.find(args.conversation)
            running = bool(conversation) and terminal.open(conversation)["running"]
        except (ConversationNotFound, WorkspaceError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.prompt is not None:
            return _run_once(terminal, args.prompt)
        return _repl(terminal, running)


def _url_and_token(server: str, token: str | None) -> tuple[str, str | None]:
    """The server's URL without a query, and the token: --token, the URL's, AGENT_WEB_TOKEN."""
    parts = urlsplit(server if "://" in server else f"http://{server}")
    in_url = parse_qs(parts.query).get("token", [None])[0]
    url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return url, token or in_url or os.environ.get("AGENT_WEB_TOKEN")


def _run_once(terminal: RemoteTerminal, prompt: str) -> int:
    try:
        reason = terminal.run_foreground(prompt)
    except WorkspaceError as exc:  # refused: nothing ran
        terminal.err.write(f"error: {exc}\n")
        return 2 if exc.code in ("not_found", "not_configured") else EXIT_CODES["error"]
    return task_exit(terminal, reason)


def _repl(terminal: RemoteTerminal, running: bool) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    status = terminal.client.status()
    terminal.out.write(
        f"Workspace Agent — {terminal.client.url} (the server's workspace)\n"
        f"{status['provider']} · {status['model']} · /help for commands\n"
    )
    if not status["api"]["configured"]:
        terminal.err.write(f"{status['api']['message']}\n")
    if running and terminal.conversation_id is not None:
        terminal.out.write(terminal.printer.paint("a task runs in it: its stream follows", DIM))
        terminal.out.write("\n")
        terminal.watch(terminal.conversation_id)
    return prompt_loop(terminal, COMMANDS, lambda line: _run_prompt(terminal, line))


def _run_prompt(terminal: RemoteTerminal, line: str) -> None:
    try:
        terminal.run_foreground(line)
    except WorkspaceError as exc:
        terminal.err.write(f"error: {exc}\n")
