"""The one settings builder of the tests (`make_settings`), the defaults every test's settings
hold (`TEST_DEFAULTS`, in-process and in a server's environment alike) and the web token.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from utils.settings import Settings

if TYPE_CHECKING:
    from tests.fake_llm import FakeLLM


TOKEN = "web-test-token-0123456789"  # every test server's and test app's web token


# What every test's settings hold unless it says otherwise: in-process (`make_settings`) and in
# a server or CLI process's environment (tests.kit.server.agent_env), the same.
TEST_DEFAULTS: dict[str, Any] = {
    "web_token": TOKEN,
    "approval": "auto",
    "mode": "fast",
    "retry_base_delay": 0.01,
}


def make_settings(
    fake: FakeLLM | None = None, root: Path | None = None, **overrides: Any
) -> Settings:
    """The test kit's one settings builder: TEST_DEFAULTS, the fake model (its flavour's
    provider, URL and key) when given, the workspace root/ws and data root/data when given,
    then `overrides` on top. Nothing is read from the machine's .env, config.yaml
    or environment."""
    values = dict(TEST_DEFAULTS)
    if fake is not None:
        values |= {
            "provider": fake.flavour.name,
            "base_url": fake.base_url,
            "api_key": fake.api_key,
        }
    if root is not None:
        values |= {"workspace": root / "ws", "data_dir": root / "data"}
    return Settings(**(values | overrides))
