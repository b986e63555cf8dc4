"""Page benchmark: a long Markdown answer streamed at full speed, socket time vs. render time.

Run from the repo root: `python bench/page.py [--chars 47000] [--chunk 8] [--runs 3]`.

The fake model streams one ~47k-character Markdown answer (headings, paragraphs, nested lists,
fenced code with blank lines inside, tables, block quotes, sanitised HTML, and every fifth
section a 100-line code block and a 40-item list) as fast as it can, in fragments of
1..--chunk characters. A real `main.py web` process relays them as `token` events to a
headless Chromium showing the page. Per run we measure:

- socket time: from the first `token` frame to the last one arriving on the page's WebSocket
  (a frame of gathered `deltas` counts too: the page asks for them, see
  web/transport/delta_batcher.py)
  (Chromium's own frame timestamps, `Network.webSocketFrameReceived`);
- render time: from the first `token` frame until the answer's DOM last changed (a
  MutationObserver), mapped onto the same clock (`Performance.getMetrics`);
- the ratio render / socket;
- the longest main-thread task while the answer streamed, in wall time (PerformanceObserver
  `longtask` entries, which start at 50 ms) and in CPU time of that thread (task events of a
  Chromium trace, category `toplevel`): on a shared machine a task's wall time also counts the
  time the thread waited for a core (the server relaying at full speed needs one of its own);
- the main thread's CPU time from the first token on (all its tasks: socket events, rendering,
  layout, paint);
- whether the final answer is identical to a one-shot render of the whole text;
- the same page reloaded, showing the answer from the conversation's history: when it was shown
  completely (ms after the page began to load), the longest main-thread task from the moment
  the answer's element appeared, and whether it is a one-shot render's.

The page reads its socket on its main thread, so a busy page also holds the tokens back: its
socket time stretches with its own work. Each round therefore also times the same answer at a
bare Socket.IO client that only records the tokens, and prints render time against that.

Baseline in the same run: the same page with the answer renderer as it was before incremental
rendering (static/js/markdown.js and messages.js of commit BASELINE_COMMIT, served in place of
today's by request interception): it lexed the whole text again on every frame, and rendered a
history answer at once. Runs alternate between the two so a noisy machine slows both alike.
Goals: ratio <= 1.25 and no task over 50 ms (of CPU time, streaming or history). Exit code 1
when the incremental page misses one.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.page_figures import (
    GOAL_RATIO,
    GOAL_TASK_MS,
    Run,
    main_thread_tasks,
    mark_ms,
    print_report,
    print_run,
)
from tests.fake_llm import FakeLLM, Reply
from tests.kit.browser import CHROMIUM, CHROMIUM_ARGS, collect_errors
from tests.kit.clients import EventClient
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN

REPO = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "43dbda2"  # the last commit with the full re-render of a streamed answer
BASELINE_FILES = ("static/js/markdown.js", "static/js/messages.js")
BASELINE_DOM = "static/js/page-bench-baseline-dom.js"  # exists only for the baseline page
SENTINEL = "End of the answer (page-bench)."
TRACE_CATEGORIES = ["toplevel", "blink.user_timing"]

# Installed before the page's own scripts: long tasks, when the answer's element appeared and
# when it last changed.
ANSWER_MARK = "page-bench-answer"
PAGE_PROBE = (
    f'const ANSWER_MARK = "{ANSWER_MARK}";'
    + """
