"""Run a handler without a cluster, the way a worker would, for unit tests of handlers.

    from worker.testing import run_handler

    def test_build_report_retries_when_input_is_missing():
        outcome = run_handler(build_report, payload={"report": "sales"})
        assert outcome.kind == "RETRY_LATER"
        assert outcome.retry_after_s == 300

    def test_build_report_stops_when_cancelled():
        outcome = run_handler(build_report, payload={"report": "huge"}, cancel_after_s=0.1)
        assert outcome.cancelled and outcome.duration_s < 1

The handler gets a real RunContext (run key, fencing token, idempotency key, deadline, payload
parsed from JSON) and runs exactly as under a Worker: a plain function in a thread, an
`async def` on an event loop thread, a ShellCommand in its own process group. Its deadline is
enforced, `cancel_after_s` cancels it as the cluster would (fenced lease, cancelled run...), and
the outcome says what the worker would have reported, if anything.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from worker._context import CancelReason, RunContext
from worker._execution import AsyncLoopThread, Handler, OutcomeKind, arm_deadline, execute

__all__ = ["HandlerOutcome", "make_context", "run_handler"]


@dataclass(frozen=True)
class HandlerOutcome:
    """What happened to one attempt run by `run_handler`.

    kind, error, exit_code, output_tail, retry_after_s, final: the outcome a worker would report.
    stdout_tail, stderr_tail, exception_type: its output, and the type of what it raised.
    reported: False when a worker would not report it at all (its lease was lost).
    cancelled, cancel_reason: whether and why ctx.cancelled was set while it ran.
    duration_s: how long the handler ran.
    heartbeats: how many heartbeats a worker would have sent meanwhile (one per lease_ttl_s/3).
    context: the RunContext the handler got.
    """

    kind: OutcomeKind
    error: str
    exit_code: int
    output_tail: str
    retry_after_s: float | None
    reported: bool
    cancelled: bool
    cancel_reason: CancelReason | None
    duration_s: float
    heartbeats: int
    context: RunContext
    final: bool = False
    # What the handler wrote to stdout and stderr (log records included), and what it raised.
    stdout_tail: str = ""
    stderr_tail: str = ""
    exception_type: str = ""


def readable_run_key(job_id: str, scheduled_at: datetime) -> str:
    """`job@2026-12-01T18:59:00Z` as the cluster sends it: fractional seconds only when there are any."""
    utc = scheduled_at.astimezone(timezone.utc).replace(tzinfo=None)
    return f"{job_id}@{utc.isoformat()}Z"


def make_context(
    payload: Any = None,
    *,
    job_id: str = "test.job",
    scheduled_at: datetime | None = None,
    attempt: int = 1,
    fencing_token: int = 1,
    deadline_s: float | None = 60.0,
    target: str = "test",
) -> RunContext:
    """A RunContext like the one a worker builds from a grant (payload given as a Python value)."""
    scheduled_at = scheduled_at or datetime.now(timezone.utc).replace(microsecond=0)
    deadline = None if deadline_s is None else datetime.now(timezone.utc) + timedelta(seconds=deadline_s)
    return RunContext(
        job_id=job_id,
        run_key=readable_run_key(job_id, scheduled_at),
        scheduled_at=scheduled_at,
        fencing_token=fencing_token,
        attempt=attempt,
        deadline=deadline,
        # Through JSON, as from the cluster: a payload that is not JSON-like fails here.
        payload_json="" if payload is None else json.dumps(payload),
        worker_id="test-worker",
        target=target,
    )


def run_handler(
    handler: Handler,
    payload: Any = None,
    *,
    attempt: int = 1,
    deadline_s: float | None = 60.0,
    cancel_after_s: float | None = None,
    cancel_reason: CancelReason | str = CancelReason.RUN_CANCELLED,
    lease_ttl_s: float = 30.0,
    job_id: str = "test.job",
    scheduled_at: datetime | None = None,
    fencing_token: int = 1,
    context: RunContext | None = None,
) -> HandlerOutcome:
    """Run `handler` once to its end and return what happened (see the module docstring).

    deadline_s: the attempt's deadline from now (None: no deadline); at it, ctx.cancelled is set
        with reason "deadline" and the outcome becomes FAILURE "deadline exceeded".
    cancel_after_s: cancel the attempt after this many seconds with `cancel_reason`.
    context: use this RunContext instead of building one (the other run fields are ignored).
    """
    ctx = context or make_context(
        payload,
        job_id=job_id,
        scheduled_at=scheduled_at,
        attempt=attempt,
        fencing_token=fencing_token,
        deadline_s=deadline_s,
    )
    canceller = None
    if cancel_after_s is not None:
        canceller = threading.Timer(cancel_after_s, ctx.cancel, args=(CancelReason(cancel_reason),))
        canceller.daemon = True
        canceller.start()
    deadline_timer = arm_deadline(ctx)
    loop = AsyncLoopThread()
    started = time.monotonic()
    try:
        outcome = execute(handler, ctx, loop)
    finally:
        duration_s = time.monotonic() - started
        for timer in (canceller, deadline_timer):
            if timer is not None:
                timer.cancel()
        loop.close()
    return HandlerOutcome(
        kind=outcome.kind,
        error=outcome.error,
        exit_code=outcome.exit_code,
        output_tail=outcome.output_tail,
        retry_after_s=outcome.retry_after_s,
        reported=outcome.reportable,
        cancelled=ctx.is_cancelled(),
        cancel_reason=ctx.cancel_reason,
        duration_s=duration_s,
        heartbeats=int(duration_s // (lease_ttl_s / 3)),
        context=ctx,
        final=outcome.final,
        stdout_tail=outcome.stdout_tail,
        stderr_tail=outcome.stderr_tail,
        exception_type=outcome.exception_type,
    )
