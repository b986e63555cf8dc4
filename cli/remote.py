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
import os
import sys
from urllib.parse import parse_qs, urlsplit, urlunsplit

import simple_websocket

from cli.painter import DIM
from cli.remote_commands import COMMANDS
from cli.remote_follow import IdleFollower
from cli.remote_link import LinkEnded, LinkWatch
from cli.remote_terminal import RemoteTerminal
from cli.session import EXIT_CODES, prompt_loop, task_exit
from history.store import ConversationNotFound
from workspace_client import Client, ConnectionRefused, Disconnected, WorkspaceError

NO_TOKEN = (
    "error: --server needs the web server's token: pass --token T, set AGENT_WEB_TOKEN, or give "
    "the URL the server printed at its start (…/?token=…); the server keeps it in "
    "DATA_DIR/web_token"
)


def run_remote(args: argparse.Namespace) -> int:
    """`main.py cli --server URL [--token T]`: exit 2 when it cannot connect."""
    url, token = _url_and_token(args.server, args.token)
    if not token:
        print(NO_TOKEN, file=sys.stderr)
        return 2
    link = LinkWatch(url, sys.stderr)
    try:
        client = Client(url, token, on_link=link)
    except ConnectionRefused as exc:
        print(f"error: {link.why(exc)}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError, simple_websocket.ConnectionError) as exc:
        print(
            f"error: cannot reach a web workspace at {url} ({exc}): is `main.py web` running "
            "there?",
            file=sys.stderr,
        )
        return 2
    try:
        with client:
            return _session(client, args)
    except (LinkEnded, ConnectionRefused, Disconnected) as exc:
        print(f"\nerror: {link.ended or link.why(exc)}", file=sys.stderr)
        return 2


def _session(client: Client, args: argparse.Namespace) -> int:
    """The terminal on the connected client: one prompt (`-p`) or the prompt loop."""
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
    follower = IdleFollower(terminal, terminal.out)
    try:
        return prompt_loop(
            terminal,
            COMMANDS,
            lambda line: _run_prompt(terminal, follower, line),
            follower.read_line,
        )
    finally:
        follower.close()


def _run_prompt(terminal: RemoteTerminal, follower: IdleFollower, line: str) -> None:
    """A line typed at the prompt: the answer to an approval a page's task waits for, or a
    message (a task) of this terminal."""
    try:
        if not follower.answer(line):
            terminal.run_foreground(line)
    except WorkspaceError as exc:
        terminal.err.write(f"error: {exc}\n")
