"""Sandbox benchmark: the round trip of the `run_command("true")` tool in every sandbox here.

Run from the repo root: `python bench/sandbox.py [--runs N] [--cold-runs N] [--image IMAGE]`.
Local and bubblewrap always; Docker warm (a pooled container) and cold (a new container per
command) when an engine answers. The image is --image, else the configured one when it is
present, else the small test image that tests/kit/sandbox_image.py builds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.sandbox.factory import build_runner
from modules.sandbox.local_runner import LocalRunner
from modules.sandbox.runner import CommandRunner
from modules.tools.catalogue import build_registry
from modules.tools.focus import FocusFiles
from modules.tools.memory import MemoryStore
from modules.tools.registry import ToolRegistry
from modules.tools.tool_context import ToolContext
from modules.workspace.annotations import AnnotationStore
from modules.workspace.paths import Workspace
from utils.settings import Settings


def _round_trips(runner: CommandRunner, settings: Settings, runs: int) -> list[float]:
    """Milliseconds per `run_command("true")` call, dispatched like the agent loop does."""
    ctx = ToolContext(
        settings=settings,
        workspace=Workspace(settings.workspace),
        runner=runner,
        memory=MemoryStore(settings.data_dir),
        annotations=AnnotationStore(settings.data_dir),
        focus=FocusFiles(),
        conversation_id="bench",
    )
    registry: ToolRegistry = build_registry()
    arguments = json.dumps({"command": "true"})
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = registry.dispatch("run_command", arguments, ctx)
        times.append((time.perf_counter() - started) * 1000)
        if not result.ok:
            raise SystemExit(f"{runner.kind}: run_command failed: {result.output}")
    return times


def _docker(settings: Settings, image: str | None) -> tuple[Any, str] | None:
    """A client and an image, or None (with a note) when Docker cannot be measured."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:
        print(f"docker: skipped, no engine answers ({type(exc).__name__})")
        return None
    if image is None:
        try:
            client.images.get(settings.docker.image)
            image = settings.docker.image
        except Exception:
            from tests.kit.sandbox_image import build_test_image

            image = build_test_image(client)
    return client, image


def _measure_docker(settings: Settings, client: Any, image: str, runs: int, cold: int) -> dict:
    from modules.sandbox.docker_runner import DockerRunner

    results = {}
    for label, pool_size, count in (("docker warm", 1, runs), ("docker cold", 0, cold)):
        options = settings.docker.model_copy(
            update={"image": image, "pool_size": pool_size, "max_uses": 10_000}
        )
        runner = DockerRunner(settings.model_copy(update={"docker": options}), client)
        try:
            runner.pool.wait_ready(60)
            _round_trips(runner, runner.settings, 2)  # first exec in a container is slower
            results[label] = _round_trips(runner, runner.settings, count)
        finally:
            runner.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("--image", help="Docker image (default: see the module docstring)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws, data = Path(tmp, "ws"), Path(tmp, "data")
        ws.mkdir()
        ws.chmod(0o777)  # the Docker sandbox's user may not be ours when we are root
        settings = Settings(workspace=ws, data_dir=data, sandbox="local")
        results = {"local": _round_trips(LocalRunner(settings), settings, args.runs)}
        jailed = build_runner(settings)
        if jailed.kind == "bubblewrap":
            results["bubblewrap"] = _round_trips(jailed, settings, args.runs)
        else:
            print("bubblewrap: skipped, not installed or unusable here")
        engine = _docker(settings, args.image)
        if engine is not None:
            client, image = engine
            print(f"docker image: {image}")
            results |= _measure_docker(settings, client, image, args.runs, args.cold_runs)
    base = statistics.median(results["local"])
    print(f"{'sandbox':<13} {'median ms':>10} {'p90 ms':>8} {'x local':>8}   (n)")
    for label, times in results.items():
        median = statistics.median(times)
        p90 = sorted(times)[int(len(times) * 0.9) - 1]
        print(f"{label:<13} {median:>10.1f} {p90:>8.1f} {median / base:>8.1f}   ({len(times)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