window.__bench = { longtasks: [], answerAt: null, lastChange: null };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__bench.longtasks.push([e.startTime, e.duration]);
}).observe({ type: "longtask", buffered: true });
new MutationObserver((records) => {
  const answer = document.querySelector(".assistant-message .answer");
  if (!answer) return;
  const now = performance.now();
  const bench = window.__bench;
  if (bench.answerAt === null) {  // it may come filled
    bench.answerAt = bench.lastChange = now;
    performance.mark(ANSWER_MARK);  // in the trace too
  }
  else if (records.some((r) => answer.contains(r.target))) bench.lastChange = now;
}).observe(document, { childList: true, subtree: true, characterData: true, attributes: true });
"""
)
QUIET_MS = 700  # the answer is taken as shown completely when it has not changed for this long

# Whether the answer shown is what a one-shot render of the whole text makes (MarkdownView.set
# on a fresh container).
SAME_AS_ONE_SHOT = """async (text) => {
  const { MarkdownView } = await import("/static/js/markdown.js");
  const fresh = document.createElement("div");
  new MarkdownView(fresh).set(text);
  const shown = document.querySelector(".assistant-message .answer");
  return fresh.innerHTML === shown?.innerHTML;
}"""


# --- the answer -----------------------------------------------------------------------------


def markdown_answer(chars: int, seed: int = 7) -> str:
    """A long, varied Markdown answer of about `chars` characters ending with SENTINEL."""
    rng = random.Random(seed)
    words = [
        "agent",
        "workspace",
        "token",
        "stream",
        "render",
        "block",
        "frame",
        "socket",
        "markdown",
        "table",
        "list",
        "quote",
        "fence",
        "parser",
        "budget",
        "history",
    ]

    def sentence(n: int = 12) -> str:
        text = " ".join(rng.choice(words) for _ in range(n))
        return text[0].upper() + text[1:] + "."

    parts: list[str] = []
    section = 0
    while sum(len(p) for p in parts) < chars:
        section += 1
        parts.append(f"## Section {section}: {rng.choice(words)}\n\n")
        parts.append(
            f"{sentence()} See **`core/module_{section}.py:{section * 7}`** and [the "
            f"docs](https://example.com/docs/{section}) for *details*. {sentence(20)}\n\n"
        )
        parts.append(
            "".join(
                f"- {sentence(6)}\n  - nested `item_{section}_{i}` {sentence(4)}\n"
                for i in range(4)
            )
            + "\n"
        )
        parts.append("".join(f"{i}. step {sentence(5)}\n" for i in range(1, 4)) + "\n")
        code_lines = [
            f"def handler_{section}_{i}(event):\n    return event.get('{rng.choice(words)}')\n"
            for i in range(4)
        ]
        parts.append("```python\n" + "\n".join(code_lines) + "```\n\n")
        rows = "".join(
            f"| {rng.choice(words)} | {rng.randint(1, 999)} | {sentence(3)} |\n" for _ in range(5)
        )
        parts.append("| name | count | note |\n| --- | ---: | --- |\n" + rows + "\n")
        parts.append(f"> {sentence(10)}\n> {sentence(8)}\n\n")
        if section % 3 == 0:
            parts.append(
                '<div style="color:red">raw <b>html</b> <script>alert(1)</script>'
                f'<a href="javascript:alert(2)">{sentence(4)}</a></div>\n\n'
            )
        if section % 5 == 0:  # long blocks: the open one is shown again and again as it grows
            parts.append(
                "```python\n"
                + "".join(
                    f"def step_{section}_{i}(state, {rng.choice(words)}=None):\n"
                    f"    return state.update({{'{rng.choice(words)}': {i}}})  # {sentence(3)}\n"
                    for i in range(100)
                )
                + "```\n\n"
            )
            parts.append(
                "".join(f"{i}. **{rng.choice(words)}** {sentence(8)}\n" for i in range(1, 41))
                + "\n"
            )
    parts.append(SENTINEL + "\n")
    return "".join(parts)


def baseline_sources() -> dict[str, str]:
    """What the baseline page is served in place of today's files, by path.

    BASELINE_FILES as they were in BASELINE_COMMIT; their imports from dom.js that today's no
    longer has (frameThrottle) come from the baseline's dom.js, served as BASELINE_DOM.
    """

    def at_baseline(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{BASELINE_COMMIT}:{path}"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    sources = {path: at_baseline(path) for path in BASELINE_FILES}
    old_import = 'import { formatBytes, frameThrottle, h, icon } from "./dom.js";'
    new_import = (
        'import { formatBytes, h, icon } from "./dom.js";\n'
        f'import {{ frameThrottle }} from "./{Path(BASELINE_DOM).name}";'
    )
    messages = sources["static/js/messages.js"]
    assert old_import in messages, "the baseline's messages.js does not import as expected"
    sources["static/js/messages.js"] = messages.replace(old_import, new_import)
    sources[BASELINE_DOM] = at_baseline("static/js/dom.js")
    return sources


# --- one run --------------------------------------------------------------------------------


def _serve(body: str) -> Any:
    """A route handler answering with this JavaScript."""
    return lambda route: route.fulfill(body=body, content_type="text/javascript; charset=utf-8")


def _clock_offset_ms(page: Any, cdp: Any) -> float:
    """CDP monotonic time (ms) minus the page's performance.now(), best of a few tries."""
    best: tuple[float, float] | None = None
    for _ in range(5):
        t0 = time.perf_counter()
        now = page.evaluate("performance.now()")
        metrics = cdp.send("Performance.getMetrics")["metrics"]
        spent = time.perf_counter() - t0
        stamp = next(m["value"] for m in metrics if m["name"] == "Timestamp") * 1000
        if best is None or spent < best[0]:
            best = (spent, stamp - now)
    assert best is not None
    return best[1]


