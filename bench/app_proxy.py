"""App proxy benchmark: HTTP requests to an app running in a conversation's sandbox session,
through the app proxy (web/app_proxy/: its listener, each request head read and its cookies
taken out, bytes spliced) against the same requests sent straight to the app.

"Straight" is a socket the session's supervisor connected to the app (SandboxSession.connect,
what the proxy itself sends on to), handed to the client process as a descriptor: the app
listens inside the sandbox's own network, so nothing on the host reaches it more directly, and
the difference is exactly what the proxy adds. Keep-alive connections, as a browser keeps
them; the client is a process of its own (as a browser is), the proxy runs in this one.

The goal is judged as a browser loads an app: over CONNECTIONS keep-alive connections at once
(Chromium's limit per origin), to the server the agent runs (Python's http.server): requests
per second through the proxy / straight >= 0.7; and one request's median latency on one
connection: what the proxy adds <= 1 ms. One connection's requests per second (latency bound)
and the minimal server (a server that answers as fast as Python can: nearly all of each
request's time is then the proxy's hop) are printed too, beside the floor: HAProxy (the
project's load balancer, one thread, HTTP mode) in front of the same servers run on the host,
in the same run, which shows what any proxy's extra hop costs on this machine.

Run from the repo root: `python bench/app_proxy.py [--requests N]`. Exit code 1 when a goal is
missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.sandbox.session.session import SandboxSession

MINIMAL = r"""
import socket, sys, threading
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 200\r\n\r\n" + b"x" * 200
def serve(conn):
    data = b""
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            data = data.split(b"\r\n\r\n", 1)[1]
            conn.sendall(ANSWER)
listener = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=128)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
DEV_SERVER = r"""
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # its head and body are two writes: not 40 ms apart
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "200")
        self.end_headers()
        self.wfile.write(b"x" * 200)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""
# what the agent runs (python's http.server, as `python3 -m http.server` and most dev servers
# in Python are), and the floor: a server that answers as fast as Python can
TARGETS = {"dev server (http.server)": DEV_SERVER, "minimal server": MINIMAL}
GOAL_TARGET = "dev server (http.server)"
CONNECTIONS = 6
ROUNDS = 5
RPS_GOAL = 0.7
ADDED_P50_GOAL_MS = 1.0
HAPROXY = """global
  nbthread 1
defaults
  mode http
  option http-keep-alive
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend bench
  bind 127.0.0.1:{front}
  default_backend app
backend app
  server app 127.0.0.1:{back}
"""

Way = Callable[[int, int], dict[str, float]]  # (connections, requests on each): rps, p50_ms


def client(
    fds: list[int], address: str, request: bytes, count: int, connections: int
) -> dict[str, object]:
    """In the client process: `count` requests on each connection (the descriptors given, or
    as many connected to `address`), all at once; rps, and each request's latency on the
    first one."""
    if fds:
        conns = [socket.socket(fileno=fd) for fd in fds]
    else:
        host, port = address.rsplit(":", 1)
        conns = [socket.create_connection((host, int(port))) for _ in range(connections)]
    latencies: list[float] = []

    def run(conn: socket.socket, timed: bool) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter()
            conn.sendall(request)
            _answer(conn)
            if timed:
                latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(c, i == 0)) for i, c in enumerate(conns)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {"rps": count * len(conns) / seconds, "p50_ms": statistics.median(latencies)}


def _answer(conn: socket.socket) -> None:
    """Read one answer (a head with a Content-Length, and that many bytes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            raise SystemExit("the connection closed early")
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)


def run_client(
    request: bytes, count: int, fds: tuple[int, ...] = (), address: str = "", conns: int = 1
) -> dict[str, float]:
    """The client as a process of its own; what it measured."""
    argv = [sys.executable, __file__, "--client", json.dumps({
        "fds": list(fds), "address": address, "request": request.decode("latin-1"),
        "count": count, "connections": conns})]  # fmt: skip
    out = subprocess.run(argv, pass_fds=list(fds), capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def main() -> int:
    from modules.sandbox.factory import runner_for, sessions_of
    from utils.settings import Settings
    from web.app_proxy import AppProxy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="per connection and round")
    args = parser.parse_args()
    met = True
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp, "ws")
        ws.mkdir()
        settings = Settings(workspace=ws, data_dir=Path(tmp, "data"), sandbox="local")
        runner = runner_for(settings)
        pool = sessions_of(runner)
        if pool is None or runner.kind != "bubblewrap":
            print("bubblewrap is not installed or unusable here: no session to measure")
            return 1
        proxy = AppProxy(pool, "127.0.0.1", lambda host: True)
        print(f"{'':<52} {'straight':>10} {'proxied':>10} {'ratio':>7}")
        try:
            session = pool.session("bench")
            for port, (name, script) in enumerate(TARGETS.items(), start=8000):
                (ws / f"target{port}.py").write_text(script)
                started = session.start(f"python3 -u target{port}.py {port}", ws, settle=10)
                if port not in started.info.ports:
                    print(f"{name} did not listen: {started.text}")
                    return 1
                opened = proxy.open("bench", started.info.record.id, port, "127.0.0.1")
                request = _request(urlsplit(opened.url))
                ways = _ours(session, port, request, urlsplit(opened.url).netloc)
                met &= _report(f"{name}, our proxy", *ways, args.requests, name == GOAL_TARGET)
                session.stop(started.info.record.id)
                with _haproxy_floor(Path(tmp), script) as floor:
                    if floor is not None:
                        _report(f"{name}, HAProxy (floor)", *_host_ways(request, *floor),
                                args.requests, judged=False)  # fmt: skip
        finally:
            proxy.close()
            runner.close()
    return 0 if met else 1


