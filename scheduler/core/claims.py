"""Claiming run keys: the one-fire-not-two rule, and the per-job cursor that never skips a slot."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import LATE_ALERT_US, close_streaks, raise_alert
from scheduler.core.commands import ClaimRuns, SlotClaim
from scheduler.core.deadlines import watch_deadline
from scheduler.core.execution import cancel_live_runs
from scheduler.core.model import CLAIM_STATUSES, MISSED, QUEUED, SECOND_US, SKIPPED, Job, Run, format_run_key
from scheduler.core.results import Result, rejected
from scheduler.core.retention import horizon_us, prune_history
from scheduler.core.sharing import share_instant, share_last
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind, OutOfPlan, Overlap, RejectionCode, SkipReason


def _out_of_plan(state: State, claim: SlotClaim, job: Job | None, by_calendar: bool = False) -> str:
    """Why this claim disagrees with replicated state, or '' when it is the job's next slot."""
    if job is None:
        return OutOfPlan.UNKNOWN_JOB
    if claim.spec_version != job.version:
        return OutOfPlan.STALE_SPEC
    if claim.status not in CLAIM_STATUSES:
        return OutOfPlan.BAD_STATUS
    if claim.scheduled_us != job.next_due_us:
        return OutOfPlan.NOT_NEXT_SLOT
    # A slot a calendar moved to an earlier day is due there (its effective instant).
    due_us = min(claim.scheduled_us, claim.effective_us or claim.scheduled_us) if by_calendar else claim.scheduled_us
    if due_us > state.now_us:
        return OutOfPlan.NOT_DUE_YET  # judged in replicated time: a leader's clock jump cannot fire early
    if claim.next_due_us and claim.next_due_us <= claim.scheduled_us:
        return OutOfPlan.NEXT_DUE_NOT_AFTER_SLOT
    return ""


def _apply_overlap_policy(state: State, job, claim: SlotClaim) -> tuple[str, str]:
    """forbid skips this slot while another run is live; replace cancels the live ones;
    queue and allow queue it (queue leases one run of the job at a time)."""
    live = state.live_runs.get(job.id)
    if not live:
        return QUEUED, ""
    if job.body.overlap == Overlap.FORBID:
        return SKIPPED, f"{SkipReason.OVERLAP_FORBID}: run {format_run_key(job.id, live[0])} still live"
    if job.body.overlap == Overlap.REPLACE:
        cancel_live_runs(state, job.id, f"replaced by the run of {claim.scheduled_us}")
    return QUEUED, ""


def _due_us(claim: SlotClaim, by_calendar: bool) -> int:
    """When a slot is owed: its nominal instant, or for a slot a calendar moved, where it moved."""
    if by_calendar and claim.effective_us and claim.effective_us != claim.scheduled_us:
        return claim.effective_us
    return claim.scheduled_us


def _alert_on_claim(state: State, claim: SlotClaim, status: str, why: str, by_calendar: bool) -> None:
    if status == MISSED:
        raise_alert(state, AlertKind.MISSED, claim.job_id, claim.scheduled_us, why)
    elif status == SKIPPED and by_calendar and claim.status == SKIPPED:
        pass  # the owner's own calendar skipped it: expected, like a pause
    elif status == SKIPPED and why != SkipReason.PAUSED and not why.startswith(SkipReason.KILLED):
        raise_alert(state, AlertKind.SKIPPED, claim.job_id, claim.scheduled_us, why)
    elif status == QUEUED:
        close_streaks(state, claim.job_id)
        if state.now_us - (due_us := _due_us(claim, by_calendar)) > LATE_ALERT_US:
            late_s = (state.now_us - due_us) / SECOND_US
            raise_alert(state, AlertKind.LATE, claim.job_id, claim.scheduled_us, f"fired {late_s:.0f}s after its slot")


