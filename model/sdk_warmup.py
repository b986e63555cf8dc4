"""What the model client's first request needs and only waits for, made in a thread of its own
from the client's start, beside the `openai` import (the largest cost of a start):

- the TLS context: loading the CA certificates takes ~26 ms and releases the interpreter;
- the platform the SDK names in its request headers: `platform.platform()` runs `uname -p`
  in a subprocess (~8 ms) the first time, then answers from its cache.
"""

from __future__ import annotations

import platform
import ssl
import threading


class SdkWarmup:
    """`tls_context()`: the context httpx would make itself (`create_ssl_context(trust_env=...)`),
    or True when making it failed here (the HTTP client then makes it, and says why it cannot)."""

    def __init__(self, *, trust_env: bool) -> None:
        self._made: ssl.SSLContext | None = None
        # Not a daemon: a process that ends early (a bad argument) waits the few milliseconds it
        # has left, where a daemon thread importing at interpreter shutdown can crash it.
        self._thread = threading.Thread(target=self._make, args=(trust_env,), name="sdk-warmup")
        self._thread.start()

    def tls_context(self) -> ssl.SSLContext | bool:
        self._thread.join()
        return True if self._made is None else self._made

    def _make(self, trust_env: bool) -> None:
        platform.platform()
        import httpx2

        try:
            self._made = httpx2.create_ssl_context(trust_env=trust_env)
        except (OSError, ssl.SSLError):
            return