def _ours(session: SandboxSession, port: int, request: bytes, netloc: str) -> tuple[Way, Way]:
    """Straight to the app in the sandbox (the supervisor's sockets) and through our proxy."""

    def straight(conns: int, count: int) -> dict[str, float]:
        socks = [session.connect(port) for _ in range(conns)]
        try:
            return run_client(request, count, tuple(s.fileno() for s in socks))
        finally:
            for sock in socks:
                sock.close()

    def proxied(conns: int, count: int) -> dict[str, float]:
        return run_client(request, count, address=netloc, conns=conns)

    return straight, proxied


def _host_ways(request: bytes, app: str, front: str) -> tuple[Way, Way]:
    """Straight to the app on the host, and through HAProxy in front of it."""

    def way(address: str) -> Way:
        return lambda conns, count: run_client(request, count, address=address, conns=conns)

    return way(app), way(front)


@contextlib.contextmanager
def _haproxy_floor(tmp: Path, script: str) -> Iterator[tuple[str, str] | None]:
    """The target run on the host with HAProxy in front: (its address, HAProxy's); None
    (said) when HAProxy is not installed."""
    if shutil.which("haproxy") is None:
        print("  (no haproxy here: `make install` brings it; no floor measured)")
        yield None
        return
    back, front = _free_port(), _free_port()
    (tmp / "host_target.py").write_text(script)
    (tmp / "haproxy.cfg").write_text(HAPROXY.format(front=front, back=back))
    # a client leaving resets its connections: the server's complaints are not the figures
    app = subprocess.Popen(
        [sys.executable, str(tmp / "host_target.py"), str(back)], stderr=subprocess.DEVNULL
    )
    balancer = subprocess.Popen(["haproxy", "-q", "-f", str(tmp / "haproxy.cfg")])
    try:
        for port in (back, front):
            _wait_listening(port)
        yield f"127.0.0.1:{back}", f"127.0.0.1:{front}"
    finally:
        for child in (balancer, app):
            child.kill()
            child.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing listened on port {port} within {seconds:g} s") from None
            time.sleep(0.05)


def _request(app: SplitResult) -> bytes:
    """A browser's request as it reaches the proxy: with the workspace's cookie and the app's."""
    token = app.query.split("=", 1)[1]
    cookie = f"agent_token=never-sent; agent_app_{app.port}={token}"
    return (f"GET /item?id=1 HTTP/1.1\r\nHost: 127.0.0.1:{app.port}\r\nUser-Agent: bench\r\n"
            f"Accept: */*\r\nCookie: {cookie}\r\n\r\n").encode()  # fmt: skip


def _report(label: str, straight: Way, proxied: Way, count: int, judged: bool) -> bool:
    """Both ways on one connection, then on CONNECTIONS, taken in turns ROUNDS times (a
    machine's load changes as it runs; the median round of each): a line each; whether the
    goals are met (always, for a line not judged)."""

    def rounds(conns: int) -> list[dict[str, float]]:
        runs: list[list[dict[str, float]]] = [[], []]
        for _ in range(ROUNDS):
            runs[0].append(straight(conns, count))
            runs[1].append(proxied(conns, count))
        return [{k: statistics.median(r[k] for r in way) for k in way[0]} for way in runs]

    straight(1, 200), proxied(1, 200)  # warm both paths up
    one, many = rounds(1), rounds(CONNECTIONS)
    goal = f"   (goal >= {RPS_GOAL})" if judged else ""
    ratio = many[1]["rps"] / many[0]["rps"]
    print(f"{label + f', rps, {CONNECTIONS} connections':<52} {many[0]['rps']:>10.0f} "
          f"{many[1]['rps']:>10.0f} {ratio:>7.2f}{goal}")  # fmt: skip
    print(f"{label + ', rps, 1 connection':<52} {one[0]['rps']:>10.0f} {one[1]['rps']:>10.0f} "
          f"{one[1]['rps'] / one[0]['rps']:>7.2f}")  # fmt: skip
    added = one[1]["p50_ms"] - one[0]["p50_ms"]
    goal = f" (goal <= {ADDED_P50_GOAL_MS:g} ms)" if judged else ""
    print(f"{label + ', p50 ms, 1 connection':<52} {one[0]['p50_ms']:>10.3f} "
          f"{one[1]['p50_ms']:>10.3f}   added {added:.3f} ms{goal}")  # fmt: skip
    return not judged or (ratio >= RPS_GOAL and added <= ADDED_P50_GOAL_MS)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        spec = json.loads(sys.argv[2])
        fds = spec["fds"]
        request = spec["request"].encode("latin-1")
        result = client(fds, spec["address"], request, spec["count"], spec["connections"])
        print(json.dumps(result))
        sys.exit(0)
    sys.exit(main())
