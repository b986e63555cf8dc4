"""The supervisor of one sandbox session: it runs INSIDE the sandbox and does what the server
asks over its control socket, handing every byte stream back as a file descriptor.

Started as `python -I -S supervisor.py FD` (FD: its end of an AF_UNIX SOCK_SEQPACKET
socketpair; under bubblewrap it is PID 1 of the session's PID namespace) or as
`python -I -S supervisor.py --listen PATH` (a Docker container's main process: it accepts one
connection on PATH, then removes PATH and closes the listener before it starts anything).
The standard library only: it imports nothing of the program.

One JSON object per message, `{"op", "id", ...}`; each answer `{"id", "ok", ...}` with its
file descriptors attached (SCM_RIGHTS), or `{"id", "ok": false, "error"}`. Ops: `spawn`,
`signal`, `connect`, `ports`, `procs`, `ping`. Unsolicited: `{"event": "exit", "pid", "sid",
"pgid", "code", "signal", "sid_empty"}` for every process it reaps. A request it cannot use
gets an error answer and changes nothing. It exits when its control socket closes, and then
everything it started ends: as PID 1 the kernel kills the namespace; otherwise it kills them.
"""

import contextlib
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import termios

MAX_MESSAGE = 1 << 18  # bytes of one request
MAX_ANSWER = 150_000  # bytes of one answer: below a socket's default send buffer
MAX_ARGV_CHARS = 400  # of one process's command line in `procs`
MAX_LISTED = 2048  # ports in one answer
CONNECT_SECONDS = 2.0
END_SECONDS = 2.0  # without a PID namespace: how long it keeps killing what is left at its end
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
SIGNALS = {
    name: getattr(signal, "SIG" + name)
    for name in ("TERM", "KILL", "INT", "HUP", "QUIT", "STOP", "CONT", "USR1", "USR2", "WINCH")
}
RLIMITS = {
    name: getattr(resource, name)
    for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_NOFILE")
}
HOSTS = ("127.0.0.1", "::1")
RESET_SIGNALS = (
    "SIGINT",
    "SIGTERM",
    "SIGHUP",
    "SIGQUIT",
    "SIGPIPE",
    "SIGCHLD",
    "SIGUSR1",
    "SIGUSR2",
)


class Refused(Exception):
    """A request that cannot be carried out; its text is the error answer."""


