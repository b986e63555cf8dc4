"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_llm import FakeLLM


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running DeepSeek-flavoured fake model API, stopped after the test."""
    with FakeLLM("deepseek") as fake:
        yield fake
