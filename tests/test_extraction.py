"""Text out of every accepted format, from files the writer libraries make here, and the
refusals: extension against content, zip bombs, DTDs in Office parts, a parse past its time."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path
from typing import TypedDict, Unpack

import docx
import openpyxl
import pptx
import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from history.context_builder import IMAGE_TOKENS, MESSAGE_OVERHEAD, estimate_message_tokens
from model.messages import ChatMessage
from modules.uploads.attachments import AttachmentStore, safe_name
from modules.uploads.extraction import Limits, extract
from modules.uploads.file_types import ExtractionError, identify
from modules.workspace.paths import Workspace

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(17)
BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + b"".join(
        f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">'.encode()
        for n in range(1, 10)
    )
    + b']>\n<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
)


# --- fixtures made with the writer libraries -----------------------------------------------------


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Quarterly report", 1)
    document.add_paragraph("Revenue grew by 12 percent.")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {
        (0, 0): "Region",
        (0, 1): "Sales",
        (1, 0): "North",
        (1, 1): "42",
    }.items():
        table.cell(row, col).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_xlsx(*, cached: str | None = "3") -> bytes:
    """A sheet with a formula; `cached` is written as the formula's cached value, the way a
    spreadsheet program saves it (openpyxl itself writes formulas without one)."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Budget"
    sheet.append(["item", "cost", "total"])
    sheet.append(["rent", 1, "=B2+2"])
    out = io.BytesIO()
    book.save(out)
    if cached is None:
        return out.getvalue()
    part = "xl/worksheets/sheet1.xml"
    xml = zipfile.ZipFile(io.BytesIO(out.getvalue())).read(part)
    xml = xml.replace(b"<f>B2+2</f><v></v>", f"<f>B2+2</f><v>{cached}</v>".encode())
    assert f"<v>{cached}</v>".encode() in xml
    return rezip(out.getvalue(), {part: xml})


def make_pptx() -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Launch plan"
    slide.placeholders[1].text = "Ship in May"
    slide.notes_slide.notes_text_frame.text = "Mention the beta users"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_pdf(*contents: bytes) -> bytes:
    """One page per content stream, Helvetica as /F1."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    for content in contents:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        stream.set_data(content)
        page[NameObject("/Contents")] = writer._add_object(stream.flate_encode())
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def slow_pdf() -> bytes:
    """28 KB that take pypdf most of a minute: a million text operators on one page."""
    return make_pdf(b"BT /F1 12 Tf " + b"(a) Tj 1 0 Td " * 1_000_000 + b"ET")


def rezip(data: bytes, replace: dict[str, bytes], *, add: dict[str, bytes] | None = None) -> bytes:
    """The zip `data` with some parts replaced and others added."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as old,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as new,
    ):
        for entry in old.infolist():
            new.writestr(entry.filename, replace.get(entry.filename, old.read(entry)))
        for name, content in (add or {}).items():
            new.writestr(name, content)
    return out.getvalue()


def zip_bomb_docx() -> bytes:
    return rezip(make_docx(), {}, add={"word/media/zeros.bin": bytes(50 * 1024 * 1024)})


def billion_laughs_docx() -> bytes:
    return rezip(make_docx(), {"word/document.xml": BILLION_LAUGHS})


LIMITS = Limits(max_bytes=25 * 1024 * 1024, seconds=20)


# --- every format ---------------------------------------------------------------------------------


def test_docx_text_keeps_headings_paragraphs_and_tables():
    found = extract("report.docx", make_docx(), LIMITS)
    assert found.kind == "docx"
    assert "## Quarterly report\nRevenue grew by 12 percent." in found.text
    assert "Region | Sales\nNorth | 42" in found.text


def test_xlsx_labels_formulas_with_their_cached_values():
    found = extract("budget.xlsx", make_xlsx(), LIMITS)
    assert "## Sheet: Budget" in found.text
    assert "1: item | cost | total" in found.text
    assert "2: rent | 1 | 3 [=B2+2]" in found.text
    assert "1 formula" in found.note
    bare = extract("budget.xlsx", make_xlsx(cached=None), LIMITS)
    assert "2: rent | 1 | [=B2+2; no cached value]" in bare.text


def test_pptx_text_has_slides_tables_and_notes():
    found = extract("plan.pptx", make_pptx(), LIMITS)
    assert found.text.startswith("## Slide 1\nLaunch plan\nShip in May")
    assert "Notes: Mention the beta users" in found.text
    assert found.note == "1 slide"


