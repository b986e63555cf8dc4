"""The fake model of bench/long_conversation.py, its workspace, and the bare request floor.

`python bench/long_conversation_fake.py serve CALLS CAPTURE_DIR` serves a ten-call task (by
default): each request whose current turn has fewer than CALLS - 1 tool results asks for one
more tool call (read_file, list_files, run_command, search_code in turn, each with a short
sentence first), the last one answers. A task whose message ends with CAPTURE is captured:
the body of each of its requests is written to CAPTURE_DIR/<conversation>-<task>.json.

`python bench/long_conversation_fake.py ok` serves a fake that answers every request `ok`, and
`python bench/long_conversation_fake.py floor BASE_URL API_KEY REPEAT FILE...` is the floor:
a bare process that JSON-encodes each captured request and sends it to that fake REPEAT times,
and prints the CPU seconds one sending of each file's requests took.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2

from tests.fake_llm import Call, FakeLLM, RecordedRequest, Reply, Response

CAPTURE = " [capture]"
_TASK = re.compile(r"task (\d+) of conversation (\d+)")
MODULES = 12


def workspace_files() -> dict[str, str]:
    """A small Python project: what the tool calls read, list, count and search."""
    files = {"README.md": "# inventory\n\nA small stock-keeping service.\n" * 8}
    for i in range(MODULES):
        lines = [f'"""Module {i} of the inventory service."""', "", "import json", ""]
        for j in range(12):
            lines += [
                f"def handle_{i}_{j}(item: dict, count: int = {j}) -> dict:",
                f'    """Adjust the stock of one item by {j} units and report it."""',
                f"    total = item.get('stock', 0) + count * {i + 1}",
                "    return {'id': item['id'], 'stock': total, 'ok': total >= 0}",
                "",
            ]
        files[f"src/module_{i}.py"] = "\n".join(lines) + "\n"
        files[f"tests/test_module_{i}.py"] = f"from src.module_{i} import handle_{i}_0\n" * 6
    return files


def _tool_call(turn: int, task: int) -> Call:
    module = (task + turn) % MODULES
    kind = turn % 4
    if kind == 0:
        return Call("read_file", {"path": f"src/module_{module}.py"})
    if kind == 1:
        return Call("list_files", {"directory": "."})
    if kind == 2:
        command = f"wc -l src/*.py && head -n 40 src/module_{module}.py"
        return Call("run_command", {"command": command})
    return Call("search_code", {"query": f"handle_{module}_"})


def _turn(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The current turn's user text and how many tool results it has."""
    results = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or ""), results
        results += message.get("role") == "tool"
    return "", results


def _responder(calls: int, capture_dir: Path) -> Callable[[RecordedRequest], Response]:
    captured: dict[str, list[Any]] = {}  # a captured task's requests so far, by file name

    def respond(request: RecordedRequest) -> Response:
        text, results = _turn(request.messages)
        match = _TASK.search(text)
        task = int(match[1]) if match else 0
        name = f"{match[2]}-{match[1]}.json" if match and text.endswith(CAPTURE) else None
        if name is not None:
            captured.setdefault(name, []).append(request.body)
        if results < calls - 1:
            sentence = f"Step {results + 1}: I will look at the next part of the code."
            return Reply(content=sentence, tool_calls=[_tool_call(results, task)], chunk_size=4)
        if name is not None:
            (capture_dir / name).write_text(json.dumps(captured.pop(name), ensure_ascii=False))
        answer = f"Task {task} done: the stock handlers add count times the module number. " * 8
        return Reply(content=answer, chunk_size=4)

    return respond


def serve(respond: Callable[[RecordedRequest], Response]) -> int:
    """Serve until stdin closes; keeps no request (the fake's own list is emptied each time)."""
    with FakeLLM("deepseek") as fake:

        def forgetful(request: RecordedRequest) -> Response:
            fake.requests.clear()  # 500 requests of up to a few MB each would pile up here
            return respond(request)

        fake.responder = forgetful
        print(f"fake {fake.base_url} {fake.api_key} {fake.model}", flush=True)
        reader = threading.Thread(target=sys.stdin.read, daemon=True)
        reader.start()
        reader.join(4 * 3600)
    return 0


def floor(base_url: str, api_key: str, repeat: int, files: list[Path]) -> int:
    """CPU seconds of encoding and sending each file's requests once, as the SDK does: one
    `json.dumps` of the body (the SDK's settings), one HTTP POST, the short reply read."""
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    bodies = {path: json.loads(path.read_text()) for path in files}
    with httpx2.Client(base_url=base_url, headers=headers, timeout=60) as client:
        for body in next(iter(bodies.values()))[:2]:  # warm: the connection
            _send(client, body)
        for path, requests in bodies.items():
            started = time.process_time()
            for _ in range(repeat):
                sizes = sum(_send(client, body) for body in requests)
            seconds = (time.process_time() - started) / repeat
            print(f"floor {path.name} {seconds:.6f} {sizes}")
    return 0


def _send(client: httpx2.Client, body: dict[str, Any]) -> int:
    """Send one request body; its size in bytes."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    with client.stream("POST", "/chat/completions", content=data) as response:
        if not any(line.startswith("data: [DONE]") for line in response.iter_lines()):
            raise RuntimeError(f"the floor's request got no answer ({response.status_code})")
    return len(data)


def main(argv: list[str]) -> int:
    if argv[0] == "serve":
        return serve(_responder(int(argv[1]), Path(argv[2])))
    if argv[0] == "ok":  # the floor's fake: every request answered at once
        return serve(lambda request: Reply(content="ok"))
    if argv[0] == "floor":
        return floor(argv[1], argv[2], int(argv[3]), [Path(p) for p in argv[4:]])
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
