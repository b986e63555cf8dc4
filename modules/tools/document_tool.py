"""The `read_document` tool: the text of a document in the workspace, extracted as for an
attachment, in parts."""

from __future__ import annotations

from pydantic import BaseModel, Field

from modules.tools.tool_context import ToolContext
from modules.uploads.attachments import AttachmentStore


class ReadDocumentArgs(BaseModel):
    path: str = Field(
        description="The document, relative to the workspace (uploads are in uploads/)."
    )
    offset: int = Field(
        0,
        ge=0,
        description="Character to start at, for reading on where an "
        "earlier call or an attachment stopped.",
    )


def read_document(ctx: ToolContext, args: ReadDocumentArgs) -> str:
    """Read the text of a document in the workspace: PDF, DOCX, XLSX (formulas shown with their
    cached values), PPTX, CSV/TSV, Markdown, text or source. Long documents come in parts;
    the answer says the offset to read on from. Changes nothing."""
    store = AttachmentStore.from_settings(ctx.settings, ctx.workspace)
    chars = max(1_000, min(store.shown_chars, ctx.settings.output_limit_chars - 1_000))
    return store.read(args.path, args.offset, chars)
