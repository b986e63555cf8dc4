"""Finding things in the page, in a real headless Chromium: workspace images show in the preview
(an SVG only as an image: its script never runs), the conversation search shows the words around
a hit with the hit marked and nothing of the message's markup run or shown, and conversations of
the same title are told apart."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image

from tests.fake_llm import Reply
from tests.kit.browser import Served, open_page
from tests.kit.clients import connected


def png(width: int, height: int) -> bytes:
    data = io.BytesIO()
    Image.new("RGBA", (width, height), (200, 30, 30, 128)).save(data, "PNG")
    return data.getvalue()


SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    '<rect width="40" height="20" fill="teal"/>'
    "<script>window.parent.svgRan = true; document.title = 'svg ran'</script></svg>"
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.usefixtures("clean_fake"),
    pytest.mark.server(
        files={
            "README.md": "# demo\n",
            "art/dot.png": png(3, 2),
            "art/logo.svg": SVG,
            "art/fake.png": "not an image at all\n",
            "names/constructor": "plain words\n",
            "names/notes.__proto__": "more plain words\n",
        }
    ),
]
ANSWER = (
    "## Fixed\n\nI changed **`calc.py`**: the [divide](https://example.com/d) function now "
    'checks for *zero* first, and <img src=x onerror="window.listRan=true"> stays text.'
)


def open_file(page: Any, path: str) -> None:
    page.click(f'#file-tree [data-path="{path}"]')
    page.wait_for_selector(f'#file-preview [data-role=path]:text-is("{path}")')


def test_workspace_images_show_in_the_preview(browser: Any, served: Served):
    ready = ['#file-tree [data-path="art"]']
    with open_page(browser, served, ready=ready, tolerated="status of 415") as page:
        page.click('#file-tree [data-path="art"]')
        open_file(page, "art/dot.png")
        image = page.locator("[data-testid=preview-image]")
        page.wait_for_function(
            "() => document.querySelector('[data-testid=preview-image]')?.naturalWidth"
        )
        assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [3, 2]
        page.wait_for_selector("#file-preview [data-role=meta]:has-text('3 × 2 px')")
        assert "Binary file" not in page.inner_text("#file-preview")

        open_file(page, "art/logo.svg")  # drawn, never inline: its script does not run
        page.wait_for_function(
            "() => document.querySelector('[data-testid=preview-image]')?.naturalWidth"
        )
        assert image.evaluate("img => img.naturalWidth") == 40
        assert page.locator("#file-preview svg rect").count() == 0
        assert page.evaluate("window.svgRan") is None and page.title() != "svg ran"
        page.click("[data-testid=preview-toggle]")  # its source, as text
        page.wait_for_selector("#file-preview .code-lines:has-text('window.parent.svgRan')")
        page.click("[data-testid=preview-toggle]")
        page.wait_for_selector("[data-testid=preview-image]")

        open_file(page, "art/fake.png")  # named as an image, but not one
        page.wait_for_selector("[data-testid=preview-image-error]")
        page.click("#file-preview [data-role=close]")
        assert page.evaluate("window.svgRan") is None


def test_a_file_named_as_a_property_of_every_object_previews_as_text(browser: Any, served: Served):
    # The language of a name was looked up in plain objects: "constructor" found a function.
    with open_page(browser, served, ready=['#file-tree [data-path="names"]']) as page:
        page.click('#file-tree [data-path="names"]')
        open_file(page, "names/constructor")
        page.wait_for_selector("#file-preview .code-lines:has-text('plain words')")
        open_file(page, "names/notes.__proto__")
        page.wait_for_selector("#file-preview .code-lines:has-text('more plain words')")


def test_search_marks_the_words_around_the_hit_and_twins_are_told_apart(
    browser: Any, served: Served
):
    server, fake, _ = served
    fake.script(Reply(content=ANSWER), Reply(content="Again."), Reply(content="Fine."))
    fake.script(Reply(content="Sure."))
    with connected(server.url) as client:
        first = client.start("Fix the bug in calc.py")
        client.wait_done(first)
        client.wait_done(client.start("and check it", conversation_id=first), count=2)
        second = client.start("Fix the bug in calc.py")
        client.wait_done(second)
        other = client.start("Write a haiku about tests")
        client.wait_done(other)

    ready = [f'.conv-item[data-conversation-id="{other}"]']
    with open_page(browser, served, ready=ready) as page:
        twins = page.locator("[data-testid=conversation-twin]")
        assert twins.count() == 2  # the haiku has a title of its own: no line under it
        first_twin = page.locator(f'.conv-item[data-conversation-id="{first}"] .conv-twin')
        second_twin = page.locator(f'.conv-item[data-conversation-id="{second}"] .conv-twin')
        assert first_twin.inner_text().endswith("· 2 tasks")
        assert second_twin.inner_text().endswith("· 1 task")
        assert first_twin.inner_text().startswith("started ")

        page.fill("#conversation-search", "DIVIDE function")
        snippet = page.locator(f'.conv-item[data-conversation-id="{first}"] .conv-snippet')
        snippet.wait_for()
        assert page.locator(".conv-item").count() == 1
        assert snippet.locator("mark").all_inner_texts() == ["divide function"]
        text = snippet.inner_text()
        assert text.startswith("Fixed I changed calc.py: the divide function")
        assert not any(markup in text for markup in ("**", "`", "](", "##"))

        page.fill("#conversation-search", "onerror")  # a message's HTML is shown as text
        page.wait_for_selector(".conv-snippet mark:text-is('onerror')")
        assert page.locator("#conversation-list img").count() == 0
        assert "<img src=x onerror=" in page.inner_text(".conv-snippet")
        assert page.evaluate("window.listRan") is None

        page.fill("#conversation-search", "haiku")  # a title hit: marked in the title
        page.wait_for_selector(".conv-title mark:text-is('haiku')")
        assert page.locator(".conv-item").count() == 1
