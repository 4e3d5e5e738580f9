"""RunContext's cancellation: `ctx.cancelled` is made on first use (most handlers never look
at it), and must behave as the Event it always was, whichever comes first."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

from worker import CancelReason, RunContext


def context() -> RunContext:
    return RunContext(
        job_id="j",
        run_key="j@2026-12-07T00:00:00Z",
        scheduled_at=datetime(2026, 12, 7, tzinfo=timezone.utc),
        fencing_token=7,
        attempt=1,
        deadline=None,
    )


def test_an_event_asked_for_after_the_cancel_is_already_set() -> None:
    ctx = context()
    assert ctx.cancel(CancelReason.FENCED)
    assert ctx.is_cancelled() and ctx.cancelled.is_set() and ctx.cancel_reason == "fenced"
    assert ctx.cancelled.wait(0)


def test_an_event_asked_for_before_the_cancel_is_set_by_it_and_wakes_its_waiter() -> None:
    ctx = context()
    event = ctx.cancelled
    assert not event.is_set() and not ctx.is_cancelled() and ctx.cancel_reason is None
    woke = threading.Event()
    waiter = threading.Thread(target=lambda: event.wait(10) and woke.set())
    waiter.start()
    ctx.cancel("deadline")
    waiter.join(10)
    assert woke.is_set() and ctx.cancelled is event and ctx.cancel_reason == CancelReason.DEADLINE


def test_the_first_reason_wins_and_callbacks_run_once() -> None:
    ctx = context()
    calls: list[str] = []
    ctx.add_cancel_callback(lambda: calls.append("early"))
    assert ctx.cancel("lease_lost") and not ctx.cancel("shutdown")
    ctx.add_cancel_callback(lambda: calls.append("late"))  # already cancelled: called at once
    assert calls == ["early", "late"] and ctx.cancel_reason == CancelReason.LEASE_LOST


def test_one_event_for_every_caller_even_when_asked_for_at_once() -> None:
    ctx = context()
    seen: list[threading.Event] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        seen.append(ctx.cancelled)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(seen) == 8 and all(event is seen[0] for event in seen)
