"""HTTP routes of the web workspace; every one needs the token (docs/protocol.md §3, §7)."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    send_file,
)
from werkzeug.exceptions import HTTPException

from history.export import EXPORT_FORMATS, export_download
from history.store import ConversationNotFound
from modules.results import ToolError
from modules.uploads.file_types import ExtractionError, image_mime
from modules.workspace.archive import zip_stream
from protocol.event_values import FileChange
from protocol.events import FileTree
from web.payloads import conversation_payload, conversations_payload, status_payload, tree_payload
from web.refusals import HTTP_STATUS, HttpCode, refusal
from web.state import WebState

TOKEN_COOKIE = "agent_token"
PREVIEW_LIMIT_BYTES = 512 * 1024
LOG_CHUNK_BYTES = 256 * 1024
LOG_TAIL_BYTES = 64 * 1024
OVERSIZED_LINE_HEAD = 4096
IMAGE_HEAD_BYTES = 4096  # where an image's signature (an SVG's root element) must be
IMAGE_LIMIT_BYTES = 20 * 1024 * 1024  # the largest image the preview shows
SVG_ROOT = re.compile(rb"<svg[\s>/]")
IMAGE_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
LOG_FILES = {"agent": "agent.jsonl", "debug_stream": "debug_stream.log"}
LOG_FILTERS = ("conversation_id", "trace_id")  # fields a log line must carry with the asked value


def page_policy(style_nonce: str | None = None) -> str:
    """The pages' Content-Security-Policy: only this origin's scripts and styles, and the
    <style> elements that carry `style_nonce` (a fresh one per page: xterm's renderer writes
    the terminal's theme and cell sizes into <style> elements it makes)."""
    styles = f"style-src 'self' 'nonce-{style_nonce}'" if style_nonce else "style-src 'self'"
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            styles,
            "img-src 'self' data:",
            "font-src 'self'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


CONTENT_SECURITY_POLICY = page_policy()

PAGES = ("/", "/debug")  # the pages `?token=` opens, setting the cookie
HOW_TO_OPEN = (
    "Open the address the server printed when it started: the line\n"
    "  Workspace Agent: http://HOST:PORT/?token=...\n"
    "in the terminal where `make run` or `python main.py web` runs.\n"
    "The token is also kept in the file web_token of the server's data folder\n"
    "(./data/web_token by default), unless AGENT_WEB_TOKEN sets it.\n"
)
NO_TOKEN_PAGE = f"This page needs the server's access token.\n\n{HOW_TO_OPEN}"
WRONG_TOKEN_PAGE = (
    "This token is not the server's: the server was restarted with another one, "
    f"or the address was mistyped.\n\n{HOW_TO_OPEN}"
)

routes = Blueprint("workspace", __name__)


def _state() -> WebState:
    return current_app.extensions["agent"]


def _error(code: HttpCode, message: str) -> tuple[Response, int]:
    return _answer(HTTP_STATUS[code], code, message)


def _answer(status: int, code: str, message: str) -> tuple[Response, int]:
    return jsonify({"ok": False, "error": {"code": code, "message": message}}), status


@routes.before_app_request
def require_token() -> Any:
    """Let static assets and the right token through; a wrong or missing token gets 401, or
    429 once its address has sent too many (the right token is never throttled)."""
    if request.endpoint == "static":
        return None
    state = _state()
    header = request.headers.get("Authorization", "")
    bearer = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
    if state.token_ok(bearer) or state.token_ok(request.cookies.get(TOKEN_COOKIE)):
        return None
    if request.path in PAGES and state.token_ok(request.args.get("token")):
        response = redirect(request.path)
        response.set_cookie(TOKEN_COOKIE, state.token, httponly=True, samesite="Strict")
        return response
    wait = state.throttle.wrong_token(request.remote_addr, f"HTTP {request.path[:80]}")
    if wait:
        response, status = _error("too_many_attempts", "too many wrong tokens; wait")
        response.headers["Retry-After"] = str(wait)
        return response, status
    if request.path.startswith("/api/"):
        return _error("unauthorized", "missing or wrong token")
    given = request.args.get("token") or request.cookies.get(TOKEN_COOKIE)
    return Response(WRONG_TOKEN_PAGE if given else NO_TOKEN_PAGE, status=401, mimetype="text/plain")


@routes.after_app_request
def harden(response: Response) -> Response:
    """Only this origin's scripts, styles, images and connections; no framing, no sniffing,
    no token in a Referer, no cached API answers."""
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    if request.path.startswith("/api/"):
        response.headers["Cache-Control"] = "no-store"
    return response


@routes.app_errorhandler(HTTPException)
def http_error(error: HTTPException) -> Any:
    """API paths answer errors as JSON, like every other API answer; pages keep Flask's."""
    if not request.path.startswith("/api/"):
        return error
    code = (error.name or "error").lower().replace(" ", "_")
    return _answer(error.code or 500, code, error.description or error.name)


@routes.get("/")
def index() -> Response:
    state = _state()
    style_nonce = secrets.token_urlsafe(18)
    response = Response(
        render_template(
            "index.html",
            token=state.token,
            version="0.1.0",
            upload_limit=state.services.attachments.limits.max_bytes,
            style_nonce=style_nonce,
        )
    )
    response.headers["Content-Security-Policy"] = page_policy(style_nonce)
    return response


@routes.get("/debug")
def debug() -> str:
    return render_template("debug.html", token=_state().token, version="0.1.0")


@routes.get("/api/conversations")
def conversations() -> Response:
    return jsonify(conversations_payload(_state()))


@routes.get("/api/conversations/<conversation_id>")
def conversation(conversation_id: str) -> Any:
    try:
        return jsonify(conversation_payload(_state(), conversation_id))
    except ConversationNotFound as exc:
        return _error(**refusal(exc, "GET /api/conversations/ID"))


@routes.get("/api/conversations/<conversation_id>/export")
def export(conversation_id: str) -> Any:
    """The conversation's current branch as a Markdown or JSON download (`format`)."""
    fmt = request.args.get("format", "md")
    if fmt not in EXPORT_FORMATS:
        return _error("bad_request", f"format is one of {', '.join(EXPORT_FORMATS)}, not {fmt!r}")
    try:
        conversation = _state().hub.get(conversation_id).conversation
    except ConversationNotFound as exc:
        return _error(**refusal(exc, "GET /api/conversations/ID/export"))
    if conversation is None:
        return _error("not_found", f"conversation {conversation_id!r} has no messages")
    text, media_type, disposition = export_download(conversation, fmt)
    return Response(text, mimetype=media_type, headers={"Content-Disposition": disposition})


@routes.get("/api/tree")
def tree() -> Response:
    return jsonify(tree_payload(_state()))


@routes.get("/api/file")
def file_preview() -> Any:
    workspace = _state().services.workspace
    try:
        rel = workspace.relative(workspace.resolve(request.args.get("path", "")))
    except ToolError as exc:
        return _error("bad_path", str(exc))
    try:
        with workspace.open_regular(rel) as (handle, info):
            size = info.st_size
            data = handle.read(PREVIEW_LIMIT_BYTES)
    except (OSError, ToolError):  # missing, a folder, a fifo or device, or swapped outside
        return _error("not_found", f"{request.args.get('path')} is not a file")
    binary = b"\x00" in data[:8192]
    content = "" if binary else data.decode("utf-8", errors="replace")
    return jsonify(
        {
            "ok": True,
            "path": rel,
            "content": content,
            "truncated": size > PREVIEW_LIMIT_BYTES,
            "binary": binary,
            "size": size,
        }
    )


MULTIPART_SLACK = 64 * 1024  # the form's boundaries and headers around the file


@routes.post("/api/upload")
def upload() -> Any:
    """One file, as the multipart field `file` or as the raw body with `?name=`: checked,
    extracted, stored in the workspace's upload folder; refused files leave nothing behind."""
    state = _state()
    store = state.services.attachments
    limit = store.limits.max_bytes
    too_large = f"the upload limit is {limit / 2**20:,.0f} MB (AGENT_UPLOAD_LIMIT_MB)"
    if (request.content_length or 0) > limit + MULTIPART_SLACK:
        return _error("too_large", f"The file is too large: {too_large}.")
    request.max_content_length = limit + MULTIPART_SLACK
    if request.mimetype == "multipart/form-data":
        sent = request.files.get("file")
        if sent is None:
            return _error("bad_request", "send the file as the multipart field 'file'")
        name, data = sent.filename or "", sent.stream.read(limit + 1)
    else:
        name, data = request.args.get("name", ""), request.stream.read(limit + 1)
    if len(data) > limit:
        return _error("too_large", f"The file is too large: {too_large}.")
    if not name:
        return _error("bad_request", "the file needs a name (?name= for a raw body)")
    try:
        attachment = store.upload(data, name)
    except ExtractionError as exc:
        return _error(exc.reason, str(exc))
    except ToolError as exc:  # the upload folder is no folder, or has no free name left
        return _error("conflict", str(exc))
    change = FileTree([FileChange("created", attachment.path)])
    state.socketio.emit(change.name, change.to_wire())  # the trees show it now, not when watched
    return jsonify({"ok": True, **attachment.to_meta()})


@routes.get("/api/download")
def download() -> Any:
    """A workspace file as a download (never shown inline), or a folder as a zip; with
    `view=image`, an image with its own type, for the page's <img> only."""
    workspace = _state().services.workspace
    as_image = request.args.get("view") == "image"
    try:
        rel = workspace.relative(workspace.resolve(request.args.get("path", "")))
        info = workspace.lstat(rel, follow=True)
        if info is not None and stat.S_ISDIR(info.st_mode) and not as_image:
            return _zip_response(rel)
        with workspace.open_regular(rel) as (handle, opened):
            head = os.pread(handle.fileno(), IMAGE_HEAD_BYTES, 0)
            size = opened.st_size
            copy = os.fdopen(os.dup(handle.fileno()), "rb")
    except (OSError, ToolError) as exc:
        return _error("not_found", f"{request.args.get('path')!r} cannot be downloaded: {exc}")
    mimetype = _image_type(rel, head) if as_image else "application/octet-stream"
    if as_image and (refusal := _image_refusal(rel, mimetype, size)) is not None:
        copy.close()
        return refusal
    response = send_file(
        copy,
        mimetype=mimetype,
        as_attachment=True,
        download_name=rel.rsplit("/", 1)[-1],
        max_age=0,
    )
    if as_image:  # opened by itself (an SVG in a tab), it runs nothing and reaches nothing
        response.headers["Content-Security-Policy"] = IMAGE_SECURITY_POLICY
    return response


def _image_refusal(rel: str, mimetype: str, size: int) -> tuple[Response, int] | None:
    if not mimetype:
        return _error("not_an_image", f"{rel} is not a PNG, JPEG, GIF, WebP or SVG image")
    if size > IMAGE_LIMIT_BYTES:
        limit = IMAGE_LIMIT_BYTES // 2**20
        return _error("too_large", f"{rel} is over {limit} MB: download it instead")
    return None


def _image_type(rel: str, head: bytes) -> str:
    """The type of an image the page may show, from its first bytes; "" for anything else."""
    if rel.lower().endswith(".svg"):
        return "image/svg+xml" if b"\x00" not in head and SVG_ROOT.search(head) else ""
    return image_mime(head)


@routes.get("/api/archive")
def archive() -> Response:
    """The whole workspace as a zip, streamed; what the file tree leaves out is left out."""
    return _zip_response("")


def _zip_response(rel: str) -> Response:
    state = _state()
    workspace = state.services.workspace
    name = (rel.rsplit("/", 1)[-1] if rel else workspace.root.name) or "workspace"
    response = Response(zip_stream(workspace, rel), mimetype="application/zip")
    response.headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name)}.zip"
    return response


