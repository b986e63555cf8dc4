"""An attached image shows a small thumbnail, in a real headless Chromium: in the composer's chip
once it is uploaded, and in the sent user message, then and after a reload; served by the
download route under the page's own Content-Security-Policy (no console error, no blob: or
other source opened). A file that is not an image keeps its icon."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image

from tests.fake_llm import Reply
from tests.kit.settings import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.usefixtures("clean_fake")]
LOADED = "img => img.complete && img.naturalWidth === 40 && img.naturalHeight === 30"


def _png() -> bytes:
    data = io.BytesIO()
    Image.new("RGB", (40, 30), (30, 120, 200)).save(data, "PNG")
    return data.getvalue()


def _thumb_loaded(page: Any, scope: str) -> None:
    thumb = page.locator(f"{scope} [data-testid=attachment-thumb]")
    thumb.wait_for()
    src = thumb.get_attribute("src") or ""
    assert src.startswith("/api/download?path=uploads%2Fchart.png&view=image"), src
    page.wait_for_function(
        f"s => {{ const img = document.querySelector(s); return ({LOADED})(img); }}",
        arg=f"{scope} [data-testid=attachment-thumb]",
    )


def test_an_attached_image_has_a_thumbnail_before_and_after_sending(served: Any, page: Any):
    server, fake, _ = served
    page.goto(f"{server.url}/?token={TOKEN}")
    page.wait_for_selector("#reconnect-banner[data-state]", state="attached")
    page.set_input_files(
        "#attach-input",
        files=[
            {"name": "chart.png", "mimeType": "image/png", "buffer": _png()},
            {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"plain words\n"},
        ],
    )
    page.wait_for_selector('#attachment-tray [data-path="uploads/notes.txt"][data-state=ready]')
    image_chip = '#attachment-tray [data-path="uploads/chart.png"][data-state=ready]'
    _thumb_loaded(page, image_chip)
    text_chip = page.locator('#attachment-tray [data-path="uploads/notes.txt"]')
    assert text_chip.locator("[data-testid=attachment-thumb]").count() == 0
    assert text_chip.locator(".icon").count() == 2  # its file icon and the remove button's

    fake.script(Reply(content="A blue chart."))
    page.fill("#message-input", "what is this?")
    page.press("#message-input", "Enter")
    page.wait_for_selector(".assistant-message:has-text('A blue chart.')")
    sent = '.user-message .message-attachments [data-path="uploads/chart.png"]'
    _thumb_loaded(page, sent)
    page.reload()
    _thumb_loaded(page, sent)
    other = page.locator('.user-message .message-attachments [data-path="uploads/notes.txt"]')
    assert other.locator("[data-testid=attachment-thumb]").count() == 0
    assert page.console_errors == []
