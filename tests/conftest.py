"""The test kit's shared fixtures: the fake model (per test and per module), a server process
per module (or per test), a client connected to it, the app in-process, tool contexts, and the
browser with its page.

A module says what its fixtures get with markers in its `pytestmark`, read by them:
- `pytest.mark.server(env={...}, files={...}, modes=[...])`: AGENT_* (and other) variables of its
  servers, relative path -> text or bytes written in their workspace first, and the modes its
  module-wide `server` runs in, one each (["threading"]);
- `pytest.mark.ctx(**settings)`: settings of its tool context `ctx` (a test may mark itself).
A module may instead override the fixture of the same name (`server_env`, `workspace_files`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from core.services import AgentServices
from modules.tools.tool_context import ToolContext
from modules.undo.blob_store import BlobStore
from tests.fake_llm import FakeLLM
from tests.kit.browser import (
    Served,
    SharedChromium,
    collect_errors,
    new_context,
    require_chromium,
)
from tests.kit.clients import EventClient, Web, connected
from tests.kit.cluster import RedisServer
from tests.kit.model import calls_in_the_message
from tests.kit.server import ServerProcess, serving
from tests.kit.settings import TOKEN, make_settings
from tests.kit.tools import make_ctx
from web_server import create_app

# tests/live needs a real model server: `make test-live` runs it (an explicit path still does).
collect_ignore = ["live"]


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background by a script (an asynchronous list of a shell without
    # job control) inherits SIGINT ignored, and so would every program the tests start: a CLI
    # given Ctrl-C would go on, a server stopped with SIGINT would wait for SIGKILL. A handler
    # here is reset to the default in them by exec, as it is for a suite run at a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers", "server(env, files, modes): what the module's servers run with (conftest)"
    )
    config.addinivalue_line("markers", "ctx(**settings): the settings of the tool context `ctx`")
    config.addinivalue_line(
        "markers",
        "host_network: adds network interfaces to the host (a Docker network, a container's "
        "veth); `make test` runs these alone, after the rest: Chromium aborts its requests on "
        "any such change (ERR_NETWORK_CHANGED)",
    )


def server_marked(node: pytest.Item | pytest.Collector, name: str, default: Any) -> Any:
    """The `name` argument of the `server` marker closest to `node`, or `default`."""
    marker = node.get_closest_marker("server")
    found = marker.kwargs.get(name) if marker is not None else None
    return default if found is None else found


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The `server` marker's modes: the module-wide `server` once in each."""
    modes = server_marked(metafunc.definition, "modes", None)
    if modes and "async_mode" in metafunc.fixturenames:
        metafunc.parametrize("async_mode", modes, indirect=True, scope="module")


# --- the fake model --------------------------------------------------------------------


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A running DeepSeek-flavoured fake model API of the test's own."""
    with FakeLLM("deepseek") as fake:
        yield fake


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    """A running DeepSeek-flavoured fake model API the module's tests share."""
    with FakeLLM("deepseek") as server:
        yield server


@pytest.fixture
def clean_fake(fake: FakeLLM) -> Iterator[None]:
    """Every test scripts its own replies on the module's `fake`; none may be left over for the
    next one (a module whose tests share it asks for this in its pytestmark)."""
    fake.responder = None
    yield
    fake.responder = None
    assert fake.drop_script() == 0, "a scripted reply was not consumed"


# --- the model's settings --------------------------------------------------------------

KEY_VARS = (
    "AGENT_PROVIDER",
    "AGENT_BASE_URL",
    "AGENT_API_KEY",
    "AGENT_MODEL",
    "AGENT_THINKING_MODEL",
    "AGENT_CONTEXT_WINDOW",
    "AGENT_USE_PROXY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "DASHSCOPE_API_KEY",
    "SILICONFLOW_API_KEY",
    "OPENAI_API_KEY",
)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No stray .env, config.yaml or provider variables from the developer's machine (a module
    whose settings must come from its tests alone: `pytest.mark.usefixtures` in its pytestmark)."""
    monkeypatch.chdir(tmp_path)
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def services_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every AgentServices a test builds in-process is closed when the test ends, as every
    front closes its own: the sandbox sessions its commands started (their processes and
    cgroups) end with the test, not with the pytest process. Closing twice is harmless."""
    built: list[AgentServices] = []
    init = AgentServices.__init__

    def tracked(self: AgentServices, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(AgentServices, "__init__", tracked)
    yield
    for services in built:
        services.close()


# --- a server process ------------------------------------------------------------------


@pytest.fixture(scope="module")
def async_mode(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "threading"))


