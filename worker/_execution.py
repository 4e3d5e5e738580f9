"""Runs one handler for one attempt and turns how it ended into an Outcome.

Shared by the Worker and the testing helper, so a handler behaves the same in both. Mapping:

- returns normally: SUCCESS (a returned ShellResult: SUCCESS on exit code 0, else FAILURE);
- raises RetryLater(after_s, message): RETRY_LATER;
- raises anything else: FAILURE, with the exception's text as the error and its traceback as
  the output tail;
- cancelled before it ended: decided by the reason, whatever the handler did after (a handler
  that notices cancellation and returns early has not succeeded): the deadline gives FAILURE
  "deadline exceeded", a worker shutdown RETRY_LATER "worker shutting down", and a lost lease
  (fenced, not found, run cancelled, heartbeats lost) an outcome that is never reported.

`async def` handlers run on one asyncio loop in a dedicated thread; cancelling the run cancels
their task too (CancelledError at the next await).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import CancelledError as FutureCancelledError
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from worker._capture import Capture, capturing, current_capture, set_capture
from worker._context import UNREPORTABLE_REASONS, CancelReason, FinalFailure, RetryLater, RunContext
from worker._shell import ShellResult
from worker._threads import DeadlineWatcher

__all__ = [
    "AsyncLoopThread",
    "Outcome",
    "OutcomeKind",
    "arm_deadline",
    "cancelled_outcome",
    "execute",
    "with_capture",
    "with_output",
]

log = logging.getLogger("raftcron.worker")

Handler = Callable[[RunContext], Any]

ERROR_LIMIT_BYTES = 4096
TAIL_LIMIT_BYTES = 4096


class OutcomeKind(enum.StrEnum):
    """How an attempt ended; the names of WorkerService's CompletionKind."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    RETRY_LATER = "RETRY_LATER"


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended, ready for WorkerService.Complete."""

    kind: OutcomeKind
    error: str = ""
    exit_code: int = 0
    output_tail: str = ""
    retry_after_s: float | None = None
    cancel_reason: CancelReason | None = None
    # A FAILURE that must not be retried (the handler raised FinalFailure).
    final: bool = False
    # Per-attempt output: what the attempt wrote, and how it ended in detail.
    stdout_tail: str = ""
    stderr_tail: str = ""
    exception_type: str = ""
    http_status: int = 0

    @property
    def reportable(self) -> bool:
        """False when the lease is no longer this worker's: no Complete is sent."""
        return self.cancel_reason not in UNREPORTABLE_REASONS


def truncate_head(text: str, limit_bytes: int = ERROR_LIMIT_BYTES) -> str:
    """The start of `text`, at most `limit_bytes` of UTF-8 (an error's first words matter most)."""
    data = text.encode("utf-8")
    if len(data) <= limit_bytes:
        return text
    marker = " ...[truncated]"
    return data[: limit_bytes - len(marker)].decode("utf-8", errors="ignore") + marker


def truncate_tail(text: str, limit_bytes: int = TAIL_LIMIT_BYTES) -> str:
    """The end of `text`, at most `limit_bytes` of UTF-8 (output's last lines matter most)."""
    data = text.encode("utf-8")
    if len(data) <= limit_bytes:
        return text
    return data[-limit_bytes:].decode("utf-8", errors="ignore")


def _traceback_tail(exc: BaseException, line_limit: int = 300) -> str:
    """The traceback's end, with long lines (a huge message) shortened so frames still fit."""
    lines = "".join(traceback.format_exception(exc)).splitlines(keepends=True)
    short = [line if len(line) <= line_limit else line[: line_limit - 16] + " ...[truncated]\n" for line in lines]
    return truncate_tail("".join(short))


def execute(
    handler: Handler, ctx: RunContext, loop: AsyncLoopThread | None = None, capture: Capture | None = None
) -> Outcome:
    """Run `handler(ctx)` to its end in the calling thread and return its Outcome, with what it
    wrote to stdout, stderr and `logging` meanwhile as its output tails (see _capture.py).
    `capture`, if given, is where that output goes: whoever holds it can read what a handler
    that never returns wrote so far."""
    with capturing(capture) as capture:
        outcome = _execute(handler, ctx, loop)
    return with_output(outcome, capture.stdout, capture.stderr, capture.combined)


def with_capture(outcome: Outcome, capture: Capture) -> Outcome:
    """`outcome` with what `capture` holds now (a handler stopped before it returned)."""
    return with_output(outcome, capture.stdout, capture.stderr, capture.combined)


def with_output(outcome: Outcome, stdout: str, stderr: str, combined: str) -> Outcome:
    """`outcome` with a Python handler's captured output in front of what it already carries
    (a traceback, a shell command's output), each tail cut to its limit."""
    if not (stdout or stderr or combined):
        return outcome
    return replace(
        outcome,
        output_tail=truncate_tail(combined + outcome.output_tail),
        stdout_tail=truncate_tail(stdout + outcome.stdout_tail),
        stderr_tail=truncate_tail(stderr + outcome.stderr_tail),
    )


