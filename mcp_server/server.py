"""`python main.py mcp`: the workspace served over MCP (stdio) to Claude Desktop, Cline or any
MCP client: its tools, confined to the workspace and sandboxed as they are for the agent, its
files as resources (mcp_server.resources, changes from the file watcher notified:
mcp_server.changes) and its skills as prompts (mcp_server.prompts). The same server is offered
over streamable HTTP beside the web server (mcp_server.http).

Which tools are offered follows the approval mode: `read-only` offers the reading tools,
`ask` (the default) those plus the ones named in AGENT_MCP_SERVER_TOOLS / `--allow-tool`,
`auto` every one. stdout is the protocol: logs go to DATA_DIR/logs, messages to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from mcp_server.changes import ResourceChanges
from mcp_server.prompts import SkillPrompts
from mcp_server.resources import WorkspaceResources
from modules.results import ToolError, ToolResult
from modules.sandbox.disk_floor import Floor
from modules.sandbox.factory import runner_for
from modules.skills import SkillCatalog, skill_folders
from modules.tools.catalogue import build_registry
from modules.tools.focus import FocusFiles
from modules.tools.memory import MemoryStore
from modules.tools.registry import Tool, ToolRegistry
from modules.tools.tool_context import ToolContext
from modules.undo.config_hold import ConfigWatch
from modules.undo.journal import UndoJournal
from modules.workspace.annotations import AnnotationStore
from modules.workspace.file_watcher import WorkspaceWatcher
from modules.workspace.paths import Workspace
from modules.workspace.protected import ProtectedPaths
from utils.cancel import CancelToken, TaskCancelled, run_bounded
from utils.logger import setup_logging
from utils.settings import Settings

SERVER_NAME = "workspace-agent"
CONVERSATION_ID = "mcp"  # whose task memory `update_memory` with scope `task` keeps
# Tools that only make sense inside the agent's own loop (its focus, its skills, its
# proposals shown on the page).
LOOP_ONLY = frozenset(
    {"focus_file", "unfocus_file", "use_skill", "read_skill_file", "propose_edit"}
)
COMMAND_GRACE_SECONDS = 15.0
SKILLS_POLL_SECONDS = 2.0  # how often the skill folders are looked at for the prompts' list


def offered_tools(registry: ToolRegistry, settings: Settings) -> tuple[dict[str, Tool], list[str]]:
    """The tools this approval mode offers, and warnings about names that were not added."""
    usable: dict[str, Tool] = {}
    for name in registry.names():
        tool = registry.get(name)
        if tool is not None and name not in LOOP_ONLY:
            usable[name] = tool
    approval, extra = settings.approval, settings.mcp_server_tools
    if approval == "auto":
        return usable, []
    offered = {name: tool for name, tool in usable.items() if tool.read_only}
    warnings = []
    for name in extra:
        if name not in usable:
            warnings.append(f"no tool {name!r} to offer; the tools are: {', '.join(usable)}")
        elif approval == "read-only" and not usable[name].read_only:
            warnings.append(f"{name} changes the workspace: not offered in read-only mode")
        else:
            offered[name] = usable[name]
    return offered, warnings


class _Server(Server[Any]):
    """The SDK's server, telling handshake-era clients that the resource and prompt lists
    change."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(resources_changed=True, prompts_changed=True),
            experimental_capabilities,
            extensions,
        )


