"""Finding things through the real server: search answers the words around a hit as they read
(markup out, hits set apart), the list tells apart conversations of the same title, and the
preview's images come with their own type under a policy that runs nothing."""

from __future__ import annotations

import pytest
import requests

from history.snippets import plain_text, snippet_parts
from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.server import ServerProcess
from tests.kit.settings import TOKEN
from web.routes import IMAGE_LIMIT_BYTES

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'
pytestmark = [
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        files={
            "art/dot.png": PNG,
            "art/logo.svg": SVG,
            "art/fake.png": b"just text\n",
            "art/script.svg": b"<html><script>alert(1)</script></html>",
            "notes.txt": "hello\n",
        }
    ),
]
ANSWER = (
    "## Fixed\n\nI changed **`calc.py`**: the [divide](https://example.com/d) function now "
    "checks for *zero* first.\n\n```python\ndef divide(a, b):\n    return a / b\n```\n"
)


def test_markdown_reads_as_plain_words():
    assert plain_text(ANSWER) == (
        "Fixed I changed calc.py: the divide function now checks for zero first. "
        "def divide(a, b): return a / b"
    )
    table = "| name | value |\n|---|---|\n| snake_case_name | 2 |\n\n> - [x] quoted item\n"
    assert plain_text(table) == "name value snake_case_name 2 quoted item"


def test_a_snippet_is_cut_at_words_and_every_hit_is_set_apart():
    text = " ".join(f"w{n}" for n in range(100)) + " Straße " + "tail " * 60
    parts = snippet_parts(text, "strasse")
    assert parts is not None and parts[1] == "Straße" and len(parts) == 3
    assert parts[0].startswith("…w") and parts[0].endswith(" ") and parts[2].endswith("…")
    assert all(word.startswith("w") for word in parts[0][1:].split())  # whole words only
    assert snippet_parts("divide then Divide", "divide") == ["", "divide", " then ", "Divide", ""]
    assert snippet_parts("nothing here", "divide") is None


def test_search_answers_the_words_around_the_hit_and_counts_tasks(
    server: ServerProcess, fake: FakeLLM
):
    fake.script(Reply(content=ANSWER), Reply(content="Fine."), Reply(content="Again."))
    with connected(server.url) as client:
        first = client.start("Fix the bug in calc.py")
        client.wait_done(first)
        client.wait_done(client.start("and once more", conversation_id=first), count=2)
        second = client.start("Fix the bug in calc.py")
        client.wait_done(second)
        found = client.call("list_conversations", {"query": "DIVIDE function"})["conversations"]
        assert [c["id"] for c in found] == [first]
        hit = found[0]
        assert hit["snippet_parts"][1] == "divide function"
        assert "".join(hit["snippet_parts"]) == hit["snippet"]
        assert (
            "**" not in hit["snippet"] and "`" not in hit["snippet"] and "](" not in hit["snippet"]
        )
        assert hit["snippet"].startswith("Fixed I changed calc.py: the ")
        # Markup that is searched for itself is found where it is written.
        marked = client.call("list_conversations", {"query": "**`calc"})["conversations"]
        assert marked[0]["snippet_parts"][1] == "**`calc"
        listed = {c["id"]: c for c in client.call("list_conversations", {})["conversations"]}
        assert (listed[first]["tasks"], listed[second]["tasks"]) == (2, 1)
        assert listed[first]["title"] == listed[second]["title"]


def _image(server: ServerProcess, path: str) -> requests.Response:
    params = {"path": path, "view": "image"}
    return requests.get(f"{server.url}/api/download", params=params, headers=AUTH, timeout=5)


def test_images_come_with_their_type_under_a_policy_that_runs_nothing(server: ServerProcess):
    png = _image(server, "art/dot.png")
    assert png.status_code == 200 and png.content == PNG
    assert png.headers["Content-Type"] == "image/png"
    assert png.headers["Content-Disposition"].startswith("attachment")  # a tab downloads it
    assert "sandbox" in png.headers["Content-Security-Policy"]
    svg = _image(server, "art/logo.svg")
    assert svg.headers["Content-Type"].startswith("image/svg+xml") and svg.content == SVG
    assert svg.headers["Content-Security-Policy"].startswith("default-src 'none'")
    for path in ("art/fake.png", "art/script.svg", "notes.txt"):
        refused = _image(server, path)
        assert refused.status_code == 415, path
        assert refused.json()["error"]["code"] == "not_an_image"
    assert _image(server, "art").status_code == 404  # a folder is no zip here
    big = server.workspace / "art" / "big.png"
    big.write_bytes(PNG + b"\x00" * IMAGE_LIMIT_BYTES)
    assert _image(server, "art/big.png").json()["error"]["code"] == "too_large"
    assert _image(server, "../outside.png").status_code in (400, 404)
    plain = requests.get(
        f"{server.url}/api/download", params={"path": "art/logo.svg"}, headers=AUTH, timeout=5
    )
    assert plain.headers["Content-Type"] == "application/octet-stream"  # a download stays one
