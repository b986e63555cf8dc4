"""The HTTP request heads the app proxy reads on their way from the browser to an app: parsed
only as far as the proxy needs (its token and cookie, the Host, how long the body is, an
upgrade), the workspace's cookies taken out, and the few answers the proxy gives itself."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

MAX_HEAD = 64 * 1024
TOKEN_PARAM = "agent_app_token"
APP_COOKIE_PREFIX = "agent_app_"
WORKSPACE_COOKIE = "agent_token"  # web/routes.py TOKEN_COOKIE: never sent on to an app
TOKEN_CHARS = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110 5.6.2)


class BadRequest(ValueError):
    """A request head the proxy will not pass on; the text says why."""


@dataclass(frozen=True)
class RequestHead:
    """One request head: its line's parts and its header fields' values by name (lowercased),
    each name's in the order given."""

    method: str
    target: str
    version: str
    fields: dict[str, list[str]]

    def values(self, name: str) -> list[str]:
        return self.fields.get(name, [])

    def one(self, name: str) -> str | None:
        """The field's value; BadRequest when it is given more than once."""
        found = self.values(name)
        if len(found) > 1:
            raise BadRequest(f"{name} given more than once")
        return found[0] if found else None

    @property
    def upgrade(self) -> bool:
        """A protocol switch (a WebSocket): after it the connection is no longer HTTP."""
        tokens = {t.strip().lower() for v in self.values("connection") for t in v.split(",")}
        return "upgrade" in tokens and bool(self.values("upgrade"))

    def body(self) -> int | None:
        """The body's length in bytes; None for a chunked one (BadRequest when unclear)."""
        encodings = [
            t.strip().lower() for v in self.values("transfer-encoding") for t in v.split(",")
        ]
        lengths = {v.strip() for v in self.values("content-length")}
        if encodings:
            if lengths or encodings != ["chunked"]:
                raise BadRequest("a body framed other than by one chunked encoding")
            return None
        if not lengths:
            return 0
        (length,) = lengths if len(lengths) == 1 else ("x",)
        if not length.isdigit() or len(length) > 18:
            raise BadRequest("an unclear Content-Length")
        return int(length)

    @functools.cached_property
    def cookies(self) -> list[tuple[str, str]]:
        """Every cookie the request carries, in order."""
        found = []
        for header in self.values("cookie"):
            for part in header.split(";"):
                name, _, value = part.strip().partition("=")
                if name:
                    found.append((name.strip(), value.strip()))
        return found

    def query_token(self) -> str | None:
        """The app token given in the query (`?agent_app_token=...`)."""
        if TOKEN_PARAM not in self.target:  # the common case, answered cheaply
            return None
        query = urlsplit(self.target).query
        found = [v for k, v in parse_qsl(query, keep_blank_values=True) if k == TOKEN_PARAM]
        return found[0] if found else None

    def without_token(self) -> str:
        """The target without the token: where the first request is sent back to."""
        parts = urlsplit(self.target)
        query = [
            (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != TOKEN_PARAM
        ]
        path = parts.path if parts.path.startswith("/") else "/"
        return path + (f"?{urlencode(query)}" if query else "")


def parse_head(raw: bytes) -> RequestHead:
    """Parse a request head (its bytes up to and with the blank line)."""
    lines = raw.decode("latin-1").split("\r\n")
    if lines and lines[-1] == "":
        lines = lines[:-2] if len(lines) > 1 and lines[-2] == "" else lines[:-1]
    if not lines:
        raise BadRequest("an empty request head")
    fields: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not TOKEN_CHARS.match(name):
            raise BadRequest("a malformed header field")
        fields.setdefault(name.lower(), []).append(value.strip(" \t"))
    return with_line(lines[0], fields)


def with_line(line: str, fields: dict[str, list[str]]) -> RequestHead:
    """A request head of this request line and header fields parsed before."""
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not TOKEN_CHARS.match(parts[0]):
        raise BadRequest("not an HTTP/1.x request line")
    method, target, version = parts
    if method == "CONNECT" or not target.startswith("/"):
        raise BadRequest("only requests for a path of the app go through")
    return RequestHead(method, target, version, fields)


def strip_cookies(raw: bytes, head: RequestHead) -> bytes:
    """The head as it goes on to the app: the workspace's cookie and every app cookie of
    this proxy taken out (the head unchanged when it carries none)."""
    if not any(_ours(name) for name, _ in head.cookies):
        return raw
    lines = raw.decode("latin-1").split("\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() != "cookie":
            kept.append(line)
            continue
        others = [p.strip() for p in value.split(";") if p.strip() and not _ours(_cookie_name(p))]
        if others:
            kept.append("Cookie: " + "; ".join(others))
    return "\r\n".join(kept).encode("latin-1")


def _cookie_name(part: str) -> str:
    return part.strip().partition("=")[0].strip()


def _ours(name: str) -> bool:
    return name == WORKSPACE_COOKIE or name.startswith(APP_COOKIE_PREFIX)


def answer(status: str, body: str = "", headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A response of the proxy's own (the connection closes after it)."""
    data = body.encode()
    lines = [f"HTTP/1.1 {status}", "Content-Type: text/html; charset=utf-8",
             f"Content-Length: {len(data)}", "Cache-Control: no-store", "Connection: close",
             "X-Content-Type-Options: nosniff", "Referrer-Policy: no-referrer",
             "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'"]  # fmt: skip
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def page(title: str, text: str) -> str:
    """A small HTML page saying `text`."""
    return (
        f"<!doctype html><meta charset=utf-8><title>{title}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<body style="font:16px system-ui,sans-serif;margin:2em;max-width:40em">'
        f'<h1 style="font-size:1.3em">{title}</h1><p>{text}</p>'
    )