class WorkspaceServer:
    """The MCP server: lists the offered tools and runs each call in a worker thread; lists
    and reads the files, and the skills as prompts. One definition for both transports."""

    def __init__(self, settings: Settings) -> None:
        settings.workspace.mkdir(parents=True, exist_ok=True)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.registry = build_registry()
        self.tools, self.warnings = offered_tools(self.registry, settings)
        self.workspace = Workspace(settings.workspace)
        self.protected = ProtectedPaths(self.workspace.root)
        journal = UndoJournal(settings.data_dir, self.workspace, floor=Floor.of(settings))
        self.config = ConfigWatch(journal, self.protected)
        self.runner = runner_for(settings)  # its one conversation's session, when local
        self.memory = MemoryStore(settings.data_dir)
        self.annotations = AnnotationStore(settings.data_dir)
        self.resources = WorkspaceResources(self.workspace)
        self.prompts = SkillPrompts(SkillCatalog(skill_folders(settings)))
        self.changes = ResourceChanges()
        self.server = _Server(
            SERVER_NAME,
            version="1",
            instructions=f"Tools working inside the folder {settings.workspace}; paths are "
            "relative to it. Its files are the resources (workspace:///PATH), its skills the "
            "prompts.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=self.changes.listen,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
        )

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        self.changes.seen(ctx)
        cursor = params.cursor if params is not None else None
        return await anyio.to_thread.run_sync(self.resources.page, cursor)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await anyio.to_thread.run_sync(self.resources.read, str(params.uri))

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        self.resources.rel_of(uri)
        try:
            self.changes.subscribe(ctx, uri)
        except ValueError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.changes.unsubscribe(ctx, str(params.uri))
        return types.EmptyResult()

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        self.changes.prompts_listed(ctx)
        return await anyio.to_thread.run_sync(self.prompts.list)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await anyio.to_thread.run_sync(self.prompts.get, params.name, params.arguments)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_describe(tool) for tool in self.tools.values()])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:  # a protocol error in MCP, not a failed call
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown tool {params.name!r}. Available: {', '.join(self.tools)}",
            )
        try:
            _, args = self.registry.parse_arguments(params.name, json.dumps(params.arguments or {}))
        except ToolError as exc:
            return _result(str(exc), ok=False)
        cancel = CancelToken()
        try:
            result = await anyio.to_thread.run_sync(
                self._run, tool, args, cancel, abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            cancel.cancel()  # the client cancelled the request: stop the command too
            raise
        return _result(result.output, ok=result.ok)

    def _run(self, tool: Tool, args: Any, cancel: CancelToken) -> ToolResult:
        """Run a call. Nobody can be asked here: a change to the program's own configuration is
        refused, and a command's is put back."""
        config = self.protected.reasons(tool.changed_paths(self.workspace, args))
        if config:
            return ToolResult(False, _not_asked(tool.name, config))
        if not tool.runs_code:
            return self._bounded(tool, args, cancel)
        with self.config.around() as watch:
            result = self._bounded(tool, args, cancel)
            held = watch.changes()
            if held is not None:
                result = replace(result, output=result.output + held.decide(False, can_ask=False))
            return result

    def _bounded(self, tool: Tool, args: Any, cancel: CancelToken) -> ToolResult:
        settings = self.settings
        context = ToolContext(
            settings=settings,
            workspace=self.workspace,
            runner=self.runner,
            memory=self.memory,
            annotations=self.annotations,
            focus=FocusFiles(),
            conversation_id=CONVERSATION_ID,
            cancel=cancel,
        )
        if "timeout" in type(args).model_fields:
            limit = (args.timeout or settings.command_timeout) + COMMAND_GRACE_SECONDS
        else:
            limit = settings.tool_timeout
        try:
            return run_bounded(lambda: self.registry.run(tool, args, context), cancel, limit)
        except TimeoutError:
            return ToolResult(False, f"{tool.name} did not finish within {limit:g} s.")
        except TaskCancelled:
            return ToolResult(False, "Cancelled.")

    async def watch_skills(self) -> None:
        """Tell the clients when a skill is added, removed or edited, in any skill folder (the
        shipped one, DATA_DIR's, the workspace's), looked at every SKILLS_POLL_SECONDS."""
        while True:
            await anyio.sleep(SKILLS_POLL_SECONDS)
            if await anyio.to_thread.run_sync(self.prompts.changed):
                await self.changes.prompts_changed()

    async def serve(self) -> None:
        """Serve stdio, the workspace watched for the resource notifications meanwhile."""
        from mcp.server.stdio import stdio_server

        self.changes.attach(asyncio.get_running_loop())
        watcher = WorkspaceWatcher(
            self.settings.workspace.resolve(),
            on_changes=self.changes.on_changes,
            start_background_task=_daemon_thread,
        )
        watcher.start()
        try:
            async with stdio_server() as (read, write), anyio.create_task_group() as tasks:
                tasks.start_soon(self.watch_skills)
                await self.server.run(read, write, self.server.create_initialization_options())
                tasks.cancel_scope.cancel()
        finally:
            watcher.stop()

    def close(self) -> None:
        self.runner.close()


def _daemon_thread(target: Callable[[], None]) -> None:
    threading.Thread(target=target, name="mcp-watcher", daemon=True).start()


def _describe(tool: Tool) -> types.Tool:
    parameters = tool.schema()["function"]["parameters"]
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=parameters,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=None if tool.read_only else tool.asks != "never",
        ),
    )


def _not_asked(tool: str, reasons: list[str]) -> str:
    changes = "; ".join(reasons)
    return (
        f"{tool} was not run: it changes {changes}. Changes to Workspace Agent's own "
        "configuration need its user's approval, which cannot be asked over MCP."
    )


def _result(text: str, *, ok: bool) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=not ok
    )


def serve_stdio(settings: Settings) -> int:
    """Serve until the client closes stdin."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(settings.data_dir / "logs", redact_content=settings.log_redact_content)
    server = WorkspaceServer(settings)
    for warning in server.warnings:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    print(
        f"Workspace Agent MCP server: {settings.workspace} ({settings.approval} mode, "
        f"{len(server.tools)} tools: {', '.join(server.tools)})",
        file=sys.stderr,
        flush=True,
    )
    try:
        anyio.run(server.serve)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
