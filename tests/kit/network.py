"""What a sandbox's network reaches: a probe script run inside it, and this machine's
addresses besides loopback's."""

from __future__ import annotations

import shutil
import subprocess

# Run as `python -c PROBE HOST PORT [HOST PORT ...]`: a line per target, "HOST PORT reached"
# or "HOST PORT refused ERROR".
PROBE = """
import socket, sys
for host, port in zip(sys.argv[1::2], sys.argv[2::2]):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect((host, int(port)))
        print(host, port, "reached")
    except OSError as exc:
        print(host, port, "refused", type(exc).__name__)
    finally:
        s.close()
"""


def host_addresses() -> list[str]:
    """This machine's IPv4 addresses but loopback's (from `ip`; none when it is missing)."""
    if shutil.which("ip") is None:
        return []
    shown = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
    found = [line.split()[3].split("/")[0] for line in shown.stdout.splitlines()]
    return [address for address in found if not address.startswith("127.")]
