"""The testing helper (run a handler without a cluster) and the idempotency examples."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from examples import payment_job, report_job
from worker import CancelReason, RetryLater, RunContext
from worker.testing import make_context, run_handler


def test_success_with_a_real_context() -> None:
    seen: list[RunContext] = []
    outcome = run_handler(seen.append, {"report": "sales"}, attempt=3, fencing_token=8, job_id="reports.x")
    assert outcome.kind == "SUCCESS" and outcome.reported and not outcome.cancelled
    ctx = seen[0]
    assert ctx is outcome.context
    assert ctx.payload == {"report": "sales"} and json.loads(ctx.payload_json) == ctx.payload
    assert ctx.attempt == 3 and ctx.fencing_token == 8 and ctx.run_key.startswith("reports.x@")
    assert ctx.deadline is not None and ctx.deadline.tzinfo is not None
    assert len(ctx.idempotency_key) == 40


def test_failure_and_retry_later() -> None:
    def broken(ctx):
        raise KeyError("missing")

    def busy(ctx):
        raise RetryLater(30, "warehouse busy")

    failed = run_handler(broken)
    assert failed.kind == "FAILURE" and failed.error == "KeyError: 'missing'"
    assert "Traceback" in failed.output_tail
    retry = run_handler(busy)
    assert retry.kind == "RETRY_LATER" and retry.error == "warehouse busy" and retry.retry_after_s == 30
    default = run_handler(lambda ctx: (_ for _ in ()).throw(RetryLater()))
    assert default.kind == "RETRY_LATER" and default.retry_after_s is None


def test_cancellation_is_seen_by_the_handler_and_not_reported() -> None:
    def polite(ctx):
        while not ctx.cancelled.wait(0.01):
            pass
        return "stopped early"  # returning after cancellation is not a success

    outcome = run_handler(polite, cancel_after_s=0.05, cancel_reason="fenced")
    assert outcome.cancelled and outcome.cancel_reason == CancelReason.FENCED
    assert not outcome.reported and outcome.kind == "FAILURE"


def test_deadline_is_enforced() -> None:
    outcome = run_handler(lambda ctx: ctx.cancelled.wait(5), deadline_s=0.1)
    assert outcome.cancel_reason == "deadline" and outcome.reported
    assert outcome.kind == "FAILURE" and outcome.error == "deadline exceeded"
    assert outcome.duration_s < 2


def test_async_handlers_run_and_are_cancelled_as_tasks() -> None:
    cleaned_up = []

    async def fetch(ctx):
        await asyncio.sleep(0)
        return ctx.payload["n"] * 2

    async def forever(ctx):
        try:
            await asyncio.sleep(30)
        finally:
            cleaned_up.append(True)

    assert run_handler(fetch, {"n": 2}).kind == "SUCCESS"
    outcome = run_handler(forever, cancel_after_s=0.05)
    assert outcome.cancel_reason == "run_cancelled" and cleaned_up == [True]
    assert outcome.duration_s < 2


def test_heartbeats_are_counted_per_lease_ttl_third() -> None:
    outcome = run_handler(lambda ctx: ctx.cancelled.wait(0.35), lease_ttl_s=0.3)
    assert outcome.heartbeats >= 3  # one per 0.1s


def test_make_context_round_trips_the_payload_through_json() -> None:
    ctx = make_context({"when": "now"}, scheduled_at=datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert ctx.run_key == "test.job@2026-01-01T00:00:00Z"
    with pytest.raises(TypeError):
        make_context({"not json": object()})


def test_payment_example_charges_once_across_attempts() -> None:
    payment_job.PAYMENTS = api = payment_job.FakePaymentAPI()
    order = {"customer": "cus_1", "amount_cents": 500}
    slot = datetime(2026, 2, 1, tzinfo=timezone.utc)
    api.lose_next_response = True
    first = run_handler(payment_job.charge_subscription, order, scheduled_at=slot, fencing_token=3)
    second = run_handler(payment_job.charge_subscription, order, scheduled_at=slot, attempt=2, fencing_token=4)
    assert first.kind == "FAILURE" and second.kind == "SUCCESS"
    assert len(api.charges) == 1  # the retry reused the first charge
    next_month = datetime(2026, 3, 1, tzinfo=timezone.utc)
    next_slot = run_handler(payment_job.charge_subscription, order, scheduled_at=next_month)
    assert next_slot.kind == "SUCCESS" and len(api.charges) == 2
    api.busy = True
    busy = run_handler(payment_job.charge_subscription, order)
    assert busy.kind == "RETRY_LATER" and busy.retry_after_s == 60


def test_report_example_refuses_stale_writers(tmp_path: Path) -> None:
    payload = {"report": "sales", "out_dir": str(tmp_path)}
    slot = datetime(2026, 1, 1, 5, 15, tzinfo=timezone.utc)
    newer = run_handler(report_job.build_report, payload, scheduled_at=slot, attempt=2, fencing_token=9)
    stale = run_handler(report_job.build_report, payload, scheduled_at=slot, attempt=1, fencing_token=5)
    assert newer.kind == "SUCCESS"
    assert stale.kind == "FAILURE" and "StaleAttempt" in stale.error
    path = report_job.output_path(tmp_path, newer.context.run_key)
    assert json.loads(path.read_text())["fencing_token"] == 9  # the stale attempt wrote nothing
    again = run_handler(report_job.build_report, payload, scheduled_at=slot, attempt=3, fencing_token=12)
    assert again.kind == "SUCCESS" and json.loads(path.read_text())["fencing_token"] == 12
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left
