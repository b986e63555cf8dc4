"""A streamed answer, rendered block by block, ends exactly as a one-shot render of its text; so
does a long one shown from history, in slices of frames."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_llm import Reply
from tests.kit.browser import Served, new_context
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

DOCUMENTS = {
    "headings": (
        "# Title\n\nSome **bold**, *em*, `code` and [a link](https://example.com/a).\n\n"
        "Setext heading\n==============\n\nAnother one\n---\n\n### Third\ntext right after\n"
    ),
    "lists": (
        "- one\n- two\n  - nested *a*\n  - nested b\n\n    still b, after a blank line\n"
        "- three\n\n1. first\n2. second\n   1. inner\n   2. inner two\n3. third\n\n"
        "- [ ] task\n- [x] done task\n\nafter the lists\n"
    ),
    "code": (
        "Before:\n\n```python\ndef f(x):\n\n    return x\n\n\n# after two blank lines\n```\n\n"
        "~~~\nplain ~~~ fence\n\n```not closing here\n~~~\n\n"
        "    indented code\n\n    more of it\n\n"
        "```js\nconst a = 1;\n```\nend\n"
    ),
    "tables": (
        "| name | count | note |\n| :--- | ---: | :---: |\n"
        "| a | 1 | `x \\| y` |\n| b | 22 | **bold** |\n\n"
        "text between\n\n| x | y |\n|---|---|\n| 1 | 2 |\nlast row-ish line\n\n"
        "a paragraph\n| not | a table |\n|---|---|x\n"
    ),
    "quotes": (
        "> quoted *text*\n> on two lines\n\n"
        "> - a list in a quote\n> - second\n>\n> > nested quote\n\n"
        "> ```\n> code in a quote\n> ```\nlazy continuation\n\nafter\n"
    ),
    "html": (
        'Text <b>bold</b> <span style="color:red">styled</span>.\n\n'
        '<div style="background:url(http://127.0.0.1:9/css)">block <i>html</i>\n'
        "<script>alert(1)</script>\n</div>\n\n"
        "![remote](http://127.0.0.1:9/leak?q=SECRET) and "
        "![inline](data:image/png;base64,iVBORw0KGgo=)\n\n"
        '<iframe src="http://127.0.0.1:9/frame"></iframe>\n\n[bad](javascript:alert(2)) '
        "<details><summary>more</summary>\n\nhidden *text*\n\n</details>\n"
    ),
    "references": (
        "See [the docs][docs] and [other].\n\n- a list item with [docs]\n\n"
        '[docs]: https://example.com/docs "Docs"\n[other]: https://example.com/other\n\nafter\n'
    ),
    "crlf": "# CRLF\r\n\r\nline one\r\nline two\r\n\r\n- a\r\n- b\r\n\r\n```\r\ncode\r\n```\r\n",
    # lists and tables are rendered part by part while open; code stays plain until closed
    "parts": (
        "3. three *x*\n4. four `y`\n   - nested\n   - nested two\n5. five\n\n   now loose\n"
        "6. six\n   ```python\n   def f():\n       return 6\n   ```\n7. [ ] task\n\n"
        "- a <b>raw</b>\n- b\n- c\n\n"
        "| k | v |\n|:--|--:|\n| a | **1** |\n| b \\| c | 2 |\n| short |\n| d | `4` | extra |\n\n"
        '```python\n"""Doc\n\nstring."""\nclass A:\n    x = [1, 2]  # c\n```\n'
    ),
}

# Streams `text` in the given pieces through one view (stream() per piece, each with the given
# budget, as the page does per frame), then set() as when the answer is finished; returns
# whether the result is a one-shot render's, and whether the first block's element, once
# another block followed it, was kept.
STREAM_AND_COMPARE = """async ([text, cuts, budget]) => {
  const { MarkdownView } = await import("/static/js/markdown.js");
  const streamed = new MarkdownView(document.createElement("div"));
  let firstClosed = null;
  let kept = true;
  for (const cut of cuts) {
    streamed.stream(text.slice(0, cut), budget);
    if (firstClosed && streamed.el.firstElementChild !== firstClosed) kept = false;
    if (streamed.el.childElementCount > 1) firstClosed ??= streamed.el.firstElementChild;
  }
  while (streamed.stream(text, budget)) {}
  streamed.set(text);
  const oneShot = new MarkdownView(document.createElement("div"));
  oneShot.set(text);
  return { same: streamed.el.innerHTML === oneShot.el.innerHTML, kept,
           html: streamed.el.innerHTML, expected: oneShot.el.innerHTML };
}"""


EXPECT_ONE_SHOT = """async (text) => {
  const { MarkdownView } = await import("/static/js/markdown.js");
  const oneShot = new MarkdownView(document.createElement("div"));
  oneShot.set(text);
  window.expected = oneShot.el.innerHTML;
}"""  # window.expected: a one-shot render of the whole answer


def chunkings(text: str, rng: random.Random) -> Iterator[list[int]]:
    """Cut points: one character at a time, then a few random chunkings (small to large)."""
    yield list(range(1, len(text) + 1))
    for largest in (3, 12, 80):
        cuts, at = [], 0
        while at < len(text):
            at = min(len(text), at + rng.randint(1, largest))
            cuts.append(at)
        yield cuts


@pytest.fixture(scope="module")
def page(browser: Any, served: Served) -> Iterator[Any]:
    """One workspace page the module's tests render in, one after another."""
    server, _, _ = served
    page = new_context(browser, viewport={"width": 1200, "height": 800}).new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector("#message-input")
    yield page
    page.context.close()


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_any_chunking_ends_as_a_one_shot_render(page: Any, name: str) -> None:
    text = DOCUMENTS[name]
    rng = random.Random(name)
    for cuts in chunkings(text, rng):
        for budget in (1e9, 0):  # everything each time / one block per call
            result = page.evaluate(STREAM_AND_COMPARE, [text, cuts, budget])
            assert result["same"], (name, len(cuts), budget, result["html"], result["expected"])
            # a reference definition changes blocks before it: those are rendered again
            assert result["kept"] or name == "references", f"{name}: first block rendered again"
    assert page.errors == []


