"""Workspace Agent: `python main.py web ...` or `python main.py cli ...` (docs/protocol.md §1)."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.services import AgentServices
    from utils.settings import Settings


CREATE_HELP = "create the --workspace folder when it does not exist (./workspace always is)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description="An LLM agent in one folder.")
    sub = parser.add_subparsers(dest="front", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--workspace", help="the only folder the agent may change (./workspace)")
        p.add_argument("--create", action="store_true", help=CREATE_HELP)
        p.add_argument("--data-dir", help="history, memory, annotations and logs (./data)")
        p.add_argument("--mode", choices=["fast", "thinking"], help="thinking policy")
        p.add_argument(
            "--approval",
            choices=["auto", "ask", "read-only"],
            help="run tools without asking (changes to .agents/ and .mcp.json still ask) / "
            "ask before commands and overwrites / read only",
        )
        p.add_argument("--agent", help="the agent new conversations use (default: general)")

    web = sub.add_parser("web", help="serve the browser workspace")
    common(web)
    web.add_argument("--host", default="127.0.0.1")
    web.add_argument("--port", type=int, default=5000)
    web.add_argument("--async-mode", choices=["threading", "eventlet"], default="threading")

    cli = sub.add_parser("cli", help="work in the terminal")
    common(cli)
    cli.add_argument("-p", "--prompt", help="run one task non-interactively, then exit")
    cli.add_argument("--conversation", help="continue this conversation")
    cli.add_argument("--json", action="store_true", help="print one JSON event per line")
    cli.add_argument(
        "--server",
        metavar="URL",
        help="drive the running web workspace at URL (its conversations, tasks and approvals)",
    )
    cli.add_argument("--token", help="the --server's token (default AGENT_WEB_TOKEN)")

    mcp = sub.add_parser("mcp", help="serve the workspace's tools to MCP clients over stdio")
    mcp.add_argument("--workspace", help="the only folder the tools may change (./workspace)")
    mcp.add_argument("--create", action="store_true", help=CREATE_HELP)
    mcp.add_argument("--data-dir", help="memory, annotations and logs (./data)")
    mcp.add_argument(
        "--approval",
        choices=["auto", "ask", "read-only"],
        help="every tool / reading ones and --allow-tool ones / reading only",
    )
    mcp.add_argument(
        "--allow-tool",
        action="append",
        metavar="NAME",
        help="also offer this tool in ask mode (repeatable; AGENT_MCP_SERVER_TOOLS)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    gc.disable()  # until start-up is over: see _start_up_over
    try:
        return _start(argv)
    finally:
        gc.enable()  # after an early exit too (a bad flag, a bad configuration)


def _start(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.front == "cli" and args.server:
        return _run_remote(args)
    if args.front == "web" and args.async_mode == "eventlet":
        import eventlet  # patched before anything else imports socket or threading

        eventlet.monkey_patch()
    from pydantic import ValidationError

    from modules.sandbox.runner import SandboxUnavailable
    from modules.workspace.folder import WorkspaceUnusable, prepare_workspace, read_only_warning
    from utils.settings import BadConfiguration, Settings, load_settings
    from utils.validation import describe_validation_error

    try:
        settings = load_settings(
            workspace=args.workspace,
            data_dir=args.data_dir,
            mode=getattr(args, "mode", None),
            approval=args.approval,
            default_agent=getattr(args, "agent", None),
            mcp_server_tools=getattr(args, "allow_tool", None),
        )
        # ./workspace is made on first start; another folder must exist (a typo would
        # otherwise become a new empty workspace) unless --create asks for it.
        default = Path(Settings.model_fields["workspace"].default).resolve()
        prepare_workspace(settings.workspace, create=args.create or settings.workspace == default)
        if (read_only := read_only_warning(settings.workspace)) is not None:
            print(f"warning: {read_only}", file=sys.stderr, flush=True)
        if args.front == "mcp":
            from mcp_server.server import serve_stdio

            _start_up_over()
            return serve_stdio(settings)
        if args.front == "web":
            from web_server import serve

            _start_up_over()
            return serve(settings, host=args.host, port=args.port, async_mode=args.async_mode)
        return _run_cli(settings, args)
    except ValidationError as exc:
        print(f"error: bad configuration: {describe_validation_error(exc)}", file=sys.stderr)
    except BadConfiguration as exc:
        print(f"error: bad configuration: {exc}", file=sys.stderr)
    except (SandboxUnavailable, WorkspaceUnusable) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except OSError as exc:  # a folder it may not write, a port already taken
        print(f"error: cannot start: {_start_problem(exc)}", file=sys.stderr)
    return 2


def _start_up_over() -> None:
    """Start-up runs with the cyclic garbage collector off. What it makes (modules, classes,
    the settings, the services) lives as long as the process, so the collections its
    allocations would trigger only walk it again and again: a seventh of `import openai`.
    Now it is frozen, out of every later collection's way, and collection resumes."""
    gc.freeze()
    gc.enable()


def _start_problem(exc: OSError) -> str:
    if isinstance(exc, PermissionError) and exc.filename:
        return (
            f"no permission to write {exc.filename}; the workspace and the data folder "
            "must be writable (see --workspace and --data-dir)"
        )
    return str(exc)


def _run_remote(args: argparse.Namespace) -> int:
    """`cli --server`: the workspace, data and settings are the server's."""
    if args.workspace or args.data_dir or args.create:
        print(
            "error: with --server the workspace and its data are the server's: drop "
            "--workspace, --data-dir and --create",
            file=sys.stderr,
        )
        return 2
    from cli.remote import run_remote

    _start_up_over()
    return run_remote(args)


def _run_cli(settings: Settings, args: argparse.Namespace) -> int:
    from core.services import build_services

    services = build_services(settings, ends_with_run=args.prompt is not None)
    try:
        return _run_terminal(services, args)
    finally:
        services.close()  # MCP servers stopped, sandbox sessions ended


def _run_terminal(services: AgentServices, args: argparse.Namespace) -> int:
    from cli.history import find_conversation
    from cli.session import repl, run_once
    from cli.terminal import CliTerminal
    from history.store import ConversationNotFound
    from utils.errors import NotFound

    settings = services.settings
    try:
        services.agents.get(settings.default_agent)
    except NotFound as exc:  # --agent or AGENT_DEFAULT_AGENT names none
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        conversation = args.conversation and find_conversation(services.store, args.conversation)
        terminal = CliTerminal(
            services, conversation, json_mode=args.json, one_shot=args.prompt is not None
        )
    except ConversationNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.prompt is None:
        _start_up_over()
        return repl(terminal)
    services.warm_model()  # the `openai` import is start-up too
    _start_up_over()
    return run_once(terminal, args.prompt)


if __name__ == "__main__":
    code = main()
    # The collections at exit would walk every object of a heap this size (the openai SDK
    # alone defines thousands of classes): a third of a second, a quarter of `cli -p`.
    # Everything is closed and flushed by now; frozen objects are left to the process's end.
    gc.freeze()
    sys.exit(code)