def test_pdf_text_per_page():
    found = extract(
        "paper.pdf",
        make_pdf(
            b"BT /F1 12 Tf 72 720 Td (First page) Tj ET",
            b"BT /F1 12 Tf 72 720 Td (Second page) Tj ET",
        ),
        LIMITS,
    )
    assert found.text.split("\n") == [
        "--- page 1 ---",
        "First page",
        "--- page 2 ---",
        "Second page",
    ]
    assert found.note == "2 pages"


def test_text_csv_and_source_decode_as_utf8():
    notes = "# Notizen\n\nÄpfel\n"
    assert extract("notes.md", notes.encode(), LIMITS).text == notes
    table = extract("data.csv", b"\xef\xbb\xbfa,b\n1,2\n", LIMITS)
    assert (table.kind, table.text, table.note) == ("csv", "a,b\n1,2\n", "2 rows")
    assert extract("data.tsv", b"a\tb\n", LIMITS).kind == "tsv"
    assert extract("main.py", b"print('hi')\n", LIMITS).kind == "text"
    assert extract("Makefile", b"all:\n\techo\n", LIMITS).kind == "text"
    assert extract("notes.unknownext", b"plain words\n", LIMITS).kind == "text"


def test_images_and_databases_are_recognised_not_parsed():
    image = extract("cat.png", PNG, LIMITS)
    assert (image.kind, image.mime, image.text) == ("image", "image/png", "")
    assert extract("shop.db", b"SQLite format 3\x00" + bytes(100), LIMITS).kind == "sqlite"


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("report.pdf", PNG, "the name says PDF but its content is an image"),
        ("cat.png", b"%PDF-1.7\n", "not a image/png image"),
        ("cat.jpg", PNG, "not a image/jpeg image"),
        ("report.docx", b"%PDF-1.7\n", "its content is a PDF"),
        ("notes.md", b"\x00\x01\x02binary", "binary"),
        ("notes.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00", "this type of file is not accepted"),
        ("data.csv", PNG, "its content is an image"),
    ],
)
def test_content_must_match_the_extension(name: str, data: bytes, words: str):
    with pytest.raises(ExtractionError, match=words) as caught:
        extract(name, data, LIMITS)
    assert caught.value.reason in ("mismatch", "unsupported")


def test_an_office_name_needs_its_own_main_part():
    plain_zip = io.BytesIO()
    with zipfile.ZipFile(plain_zip, "w") as archive:
        archive.writestr("hello.txt", "hi")
    with pytest.raises(ExtractionError, match=r"no word/document\.xml"):
        extract("report.docx", plain_zip.getvalue(), LIMITS)
    with pytest.raises(ExtractionError, match=r"no xl/workbook\.xml"):
        extract("report.xlsx", make_docx(), LIMITS)
    renamed = rezip(make_docx(), {}, add={"xl/workbook.xml": b"<x/>"})
    with pytest.raises(ExtractionError, match="main part is declared as something else"):
        extract("report.xlsx", renamed, LIMITS)


def test_zip_bombs_are_refused_before_parsing():
    started = time.monotonic()
    with pytest.raises(ExtractionError, match=r"compressed .* to 1") as caught:
        extract("report.docx", zip_bomb_docx(), LIMITS)
    assert caught.value.reason == "zip_bomb"
    many = rezip(make_docx(), {}, add={f"word/x{n}.xml": b"<a/>" for n in range(5_001)})
    with pytest.raises(ExtractionError, match=r"holds 5,0\d\d files"):
        extract("report.docx", many, LIMITS)
    assert time.monotonic() - started < 10


def test_a_dtd_in_any_office_part_is_refused():
    with pytest.raises(ExtractionError, match="declares a DTD") as caught:
        extract("report.docx", billion_laughs_docx(), LIMITS)
    assert caught.value.reason == "xml_entities"
    rels = rezip(make_pptx(), {"_rels/.rels": b'<!DOCTYPE r [<!ENTITY a "b">]><Relationships/>'})
    with pytest.raises(ExtractionError, match=r"_rels/\.rels"):
        extract("plan.pptx", rels, LIMITS)


def test_a_parse_past_the_time_limit_is_stopped():
    started = time.monotonic()
    with pytest.raises(ExtractionError, match="longer than 1 s") as caught:
        extract("slow.pdf", slow_pdf(), Limits(seconds=1))
    assert caught.value.reason == "timeout"
    assert time.monotonic() - started < 6  # the limit, the child's start on a busy machine


