"""Leases: grant, extend, complete and expire, all fenced by the Raft index that granted them.

Every handler returns exactly one event per item, in item order, so a batching
proposer can hand each caller its own answer.
"""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import note_success, raise_alert
from scheduler.core.commands import (
    CancelRun,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    LeaseRef,
    RunRef,
)
from scheduler.core.log_format import ATTEMPT_OUTPUT_FORMAT, OVERLAP_AT_GRANT_FORMAT
from scheduler.core.model import (
    CANCELLED,
    FAILED,
    LEASED,
    LIVE_STATUSES,
    QUEUED,
    SECOND_US,
    SUCCEEDED,
    TIMED_OUT,
    Attempt,
    Run,
    format_run_key,
    run_overlap,
)
from scheduler.core.results import Result, rejected
from scheduler.core.retry import end_run, retry_or_end
from scheduler.core.sharing import share_last
from scheduler.core.state import State
from scheduler.core.vocabulary import (
    AlertKind,
    CompletionKind,
    ExpiryReason,
    FenceReason,
    LeaseRefusal,
    Overlap,
    RejectionCode,
)

_COMPLETION_KINDS = frozenset(CompletionKind)
MAX_LEASE_TTL_US = 365 * 86_400 * SECOND_US
# A run keeps the stdout and stderr of its first attempt and of its last two.
ATTEMPTS_WITH_STREAMS = 3
_EXPIRY_REASONS = frozenset(ExpiryReason)
# A completion fenced for these may still carry the output of an attempt the reaper ended.
_LATE_REASONS = frozenset({FenceReason.NOT_LEASED, FenceReason.STALE_TOKEN})


def _grant_one(state: State, ref: RunRef, cmd: GrantLeases, index: int, deadlines: dict[int, int]) -> ev.AnyEvent:
    run = state.get_run(ref.job_id, ref.scheduled_us)
    if run is None or run.status != QUEUED:
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, LeaseRefusal.NOT_QUEUED)
    if run.not_before_us > state.now_us:
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, LeaseRefusal.BACKING_OFF)
    job = state.jobs.get(ref.job_id)
    if job is None:
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, LeaseRefusal.JOB_DELETED)
    if state.kill_of(job.body.job_class) is not None:
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, LeaseRefusal.CLASS_KILLED)
    if state.cluster_version >= OVERLAP_AT_GRANT_FORMAT:
        overlap = run_overlap(run, job.body)
        if overlap in (Overlap.QUEUE, Overlap.FORBID) and any(o.status == LEASED for o in state.live(ref.job_id)):
            refusal = LeaseRefusal.OVERLAP_QUEUE if overlap == Overlap.QUEUE else LeaseRefusal.OVERLAP_FORBID
            return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, refusal)
    elif job.body.overlap == Overlap.QUEUE and any(other.status == LEASED for other in state.live(ref.job_id)):
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, LeaseRefusal.OVERLAP_QUEUE)
    busy = _resource_without_room(state, job.body.uses)
    if busy:
        return ev.LeaseNotGranted(ref.job_id, ref.scheduled_us, busy)
    for name in job.body.uses:
        _record_start(state, name)
    run.resources = job.body.uses
    state.set_status(run, LEASED)
    run.attempt += 1
    run.fencing_token = index
    run.worker_id = cmd.worker_id
    run.started_us = run.started_us or state.now_us
    run.lease_ttl_us = cmd.lease_ttl_us
    run.lease_expires_us = state.now_us + cmd.lease_ttl_us
    # One int object per timeout and command, not one per run: finished runs keep their deadline.
    run.deadline_us = deadlines.get(job.body.timeout_us) or deadlines.setdefault(
        job.body.timeout_us, state.now_us + job.body.timeout_us
    )
    run.attempts = (
        *run.attempts,
        Attempt(number=run.attempt, worker_id=cmd.worker_id, fencing_token=index, started_us=state.now_us),
    )
    return ev.LeaseGranted(ref.job_id, ref.scheduled_us, index, run.attempt, run.lease_expires_us, run.deadline_us)


