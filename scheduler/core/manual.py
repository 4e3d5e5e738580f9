"""Runs outside the schedule: a manual trigger now, and a backfill of past slots that never ran."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.commands import BackfillRuns, TriggerRun
from scheduler.core.execution import cancel_live_runs
from scheduler.core.model import MISSED, QUEUED, SKIPPED, Run
from scheduler.core.results import Result, rejected
from scheduler.core.retention import horizon_us, prune_history
from scheduler.core.state import State
from scheduler.core.vocabulary import OutOfPlan, Overlap, RejectionCode, RunKind

MAX_BACKFILL_SLOTS = 10_000
OVERLAPS = tuple(Overlap)
BACKFILL_OVERLAPS = (Overlap.ALLOW, Overlap.FORBID, Overlap.QUEUE)


def trigger_run(state: State, cmd: TriggerRun, index: int) -> Result:
    job = state.jobs.get(cmd.job_id)
    if job is None:
        return rejected(index, RejectionCode.NOT_FOUND, f"job {cmd.job_id!r} does not exist")
    kill = state.kill_of(job.body.job_class)
    if kill is not None:
        return rejected(index, RejectionCode.CLASS_KILLED, f"class {job.body.job_class!r} is killed: {kill.reason}")
    overlap = job.body.overlap if cmd.overlap is UNSET else cmd.overlap
    if overlap not in OVERLAPS:
        return rejected(index, RejectionCode.INVALID, f"overlap {overlap!r} is not one of {', '.join(OVERLAPS)}")
    if state.live_runs.get(cmd.job_id):
        if overlap == Overlap.FORBID:
            return rejected(
                index, RejectionCode.OVERLAP_FORBID, f"job {cmd.job_id!r} has a live run and overlap is forbid"
            )
        if overlap == Overlap.REPLACE:
            cancel_live_runs(state, cmd.job_id, f"replaced by a manual run from {cmd.author}")
    # Replicated time: a follower's clock must not decide when it is due; never a pruned key.
    instant_us = max(state.now_us, horizon_us(state, cmd.job_id) + 1)
    while state.get_run(cmd.job_id, instant_us) is not None:
        instant_us += 1  # a run key of its own: never the key of an existing run
    state.add_run(
        Run(
            job_id=cmd.job_id,
            scheduled_us=instant_us,
            status=QUEUED,
            kind=RunKind.MANUAL,
            reason=f"triggered by {cmd.author}",
            effective_us=instant_us,
            claimed_us=state.now_us,
            claim_index=index,
            spec_version=job.version,
            payload_json=cmd.payload_json,
            overlap=cmd.overlap,
        )
    )
    prune_history(state, cmd.job_id)
    return Result(index=index, events=(ev.RunClaimed(cmd.job_id, instant_us, QUEUED, index),))


def _backfill_one(state: State, cmd: BackfillRuns, slot_us: int, due_us: int, index: int) -> ev.AnyEvent:
    job = state.jobs[cmd.job_id]
    if slot_us > job.cursor_us:
        return ev.ClaimOutOfPlan(cmd.job_id, slot_us, OutOfPlan.BACKFILL_NOT_DUE)
    if slot_us <= horizon_us(state, cmd.job_id):
        # Pruned from history: whether it ran can no longer be told, so it is not fired again.
        return ev.ClaimOutOfPlan(cmd.job_id, slot_us, OutOfPlan.HISTORY_PRUNED)
    run = state.get_run(cmd.job_id, slot_us)
    if run is not None and run.status not in (SKIPPED, MISSED):
        return ev.RunAlreadyClaimed(cmd.job_id, slot_us)
    if run is None:
        run = Run(job_id=cmd.job_id, scheduled_us=slot_us, status=MISSED)
        state.add_run(run)
    state.set_status(run, QUEUED)
    run.kind = RunKind.BACKFILL
    run.reason = f"backfilled by {cmd.author}"
    run.effective_us = slot_us if due_us == slot_us else due_us  # one int object, not two equal ones
    run.claimed_us = state.now_us
    run.claim_index = index
    run.spec_version = job.version
    run.payload_json, run.overlap = cmd.payload_json, cmd.overlap
    return ev.RunClaimed(cmd.job_id, slot_us, QUEUED, index)


def backfill_runs(state: State, cmd: BackfillRuns, index: int) -> Result:
    if cmd.job_id not in state.jobs:
        return rejected(index, RejectionCode.NOT_FOUND, f"job {cmd.job_id!r} does not exist")
    if len(cmd.slots) > MAX_BACKFILL_SLOTS or list(cmd.slots) != sorted(set(cmd.slots)) or cmd.interval_us < 0:
        return rejected(index, RejectionCode.INVALID, f"slots must be unique, ascending, at most {MAX_BACKFILL_SLOTS}")
    if cmd.overlap is not UNSET and cmd.overlap not in BACKFILL_OVERLAPS:
        # `replace` would have each backfilled run cancel the one before it.
        return rejected(index, RejectionCode.INVALID, f"a backfill's overlap is one of {', '.join(BACKFILL_OVERLAPS)}")
    events = []
    due_us = state.now_us
    for slot_us in cmd.slots:
        event = _backfill_one(state, cmd, slot_us, due_us, index)
        if isinstance(event, ev.RunClaimed):
            due_us += cmd.interval_us
        events.append(event)
    prune_history(state, cmd.job_id)
    return Result(index=index, events=tuple(events))
