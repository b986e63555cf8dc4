"""What the demo model reads in a request, as a model would: the user's own words, the files
attached to them (the blocks modules/uploads/attachments.py appends) and the images sent as
`image_url` parts, of which it reads the format and size from their first bytes."""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass

from model.messages import ChatMessage

_FILE = re.compile(r"^\[Attached file (?P<path>.+?): (?P<label>[^\]\n]*)\]$", re.MULTILINE)
_IMAGE = re.compile(r"^\[Attached image (?P<path>.+) \((?P<size>[^)\n]*)\), shown below\.\]$", re.M)
_FIRST_BLOCK = re.compile(r"\n\n\[Attached (?:file|image) ")
_DATA_URL = re.compile(r"^data:(?P<mime>[\w./+-]+);base64,(?P<data>.*)$", re.S)


@dataclass(frozen=True)
class Attached:
    """One attachment as the request shows it: `text` is the file's extracted text (None when
    only its name came), `image` its format and size ("a PNG image, 64 × 48 pixels")."""

    path: str
    label: str
    text: str | None = None
    image: str | None = None


@dataclass(frozen=True)
class Request:
    words: str
    attached: list[Attached]


def read_request(message: ChatMessage) -> Request:
    """The user's words (without the attachment blocks) and what is attached."""
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    text = content if isinstance(content, str) else ""
    if parts:
        text = next((str(p.get("text") or "") for p in parts if p.get("type") == "text"), "")
    cut = _FIRST_BLOCK.search(text)
    words = text[: cut.start()] if cut else text
    urls = [p["image_url"]["url"] for p in parts if "image_url" in p]
    found: list[tuple[int, Attached]] = []
    for match in _FILE.finditer(text):
        path = match["path"]
        body = re.search(
            rf"<<<BEGIN {re.escape(path)}>>>\n(.*?)\n?<<<END {re.escape(path)}>>>", text, re.S
        )
        found.append((match.start(), Attached(path, match["label"], body[1] if body else None)))
    for n, match in enumerate(_IMAGE.finditer(text)):
        image = describe_image(urls[n]) if n < len(urls) else None
        found.append(
            (match.start(), Attached(match["path"], f"image, {match['size']}", None, image))
        )
    return Request(words.strip(), [a for _, a in sorted(found, key=lambda f: f[0])])


def describe_image(url: str) -> str | None:
    """ "a PNG image, 64 × 48 pixels" from a data URL's header bytes; None if unreadable."""
    found = _DATA_URL.match(url)
    if found is None:
        return None
    try:
        data = base64.b64decode(found["data"][:65_536], validate=False)
    except (binascii.Error, ValueError):
        return None
    kind = found["mime"].split("/")[-1].upper()
    size = _pixels(data)
    return f"a {kind} image, {size[0]} × {size[1]} pixels" if size else f"a {kind} image"


def _pixels(data: bytes) -> tuple[int, int] | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data.startswith(b"\xff\xd8"):
        return _jpeg_pixels(data)
    return None


def _jpeg_pixels(data: bytes) -> tuple[int, int] | None:
    """The size in the first start-of-frame segment (markers C0-CF but C4, C8, CC)."""
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def describe_attachments(attached: list[Attached]) -> str:
    """A paragraph on what the user attached, each file by what its content shows."""
    lines = [f"- `{a.path}` ({a.label}): {_what_it_holds(a)}" for a in attached]
    many = "these files" if len(attached) > 1 else "this file"
    return (
        f"You attached {many}; here is what I see in {'them' if len(attached) > 1 else 'it'}:\n\n"
        + "\n".join(lines)
    )


def _what_it_holds(attached: Attached) -> str:
    if attached.image is not None:
        return (
            f"{attached.image}. I'm a scripted model, so I can't say what it shows; a model "
            "that takes images would describe it."
        )
    if attached.label.startswith("image"):
        return "an image; only its name and size reached me."
    if attached.text is None:
        return "only its name and size reached me (its text is not in the message)."
    rows = [line for line in attached.text.splitlines() if line.strip()]
    if not rows:
        return "no text at all."
    if attached.path.lower().endswith(".csv"):
        return f"{len(rows) - 1} rows under the header `{rows[0].strip()[:120]}`."
    first = rows[0].strip().lstrip("#").strip()[:100]
    return f"{len(rows)} lines of text, starting with *{first}*."