def _resource_without_room(state: State, uses: tuple[str, ...]) -> str:
    """'resource_busy:NAME' or 'resource_rate:NAME' for the first budget that is full, else ''."""
    window_start_us = state.now_us - SECOND_US
    for name in uses:
        resource = state.resources.get(name)
        if resource is None:
            continue
        if resource.max_concurrent and state.resource_leased.get(name, 0) >= resource.max_concurrent:
            return f"{LeaseRefusal.RESOURCE_BUSY}:{name}"
        recent = state.resource_starts.get(name, ())
        if resource.max_starts_per_s and sum(1 for t in recent if t > window_start_us) >= resource.max_starts_per_s:
            return f"{LeaseRefusal.RESOURCE_RATE}:{name}"
    return ""


def _record_start(state: State, name: str) -> None:
    resource = state.resources.get(name)
    if resource is None or not resource.max_starts_per_s:
        return
    starts = state.resource_starts.setdefault(name, [])
    starts.append(state.now_us)
    del starts[: max(0, len(starts) - resource.max_starts_per_s)]


def grant_leases(state: State, cmd: GrantLeases, index: int) -> Result:
    if cmd.lease_ttl_us <= 0:
        return rejected(index, RejectionCode.INVALID, "lease TTL must be positive")
    if cmd.lease_ttl_us > MAX_LEASE_TTL_US:  # an expiry must fit 64 bits past any replicated time
        return rejected(index, RejectionCode.INVALID, "lease TTL must be at most a year")
    deadlines: dict[int, int] = {}
    return Result(index=index, events=tuple(_grant_one(state, ref, cmd, index, deadlines) for ref in cmd.grants))


def _current_lease(state: State, lease: LeaseRef) -> tuple[Run | None, ev.LeaseFenced | None]:
    """The run if `lease` is its current lease, else the fencing answer."""
    run = state.get_run(lease.job_id, lease.scheduled_us)
    if run is None:
        return None, ev.LeaseFenced(lease.job_id, lease.scheduled_us, lease.fencing_token, FenceReason.NOT_FOUND)
    if run.fencing_token != lease.fencing_token:
        return run, ev.LeaseFenced(lease.job_id, lease.scheduled_us, lease.fencing_token, FenceReason.STALE_TOKEN)
    if run.status == CANCELLED:
        return run, ev.LeaseFenced(lease.job_id, lease.scheduled_us, lease.fencing_token, FenceReason.CANCELLED)
    if run.status != LEASED:
        return run, ev.LeaseFenced(lease.job_id, lease.scheduled_us, lease.fencing_token, FenceReason.NOT_LEASED)
    return run, None


def _extend_one(state: State, lease: LeaseRef) -> ev.AnyEvent:
    run, fenced = _current_lease(state, lease)
    if fenced is not None:
        return fenced
    assert run is not None  # _current_lease fences every lease whose run is gone
    run.lease_expires_us = max(run.lease_expires_us, state.now_us + run.lease_ttl_us)
    return ev.LeaseExtended(lease.job_id, lease.scheduled_us, lease.fencing_token, run.lease_expires_us)


def extend_leases(state: State, cmd: ExtendLeases, index: int) -> Result:
    return Result(index=index, events=tuple(_extend_one(state, lease) for lease in cmd.leases))


def _finish_attempt(state: State, run: Run, outcome: str, error: str = "", exit_code: int = 0) -> None:
    attempt = run.attempts[-1]
    attempt.finished_us = state.now_us
    attempt.outcome = outcome
    attempt.error = error
    attempt.exit_code = exit_code
    run.error, run.exit_code = error, exit_code


