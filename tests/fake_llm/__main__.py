"""Run the fake model API as a process: `python -m tests.fake_llm --port 8765`."""

from __future__ import annotations

import argparse
import signal

from tests.fake_llm.flavours import FLAVOURS
from tests.fake_llm.replies import echo_responder
from tests.fake_llm.server import DEFAULT_API_KEY, FakeLLM


def main() -> None:
    """Serve echo replies until interrupted."""
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible model API (echo).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--flavour", choices=sorted(FLAVOURS), default="deepseek")
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each chunk")
    args = parser.parse_args()

    fake = FakeLLM(args.flavour, api_key=args.api_key, host=args.host, port=args.port)
    fake.responder = echo_responder(delay=args.delay)
    # Signals wait in the main thread's mask instead of running a handler: a handler that
    # set a threading.Event could land while the main thread holds that Event's lock.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    with fake:
        print(
            f"fake LLM ({args.flavour}) at {fake.base_url} key={fake.api_key} "
            f"models={','.join(fake.models)}",
            flush=True,
        )
        signal.sigwait(stop_signals)


if __name__ == "__main__":
    main()
