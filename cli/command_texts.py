"""What the slash commands say, the same in the local and the remote terminal: the approval
modes, and the listings of agents, skills and MCP servers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

APPROVAL_MODES = ("auto", "ask", "read-only")
APPROVAL_MEANING = {
    "auto": "every tool runs without asking, but changes to Workspace Agent's own configuration",
    "ask": "asks before commands, deletions, renames, overwrites and changes to Workspace "
    "Agent's own configuration",
    "read-only": "reading tools only",
}


def choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"usage: /{what} {'|'.join(allowed)}")
    return value


def agents_text(
    rows: Sequence[Mapping[str, Any]], problems: Sequence[tuple[object, str]], current: str
) -> str:
    """`/agents`: one line each, `*` on the conversation's; then the definitions that broke."""
    lines = [
        f"{'*' if a['name'] == current else ' '} {a['name']:<12} {a['mode']:<12} {a['description']}"
        for a in rows
    ]
    lines += [f"  broken: {path}: {message}" for path, message in problems]
    return "\n".join(lines)


def tools_off_text(off: Mapping[str, str]) -> str:
    """`/status`'s line of the tools switched off, each with why ("" when none is)."""
    return "".join(f"{name} off: {why}\n" for name, why in off.items())


def skills_text(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "no skills (add folders with a SKILL.md to .agents/skills/ in the workspace)"
    return "\n".join(
        f"  {r['name']:<20} broken: {r['broken']}"
        if "broken" in r
        else f"  {r['name']:<20} {r['description']}"
        for r in rows
    )


def mcp_text(status: Mapping[str, Any], where: str) -> str:
    """`/mcp`: the servers (`get_status.mcp`'s shape), their state and tools' policies."""
    lines = [f"  problem: {p['path']}: {p['message']}" for p in status["problems"]]
    for server in status["servers"]:
        state = server["state"] + (f": {server['error']}" if server["error"] else "")
        lines.append(f"  {server['name']:<16} {state}")
        lines += [f"      {tool['name']}  ({_mcp_policy(tool)})" for tool in server["tools"]]
    if not status["servers"]:
        lines.append(f"  no MCP servers: add an `mcpServers` object to {where} (see the README)")
    return "MCP servers:\n" + "\n".join(lines)


def _mcp_policy(tool: dict[str, Any]) -> str:
    if tool["read_only"]:
        return "read-only"
    return "asks in ask mode" if tool["asks"] else "allowed without asking"


ALLOW_QUESTION = "Allow? [y]es / [n]o / [a]lways for this tool: "


def no_terminal_to_ask(tool: str, warnings: list[str] | None = None) -> tuple[str, str]:
    """(what is printed, why the call was declined) for an approval with no terminal to ask;
    the approval's warnings are printed too (why a change to the configuration asks)."""
    return (
        f"{tool} needs approval but there is no terminal to ask: declined.\n"
        + "".join(f"warning: it {warning}\n" for warning in warnings or ()),
        f"{tool} needed approval and there was no terminal to ask (--approval auto runs such "
        "calls, but those that change Workspace Agent's own configuration)",
    )