@pytest.fixture(scope="module")
def server_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The `server` marker's env: variables of the module's servers."""
    return dict(server_marked(request.node, "env", {}))


@pytest.fixture(scope="module")
def workspace_files(request: pytest.FixtureRequest) -> dict[str, str | bytes]:
    """The `server` marker's files: written in the workspace of the module's servers."""
    return dict(server_marked(request.node, "files", {}))


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fake: FakeLLM,
    async_mode: str,
    server_env: dict[str, str],
    workspace_files: dict[str, str | bytes],
) -> Iterator[ServerProcess]:
    """The module's server on its fake model; it must end cleanly (exit code 0) after."""
    root = tmp_path_factory.mktemp(f"{request.module.__name__.rpartition('.')[2]}-{async_mode}")
    with serving(root, fake, server_env, workspace_files, async_mode) as process:
        yield process
        assert process.stop() == 0, process.stderr


@pytest.fixture(scope="module")
def served(server: ServerProcess, fake: FakeLLM) -> Served:
    """The module's server, its fake model and its workspace (what a page is opened on)."""
    return server, fake, server.workspace


@pytest.fixture
def in_bubblewrap(served: Served) -> None:
    """Skips a test of the module's server where its commands cannot run in bubblewrap
    sessions (what processes and terminals need)."""
    status = requests.get(
        f"{served[0].url}/api/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )
    if status.ok and status.json().get("sandbox", {}).get("kind") != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")


@pytest.fixture
def fresh_served(
    tmp_path: Path,
    fake_llm: FakeLLM,
    server_env: dict[str, str],
    workspace_files: dict[str, str | bytes],
) -> Iterator[Served]:
    """A server of the test's own on `fake_llm`, for tests that leave it changed."""
    with serving(tmp_path, fake_llm, server_env, workspace_files) as process:
        yield process, fake_llm, process.workspace


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A throwaway redis-server for the module (its clusters each take a database of their own)."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def client(server: ServerProcess) -> Iterator[EventClient]:
    """A Socket.IO client connected to the module's server for the test."""
    with connected(server.url) as sio:
        yield sio


@pytest.fixture
def agent(fake: FakeLLM, client: EventClient) -> EventClient:
    """The module's client, on a server whose model makes the calls a message lists and whose
    commands run in bubblewrap sessions (skipped where bubblewrap is not usable)."""
    fake.responder = calls_in_the_message
    if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")
    return client


# --- the app in-process ----------------------------------------------------------------


@pytest.fixture
def make_web(tmp_path: Path, fake_llm: FakeLLM) -> Callable[..., Web]:
    """Build the web app in-process on temporary folders (threading mode)."""

    def make(**overrides: Any) -> Web:
        settings = make_settings(fake_llm, tmp_path, **overrides)
        return Web(create_app(settings, async_mode="threading"))

    return make


@pytest.fixture
def web(make_web: Callable[..., Web]) -> Web:
    return make_web()


# --- tool contexts ---------------------------------------------------------------------


@pytest.fixture
def ctx_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The `ctx` marker's settings (closest to the test)."""
    marker = request.node.get_closest_marker("ctx")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def ctx(tmp_path: Path, ctx_settings: dict[str, Any]) -> ToolContext:
    """A real tool context on tmp_path/ws, data in tmp_path/data (a module adds its files by
    overriding it: `def ctx(ctx)`)."""
    return make_ctx(tmp_path, **ctx_settings)


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


# --- the browser -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def shared_chromium() -> Iterator[SharedChromium]:
    """The pytest process's one Chromium (skips its tests when there is none)."""
    shared = SharedChromium(require_chromium())
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def browser(shared_chromium: SharedChromium) -> Iterator[Any]:
    """The headless Chromium, lent to the module for its pages."""
    with shared_chromium.lend() as launched:
        yield launched


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the test item: `page` reads whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A blank page (1400×900) in a browser context of the test's own (its pages wait with
    room for a loaded machine, tests/kit/browser.py `new_context`); its console errors and
    uncaught exceptions collect in `page.console_errors`. When the test fails, what the page
    showed (the conversation's text, the end of its console) is printed with the failure: a
    failure seen only on a loaded CI machine then says what the page was doing."""
    context = new_context(browser, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.console_errors = collect_errors(page)
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            shown = page.evaluate("() => document.querySelector('main')?.innerText ?? ''")
            print(f"--- the page at the failure ({page.url}):\n{shown[-3000:]}")
        print("--- its console:\n" + "\n".join(console[-40:]))
    context.close()