def _claim_one(
    state: State, claim: SlotClaim, index: int, schedule_index: int = -1, by_calendar: bool = False
) -> ev.AnyEvent:
    if state.get_run(claim.job_id, claim.scheduled_us) is not None:
        return ev.RunAlreadyClaimed(claim.job_id, claim.scheduled_us)
    job = state.jobs.get(claim.job_id)
    if job is not None and claim.scheduled_us <= job.cursor_us:
        return ev.SlotAlreadyAccounted(claim.job_id, claim.scheduled_us, job.cursor_us)
    pruned_through_us = horizon_us(state, claim.job_id)
    if claim.scheduled_us <= pruned_through_us:
        # Its run may have been pruned from history: the key counts as claimed.
        return ev.SlotAlreadyAccounted(claim.job_id, claim.scheduled_us, pruned_through_us)
    reason = _out_of_plan(state, claim, job, by_calendar)
    if reason:
        return ev.ClaimOutOfPlan(claim.job_id, claim.scheduled_us, reason)
    assert job is not None  # _out_of_plan answers unknown_job for a job that does not exist
    status, why = claim.status, claim.reason
    kill = state.kill_of(job.body.job_class)
    if job.paused and status == QUEUED:
        # Decided here, not by the proposer, so a pause races with no claim.
        status, why = SKIPPED, SkipReason.PAUSED
    elif kill is not None and status == QUEUED:
        status, why = SKIPPED, f"{SkipReason.KILLED}: {kill.reason} (by {kill.author})"
    if status == QUEUED:
        status, overlap_why = _apply_overlap_policy(state, job, claim)
        # A calendar's note (where the slot moved) stays on the run; otherwise the reason is the overlap's.
        why = why if by_calendar and status == QUEUED else overlap_why
    _alert_on_claim(state, claim, status, why, by_calendar)
    run = Run(
        job_id=claim.job_id,
        scheduled_us=claim.scheduled_us,
        status=status,
        reason=why,
        # The run key's own int object when the slot is not spread: a million runs, 32 MB less.
        effective_us=claim.scheduled_us if claim.effective_us in (0, claim.scheduled_us) else claim.effective_us,
        claimed_us=state.now_us,
        claim_index=index,
        spec_version=job.version,
    )
    if schedule_index >= 0:
        run.schedule_index = schedule_index
    state.add_run(run, job)
    if status == QUEUED and job.body.deadline_us is not UNSET:
        # Counted from when the slot is released (its herd spread, or where a calendar moved it).
        watch_deadline(state, job, claim.scheduled_us, claim.effective_us or claim.scheduled_us)
    job.cursor_us = claim.scheduled_us
    job.next_due_us = share_instant(claim.next_due_us)
    if job.counted_runs is not UNSET and status == QUEUED:
        # max_runs counts the scheduled slots that were queued to run, decided here so a skipped
        # (paused, killed, overlapping) or missed slot never counts (docs/design/run-limits.md).
        job.counted_runs += 1
        max_runs = job.body.max_runs
        if max_runs is not UNSET and job.counted_runs >= max_runs:
            job.next_due_us = 0
    job.last = share_last(status, claim.scheduled_us)
    prune_history(state, claim.job_id)
    return ev.RunClaimed(claim.job_id, claim.scheduled_us, status, index)


def claim_runs(state: State, cmd: ClaimRuns, index: int) -> Result:
    sources = cmd.schedule_indexes
    if sources is UNSET and not cmd.calendar_keys:  # the hot path: a herd's claims
        return Result(index=index, events=tuple(_claim_one(state, claim, index) for claim in cmd.claims))
    if sources is not UNSET and len(sources) != len(cmd.claims):
        return rejected(index, RejectionCode.INVALID, "schedule_indexes must hold one index per claim")
    indexes = sources if sources is not UNSET else (-1,) * len(cmd.claims)
    decided = {(ref.job_id, ref.scheduled_us) for ref in cmd.calendar_keys} if cmd.calendar_keys else set()
    events = tuple(
        _claim_one(state, c, index, source, (c.job_id, c.scheduled_us) in decided)
        for c, source in zip(cmd.claims, indexes)
    )
    return Result(index=index, events=events)
