"""A tiny web app for the app proxy's tests, run by the fake model's command inside a sandbox
session (`python3 -u web_app.py PORT WORKSPACE_URL`, stdlib only): a page whose script opens
a WebSocket to the app (an echo) and tries to reach the workspace at WORKSPACE_URL (its API
with credentials, its Socket.IO, the cookies it can read), saying what happened in #result;
`/echo` answers a POST's body; each request's Cookie header is printed as `cookie: ...`."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import struct
import sys
from typing import Any

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

PAGE = """<!doctype html><meta charset=utf-8><title>test app</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<h1>test app</h1><pre id=result>running</pre>
<script>
const WORKSPACE = %s;
const report = {};
const done = () => { document.getElementById("result").textContent = JSON.stringify(report); };
const attempt = async (name, run) => {
  try { report[name] = await run(); } catch (error) { report[name] = "failed: " + error; }
};
const echo = () => new Promise((resolve) => {
  const ws = new WebSocket(`ws://${location.host}/ws`);
  ws.onopen = () => ws.send("ping through the proxy");
  ws.onmessage = (event) => { resolve("echo: " + event.data); ws.close(); };
  ws.onerror = () => resolve("failed: websocket error");
});
const ENGINE = "/socket.io/?EIO=4&transport=";
const status = async (path, options) => (await fetch(WORKSPACE + path, options)).status;
const workspaceSocket = () => new Promise((resolve) => {
  const ws = new WebSocket(WORKSPACE.replace("http", "ws") + ENGINE + "websocket");
  ws.onopen = () => { ws.send('40{"token":""}'); };
  ws.onmessage = (event) => { if (String(event.data).startsWith("40")) resolve("connected"); };
  ws.onerror = () => resolve("failed: refused");
  ws.onclose = () => resolve("failed: closed");
});
(async () => {
  report.cookie = document.cookie;
  await attempt("echo", echo);
  await attempt("api", () => status("/api/status", { credentials: "include" }));
  await attempt("upload", () => status("/api/upload?path=from-app.txt",
    { method: "POST", credentials: "include", body: "x" }));
  await attempt("polling", () => status(ENGINE + "polling", { credentials: "include" }));
  await attempt("socket", workspaceSocket);
  done();
})();
</script>"""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    workspace = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _log_cookie(self) -> None:
        print(f"cookie: {self.headers.get('Cookie', '')}", flush=True)

    def do_GET(self) -> None:
        self._log_cookie()
        if self.path == "/ws":
            return self._websocket()
        body = (PAGE % json.dumps(self.workspace)).encode()
        if self.path != "/":
            body = f"path {self.path}".encode()
        self._send(200, body, "text/html; charset=utf-8" if self.path == "/" else "text/plain")

    def do_POST(self) -> None:
        self._log_cookie()
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(200, b"got " + body, "text/plain")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _websocket(self) -> None:
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while (message := self._frame()) is not None:
            self._reply(message)
        self.close_connection = True

    def _frame(self) -> bytes | None:
        """The next text frame's payload (None at a close frame or the end)."""
        head = self.rfile.read(2)
        if len(head) < 2 or head[0] & 0x0F == 8:
            return None
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack(">H", self.rfile.read(2))[0]
        elif length == 127:
            length = struct.unpack(">Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = self.rfile.read(length)
        return bytes(b ^ mask[i % 4] for i, b in enumerate(data))

    def _reply(self, payload: bytes) -> None:
        size = len(payload)
        head = bytes([0x81, size]) if size < 126 else bytes([0x81, 126]) + struct.pack(">H", size)
        self.wfile.write(head + payload)
        self.wfile.flush()


def main() -> None:
    Handler.workspace = sys.argv[2] if len(sys.argv) > 2 else ""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"app listening on {sys.argv[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