def test_the_page_streams_a_long_answer_into_the_same_elements(page: Any, served: Served) -> None:
    _, fake, _ = served
    answer = "\n\n".join(DOCUMENTS.values()) * 3
    fake.script(Reply(content=answer, chunk_size=9, split_seed=4))
    page.evaluate("""() => {
      window.firstBlock = null;
      new MutationObserver(() => {  // the first block once another follows it (closed)
        const answer = document.querySelector(".assistant-message .answer");
        if (answer?.childElementCount > 1) window.firstBlock ??= answer.firstElementChild;
      }).observe(document.querySelector("#conversation"), { childList: true, subtree: true });
    }""")
    page.fill("#message-input", "write everything")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    page.evaluate(EXPECT_ONE_SHOT, answer)
    # the last frames and the final check may still be on their way
    page.wait_for_function(
        "() => document.querySelector('.assistant-message .answer').innerHTML === window.expected"
    )
    assert page.evaluate(
        "document.querySelector('.assistant-message .answer').firstElementChild === firstBlock"
    )
    assert (
        page.locator(".assistant-message pre.code-block").count()
        == page.locator(".assistant-message pre.code-block .copy-code").count()
        > 0
    )
    assert page.locator(".assistant-message a.remote-image").count() == 3
    assert page.locator(".assistant-message img").count() == 3  # the inline data: ones
    assert (
        page.locator(
            ".assistant-message img:not([src^='data:image/']), "
            ".assistant-message script, .assistant-message iframe, "
            ".assistant-message [style], .assistant-message a[href^=javascript]"
        ).count()
        == 0
    )
    assert page.errors == []


def test_text_that_is_not_an_extension_starts_over(page: Any) -> None:
    html = page.evaluate("""async () => {
      const { MarkdownView } = await import("/static/js/markdown.js");
      const view = new MarkdownView(document.createElement("div"));
      view.stream("# one\\n\\nfirst text\\n\\n- a");
      view.stream("# two\\n\\nother");
      return view.el.innerHTML;
    }""")
    assert "two" in html and "one" not in html and "first text" not in html


CODE_ELEMENT = """async (text) => {
  const { MarkdownView } = await import("/static/js/markdown.js");
  const view = new MarkdownView(document.createElement("div"));
  view.stream(text);
  const code = view.el.querySelector("pre code");
  const spans = code.querySelectorAll("span").length;
  return { classes: code.className, spans, text: code.textContent };
}"""


def test_open_code_shows_plain_until_its_fence_closes(page: Any) -> None:
    open_code = "Look:\n\n```python\ndef f():\n    return 1\n"
    shown = page.evaluate(CODE_ELEMENT, open_code)
    assert shown == {
        "classes": "hljs language-python",
        "spans": 0,
        "text": "def f():\n    return 1",
    }
    closed = page.evaluate(CODE_ELEMENT, open_code + "```\n\nafter\n")
    assert closed["spans"] > 0 and closed["text"] == "def f():\n    return 1"


def test_code_blocks_are_text_whatever_they_hold(page: Any) -> None:
    """Code blocks skip the sanitiser (their HTML is made by markdown.js): nothing in them, nor in
    their language, may become an element."""
    hostile = '<img src=x onerror="window.hit=1"></code></pre><script>window.hit=2</script>'
    text = (
        f"```python\n{hostile}\n```\n\n```\n{hostile}\n```\n\n"
        f'```python"><img src=x onerror="window.hit=3">\n{hostile}\n```\n'
    )
    shown = page.evaluate(
        """async (text) => {
      const { MarkdownView } = await import("/static/js/markdown.js");
      const view = new MarkdownView(document.createElement("div"));
      document.body.append(view.el);
      view.set(text);
      const result = {
        codes: [...view.el.querySelectorAll("pre code")].map((code) => code.textContent),
        langs: [...view.el.querySelectorAll("pre")].map((pre) => pre.dataset.lang),
        elements: view.el.querySelectorAll("img, script, code :not(span)").length,
      };
      view.el.remove();
      return result;
    }""",
        text,
    )
    assert shown == {"codes": [hostile] * 3, "langs": ["python", "", 'python"><img'], "elements": 0}
    assert page.evaluate("window.hit") is None