def exception_type_name(exc: BaseException) -> str:
    """`ValueError`, `json.decoder.JSONDecodeError`: the builtins go without their module."""
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _execute(handler: Handler, ctx: RunContext, loop: AsyncLoopThread | None) -> Outcome:
    try:
        if ctx.is_cancelled():  # e.g. the deadline had passed before the run started
            return _cancelled_outcome(ctx)
        result = handler(ctx)
        if inspect.isawaitable(result):
            if loop is None:
                raise TypeError(f"{handler!r} returned an awaitable but no event loop was given")
            result = loop.run(result, ctx)
    except (asyncio.CancelledError, FutureCancelledError):
        if ctx.is_cancelled():
            return _cancelled_outcome(ctx)
        return Outcome(OutcomeKind.FAILURE, error="handler task was cancelled")
    except RetryLater as exc:
        if ctx.is_cancelled():
            return _cancelled_outcome(ctx)
        return Outcome(OutcomeKind.RETRY_LATER, error=truncate_head(exc.message), retry_after_s=exc.after_s)
    except FinalFailure as exc:
        if ctx.is_cancelled():
            return _cancelled_outcome(ctx)
        log.warning("run %s failed for good: %s", ctx.run_key, exc.message)
        return Outcome(
            OutcomeKind.FAILURE, error=truncate_head(exc.message), final=True, exception_type=exception_type_name(exc)
        )
    except BaseException as exc:  # noqa: BLE001 (even sys.exit() in a handler is the run's failure)
        if ctx.is_cancelled():
            return _cancelled_outcome(ctx)
        text = "".join(traceback.format_exception_only(exc)).strip()
        log.warning("run %s failed: %s", ctx.run_key, text, exc_info=exc)
        tail = _traceback_tail(exc)
        return Outcome(
            OutcomeKind.FAILURE,
            error=truncate_head(text),
            output_tail=tail,
            stderr_tail=tail,
            exception_type=exception_type_name(exc),
        )
    if isinstance(result, ShellResult):
        base = _shell_outcome(result)
    elif isinstance(result, Outcome):  # a built-in executor's own (worker/_http.py)
        base = result
    else:
        base = Outcome(OutcomeKind.SUCCESS)
    if ctx.is_cancelled():
        return _cancelled_outcome(ctx, base)
    return base


def _shell_outcome(result: ShellResult) -> Outcome:
    out, err = result.stdout_tail, result.stderr_tail
    if result.exit_code == 0:
        return Outcome(OutcomeKind.SUCCESS, output_tail=result.output_tail, stdout_tail=out, stderr_tail=err)
    error = f"exit code {result.exit_code}"
    if result.signal_name:
        error = f"terminated by {result.signal_name} ({error})"
    return Outcome(
        OutcomeKind.FAILURE,
        error=error,
        exit_code=result.exit_code,
        output_tail=result.output_tail,
        stdout_tail=out,
        stderr_tail=err,
    )


def _cancelled_outcome(ctx: RunContext, ended: Outcome | None = None) -> Outcome:
    """The outcome of a cancelled attempt, keeping the exit code and output of `ended`."""
    reason = ctx.cancel_reason
    if reason == CancelReason.SHUTDOWN:
        # Retry at once: the run did nothing wrong, this worker is just going away.
        kind, error, retry_after_s = OutcomeKind.RETRY_LATER, "worker shutting down", 0.0
    elif reason == CancelReason.DEADLINE:
        kind, error, retry_after_s = OutcomeKind.FAILURE, "deadline exceeded", None
    else:
        kind, error, retry_after_s = OutcomeKind.FAILURE, f"cancelled: {reason}", None
    if ended is None:
        return Outcome(kind, error, retry_after_s=retry_after_s, cancel_reason=reason)
    return replace(
        ended, kind=kind, error=error, retry_after_s=retry_after_s, cancel_reason=reason, final=False, exception_type=""
    )


def cancelled_outcome(ctx: RunContext, ended: Outcome | None = None) -> Outcome:
    """What a cancelled attempt reports, whatever `ended` (how it really ended, if known) says."""
    return _cancelled_outcome(ctx, ended)


# One thread watches every attempt's deadline in the process (see _threads.py).
_deadlines = DeadlineWatcher()


def arm_deadline(ctx: RunContext):
    """Cancel `ctx` with reason DEADLINE when its deadline passes; `.cancel()` what this returns
    when the run ends. The deadline is an absolute instant from the cluster, so it relies on
    clocks in sync; the cluster also stops the run at its maximum runtime on its own."""
    if ctx.deadline is None:
        return None
    deadline = ctx.deadline
    delay_s = (deadline - datetime.now(timezone.utc)).total_seconds()
    return _deadlines.arm(delay_s, lambda: _deadline_passed(ctx, deadline))


def _deadline_passed(ctx: RunContext, deadline: datetime) -> None:
    if ctx.cancel(CancelReason.DEADLINE):
        log.warning("run %s reached its deadline %s: cancelling it", ctx.run_key, deadline.isoformat())


class AsyncLoopThread:
    """One asyncio event loop in a daemon thread, for `async def` handlers."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, awaitable: Any, ctx: RunContext) -> Any:
        """Run `awaitable` on the loop and wait for it to end. Cancelling `ctx` cancels its task
        (CancelledError at its next await); we still wait for the task to finish its cleanup."""
        loop = self._ensure_started()
        started: list[asyncio.Task] = []
        # The task runs in the loop thread's context: hand it this attempt's capture.
        capture = current_capture()

        async def main() -> Any:
            set_capture(capture)
            task = asyncio.current_task()
            if task is not None:  # always, inside a coroutine the loop runs
                started.append(task)
            if ctx.is_cancelled():  # cancelled before the task existed
                raise asyncio.CancelledError()
            return await awaitable

        def cancel_task() -> None:
            for task in started:
                task.cancel()

        future = asyncio.run_coroutine_threadsafe(main(), loop)

        # A run abandoned at shutdown may be cancelled after the loop closed: nothing to do then.
        def cancel_soon() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(cancel_task)

        ctx.add_cancel_callback(cancel_soon)
        try:
            return future.result()
        finally:
            if inspect.iscoroutine(awaitable) and not started:
                awaitable.close()  # never started: avoid "coroutine was never awaited"

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="raftcron-asyncio")
                self._thread.start()
            return self._loop

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the loop. Tasks still running are abandoned (their runs were reported)."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        if not thread.is_alive():
            loop.close()