def test_the_parse_runs_under_the_memory_limit():
    """40 MB of address space cannot hold a Word parser: the child fails, cleanly."""
    with pytest.raises(ExtractionError, match=r"could not be read|memory"):
        extract("report.docx", make_docx(), Limits(memory_bytes=40 * 1024 * 1024))


def test_size_limit():
    with pytest.raises(ExtractionError, match="limit is 1 MB") as caught:
        extract("big.txt", b"a" * (1024 * 1024 + 1), Limits(max_bytes=1024 * 1024))
    assert caught.value.reason == "too_large"


def test_identify_trusts_content_for_names_without_a_known_extension():
    assert identify("README", b"hello") == "text"


# --- names, storage and the model's view ---------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\Q3 report.pdf", "Q3_report.pdf"),
        (".bashrc", "bashrc"),
        ("-rf.txt", "rf.txt"),
        ("a\x00b\nc.md", "a_b_c.md"),
        ("  .. ", "upload"),
        ("<script>.md", "script.md"),
        ("notes.swp", "notes.swp.txt"),
        ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
    ],
)
def test_safe_names(given: str, stored: str):
    assert safe_name(given) == stored


class _StoreOptions(TypedDict, total=False):
    shown_chars: int
    folder: str


def _store(tmp_path: Path, **kwargs: Unpack[_StoreOptions]) -> AttachmentStore:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return AttachmentStore(Workspace(tmp_path / "ws"), tmp_path / "data", LIMITS, **kwargs)


def test_uploads_never_replace_a_file_and_refusals_leave_nothing(tmp_path: Path):
    store = _store(tmp_path)
    first = store.upload(b"one\n", "notes.md")
    second = store.upload(b"two\n", "../notes.md")
    assert (first.path, second.path) == ("uploads/notes.md", "uploads/notes-2.md")
    assert (tmp_path / "ws/uploads/notes.md").read_text() == "one\n"
    with pytest.raises(ExtractionError):
        store.upload(PNG, "fake.pdf")
    assert sorted(p.name for p in (tmp_path / "ws/uploads").iterdir()) == ["notes-2.md", "notes.md"]


def test_expand_puts_capped_text_after_the_message(tmp_path: Path):
    store = _store(tmp_path, shown_chars=1_000)
    (tmp_path / "ws/long.txt").write_text("x" * 2_500)
    [attachment] = store.attach(["long.txt"])
    record: ChatMessage = {
        "role": "user",
        "content": "summarise",
        "meta": {"attachments": [attachment.to_meta()]},
    }
    content = store.expand(record, images=False)["content"]
    assert isinstance(content, str)  # text only: no image parts
    assert content.startswith("summarise\n\n[Attached file long.txt: text, 2.4 KB, 1 line]")
    assert "<<<BEGIN long.txt>>>\n" + "x" * 1_000 + "\n<<<END long.txt>>>" in content
    assert "only the first 1,000 of 2,500 characters" in content
    assert "read_document(path='long.txt', offset=1000)" in content
    assert store.read("long.txt", 1_000, 1_000).endswith(
        "x" * 1_000 + "\n[More: read_document(path='long.txt', offset=2000)]"
    )


def test_images_become_image_parts_only_for_models_that_take_them(tmp_path: Path):
    store = _store(tmp_path)
    image = store.upload(PNG, "cat.png")
    record: ChatMessage = {
        "role": "user",
        "content": "what is it?",
        "meta": {"attachments": [image.to_meta()]},
    }
    parts = store.expand(record, images=True)["content"]
    assert isinstance(parts, list)  # an image goes as parts
    text, part = parts
    assert text["type"] == "text" and "uploads/cat.png" in text["text"]
    assert part["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    blind = store.expand(record, images=False)["content"]
    assert isinstance(blind, str) and "this model does not take images" in blind
    (tmp_path / "ws/uploads/cat.png").write_bytes(PNG + b"changed")
    store._images.clear()
    assert "too large to send" in store.expand(record, images=True)["content"]
    message: ChatMessage = {"role": "user", "content": [text, part]}
    assert estimate_message_tokens(message) < MESSAGE_OVERHEAD + IMAGE_TOKENS + 100


def test_the_extracted_text_is_cached_by_content(tmp_path: Path):
    store = _store(tmp_path)
    (tmp_path / "ws/r.docx").write_bytes(make_docx())
    [first] = store.attach(["r.docx"])
    assert (tmp_path / "data/attachments" / f"{first.sha256}.json").is_file()
    started = time.monotonic()
    [again] = _store(tmp_path).attach(["r.docx"])  # a new store: read from disk, no child
    assert again == first and time.monotonic() - started < 0.5