def _prctl(option, value):
    """prctl(2) through ctypes; False where it is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        return False


def _stat(pid):
    """(ppid, pgid, sid, state, starttime) of a process from /proc, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        return int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode(), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _argv(pid):
    """A process's command line, its words cut to MAX_ARGV_CHARS together."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read(MAX_ARGV_CHARS * 4)
    except OSError:
        return []
    words, left = [], MAX_ARGV_CHARS
    for word in raw.split(b"\0"):
        if word and left > 0:
            words.append(word.decode("utf-8", "replace")[:left])
            left -= len(words[-1])
    return words


class Supervisor:
    """The control loop: requests in, answers and exit notices out, children reaped."""

    def __init__(self, control):
        self.control = control
        self.pid1 = os.getpid() == 1
        self.children = {}  # pid -> Popen, until reaped
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        self.wake = wake_read
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
            # As PID 1 a default action is ignored when the signal comes from inside the
            # namespace: no command can stop the supervisor. Without a namespace the server's
            # death (PDEATHSIG) ends it through SIGTERM.
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        if not self.pid1:
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
            signal.signal(signal.SIGTERM, lambda signum, frame: self.end())
            _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    def serve(self):
        """Answer requests until the control socket closes, then end the session."""
        while True:
            try:
                readable, _, _ = select.select([self.control, self.wake], [], [])
            except InterruptedError:
                continue
            if self.wake in readable:
                with contextlib.suppress(OSError):
                    os.read(self.wake, 4096)
                self.reap()
            if self.control in readable and not self.receive():
                self.end()

    def receive(self):
        """Handle one request; False when the control socket closed."""
        try:
            message, fds, flags, _ = socket.recv_fds(self.control, MAX_MESSAGE, 8)
        except InterruptedError:
            return True
        except OSError:
            return False
        for fd in fds:  # nothing a request carries is used
            os.close(fd)
        if not message and not fds:
            return False
        request_id = None
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise Refused("message too long")
            request = json.loads(message)
            if not isinstance(request, dict):
                raise Refused("a request is a JSON object")
            request_id = request.get("id")
            if not isinstance(request_id, int) or isinstance(request_id, bool):
                request_id = None
                raise Refused("a request needs an integer id")
            handler = OPS.get(str(request.get("op")))
            if handler is None:
                raise Refused(f"unknown op: {str(request.get('op'))[:40]}")
            answer, out_fds = handler(self, request)
        except Refused as exc:
            answer, out_fds = {"ok": False, "error": str(exc)}, []
        except (ValueError, TypeError, KeyError, OSError) as exc:
            answer, out_fds = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}, []
        answer = {"id": request_id, "ok": True, **answer}
        try:
            return self.send(answer, out_fds)
        finally:
            for fd in out_fds:
                os.close(fd)

    def send(self, message, fds=()):
        """Send one message; False when the server is gone."""
        data = json.dumps(message, separators=(",", ":")).encode()
        try:
            if fds:
                socket.send_fds(self.control, [data], list(fds))
            else:
                self.control.send(data)
        except OSError:
            return False
        return True

    # --- ops ------------------------------------------------------------------------------

    def spawn(self, request):
        argv, cwd, env = request["argv"], request["cwd"], request.get("env", {})
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise Refused("argv: a non-empty list of strings")
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise Refused("cwd: an absolute path")
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise Refused("env: an object of strings")
        limits = _rlimits(request.get("rlimits", {}))
        pty_size = request.get("pty")
        if pty_size is not None:
            return self._spawn_pty(argv, cwd, env, limits, pty_size)
        with_stdin = request.get("stdin", True) is True
        ends = []  # the child's ends, closed here once it started
        ours = []
        try:
            if with_stdin:
                stdin_read, stdin_write = os.pipe()
                ends.append(stdin_read)
                ours.append(stdin_write)
            else:
                stdin_read = os.open(os.devnull, os.O_RDONLY)
                ends.append(stdin_read)
            out_read, out_write = os.pipe()
            ends.append(out_write)
            ours.append(out_read)
            child = self._start(argv, cwd, env, (stdin_read, out_write, out_write), limits, False)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in ends:
                os.close(fd)
        return {"pid": child.pid}, ours

    def _spawn_pty(self, argv, cwd, env, limits, size):
        if not isinstance(size, dict):
            raise Refused("pty: {rows, cols}")
        rows, cols = _number(size.get("rows"), 1, 1000), _number(size.get("cols"), 1, 1000)
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            child = self._start(argv, cwd, env, (slave, slave, slave), limits, True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        return {"pid": child.pid}, [master]

    def _start(self, argv, cwd, env, stdio, limits, terminal):
        def prepare():
            # In the child, before exec: plain signal dispositions, the PTY as the controlling
            # terminal, the limits.
            for name in RESET_SIGNALS:
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            if terminal:
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
            for which, value in limits:
                resource.setrlimit(which, value)

        child = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            start_new_session=True,  # its own session and process group: its pid names both
            preexec_fn=prepare,
            close_fds=True,
        )
        self.children[child.pid] = child
        return child

    def signal(self, request):
        pid, name, scope = request["pid"], request["sig"], request.get("scope", "process")
        pid = _number(pid, 2, 1 << 22)
        if name not in SIGNALS:
            raise Refused(f"sig: one of {', '.join(SIGNALS)}")
        sig = SIGNALS[name]
        if scope == "process":
            targets = [pid]
        elif scope == "group":
            return {"signalled": self._kill_group(pid, sig)}, []
        elif scope == "session":
            return {"signalled": self._kill_session(pid, sig)}, []
        else:
            raise Refused("scope: process, group or session")
        sent = 0
        for target in targets:
            if target in self._table():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target, sig)
                    sent += 1
        return {"signalled": sent}, []

    def _kill_group(self, pgid, sig):
        """Signal process group `pgid` when it is one of the session's; 1 if it was."""
        if not any(stat[1] == pgid for stat in self._table().values()):
            return 0
        return _kill_group(pgid, sig)

    def _kill_session(self, sid, sig):
        """Signal every process of session `sid` (each of its groups too, so a process forked
        meanwhile is reached); how many processes there were."""
        table = self._table()
        members = [pid for pid, stat in table.items() if stat[2] == sid]
        for pgid in {table[pid][1] for pid in members}:
            _kill_group(pgid, sig)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return len(members)

    def connect(self, request):
        port, host = _number(request["port"], 1, 65535), request.get("host", "127.0.0.1")
        if host not in HOSTS:
            raise Refused(f"host: one of {', '.join(HOSTS)}")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        conn = socket.socket(family, socket.SOCK_STREAM)
        try:
            conn.settimeout(CONNECT_SECONDS)
            conn.connect((host, port))
            conn.setblocking(True)
            return {}, [os.dup(conn.fileno())]
        finally:
            conn.close()

    def ports(self, request):
        table = self._table()
        listening = _listening()
        found = []
        for pid in table:
            for inode in _socket_inodes(pid):
                if inode in listening:
                    host, port = listening.pop(inode)
                    found.append({"port": port, "host": host, "pid": pid, "sid": table[pid][2]})
        return {"ports": found[:MAX_LISTED]}, []

    def procs(self, request):
        listed: list = []
        size = 0
        for pid, (ppid, pgid, sid, state, start) in sorted(self._table().items()):
            entry = {"pid": pid, "ppid": ppid, "pgid": pgid, "sid": sid, "state": state,
                     "start": start, "argv": _argv(pid)}  # fmt: skip
            size += len(json.dumps(entry))
            if size > MAX_ANSWER:
                return {"procs": listed, "truncated": True}, []
            listed.append(entry)
        return {"procs": listed}, []

    def ping(self, request):
        return {"pid": os.getpid(), "pid1": self.pid1}, []

    # --- processes ------------------------------------------------------------------------

    def _table(self):
        """Every live (not zombie) process of the session but this one: pid -> stat fields."""
        me = os.getpid()
        table = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != me:
                stat = _stat(int(name))
                if stat is not None and stat[3] not in ("Z", "X"):
                    table[int(name)] = stat
        if not self.pid1:  # the host's /proc: only this supervisor's descendants
            table = _descendants(table, me)
        return table

    def reap(self):
        """Reap every child that ended; tell the server each one's end."""
        ended = []
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if info is None or info.si_pid == 0:
                break
            stat = _stat(info.si_pid)  # a zombie still shows its session and group
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)
            exited = info.si_code == os.CLD_EXITED
            child = self.children.pop(info.si_pid, None)
            if child is not None:
                child.returncode = info.si_status if exited else -info.si_status
            ended.append((info.si_pid, stat, info.si_status if exited else None,
                          None if exited else info.si_status))  # fmt: skip
        if not ended:
            return
        sids = {stat[2] for stat in self._table().values()}
        for pid, stat, code, sig in ended:
            sid = stat[2] if stat else None
            pgid = stat[1] if stat else None
            event = {"event": "exit", "pid": pid, "sid": sid, "pgid": pgid, "code": code,
                     "signal": sig, "sid_empty": sid not in sids}  # fmt: skip
            if not self.send(event):
                self.end()

    def end(self):
        """The server is gone: end everything of the session, then exit."""
        if not self.pid1:  # as PID 1, exiting makes the kernel kill the whole namespace
            import time

            deadline = time.monotonic() + END_SECONDS
            while (table := self._table()) and time.monotonic() < deadline:
                for pid, stat in table.items():
                    _kill_group(stat[1], signal.SIGKILL)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                time.sleep(0.01)
        os._exit(0)