def _copy_output(attempt: Attempt, item: Completion) -> None:
    """What `item` says of the attempt's output; UNSET fields leave the attempt's as they are."""
    if item.stdout_tail is not UNSET:
        attempt.stdout_tail = item.stdout_tail
    if item.stderr_tail is not UNSET:
        attempt.stderr_tail = item.stderr_tail
    if item.exception_type is not UNSET:
        attempt.exception_type = item.exception_type
    if item.http_status is not UNSET:
        attempt.http_status = item.http_status


def _keep_attempt_output(run: Run, item: Completion) -> None:
    """The completion's per-attempt output, on the attempt it ends. The proposer bounded each
    field (node config `output_tail_bytes`) and left UNSET what was empty. A run keeps the streams
    of its first attempt and of its last two only, so a run retried a hundred times holds three
    attempts' output (docs/design/output-per-attempt.md); how each attempt ended stays."""
    _copy_output(run.attempts[-1], item)
    if len(run.attempts) > ATTEMPTS_WITH_STREAMS and (item.stdout_tail is not UNSET or item.stderr_tail is not UNSET):
        for older in run.attempts[1 : 1 - ATTEMPTS_WITH_STREAMS]:
            older.stdout_tail = older.stderr_tail = UNSET


def _keep_late_output(run: Run, item: Completion) -> None:
    """A worker stops a handler at the run's deadline and reports what it wrote a grace period
    later, when the reaper has already ended the attempt `timed_out`: its outcome is discarded
    (the lease is gone), but its output is the one account of what the handler was doing, so it
    goes on the attempt the token names, once, if that attempt was ended by the reaper, was held
    by the same worker and holds none (docs/design/output-of-killed-handlers.md). The bound of _keep_attempt_output holds: only
    the first attempt and the last two keep streams."""
    if item.stdout_tail is UNSET and item.stderr_tail is UNSET and item.exception_type is UNSET:
        return
    token = item.lease.fencing_token
    last = len(run.attempts) - 1
    for position in range(last, -1, -1):
        attempt = run.attempts[position]
        if attempt.fencing_token != token:
            continue
        keeps_streams = position == 0 or position > last - (ATTEMPTS_WITH_STREAMS - 1)
        if (
            attempt.outcome in _EXPIRY_REASONS
            and attempt.worker_id == item.worker_id  # its holder's account, nobody else's
            and keeps_streams
            and attempt.stdout_tail is UNSET
            and attempt.stderr_tail is UNSET
            and attempt.exception_type is UNSET
        ):
            _copy_output(attempt, item)
        return


def _complete_one(state: State, item: Completion) -> ev.AnyEvent:
    lease = item.lease
    run, fenced = _current_lease(state, lease)
    if fenced is not None:
        if run is not None and fenced.reason in _LATE_REASONS and state.cluster_version >= ATTEMPT_OUTPUT_FORMAT:
            _keep_late_output(run, item)
        if (
            run is not None
            and fenced.reason == FenceReason.NOT_LEASED
            and run.attempts
            and run.attempts[-1].outcome == item.outcome
        ):
            return ev.CompletionRepeated(lease.job_id, lease.scheduled_us, lease.fencing_token)
        if fenced.reason == FenceReason.STALE_TOKEN:
            message = f"worker {item.worker_id} reported with stale token {lease.fencing_token}; outcome discarded"
            raise_alert(state, AlertKind.FENCED, lease.job_id, lease.scheduled_us, message)
        return fenced
    assert run is not None  # _current_lease fences every lease whose run is gone
    if item.outcome not in _COMPLETION_KINDS:
        return ev.LeaseFenced(lease.job_id, lease.scheduled_us, lease.fencing_token, FenceReason.BAD_OUTCOME)
    _finish_attempt(state, run, item.outcome, item.error, item.exit_code)
    _keep_attempt_output(run, item)
    run.output_tail = item.output_tail
    if item.outcome == CompletionKind.SUCCESS:
        state.set_status(run, SUCCEEDED)
        run.finished_us = state.now_us
        run.reason = ""
        run.lease_expires_us = 0
        job = state.jobs.get(run.job_id)
        if job is not None and job.last.scheduled_us == run.scheduled_us:
            job.last = share_last(SUCCEEDED, run.scheduled_us)
        note_success(state, run.job_id, run.scheduled_us)
        return ev.RunSucceeded(lease.job_id, lease.scheduled_us, run.attempt)
    why = item.error or item.outcome
    if item.final is True and item.outcome == CompletionKind.FAILURE:
        return end_run(state, run, FAILED, f"{why}; final: not retried")
    job = state.jobs.get(run.job_id)
    final_codes = job.body.retry.final_exit_codes if job is not None else UNSET
    if final_codes is not UNSET and item.outcome == CompletionKind.FAILURE and item.exit_code in final_codes:
        return end_run(state, run, FAILED, f"{why}; exit code {item.exit_code} is final: not retried")
    return retry_or_end(state, run, job, FAILED, why, item.retry_after_us, item.jitter_ppm)


