"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.undo.blob_store import BlobStore
from tests.browser_helpers import chromium, require_chromium
from tests.fake_llm import FakeLLM
from tests.web_helpers import TOKEN, Web
from utils.settings import load_settings
from web_server import create_app


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running DeepSeek-flavoured fake model API, stopped after the test."""
    with FakeLLM("deepseek") as fake:
        yield fake


@pytest.fixture
def make_web(tmp_path: Path, fake_llm: FakeLLM) -> Callable[..., Web]:
    """Build the web app in-process on temporary folders (threading mode)."""

    def make(**overrides: Any) -> Web:
        settings = load_settings(
            **{
                "provider": "deepseek",
                "base_url": fake_llm.base_url,
                "api_key": fake_llm.api_key,
                "workspace": tmp_path / "ws",
                "data_dir": tmp_path / "data",
                "web_token": TOKEN,
                "approval": "auto",
                "mode": "fast",
                "retry_base_delay": 0.01,
                **overrides,
            }
        )
        return Web(create_app(settings, async_mode="threading"))

    return make


@pytest.fixture
def web(make_web: Callable[..., Web]) -> Web:
    return make_web()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every workspace file the undo blob store reads (to hash and keep it)."""
    seen: list[str] = []
    original = BlobStore.store_at

    def counting(self: BlobStore, folder: int, name: str, rel: str) -> tuple:
        seen.append(rel)
        return original(self, folder, name, rel)

    monkeypatch.setattr(BlobStore, "store_at", counting)
    return seen


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for the module's pages (skips it when there is none)."""
    with chromium(require_chromium()) as launched:
        yield launched
