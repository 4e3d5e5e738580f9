"""Handlers of test_isolation's worker, run in its handler processes: importable by name."""

from __future__ import annotations

import os
import time

from tests.integration.handlers import FencedSink


def _sink() -> FencedSink:
    return FencedSink(os.environ["RAFTCRON_TEST_SINK"])


def ignores_deadline(ctx) -> None:
    """Sleeps far past its deadline, deaf to cancellation and to SIGTERM's HandlerTerminated."""
    _sink().mark("hung", {"key": ctx.run_key, "pid": os.getpid()})
    print(f"deaf to {ctx.run_key}'s deadline", flush=True)
    stop_at = time.monotonic() + 120
    while time.monotonic() < stop_at:
        try:
            time.sleep(0.05)
        except BaseException:  # noqa: BLE001
            continue


def takes_a_second(ctx) -> None:
    sink = _sink()
    sink.mark("spans", {"key": ctx.run_key, "at": time.time(), "edge": "start"})
    print(f"working on {ctx.run_key}")
    ctx.cancelled.wait(1.0)
    sink.mark("spans", {"key": ctx.run_key, "at": time.time(), "edge": "end"})
