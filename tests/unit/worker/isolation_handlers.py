"""Handlers the process-isolation tests run in child processes: importable by name."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time

log = logging.getLogger("isolation.handlers")


def quick(ctx) -> str:
    print(f"hello from {os.getpid()}")
    log.warning("payload %s", ctx.payload)
    return "ignored"


def pid_of_child(ctx) -> None:
    print(f"pid={os.getpid()}")


def fails(ctx) -> None:
    print("about to fail", file=sys.stderr)
    raise KeyError("missing input")


def sleeps_ignoring_cancellation(ctx) -> None:
    print(f"pid={os.getpid()}", flush=True)
    deadline = time.monotonic() + float((ctx.payload or {}).get("sleep_s", 60))
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except BaseException:  # noqa: BLE001 (ignores HandlerTerminated too: only SIGKILL stops it)
            continue


def ignores_sigterm(ctx) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"pid={os.getpid()}", flush=True)
    time.sleep(60)


def prints_then_ignores_sigterm(ctx) -> None:
    """What a hung handler wrote before it was killed: more than a tail, a log record, a last line."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("x" * 10_000)
    log.warning("hang starting")
    print("last line before the hang")
    time.sleep(60)


def cleans_up_then_hangs(ctx) -> None:
    """Writes in its `except` after SIGTERM, then goes on ignoring everything until killed."""
    print("working")
    try:
        time.sleep(60)
    except BaseException:  # noqa: BLE001 (HandlerTerminated)
        print("terminated: cleaning up", file=sys.stderr)
    while True:
        try:
            time.sleep(0.05)
        except BaseException:  # noqa: BLE001
            continue


def prints_then_segfaults(ctx) -> None:
    print("about to crash")
    time.sleep(0.5)  # longer than the child's forwarding interval (_isolation.FORWARD_EVERY_S)
    os.kill(os.getpid(), signal.SIGSEGV)


def cooperative(ctx) -> None:
    ctx.cancelled.wait(60)


def exits(ctx) -> None:
    os._exit(3)


def segfaults(ctx) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


async def async_quick(ctx) -> int:
    await asyncio.sleep(0.01)
    print("async done")
    return 1


def reads_context(ctx) -> None:
    print(f"{ctx.run_key} {ctx.attempt} {ctx.fencing_token} {ctx.payload['n']} {ctx.deadline is not None}")
