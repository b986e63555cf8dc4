"""The TLS context of the model client, made in a thread of its own from the client's start.

Loading the CA certificates takes ~26 ms and releases the interpreter, so made beside the
`openai` import (the largest cost of a start) it costs a start next to nothing.
"""

from __future__ import annotations

import ssl
import threading


class TlsContext:
    """`get()`: the context httpx would make itself (`create_ssl_context(trust_env=...)`), or
    True when making it failed here (the HTTP client then makes it, and says why it cannot)."""

    def __init__(self, *, trust_env: bool) -> None:
        self._made: ssl.SSLContext | None = None
        self._thread = threading.Thread(
            target=self._make, args=(trust_env,), name="tls-context", daemon=True
        )
        self._thread.start()

    def get(self) -> ssl.SSLContext | bool:
        self._thread.join()
        return True if self._made is None else self._made

    def _make(self, trust_env: bool) -> None:
        import httpx2

        try:
            self._made = httpx2.create_ssl_context(trust_env=trust_env)
        except (OSError, ssl.SSLError):
            return
