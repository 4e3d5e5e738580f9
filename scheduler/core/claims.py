"""Claiming run keys: the one-fire-not-two rule, and the per-job cursor that never skips a slot."""

from __future__ import annotations

from scheduler.core import results as ev
from scheduler.core.alerts import LATE_ALERT_US, close_streaks, raise_alert
from scheduler.core.commands import ClaimRuns, SlotClaim
from scheduler.core.execution import cancel_live_runs
from scheduler.core.model import CLAIM_STATUSES, MISSED, QUEUED, SECOND_US, SKIPPED, Run, format_run_key
from scheduler.core.results import Result
from scheduler.core.retention import horizon_us, prune_history
from scheduler.core.sharing import share_instant, share_last
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind, OutOfPlan, Overlap, SkipReason


def _out_of_plan(state: State, claim: SlotClaim) -> str:
    """Why this claim disagrees with replicated state, or '' when it is the job's next slot."""
    job = state.jobs.get(claim.job_id)
    if job is None:
        return OutOfPlan.UNKNOWN_JOB
    if claim.spec_version != job.version:
        return OutOfPlan.STALE_SPEC
    if claim.status not in CLAIM_STATUSES:
        return OutOfPlan.BAD_STATUS
    if claim.scheduled_us != job.next_due_us:
        return OutOfPlan.NOT_NEXT_SLOT
    if claim.scheduled_us > state.now_us:
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


def _alert_on_claim(state: State, claim: SlotClaim, status: str, why: str) -> None:
    if status == MISSED:
        raise_alert(state, AlertKind.MISSED, claim.job_id, claim.scheduled_us, why)
    elif status == SKIPPED and why != SkipReason.PAUSED and not why.startswith(SkipReason.KILLED):
        raise_alert(state, AlertKind.SKIPPED, claim.job_id, claim.scheduled_us, why)
    elif status == QUEUED:
        close_streaks(state, claim.job_id)
        if state.now_us - claim.scheduled_us > LATE_ALERT_US:
            late_s = (state.now_us - claim.scheduled_us) / SECOND_US
            raise_alert(state, AlertKind.LATE, claim.job_id, claim.scheduled_us, f"fired {late_s:.0f}s after its slot")


def _claim_one(state: State, claim: SlotClaim, index: int) -> ev.AnyEvent:
    if state.get_run(claim.job_id, claim.scheduled_us) is not None:
        return ev.RunAlreadyClaimed(claim.job_id, claim.scheduled_us)
    job = state.jobs.get(claim.job_id)
    if job is not None and claim.scheduled_us <= job.cursor_us:
        return ev.SlotAlreadyAccounted(claim.job_id, claim.scheduled_us, job.cursor_us)
    pruned_through_us = horizon_us(state, claim.job_id)
    if claim.scheduled_us <= pruned_through_us:
        # Its run may have been pruned from history: the key counts as claimed.
        return ev.SlotAlreadyAccounted(claim.job_id, claim.scheduled_us, pruned_through_us)
    reason = _out_of_plan(state, claim)
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
        status, why = _apply_overlap_policy(state, job, claim)
    _alert_on_claim(state, claim, status, why)
    state.add_run(
        Run(
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
    )
    job.cursor_us = claim.scheduled_us
    job.next_due_us = share_instant(claim.next_due_us)
    job.last = share_last(status, claim.scheduled_us)
    prune_history(state, claim.job_id)
    return ev.RunClaimed(claim.job_id, claim.scheduled_us, status, index)


def claim_runs(state: State, cmd: ClaimRuns, index: int) -> Result:
    return Result(index=index, events=tuple(_claim_one(state, claim, index) for claim in cmd.claims))
