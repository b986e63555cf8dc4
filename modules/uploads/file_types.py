"""What an uploaded file is, and whether its content agrees with its name and is safe to parse.

The kind comes from the name and must match the content's signature; zip-based Office files
pass the bomb checks below (which read only the central directory) before any parser sees
them; text must decode as UTF-8. modules/uploads/extraction.py then extracts the text.
"""

from __future__ import annotations

import io
import os
from typing import Literal

from modules.results import ToolError

Kind = Literal["pdf", "docx", "xlsx", "pptx", "csv", "tsv", "text", "image", "sqlite"]
UploadRefusal = Literal[
    "too_large",
    "unsupported",
    "mismatch",
    "zip_bomb",
    "xml_entities",
    "encrypted",
    "corrupt",
    "timeout",
    "memory",
]

MAX_ZIP_ENTRIES = 5_000
MAX_ZIP_TOTAL = 200 * 1024 * 1024  # declared uncompressed bytes of all entries
MAX_ZIP_RATIO = 100  # uncompressed / compressed, for entries over RATIO_FLOOR
RATIO_FLOOR = 1024 * 1024

OFFICE_MAIN = {  # the main part each Office kind must have, and its content type
    "docx": ("word/document.xml", "wordprocessingml.document.main+xml"),
    "xlsx": ("xl/workbook.xml", "spreadsheetml.sheet.main+xml"),
    "pptx": ("ppt/presentation.xml", "presentationml.presentation.main+xml"),
}
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_TEXT_SUFFIXES = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".org",
        ".tex",
        ".log",
        ".json",
        ".jsonl",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".env",
        ".xml",
        ".html",
        ".htm",
        ".css",
        ".scss",
        ".svg",
        ".py",
        ".pyi",
        ".ipynb",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".vue",
        ".java",
        ".kt",
        ".scala",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".pl",
        ".lua",
        ".r",
        ".jl",
        ".swift",
        ".m",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".bat",
        ".sql",
        ".graphql",
        ".proto",
        ".dockerfile",
        ".makefile",
        ".gradle",
        ".properties",
        ".diff",
        ".patch",
        ".srt",
        ".vtt",
    }
)
_TEXT_NAMES = frozenset({"Dockerfile", "Makefile", "LICENSE", "README", "CHANGELOG", ".gitignore"})
LABELS: dict[str, str] = {
    "pdf": "PDF",
    "docx": "Word document",
    "xlsx": "Excel workbook",
    "pptx": "PowerPoint deck",
    "csv": "CSV",
    "tsv": "TSV",
    "text": "text",
    "image": "image",
    "sqlite": "SQLite database",
}


class ExtractionError(ToolError):
    """A file refused or unreadable; `reason` says why: the upload's error code (docs/protocol.md
    §11), which picks its HTTP status."""

    def __init__(self, message: str, reason: UploadRefusal) -> None:
        super().__init__(message)
        self.reason = reason


def suffix_of(name: str) -> str:
    return os.path.splitext(name)[1].lower()


def kind_for_name(name: str) -> Kind | None:
    """What the name says the file is; None for names no reader takes."""
    suffix = suffix_of(name)
    if suffix in (".pdf", ".docx", ".xlsx", ".pptx", ".csv", ".tsv"):
        return suffix[1:]  # type: ignore[return-value]
    if suffix in IMAGE_TYPES:
        return "image"
    if suffix in (".sqlite", ".sqlite3", ".db"):
        return "sqlite"
    if suffix in _TEXT_SUFFIXES or os.path.basename(name) in _TEXT_NAMES:
        return "text"
    return None


def identify(name: str, data: bytes) -> Kind:
    """The kind of `data` named `name`, when its content agrees with its extension."""
    kind = kind_for_name(name)
    label = os.path.basename(name)
    if kind is None:
        if _looks_like_text(data):
            return "text"
        raise ExtractionError(
            f"{label}: this type of file is not accepted. Upload PDF, DOCX, XLSX, PPTX, CSV/TSV, "
            "Markdown, text or source files, PNG/JPEG/GIF/WebP images or SQLite databases.",
            "unsupported",
        )
    signature = _signature_kind(data[:16])
    if kind in ("pdf", "docx", "xlsx", "pptx", "sqlite"):
        expected = "zip" if kind in OFFICE_MAIN else kind
        if signature != expected:
            raise _mismatch(label, kind, signature)
    elif kind == "image":
        wanted = IMAGE_TYPES[suffix_of(name)]
        if image_mime(data) != wanted:
            raise _mismatch(label, kind, signature, detail=f"it is not a {wanted} image")
    elif signature is not None or b"\x00" in data[:8192]:
        raise _mismatch(label, kind, signature or "binary")
    return kind


