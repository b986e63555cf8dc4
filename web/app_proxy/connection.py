"""One browser connection to an app: each request head read, admitted (Host, then the app's
token or cookie), its workspace cookies taken out and sent on to a socket the session's
supervisor connected inside the sandbox; bodies and the app's answers pass as they are, and
after an upgrade (a WebSocket) everything does."""

from __future__ import annotations

import contextlib
import functools
import hmac
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from modules.sandbox.session.os_threads import start_thread
from web.app_proxy.http_head import (
    APP_COOKIE_PREFIX,
    TOKEN_PARAM,
    BadRequest,
    RequestHead,
    answer,
    page,
    parse_head,
    strip_cookies,
    with_line,
)
from web.app_proxy.stream import Closed, Reader, pump

log = logging.getLogger(__name__)

FIRST_HEAD_SECONDS = 15  # for a new connection's first request head
IDLE_SECONDS = 300  # for any later read (a keep-alive connection between requests)
KNOWN_HOSTS = 16
TOKEN_PARAM_BYTES = TOKEN_PARAM.encode()

UNAUTHORISED = page(
    "Open this app from its workspace",
    "This address is an app running in a Workspace Agent conversation. Open it with the "
    "<b>Open</b> button of the conversation's processes panel: that link carries the key "
    "this browser has not shown.",
)


@dataclass(frozen=True)
class Admission:
    """What an app admits: its port on the proxy (its cookie's name), its token, and the
    Host names it answers to."""

    app_port: int
    token: str
    host_check: Callable[[str], bool]
    _hosts: dict[str, bool] = field(default_factory=dict)  # the Host values seen, checked

    def host_ok(self, header: str) -> bool:
        """Whether a Host header names this app (a few values recur: each checked once)."""
        known = self._hosts.get(header)
        if known is None:
            known = self.host_check(header)
            if len(self._hosts) < KNOWN_HOSTS:
                self._hosts[header] = known
        return known

    @property
    def cookie(self) -> str:
        return f"{APP_COOKIE_PREFIX}{self.app_port}"

    def token_ok(self, candidate: str | None) -> bool:
        if candidate is None:
            return False
        given = candidate.encode("utf-8", "surrogatepass")
        return hmac.compare_digest(given, self.token.encode("utf-8", "surrogatepass"))


def refusal(head: RequestHead, admission: Admission) -> bytes | None:
    """The proxy's own answer to a request that does not go on to the app (None: it goes):
    a foreign Host, the token in the address (its cookie set, sent back without it), or
    neither the token nor its cookie."""
    if not admission.host_ok(head.one("host") or ""):
        return answer(
            "403 Forbidden", page("Forbidden", "This app answers to its own address only.")
        )
    given = head.query_token()
    if given is not None and admission.token_ok(given):
        cookie = f"{admission.cookie}={admission.token}; HttpOnly; SameSite=Lax; Path=/"
        headers = (("Location", head.without_token()), ("Set-Cookie", cookie))
        return answer("303 See Other", headers=headers)
    if any(name == admission.cookie and admission.token_ok(value) for name, value in head.cookies):
        return None
    return answer("401 Unauthorized", UNAUTHORISED)


Connect = Callable[[], socket.socket]  # a socket to the app (OSError when it is not there)


@dataclass
class _Admitted:
    """The header fields of the last request a connection had admitted (the bytes after its
    request line), as parsed and as sent on: a browser sends the same fields with most of its
    requests, and the same bytes with a request line carrying no token get the same answer."""

    fields_raw: bytes = b""
    fields: dict[str, list[str]] = field(default_factory=dict)
    sent_on: bytes = b""

    def head(self, raw: bytes) -> tuple[RequestHead, bytes] | None:
        """The head and what goes on to the app, when `raw`'s fields are those admitted."""
        line_end = raw.find(b"\r\n")
        line = raw[:line_end]
        if raw[line_end:] != self.fields_raw or TOKEN_PARAM_BYTES in line:
            return None
        return with_line(line.decode("latin-1"), self.fields), line + self.sent_on

    def note(self, raw: bytes, head: RequestHead, sent_on: bytes) -> None:
        self.fields_raw, self.fields = raw[raw.find(b"\r\n") :], head.fields
        self.sent_on = sent_on[sent_on.find(b"\r\n") :]


def serve(browser: socket.socket, admission: Admission, connect: Connect) -> None:
    """Serve one browser connection to its end (either side closing, or a refusal)."""
    reader = Reader(browser)
    reader.quiet_limit(FIRST_HEAD_SECONDS)
    app: socket.socket | None = None
    admitted = _Admitted()
    try:
        while True:
            raw = reader.head()
            known = admitted.head(raw)
            if known is None:
                head = parse_head(raw)
                length = head.body()  # framed unclearly: refused before anything goes on
                refused = refusal(head, admission)
                if refused is not None:
                    browser.sendall(refused)
                    return
                sent_on = strip_cookies(raw, head)
                admitted.note(raw, head, sent_on)
            else:
                head, sent_on = known
                length = head.body()
            if app is None:
                app = _open(connect, browser)
                if app is None:
                    return
                start_thread(functools.partial(pump, app, browser), "app-proxy-answers")
                reader.quiet_limit(IDLE_SECONDS)
            app.sendall(sent_on)
            if head.upgrade:
                reader.quiet_limit(0)  # a WebSocket may stay quiet as long as it likes
                app.sendall(reader.take(len(reader.buffer)))
                pump(browser, app)
                return
            _body(reader, length, app)
    except BadRequest as exc:
        with contextlib.suppress(OSError):
            browser.sendall(answer("400 Bad Request", page("Bad request", str(exc))))
    except (Closed, OSError):
        pass
    finally:
        _close(browser, app)


def _open(connect: Connect, browser: socket.socket) -> socket.socket | None:
    try:
        return connect()
    except OSError as exc:
        text = f"The app does not answer ({exc}). It may have stopped."
        with contextlib.suppress(OSError):
            browser.sendall(answer("502 Bad Gateway", page("The app does not answer", text)))
        return None


def _body(reader: Reader, length: int | None, app: socket.socket) -> None:
    """Send the request's body on: `length` bytes, or chunk by chunk (None)."""
    if length is not None:
        reader.copy(length, app)
        return
    while True:
        line = reader.line()
        app.sendall(line)
        size_text = line.split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequest("a malformed chunk size") from None
        if size < 0:
            raise BadRequest("a malformed chunk size")
        if size == 0:
            while (trailer := reader.line()) not in (b"\r\n", b"\n"):
                app.sendall(trailer)
            app.sendall(trailer)
            return
        reader.copy(size + 2, app)


def _close(browser: socket.socket, app: socket.socket | None) -> None:
    for sock in (browser, app):
        if sock is None:
            continue
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
