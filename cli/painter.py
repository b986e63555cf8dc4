"""Colour in the terminal and what it shows of changes: a unified diff in colour, and what a
call waiting for approval asks (shared by the event printer and the approval prompts)."""

from __future__ import annotations

from core.approval import split_reasons
from protocol.events import ToolEvent

DIM, BOLD, RESET = "\033[2m", "\033[1m", "\033[0m"
RED, GREEN, CYAN, YELLOW = "\033[31m", "\033[32m", "\033[36m", "\033[33m"
DIFF_PREVIEW_LINES = 80
VERBS = {
    "run_command": "run",
    "run_python": "run",
    "delete_file": "delete",
    "rename_file": "rename",
}


class Painter:
    """Paints text when the terminal takes colour; leaves it plain otherwise."""

    def __init__(self, *, color: bool) -> None:
        self.color = color

    def paint(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + RESET if self.color and styles else text

    def approval_text(self, event: ToolEvent) -> str:
        """What a call waiting for approval shows: `NAME wants to change PATH:` and the diff in
        colour, or `NAME wants to run:` and the command, then its warnings; why it changes the
        program's own configuration, when it does, comes first."""
        reasons, preview = split_reasons(event.preview or "")
        path = diff_path(preview)
        if path is not None:
            head, body = f"{event.tool} wants to change {path}:", self.diff(preview)
        else:
            verb = VERBS.get(event.tool, "use")
            head = f"{event.tool} wants to {verb}:"
            body = "".join(f"  {line}\n" for line in preview.splitlines())
        why = "".join(self.paint(line, YELLOW) + "\n" for line in reasons)
        warnings = "".join(
            self.paint(f"warning: it {w}", YELLOW) + "\n" for w in event.warnings or ()
        )
        return self.paint(head, YELLOW, BOLD) + "\n" + why + body + warnings

    def diff(self, diff: str) -> str:
        """A unified diff, added lines green and removed ones red (at most DIFF_PREVIEW_LINES)."""
        lines = diff.splitlines()
        shown = [self.paint(line, *_diff_style(line)) for line in lines[:DIFF_PREVIEW_LINES]]
        if len(lines) > DIFF_PREVIEW_LINES:
            shown.append(self.paint(f"… {len(lines) - DIFF_PREVIEW_LINES} more lines", DIM))
        return "".join(f"{line}\n" for line in shown)


def _diff_style(line: str) -> tuple[str, ...]:
    if line.startswith(("+++", "---")):
        return (BOLD,)
    if line.startswith("+"):
        return (GREEN,)
    if line.startswith("-"):
        return (RED,)
    if line.startswith("@@"):
        return (CYAN,)
    return ()


def diff_path(preview: str) -> str | None:
    """The file a unified diff preview changes; None when the preview is not a diff."""
    lines = preview.split("\n", 2)
    if len(lines) < 2 or not lines[0].startswith("--- ") or not lines[1].startswith("+++ "):
        return None
    after, before = lines[1][4:].strip(), lines[0][4:].strip()
    name = after if after != "/dev/null" else before
    return name.removeprefix("b/").removeprefix("a/")