def _signature_kind(head: bytes) -> str | None:
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if image_mime(head):
        return "image"
    return None


def image_mime(head: bytes) -> str:
    """The MIME type an image's signature gives, or "" for anything else."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return ""


def _mismatch(label: str, kind: str, found: str | None, *, detail: str = "") -> ExtractionError:
    content = {
        "pdf": "a PDF",
        "zip": "a zip archive",
        "sqlite": "an SQLite database",
        "image": "an image",
        "binary": "binary data",
    }.get(found or "", "something else")
    why = detail or f"its content is {content}"
    return ExtractionError(
        f"{label}: the name says {LABELS[kind]} but {why}; the file was refused.", "mismatch"
    )


def _looks_like_text(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_zip(data: bytes, kind: Kind, label: str) -> None:
    """Refuse a zip-based Office file before it is parsed: too many entries, too much declared
    uncompressed data, an entry compressed suspiciously well, or no main part of its kind."""
    import zipfile

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ExtractionError(f"{label} is not a valid {LABELS[kind]}: {exc}.", "corrupt") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise ExtractionError(
                f"{label} holds {len(entries):,} files (at most {MAX_ZIP_ENTRIES:,}): refused as a "
                "possible zip bomb.",
                "zip_bomb",
            )
        total = sum(entry.file_size for entry in entries)
        if total > MAX_ZIP_TOTAL:
            raise ExtractionError(
                f"{label} would unpack to {total / 2**20:,.0f} MB (at most "
                f"{MAX_ZIP_TOTAL / 2**20:,.0f} MB): refused as a possible zip bomb.",
                "zip_bomb",
            )
        for entry in entries:
            if entry.file_size > RATIO_FLOOR and entry.file_size > MAX_ZIP_RATIO * max(
                entry.compress_size, 1
            ):
                ratio = entry.file_size / max(entry.compress_size, 1)
                raise ExtractionError(
                    f"{label}: its part {entry.filename[:80]!r} is compressed {ratio:,.0f} to 1 "
                    f"(at most {MAX_ZIP_RATIO} to 1): refused as a possible zip bomb.",
                    "zip_bomb",
                )
        main, content_type = OFFICE_MAIN[kind]
        names = {entry.filename for entry in entries}
        if "[Content_Types].xml" not in names or main not in names:
            raise ExtractionError(
                f"{label}: the name says {LABELS[kind]} but the archive has no {main}; the file "
                "was refused.",
                "mismatch",
            )
        _check_content_types(archive.read("[Content_Types].xml"), main, content_type, label, kind)


def _check_content_types(xml: bytes, main: str, content_type: str, label: str, kind: str) -> None:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import ParseError, fromstring

    try:
        root = fromstring(xml, forbid_dtd=True)
    except DefusedXmlException:
        raise ExtractionError(
            f"{label}: [Content_Types].xml declares a DTD or entities, which Office files never "
            "do: refused.",
            "xml_entities",
        ) from None
    except ParseError as exc:
        raise ExtractionError(
            f"{label}: [Content_Types].xml is not valid XML ({exc}).", "corrupt"
        ) from None
    for element in root:
        if element.get("PartName") == f"/{main}":
            if (element.get("ContentType") or "").endswith(content_type):
                return
            break
    raise ExtractionError(
        f"{label}: the name says {LABELS[kind]} but its main part is declared as something "
        "else; the file was refused.",
        "mismatch",
    )


def decode_text(data: bytes, label: str) -> str:
    """Text that must decode as UTF-8 (a BOM is dropped); binary content is refused."""
    if b"\x00" in data:
        raise ExtractionError(f"{label} contains NUL bytes: it is binary, not text.", "mismatch")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(
            f"{label} is not UTF-8 text (byte {exc.start:,} does not decode); save it as UTF-8.",
            "mismatch",
        ) from None