def _until_quiet(page: Any, started: Any, timeout_s: float = 120) -> None:
    """Wait, from Python (nothing polls in the page meanwhile), until started() and the answer
    has not changed for QUIET_MS."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        page.wait_for_timeout(100)
        if started() and page.evaluate(f"""() => {{ const b = window.__bench;
            return b.lastChange !== null && performance.now() - b.lastChange > {QUIET_MS}; }}"""):
            return
    raise RuntimeError("the answer did not settle")


def run_once(
    browser: Any,
    server: ServerProcess,
    fake: FakeLLM,
    answer: str,
    chunk: int,
    replaced: dict[str, str],
    seed: int,
) -> Run:
    """One streamed answer in a fresh page, then the page reloaded to show it from history;
    `replaced` serves those files instead of today's."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.add_init_script(PAGE_PROBE)
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Performance.enable")
        frames: list[float] = []
        done: list[float] = []
        errors = collect_errors(page)

        def on_frame(params: dict[str, Any]) -> None:
            data = params["response"]["payloadData"]
            if data.startswith(('42["token"', '42["deltas"')):  # deltas: gathered tokens
                frames.append(params["timestamp"] * 1000)
            elif data.startswith('42["done"'):
                done.append(params["timestamp"] * 1000)

        cdp.on("Network.webSocketFrameReceived", on_frame)
        for path, text in replaced.items():
            page.route(f"**/{path}", _serve(text))
        page.goto(f"{server.url}/?token={TOKEN}")
        try:  # the page is up once it lists the workspace
            page.wait_for_selector('#file-tree [data-path="README.md"]', timeout=30_000)
        except PlaywrightTimeout:
            raise RuntimeError(f"the page did not start: {errors[:3] or 'no error'}") from None
        page.click("#new-conversation")
        page.wait_for_function("() => !document.querySelector('.assistant-message')")
        fake.script(Reply(content=answer, chunk_size=chunk, split_seed=seed))
        page.fill("#message-input", "write the long answer")
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        page.press("#message-input", "Enter")
        _until_quiet(page, lambda: bool(done))
        trace = browser.stop_tracing()
        probe = page.evaluate("window.__bench")
        offset = _clock_offset_ms(page, cdp)
        same = page.evaluate(SAME_AS_ONE_SHOT, answer)

        browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        page.reload()  # the conversation stays open: its history shows the answer
        _until_quiet(page, lambda: True)
        history_trace = browser.stop_tracing()
        history = page.evaluate("window.__bench")
        history_same = page.evaluate(SAME_AS_ONE_SHOT, answer)
    finally:
        context.close()
    if errors:
        raise RuntimeError(f"the page reported errors: {errors[:3]}")
    first, last = min(frames), max(frames)
    tasks = [d for s, d in probe["longtasks"] if s + d >= first - offset]
    traced = main_thread_tasks(trace, first)
    # (a long task's end is rounded: the one that made the answer may seem to end just before)
    history_tasks = [d for s, d in history["longtasks"] if s + d >= history["answerAt"] - 2]
    history_traced = main_thread_tasks(history_trace, mark_ms(history_trace, ANSWER_MARK))
    return Run(
        socket_ms=last - first,
        render_ms=probe["lastChange"] + offset - first,
        longest_task_ms=max(tasks, default=0.0),
        longest_task_cpu_ms=max(cpu for _, cpu in traced),
        main_cpu_ms=sum(cpu for _, cpu in traced),
        same_as_one_shot=same,
        tokens=len(frames),
        history_ms=history["lastChange"],
        history_task_ms=max(history_tasks, default=0.0),
        history_task_cpu_ms=max(cpu for _, cpu in history_traced),
        history_same=history_same,
    )


def bare_socket_ms(
    server: ServerProcess, fake: FakeLLM, answer: str, chunk: int, seed: int
) -> float:
    """From the first token to the last at a Socket.IO client that only records them: the pace
    the server sends at when the client keeps up (the page's own socket time includes the time
    its busy main thread held the socket back)."""
    client = EventClient(server.url).connect()
    try:
        fake.script(Reply(content=answer, chunk_size=chunk, split_seed=seed))
        tokens = [
            e.at
            for e in client.wait_done(client.start("write the long answer"), timeout=120)
            if e.name == "token"
        ]
    finally:
        client.disconnect()
    return (tokens[-1] - tokens[0]) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=47_000)
    parser.add_argument("--chunk", type=int, default=8, help="largest fragment in characters")
    parser.add_argument("--runs", type=int, default=3, help="runs of each variant")
    args = parser.parse_args()
    if CHROMIUM is None:
        print("no Chromium on this machine", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    answer = markdown_answer(args.chars)
    variants = {"full (before)": baseline_sources(), "incremental": {}}
    print(
        f"answer: {len(answer)} characters, fragments of 1..{args.chunk}; "
        f"goal: ratio <= {GOAL_RATIO}x, no task over {GOAL_TASK_MS:.0f} ms"
    )
    results: dict[str, list[Run]] = {name: [] for name in variants}
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, FakeLLM("deepseek") as fake:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "README.md").write_text("# bench\n")
        with (
            ServerProcess(
                workspace, Path(tmp) / "data", base_url=fake.base_url, api_key=fake.api_key
            ) as server,
            sync_playwright() as p,
        ):
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for n in range(args.runs):
                bare.append(bare_socket_ms(server, fake, answer, args.chunk, seed=n))
                print(f"  run {n + 1} bare client    socket {bare[-1]:.0f} ms", flush=True)
                for name, replaced in variants.items():
                    run = run_once(browser, server, fake, answer, args.chunk, replaced, seed=n)
                    results[name].append(run)
                    print_run(n, name, run)
            browser.close()
    return 0 if print_report(results, bare) else 1


if __name__ == "__main__":
    sys.exit(main())