@routes.get("/api/status")
def status() -> Response:
    return jsonify(status_payload(_state()))


@routes.get("/api/logs/<name>")
def logs(name: str) -> Any:
    if name not in LOG_FILES:
        return _error("not_found", f"no log {name!r}; try {', '.join(LOG_FILES)}")
    path = _state().settings.data_dir / "logs" / LOG_FILES[name]
    try:
        after = int(request.args["after"]) if "after" in request.args else None
    except ValueError:
        return _error("bad_request", "after must be a byte offset")
    match = {key: request.args[key] for key in LOG_FILTERS if request.args.get(key)}
    lines, next_offset = read_log(path, after, match)
    return jsonify({"ok": True, "lines": lines, "next": next_offset})


def read_log(path: Path, after: int | None, match: dict[str, str]) -> tuple[list[str], int]:
    """Complete lines from byte `after` on (the last 64 KiB when None) whose JSON object has
    every field of `match` with that value (a conversation, a task's trace).

    Returns the lines and the offset to ask for next. A line longer than a chunk comes back
    cut to its head, so a reader never gets stuck on it.
    """
    if not path.exists():
        return [], 0
    size = path.stat().st_size
    start = max(0, size - LOG_TAIL_BYTES) if after is None else min(max(after, 0), size)
    with path.open("rb") as handle:
        handle.seek(start)
        chunk = handle.read(LOG_CHUNK_BYTES)
        if after is None and start > 0:
            cut = chunk.find(b"\n") + 1
            if cut == 0:
                return [], size
            chunk, start = chunk[cut:], start + cut
        end = chunk.rfind(b"\n") + 1
        if end == 0 and len(chunk) == LOG_CHUNK_BYTES:
            lines, next_offset = _oversized_line(handle, chunk, start)
        else:
            lines = chunk[:end].decode("utf-8", errors="replace").splitlines()
            next_offset = start + end
    if match:
        lines = [line for line in lines if _matches(line, match)]
    return lines, next_offset


def _oversized_line(handle: BinaryIO, head: bytes, start: int) -> tuple[list[str], int]:
    """Skip to the end of a line that does not fit a chunk; give back its head only."""
    length = len(head)
    while block := handle.read(LOG_CHUNK_BYTES):
        newline = block.find(b"\n")
        if newline >= 0:
            length += newline
            shown = head[:OVERSIZED_LINE_HEAD].decode("utf-8", errors="replace")
            return [f"{shown} … [line of {length} bytes cut]"], start + length + 1
        length += len(block)
    return [], start  # the line is still being written


def _matches(line: str, match: dict[str, str]) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and all(record.get(k) == v for k, v in match.items())