def complete_runs(state: State, cmd: CompleteRuns, index: int) -> Result:
    return Result(index=index, events=tuple(_complete_one(state, item) for item in cmd.completions))


def _expire_one(state: State, expiry: Expiry) -> ev.AnyEvent:
    lease = expiry.lease
    run, fenced = _current_lease(state, lease)
    if fenced is not None:
        return fenced
    assert run is not None  # _current_lease fences every lease whose run is gone
    due_us = run.deadline_us if expiry.reason == ExpiryReason.TIMED_OUT else run.lease_expires_us
    if expiry.reason not in _EXPIRY_REASONS or due_us > state.now_us:
        # Judged in replicated time, not the proposer's: a leader with a fast clock cannot end live leases.
        return ev.LeaseStillLive(lease.job_id, lease.scheduled_us, lease.fencing_token)
    _finish_attempt(
        state,
        run,
        expiry.reason,
        "lease expired: heartbeats stopped"
        if expiry.reason == ExpiryReason.LEASE_EXPIRED
        else "maximum runtime exceeded",
    )
    final_status = TIMED_OUT if expiry.reason == ExpiryReason.TIMED_OUT else FAILED
    job = state.jobs.get(run.job_id)
    return retry_or_end(state, run, job, final_status, run.error, 0, expiry.jitter_ppm)


def expire_leases(state: State, cmd: ExpireLeases, index: int) -> Result:
    return Result(index=index, events=tuple(_expire_one(state, expiry) for expiry in cmd.expiries))


def extend_all_live_leases(state: State) -> None:
    """A new epoch gives every live lease one full TTL from now: heartbeats sent to the old
    leader may not have committed, and a new leader must not expire healthy workers."""
    for run in state.leased():
        run.lease_expires_us = max(run.lease_expires_us, state.now_us + run.lease_ttl_us)


def cancel_live_runs(state: State, job_id: str, reason: str) -> list[ev.AnyEvent]:
    """Cancelled runs fence their leases: the holder's next heartbeat answers RUN_CANCELLED."""
    return [end_run(state, run, CANCELLED, reason) for run in state.live(job_id)]


def cancel_run(state: State, cmd: CancelRun, index: int) -> Result:
    """An operator's cancel of one run: queued, it never starts; leased, its lease is fenced."""
    run = state.get_run(cmd.job_id, cmd.scheduled_us)
    key = format_run_key(cmd.job_id, cmd.scheduled_us)
    if run is None:
        return rejected(index, RejectionCode.NOT_FOUND, f"no run {key}")
    if run.status not in LIVE_STATUSES:
        return rejected(index, RejectionCode.RUN_NOT_LIVE, f"run {key} already ended {run.status}")
    why = f"cancelled by {cmd.author}" + (f": {cmd.reason}" if cmd.reason else "")
    return Result(index=index, events=(end_run(state, run, CANCELLED, why),))
