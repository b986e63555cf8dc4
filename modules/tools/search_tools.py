"""Search tools: text in the workspace's files, and the web through Tavily."""

from __future__ import annotations

import stat
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, Field

from modules.results import ToolError
from modules.tools.tool_context import ToolContext
from modules.workspace.ignore import WorkspaceIgnore
from modules.workspace.safe_fs import SafeRoot

SEARCH_FILE_LIMIT_BYTES = 1_000_000
LINE_CHARS = 200
WEB_TIMEOUT_SECONDS = 30
WEB_SNIPPET_CHARS = 500


class SearchCodeArgs(BaseModel):
    query: str = Field(min_length=1, description="Text to find (plain text, case-insensitive).")
    max_results: int = Field(50, ge=1, le=500, description="Most matching lines to return.")


def _text_files(fs: SafeRoot, stop: Callable[[], bool]) -> Iterator[str]:
    """Workspace paths of the shown regular files, breadth-first, until `stop()` says so."""
    ignore = WorkspaceIgnore(fs.root)
    queue = deque([""])
    while queue and not stop():
        rel_dir = queue.popleft()
        rules = ignore.folder(rel_dir)
        try:
            entries = sorted(fs.list_dir(rel_dir))
        except (OSError, ToolError):
            continue
        for name, info in entries:
            is_dir = stat.S_ISDIR(info.st_mode)
            if rules.hides(name, is_dir):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if is_dir:
                queue.append(rel)
            elif stat.S_ISREG(info.st_mode):
                yield rel


def _matches(fs: SafeRoot, rel: str, needle: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of each line of a text file containing `needle` (lowercase)."""
    try:
        with fs.open_regular(rel, follow=False) as (handle, info):
            if info.st_size > SEARCH_FILE_LIMIT_BYTES:
                return
            data = handle.read(SEARCH_FILE_LIMIT_BYTES + 1)
    except (OSError, ToolError):
        return
    if b"\x00" in data[:8192]:
        return
    text = data.decode("utf-8", errors="replace")
    if needle not in text.lower():
        return
    for number, line in enumerate(text.split("\n"), 1):
        if needle in line.lower():
            yield number, line.strip()


def search_code(ctx: ToolContext, args: SearchCodeArgs) -> str:
    """Find lines containing some text in the workspace's files; answers 'path:line: text'.

    Plain text, case-insensitive (not a regular expression). Skips binary files, files over
    1 MB, files and folders matched by the workspace's .gitignore files, and .git,
    node_modules, virtualenvs, __pycache__ and other caches.
    """
    needle = args.query.lower()
    hits: list[str] = []
    seconds = ctx.settings.tool_timeout / 2  # the answer so far arrives before it is given up on
    deadline = time.monotonic() + seconds

    def stop() -> bool:
        return time.monotonic() > deadline or ctx.cancel.cancelled

    for rel in _text_files(ctx.workspace, stop):
        for number, line in _matches(ctx.workspace, rel, needle):
            if len(hits) == args.max_results:
                hits.append(
                    f"… more matches not shown (max_results={args.max_results}); narrow the query."
                )
                return "\n".join(hits)
            shown = line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + "…"
            hits.append(f"{rel}:{number}: {shown}")
    if stop():
        hits.append(f"… stopped after {seconds:g} s: not every file was searched.")
    if not hits:
        return f"No matches for {args.query!r}."
    return "\n".join(hits)


class WebSearchArgs(BaseModel):
    query: str = Field(min_length=1, description="What to search the web for.")
    max_results: int = Field(5, ge=1, le=20, description="How many results to return.")


def tavily_search(
    api_key: str | None,
    query: str,
    max_results: int,
    *,
    use_proxy: bool = False,
    base_url: str | None = None,
) -> str:
    """Search the web with Tavily and format the results; failures raise ToolError."""
    if not api_key:
        raise ToolError("web search is not configured: set TAVILY_API_KEY")
    import requests  # on first use: tavily pulls in httpx, requests and tiktoken (~0.1 s)
    from tavily import TavilyClient

    session = requests.Session()
    session.trust_env = use_proxy
    try:
        client = TavilyClient(api_key=api_key, session=session, api_base_url=base_url)
        response = client.search(query, max_results=max_results, timeout=WEB_TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        raise ToolError(f"web search failed: could not reach the search service ({exc})") from None
    except Exception as exc:
        raise ToolError(f"web search failed: {type(exc).__name__}: {exc}") from None
    finally:
        session.close()
    return _format_results(query, response)


def _format_results(query: str, response: dict[str, Any]) -> str:
    results = response.get("results") or []
    if not results:
        return f"No web results for {query!r}."
    lines = []
    if response.get("answer"):
        lines += [f"Answer: {response['answer']}", ""]
    for number, item in enumerate(results, 1):
        snippet = str(item.get("content") or "").strip()
        if len(snippet) > WEB_SNIPPET_CHARS:
            snippet = snippet[:WEB_SNIPPET_CHARS] + "…"
        lines += [f"{number}. {item.get('title') or '(no title)'}", f"   {item.get('url', '')}"]
        if snippet:
            lines.append(f"   {snippet}")
    return "\n".join(lines)


def web_search(ctx: ToolContext, args: WebSearchArgs) -> str:
    """Search the web; returns numbered results with title, URL and a snippet."""
    settings = ctx.settings
    return tavily_search(
        settings.tavily_api_key, args.query, args.max_results, use_proxy=settings.use_proxy
    )