def test_an_open_list_past_its_budget_shows_a_part_per_call(page: Any) -> None:
    items = page.evaluate("""async () => {
      const { MarkdownView } = await import("/static/js/markdown.js");
      const view = new MarkdownView(document.createElement("div"));
      const text = Array.from({ length: 5 }, (_, i) => `- item *${i}*`).join("\\n");
      const counts = [];
      let more = true;
      while (more) {
        more = view.stream(text, 0);
        counts.push([view.el.querySelectorAll("li").length, more]);
      }
      return counts;
    }""")
    assert items == [[1, True], [2, True], [3, True], [4, True], [5, False]]


# show() of a long text: how many blocks there were at each animation frame until it resolved,
# and whether it ended as set() would.
SHOW_IN_SLICES = """async ([text, other]) => {
  const { MarkdownView } = await import("/static/js/markdown.js");
  const view = new MarkdownView(document.createElement("div"));
  const counts = [];
  let done = false;
  const count = () => {
    counts.push(view.el.childElementCount);
    if (!done) requestAnimationFrame(count);
  };
  count();
  await view.show(text);
  done = true;
  const oneShot = new MarkdownView(document.createElement("div"));
  oneShot.set(text);
  const same = view.el.innerHTML === oneShot.el.innerHTML;
  const overtaken = view.show(text);  // a later set() wins over a show() under way
  view.set(other);
  await overtaken;
  return { counts, same, blocks: oneShot.el.childElementCount, other: view.el.textContent };
}"""


def long_text() -> str:
    return "\n\n".join(DOCUMENTS.values()) * 4


def long_answer() -> str:
    """As long as long_text, but no passage said again: a model's answer repeating itself is
    a loop, which ends its task (core/repeats.py)."""
    notes = (
        f"Note {n}: item {n} weighs {n * 37 % 101} g and goes to shelf {n % 7}." for n in range(90)
    )
    return "\n\n".join([*DOCUMENTS.values(), *notes])


def test_show_renders_a_long_text_in_slices_as_set_would(page: Any) -> None:
    result = page.evaluate(SHOW_IN_SLICES, [long_text(), "# other"])
    assert result["same"]
    assert result["counts"][0] == 0
    assert any(0 < n < result["blocks"] for n in result["counts"]), result["counts"]
    assert result["other"] == "other\n"
    assert any(worker.url.endswith("/static/js/mdlex.js") for worker in page.workers)
    assert page.errors == []


def test_show_stops_for_a_container_taken_out_of_the_page(page: Any) -> None:
    result = page.evaluate(
        """async (text) => {
      const { MarkdownView } = await import("/static/js/markdown.js");
      const box = document.createElement("div");
      document.body.append(box);
      const view = new MarkdownView(box);
      const shown = view.show(text);
      const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
      while (!box.childElementCount) await frame();
      box.remove();  // as when another conversation is opened
      await shown;
      const left = box.childElementCount;
      await frame();
      await frame();
      const oneShot = new MarkdownView(document.createElement("div"));
      oneShot.set(text);
      return { left, later: box.childElementCount, all: oneShot.el.childElementCount };
    }""",
        long_text(),
    )
    assert 0 < result["left"] == result["later"] < result["all"], result


def test_show_without_workers_lexes_on_the_page(page: Any, served: Served) -> None:
    other = new_context(page.context.browser).new_page()
    try:
        other.add_init_script("delete window.Worker")
        other.goto(f"{served[0].url}/?token={TOKEN}")
        result = other.evaluate(SHOW_IN_SLICES, [long_text(), "# other"])
        assert result["same"] and result["other"] == "other\n"
        assert other.workers == []
    finally:
        other.context.close()


def test_a_long_answer_from_history_shows_as_a_one_shot_render(page: Any, served: Served) -> None:
    _, fake, _ = served
    answer = long_answer()
    fake.script(Reply(content=answer, chunk_size=500))
    page.click("#new-conversation")
    page.fill("#message-input", "a long one")
    page.press("#message-input", "Enter")
    page.wait_for_selector('.task-end[data-reason="complete"]', state="attached")
    page.reload()
    page.wait_for_selector(".assistant-message .answer")
    page.evaluate(EXPECT_ONE_SHOT, answer)
    page.wait_for_function(
        "() => document.querySelector('.assistant-message .answer').innerHTML === window.expected"
    )