OPS = {
    "spawn": Supervisor.spawn,
    "signal": Supervisor.signal,
    "connect": Supervisor.connect,
    "ports": Supervisor.ports,
    "procs": Supervisor.procs,
    "ping": Supervisor.ping,
}


def _number(value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise Refused(f"a number from {low} to {high} expected, got {str(value)[:20]}")
    return value


def _rlimits(given):
    if not isinstance(given, dict):
        raise Refused("rlimits: an object")
    limits = []
    for name, pair in given.items():
        if name not in RLIMITS:
            raise Refused(f"rlimits: unknown limit {name[:30]}")
        if not (isinstance(pair, list) and len(pair) == 2):
            raise Refused("rlimits: [soft, hard] pairs")
        soft, hard = (_number(v, -1, 1 << 62) for v in pair)
        limits.append((RLIMITS[name], (soft, hard)))
    return limits


def _kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return 0
    return 1


def _descendants(table, root):
    """The processes of `table` descending from `root` (by their parents)."""
    children: dict = {}
    for pid, stat in table.items():
        children.setdefault(stat[0], []).append(pid)
    found, pending = {}, [root]
    while pending:
        for pid in children.get(pending.pop(), []):
            if pid not in found:
                found[pid] = table[pid]
                pending.append(pid)
    return found


def _listening():
    """Listening TCP sockets of this network namespace: inode -> (host, port)."""
    found = {}
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            with open(f"/proc/net/{name}") as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                continue
            address, _, port = fields[1].partition(":")
            with contextlib.suppress(ValueError):
                found[int(fields[9])] = (_host(address, v6), int(port, 16))
    return found


def _host(hexed, v6):
    raw = bytes.fromhex(hexed)
    # /proc/net shows each 32-bit word in the machine's order (little-endian here).
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, words)


def _socket_inodes(pid):
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    inodes = []
    for name in names:
        with contextlib.suppress(OSError, ValueError):
            target = os.readlink(f"/proc/{pid}/fd/{name}")
            if target.startswith("socket:["):
                inodes.append(int(target[8:-1]))
    return inodes


def _listen_once(path):
    """Docker: accept the server's one connection on `path`, then leave no way in."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(1)
    control, _ = listener.accept()
    os.unlink(path)
    listener.close()
    return control


def main(argv):
    _prctl(PR_SET_DUMPABLE, 0)  # no command of the same uid may open /proc/SELF/fd/N
    if len(argv) == 3 and argv[1] == "--listen":
        control = _listen_once(argv[2])
    elif len(argv) == 2 and argv[1].isdigit():
        control = socket.socket(fileno=int(argv[1]))
    else:
        print("usage: supervisor.py FD | --listen PATH", file=sys.stderr)
        return 2
    control.set_inheritable(False)
    if control.type != socket.SOCK_SEQPACKET:
        print("the control socket must be SOCK_SEQPACKET", file=sys.stderr)
        return 2
    Supervisor(control).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
