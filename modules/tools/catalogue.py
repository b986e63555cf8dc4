"""The registry of every tool the model is offered (docs/protocol.md §6), plus the tools that only
wrap a store: proposed edits, focus and memory."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from modules.results import ToolError, ToolOutput
from modules.tools import (
    command_tools,
    document_tool,
    file_tools,
    process_tools,
    search_tools,
    skill_tools,
    sql_tool,
)
from modules.tools.focus import focusable
from modules.tools.registry import ToolRegistry
from modules.tools.tool_context import ToolContext
from utils.settings import Settings


class ProposeEditArgs(BaseModel):
    path: str = Field(description="File to change, or to create, relative to the workspace.")
    new_content: str = Field(
        description="The new text: the whole file, or the lines that replace start_line..end_line."
    )
    start_line: int | None = Field(
        None, ge=1, description="First line to replace (1-based); omit to replace the whole file."
    )
    end_line: int | None = Field(
        None,
        ge=0,
        description="Last line to replace, inclusive (default: start_line). "
        "start_line - 1 inserts before start_line without replacing anything.",
    )


def propose_edit(ctx: ToolContext, args: ProposeEditArgs) -> ToolOutput:
    """Propose a change to a text file for the user to review; nothing is written now.

    Returns the unified diff. The user applies or discards it, so do not make the same
    change with other tools. Replace the whole file, or lines start_line..end_line.
    """
    if ctx.proposals is None:
        raise ToolError("propose_edit is not available here; use modify_file or create_file.")
    proposal = ctx.proposals.propose(
        conversation_id=ctx.conversation_id,
        task_id=ctx.journal.task_id if ctx.journal else None,
        path=args.path,
        new_content=args.new_content,
        start_line=args.start_line,
        end_line=args.end_line,
    )
    text = (
        f"Proposal {proposal.id} for {proposal.path} (nothing written; the user will "
        f"apply or discard it):\n{proposal.diff}"
    )
    details = {"proposal": {"id": proposal.id, "path": proposal.path, "diff": proposal.diff}}
    return ToolOutput(text, details=details)


class FocusFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace.")


def focus_file(ctx: ToolContext, args: FocusFileArgs) -> str:
    """Keep a file in focus: its current content is shown to you at every turn (at most 3).

    Use it for the files you are actively working on; unfocus them when done.
    """
    rel = focusable(ctx.workspace, args.path)
    added = ctx.focus.add(rel)
    current = ", ".join(ctx.focus.paths())
    state = "Focused" if added else "Already in focus:"
    return f"{state} {rel}. Focused files ({len(ctx.focus.paths())}/{ctx.focus.limit}): {current}"


def unfocus_file(ctx: ToolContext, args: FocusFileArgs) -> str:
    """Stop showing a focused file's content at every turn."""
    path = ctx.workspace.resolve(args.path, follow_symlinks=False)
    rel = ctx.workspace.relative(path)
    ctx.focus.remove(rel)
    current = ", ".join(ctx.focus.paths()) or "none"
    return f"Unfocused {rel}. Focused files: {current}"


class UpdateMemoryArgs(BaseModel):
    scope: Literal["main", "task"] = Field(
        description="'main': lasting notes for every conversation (user preferences, project "
        "facts); 'task': notes for this conversation only (plan, progress)."
    )
    operation: Literal["append", "replace"] = Field(
        description="'append' adds content on a new line; 'replace' rewrites the whole memory."
    )
    content: str = Field(description="The text to append, or the complete new memory.")


def update_memory(ctx: ToolContext, args: UpdateMemoryArgs) -> str:
    """Save notes you will see in later turns: main memory or this task's memory (Markdown)."""
    memory = ctx.memory
    if args.operation == "append":
        text = memory.append(args.scope, ctx.conversation_id, args.content)
    else:
        text = memory.replace(args.scope, ctx.conversation_id, args.content)
    return f"Updated {args.scope} memory ({len(text):,} of {memory.limit:,} characters used)."


def tools_off(settings: Settings) -> dict[str, str]:
    """The tools left out of every offer because what they need is not configured, with why."""
    if settings.tavily_api_key:
        return {}
    return {"web_search": "no Tavily key is set (TAVILY_API_KEY)"}


def build_registry() -> ToolRegistry:
    """Every tool of docs/protocol.md §6, each with when it asks for approval in `ask` mode and
    what it changes (a change to the program's own configuration asks in any mode)."""
    registry = ToolRegistry()
    registry.register(
        "create_file",
        file_tools.create_file,
        asks="on_overwrite",
        plan=file_tools.plan_create,
        targets=file_tools.written_path,
    )
    registry.register("create_folder", file_tools.create_folder, targets=file_tools.written_path)
    registry.register("read_file", file_tools.read_file, read_only=True)
    registry.register("read_document", document_tool.read_document, read_only=True)
    registry.register(
        "modify_file",
        file_tools.modify_file,
        asks="on_overwrite",
        plan=file_tools.plan_modify,
        targets=file_tools.written_path,
    )
    registry.register(
        "delete_file", file_tools.delete_file, asks="always", targets=file_tools.removed_path
    )
    registry.register(
        "rename_file", file_tools.rename_file, asks="always", targets=file_tools.moved_paths
    )
    registry.register("propose_edit", propose_edit)
    registry.register("list_files", file_tools.list_files, read_only=True)
    registry.register("search_code", search_tools.search_code, read_only=True)
    registry.register("run_python", command_tools.run_python, asks="always", runs_code=True)
    registry.register("run_command", command_tools.run_command, asks="always", runs_code=True)
    registry.register("process_output", process_tools.process_output, read_only=True)
    registry.register("process_input", process_tools.process_input, asks="always", runs_code=True)
    registry.register("process_stop", process_tools.process_stop)
    registry.register("process_list", process_tools.process_list, read_only=True)
    registry.register("web_search", search_tools.web_search, read_only=True)
    registry.register("sql_query", sql_tool.sql_query, read_only=True)
    registry.register("focus_file", focus_file, read_only=True)
    registry.register("unfocus_file", unfocus_file, read_only=True)
    registry.register("update_memory", update_memory)
    registry.register("use_skill", skill_tools.use_skill, read_only=True)
    registry.register("read_skill_file", skill_tools.read_skill_file, read_only=True)
    return registry
