"""The child process that parses one PDF, DOCX, XLSX or PPTX read from stdin.

Run as `python -m modules.uploads.extract_worker KIND MAX_CHARS MEMORY_BYTES CPU_SECONDS` by
modules/uploads/extraction.py; it limits its own address space and CPU time before it imports a
parser, refuses XML parts that declare a DTD (billion laughs and friends) before the Office
libraries see them, and prints one JSON object: {ok, result} or {ok: false, code, error}.
"""

from __future__ import annotations

import io
import json
import sys
import zipfile
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time
from itertools import zip_longest
from typing import Any

from utils.workers import limit_self

MAX_SHEET_ROWS = 5_000
MAX_CELL_CHARS = 500
_SCAN_CHUNK = 64 * 1024


class Refused(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class _Text:
    """Lines collected up to a number of characters; `full` once the cap is reached."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.full = False

    def add(self, line: str) -> bool:
        """Append a line; False once nothing more fits."""
        if self.full:
            return False
        room = self.limit - self.size
        if len(line) + 1 > room:
            self.parts.append(line[: max(room, 0)])
            self.size = self.limit
            self.full = True
            return False
        self.parts.append(line + "\n")
        self.size += len(line) + 1
        return True

    def text(self) -> str:
        return "".join(self.parts).rstrip("\n")


# --- XML safety -----------------------------------------------------------------------------


class _RootReached(Exception):
    """The root element started: no DTD can follow, the rest of the part need not be read."""


def refuse_dtds(data: bytes) -> None:
    """Refuse an Office file any of whose XML parts declares a DTD or entities."""
    from xml.sax import SAXParseException
    from xml.sax.handler import ContentHandler
    from xml.sax.xmlreader import AttributesImpl, AttributesNSImpl

    from defusedxml import DefusedXmlException
    from defusedxml.expatreader import create_parser

    class StopAtRoot(ContentHandler):
        def startElement(self, name: str, attrs: AttributesImpl) -> None:
            raise _RootReached

        def startElementNS(
            self, name: tuple[str | None, str], qname: str | None, attrs: AttributesNSImpl
        ) -> None:  # was startElement itself, whose two parameters this call's three overrun
            raise _RootReached

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for entry in archive.infolist():
            if not entry.filename.endswith((".xml", ".rels")):
                continue
            parser = create_parser(forbid_dtd=True)
            parser.setContentHandler(StopAtRoot())
            try:
                with archive.open(entry) as part:
                    while chunk := part.read(_SCAN_CHUNK):
                        parser.feed(chunk)
            except _RootReached:
                continue
            except DefusedXmlException:
                raise Refused(
                    f"its part {entry.filename!r} declares a DTD or XML entities (as in "
                    "a 'billion laughs' attack); Office files never do: refused.",
                    "xml_entities",
                ) from None
            except SAXParseException as exc:
                raise Refused(
                    f"its part {entry.filename!r} is not valid XML ({exc}).", "corrupt"
                ) from None


# --- the formats ------------------------------------------------------------------------------


def pdf_text(data: bytes, out: _Text) -> dict[str, Any]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Refused(
                "the PDF is encrypted with a password; upload an unlocked copy.", "encrypted"
            )
        pages = len(reader.pages)
        read = 0
        for number, page in enumerate(reader.pages, 1):
            if not out.add(f"--- page {number} ---") or not out.add(page.extract_text() or ""):
                break
            read = number
    except PdfReadError as exc:
        raise Refused(f"the PDF could not be read ({exc}).", "corrupt") from None
    shown = f"pages 1–{read} of {pages}" if read < pages else _count(pages, "page")
    return {"note": shown, "info": {"pages": pages}}


def docx_text(data: bytes, out: _Text) -> dict[str, Any]:
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    blocks = 0
    for block in document.iter_inner_content():
        blocks += 1
        if isinstance(block, Table):
            lines = [" | ".join(_clip(cell.text) for cell in row.cells) for row in block.rows]
            if not all(out.add(line) for line in ["", *lines, ""]):
                break
            continue
        style = (block.style.name if block.style is not None else "") or ""
        prefix = ""
        if style == "Title":
            prefix = "# "
        elif style.startswith("Heading ") and style[8:].isdigit():
            prefix = "#" * min(int(style[8:]) + 1, 6) + " "
        if block.text and not out.add(prefix + block.text):
            break
    return {
        "note": _count(blocks, "paragraph or table", "paragraphs and tables"),
        "info": {"blocks": blocks},
    }


def xlsx_text(data: bytes, out: _Text) -> dict[str, Any]:
    import openpyxl

    formulas = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    values = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    cut: list[str] = []
    counted = 0
    try:
        for name in formulas.sheetnames:
            sheet_f, sheet_v = formulas[name], values[name]
            if not out.add(f"## Sheet: {name}"):
                break
            rows = zip(
                sheet_f.iter_rows(values_only=True),
                sheet_v.iter_rows(values_only=True),
                strict=False,
            )
            for number, (row_f, row_v) in enumerate(rows, 1):
                if number > MAX_SHEET_ROWS:
                    cut.append(f"{name}: first {MAX_SHEET_ROWS:,} rows")
                    break
                cells = [_cell(f, v) for f, v in zip_longest(row_f, row_v)]
                counted += _formula_count(row_f)
                while cells and not cells[-1]:
                    cells.pop()
                if cells and not out.add(f"{number}: " + " | ".join(cells)):
                    break
            if out.full or not out.add(""):
                break
    finally:
        formulas.close()
        values.close()
    notes = [_count(len(formulas.sheetnames), "sheet")]
    if counted:
        notes.append(f"{_count(counted, 'formula')} shown as 'cached value [=FORMULA]'")
    notes += cut
    return {
        "note": "; ".join(notes),
        "truncated": bool(cut),
        "info": {"sheets": formulas.sheetnames},
    }


def _formula_count(row: Iterable[Any]) -> int:
    return sum(1 for value in row if _formula(value) is not None)


def _formula(value: Any) -> str | None:
    text = getattr(value, "text", value)  # ArrayFormula keeps its text in .text
    return text if isinstance(text, str) and text.startswith("=") else None


def _cell(stored: Any, cached: Any) -> str:
    formula = _formula(stored)
    if formula is None:
        return _clip(_value(stored))
    if cached is None:
        return f"[{_clip(formula)}; no cached value]"
    return f"{_clip(_value(cached))} [{_clip(formula)}]"


def _value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _clip(text: str) -> str:
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def pptx_text(data: bytes, out: _Text) -> dict[str, Any]:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    slides = len(deck.slides)
    for number, slide in enumerate(deck.slides, 1):
        lines = [f"## Slide {number}", *_shape_lines(slide.shapes)]
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None and notes.text.strip():
                lines.append(f"Notes: {notes.text.strip()}")
        if not all(out.add(line) for line in [*lines, ""]):
            break
    return {"note": _count(slides, "slide"), "info": {"slides": slides}}


def _shape_lines(shapes: Iterable[Any]) -> Iterator[str]:
    for shape in shapes:
        if getattr(shape, "shapes", None) is not None:  # a group
            yield from _shape_lines(shape.shapes)
        elif shape.has_text_frame and shape.text_frame.text.strip():
            yield shape.text_frame.text.strip()
        elif getattr(shape, "has_table", False) and shape.has_table:
            for row in shape.table.rows:
                yield " | ".join(_clip(cell.text) for cell in row.cells)


def _count(number: int, one: str, many: str | None = None) -> str:
    return f"{number:,} {one if number == 1 else many or one + 's'}"


READERS = {"pdf": pdf_text, "docx": docx_text, "xlsx": xlsx_text, "pptx": pptx_text}


def parse(kind: str, data: bytes, max_chars: int) -> dict[str, Any]:
    """The result of one file: {kind, text, truncated, note, info}."""
    if kind != "pdf":
        refuse_dtds(data)
    out = _Text(max_chars)
    found = READERS[kind](data, out)
    truncated = out.full or found.pop("truncated", False)
    return {"kind": kind, "text": out.text(), "truncated": truncated, **found}


def main(argv: list[str]) -> int:
    kind, max_chars, memory, cpu = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    limit_self(memory, cpu)
    data = sys.stdin.buffer.read()
    try:
        answer: dict[str, Any] = {"ok": True, "result": parse(kind, data, max_chars)}
    except Refused as exc:
        answer = {"ok": False, "code": exc.code, "error": str(exc)}
    except MemoryError:
        answer = {
            "ok": False,
            "code": "memory",
            "error": f"reading it needed more than {memory / 2**20:,.0f} MB of memory.",
        }
    except Exception as exc:  # a damaged file: say what the parser said
        answer = {
            "ok": False,
            "code": "corrupt",
            "error": f"it could not be read ({type(exc).__name__}: {str(exc)[:300]}).",
        }
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
