"""Markdown in a terminal, with rich: an answer shown as it streams, and a wait spinner.

A streamed answer is cut into Markdown's top-level blocks as it grows. Every block but the last
is finished, so it is printed for good; only the block being written is redrawn below them
(a live region never taller than the screen), so a long answer scrolls like any output and
tmux's scrollback keeps it once. Imported only when a terminal shows colour: `rich` costs
start-up time a script's `-p` run does not pay.
"""

from __future__ import annotations

from typing import ClassVar, TextIO

from markdown_it import MarkdownIt
from rich.console import (
    Console,
    ConsoleOptions,
    Group,
    JustifyMethod,
    RenderableType,
    RenderResult,
)
from rich.live import Live
from rich.markdown import Heading, Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text
from rich.theme import Theme

REFRESH_PER_SECOND = 15
_PARSER = MarkdownIt().enable("strikethrough").enable("table")  # as rich's Markdown parses


class _LeftHeading(Heading):
    """Headings flush left, like the rest of a terminal's text (rich centres `#` ones)."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = {f"h{n}": "left" for n in range(1, 7)}


class _Markdown(Markdown):
    elements: ClassVar = {**Markdown.elements, "heading_open": _LeftHeading}


def markdown(text: str) -> RenderableType:
    """Text as Markdown for a terminal: links with their address shown, code in the terminal's
    own colours, no trailing padding on the lines."""
    return Trimmed(_Markdown(text, code_theme="ansi_dark", justify="default", hyperlinks=False))


class Trimmed:
    """A renderable without the blank lines around it and the trailing blanks rich pads lines
    with; with `keep`, only its last `keep` lines."""

    def __init__(self, renderable: RenderableType, keep: int | None = None) -> None:
        self.renderable, self.keep = renderable, keep

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = [
            _rstrip(line) for line in console.render_lines(self.renderable, options, pad=False)
        ]
        while lines and not lines[-1]:
            lines.pop()
        first = next((n for n, line in enumerate(lines) if line), len(lines))
        lines = lines[first:]
        if self.keep is not None:
            lines = lines[-self.keep :]
        for line in lines:
            yield from line
            yield Segment.line()


def _rstrip(line: list[Segment]) -> list[Segment]:
    segments = list(line)
    while segments:
        last = segments[-1]
        if last.control or (last.style is not None and last.style.bgcolor is not None):
            break
        text = last.text.rstrip()
        if text:
            segments[-1] = Segment(text, last.style)
            break
        segments.pop()
    return segments


def block_starts(text: str) -> list[int]:
    """Where each top-level Markdown block of `text` starts (character offsets)."""
    line_starts = [0] + [at + 1 for at, char in enumerate(text) if char == "\n"]
    return [
        line_starts[token.map[0]]
        for token in _PARSER.parse(text)
        if token.level == 0 and token.map is not None
    ]


class MarkdownStream:
    """One answer streamed into a console: `feed` the text as it comes, `close` at its end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._pending = ""  # the block being written (and nothing before it)
        self._printed = False
        self._live: Live | None = None

    def feed(self, text: str) -> None:
        self._pending += text
        if "\n" in text:
            self._print_finished(final=False)
        if self._live is None and self._pending.strip():
            self._live = Live(
                console=self.console,
                get_renderable=self._view,
                transient=True,
                refresh_per_second=REFRESH_PER_SECOND,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)

    def close(self) -> None:
        """Print the rest for good and stop redrawing."""
        self._print_finished(final=True)

    def _print_finished(self, *, final: bool) -> None:
        """Print each finished block on its own (the last one too when `final`), one blank line
        between blocks whatever padding rich gives them.

        The live region is taken down first: printed above it, the blocks would be followed by
        its last drawing, which still shows them, and the screen would scroll twice as far.
        """
        starts = block_starts(self._pending)
        if not final and len(starts) < 2:
            return
        if self._live is not None:
            self._live.stop()
            self._live = None
        ends = [*starts[1:], len(self._pending)]
        for begin, end in list(zip(starts, ends, strict=True))[: None if final else -1]:
            if self._printed:
                self.console.print()
            self.console.print(markdown(self._pending[begin:end]))
            self._printed = True
        self._pending = "" if final else self._pending[starts[-1] :]

    def _view(self) -> RenderableType:
        """The block being written, as much of its end as the screen holds. A very long block
        (a big code block) is rendered from its last lines only, with its fence kept."""
        height = max(self.console.height - 3, 3)
        lines = self._pending.split("\n")
        text = self._pending
        if len(lines) > 2 * height:
            fence = lines[0] if lines[0].lstrip().startswith(("```", "~~~")) else None
            text = "\n".join([*([fence] if fence else []), *lines[-height:]])
        view = Trimmed(markdown(text), keep=height)
        return Group(Text(), view) if self._printed else view


class Waiting:
    """A spinner on one line while nothing else shows that work goes on; gone when stopped."""

    def __init__(self, console: Console, text: str) -> None:
        self._live = Live(
            Spinner("dots", text=text, style="cyan"),
            console=console,
            transient=True,
            refresh_per_second=10,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)

    def stop(self) -> None:
        self._live.stop()


# Inline code without rich's black background, which is a dark block on a light terminal.
_THEME = Theme({"markdown.code": "bold cyan"})


def console_for(stream: TextIO) -> Console:
    """A console writing to `stream` (a terminal that takes colour)."""
    return Console(
        file=stream, force_terminal=True, highlight=False, emoji=False, markup=False, theme=_THEME
    )
