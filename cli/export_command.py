"""`/export [md|json] [PATH]`: the conversation's current branch written to a file the user
names (a folder: the file is named from the title in it; no PATH: in the current directory),
never over an existing file; the local terminal reads its history, the remote one asks the
server (GET /api/conversations/ID/export)."""

from __future__ import annotations

import os
from pathlib import Path

from cli.remote_terminal import RemoteTerminal
from cli.terminal import CliTerminal
from history.export import EXPORT_FORMATS, ExportFormat, export_name, export_text

USAGE = "usage: /export [md|json] [PATH]"
FORMAT_NAMES = {"md": "Markdown", "json": "JSON"}


def local_export(t: CliTerminal, arg: str) -> str:
    """Export the local terminal's conversation."""
    fmt, target = _parsed(arg)
    conversation = t.conversation
    if conversation is None or t.conversation_id is None:
        raise ValueError("no conversation to export yet")
    name = export_name(conversation.meta.get("title"), conversation.id, fmt)
    return _written(export_text(conversation, fmt), name, target, fmt)


def remote_export(t: RemoteTerminal, arg: str) -> str:
    """Export the remote terminal's conversation, as the server makes it."""
    fmt, target = _parsed(arg)
    if t.conversation_id is None:
        raise ValueError("no conversation to export yet")
    title = t.client.get_conversation(t.conversation_id)["conversation"].get("title")
    name = export_name(title, t.conversation_id, fmt)
    return _written(t.client.export_conversation(t.conversation_id, fmt), name, target, fmt)


def _parsed(arg: str) -> tuple[ExportFormat, str]:
    words = arg.split(maxsplit=1)
    if words and words[0] in EXPORT_FORMATS:
        return words[0], words[1].strip() if len(words) > 1 else ""
    return "md", arg.strip()


def _written(text: str, name: str, target: str, fmt: ExportFormat) -> str:
    """Write `text` to `target` (a folder: `name` in it); say where, or raise ValueError."""
    path = Path(target).expanduser() if target else Path(name)
    if path.is_dir():
        path = path / name
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValueError(f"{path} exists: name another file ({USAGE})") from None
    except OSError as exc:
        raise ValueError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return f"exported as {FORMAT_NAMES[fmt]} to {path.resolve()}"
