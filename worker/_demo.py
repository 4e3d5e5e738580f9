"""Demo handlers for the jobs of examples/jobs.yaml (`raftcron worker --demo`)."""

from __future__ import annotations

import logging

from worker._context import RunContext

__all__ = ["DEMO_HANDLERS"]

log = logging.getLogger("raftcron.demo")


def echo(ctx: RunContext) -> None:
    """demo.echo: log the payload."""
    log.info("demo.echo %s (attempt %d): %s", ctx.run_key, ctx.attempt, ctx.payload)


def build_report(ctx: RunContext) -> None:
    """reports.build: pretend to build a report for a couple of seconds."""
    report = (ctx.payload or {}).get("report", "report")
    log.info("reports.build %s: building %s", ctx.run_key, report)
    # Wait on the cancellation event rather than time.sleep: a cancelled run stops at once.
    if ctx.cancelled.wait(2.0):
        log.info("reports.build %s: cancelled (%s)", ctx.run_key, ctx.cancel_reason)
        return
    log.info("reports.build %s: %s built", ctx.run_key, report)


def run_payroll(ctx: RunContext) -> None:
    """payroll.run: the kind of job whose effect must happen once per slot."""
    log.info(
        "payroll.run %s: paying with idempotency key %s (fencing token %d)",
        ctx.run_key,
        ctx.idempotency_key,
        ctx.fencing_token,
    )
    ctx.cancelled.wait(1.0)


DEMO_HANDLERS = {
    "demo.echo": echo,
    "reports.build": build_report,
    "payroll.run": run_payroll,
}
