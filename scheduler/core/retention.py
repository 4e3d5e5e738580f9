"""Run history retention: bounded per job by count and age, failures kept apart and longer.

Pruning is part of applying an entry, so every replica prunes exactly the same runs:
decisions read only replicated state (the job's policy, `state.now_us`, the runs).

A pass over a job's history costs O(its runs), so passes are amortised: after one, the
job is next looked at once it has grown by a slack (a few percent of its caps) or once
replicated time reaches the instant its oldest kept run would outlive its age limit (checked
when the job records a run, and by a sweep every minute of replicated time, so a job that
stopped firing and a deleted job's history age out as well).
Between passes a history may exceed its caps by at most that slack.

Every pruned run key stays accounted for: the job's horizon (the newest pruned scheduled
instant) is kept, and nothing may claim, backfill or trigger a key at or before it, even
after the job is deleted and re-added under the same id.
"""

from __future__ import annotations

import msgspec

from scheduler.core.model import FAILURE_STATUSES, FINAL_STATUSES, SECOND_US, HistoryPolicy, Run
from scheduler.core.state import HistoryMark, State

# Age limits are honoured to this granularity: a pass per job at most this often for age.
AGE_RECHECK_US = 60 * SECOND_US
# How often replicated time sweeps every history for age (a pass only where one is due).
HISTORY_SWEEP_US = 60 * SECOND_US
MIN_SLACK = 16


def slack(policy: HistoryPolicy) -> int:
    """How far a history may grow past its caps before the next pass."""
    return max(MIN_SLACK, (policy.keep_runs + policy.keep_failed_runs) // 32)


def _limits(policy: HistoryPolicy, run: Run) -> tuple[int, int]:
    if run.status in FAILURE_STATUSES:
        return policy.keep_failed_runs, policy.failed_max_age_us
    return policy.keep_runs, policy.max_age_us


def _next_expiry(policy: HistoryPolicy, kept: list[Run]) -> int:
    """The earliest instant the oldest kept final run of either class outlives its age (0: never)."""
    expiries = []
    seen = set()
    for run in kept:
        if run.status not in FINAL_STATUSES:
            continue
        failed = run.status in FAILURE_STATUSES
        if failed not in seen:
            seen.add(failed)
            max_age_us = _limits(policy, run)[1]
            if max_age_us:
                expiries.append(run.scheduled_us + max_age_us + 1)
            if len(seen) == 2:
                break
    return min(expiries, default=0)


def plan_pruning(policy: HistoryPolicy, runs: list[Run], now_us: int) -> tuple[list[Run], list[Run]]:
    """Split a job's history (sorted by scheduled instant) into (kept, pruned). Pure."""
    counts = {True: 0, False: 0}
    keep_flags = []
    for run in reversed(runs):
        if run.status not in FINAL_STATUSES:
            keep_flags.append(True)  # live runs are never pruned
            continue
        failed = run.status in FAILURE_STATUSES
        counts[failed] += 1
        keep, max_age_us = _limits(policy, run)
        young_enough = max_age_us == 0 or now_us - run.scheduled_us <= max_age_us
        keep_flags.append(counts[failed] <= keep and young_enough)
    keep_flags.reverse()
    kept = [run for run, keep in zip(runs, keep_flags) if keep]
    pruned = [run for run, keep in zip(runs, keep_flags) if not keep]
    return kept, pruned


def _policy_of(state: State, job_id: str, mark: HistoryMark | None) -> HistoryPolicy | None:
    job = state.jobs.get(job_id)
    if job is not None:
        return job.body.history
    return mark.policy if mark is not None else None


def _due(state: State, job_id: str, runs: list[Run], mark: HistoryMark | None) -> bool:
    if mark is None:
        return len(runs) > MIN_SLACK
    if len(runs) >= mark.recheck_len:
        return True
    return mark.recheck_us != 0 and state.now_us >= mark.recheck_us


def prune_history(state: State, job_id: str) -> int:
    """Prune one job's history if a pass is due; returns how many runs went."""
    runs = state.runs.get(job_id)
    mark = state.history.get(job_id)
    if not runs or not _due(state, job_id, runs, mark):
        return 0
    policy = _policy_of(state, job_id, mark)
    if policy is None:
        return 0
    kept, pruned = plan_pruning(policy, runs, state.now_us)
    horizon_us = max([mark.horizon_us if mark else 0] + [run.scheduled_us for run in pruned])
    expiry_us = _next_expiry(policy, kept)
    state.history[job_id] = HistoryMark(
        horizon_us=horizon_us,
        recheck_len=len(kept) + slack(policy),
        recheck_us=max(expiry_us, state.now_us + AGE_RECHECK_US) if expiry_us else 0,
        policy=None if job_id in state.jobs else policy,
    )
    if kept:
        state.runs[job_id] = kept
    else:
        del state.runs[job_id]
        state.orphaned_histories.pop(job_id, None)
    state.run_count -= len(pruned)
    return len(pruned)


def forget_job(state: State, job_id: str, policy: HistoryPolicy) -> None:
    """A deleted job's history stays, still bounded by the policy it had."""
    if job_id not in state.runs:
        return
    mark = state.history.get(job_id) or HistoryMark()
    state.history[job_id] = msgspec.structs.replace(mark, policy=policy, recheck_len=0)
    state.orphaned_histories[job_id] = True


def adopt_job(state: State, job_id: str) -> None:
    """A job (re)added under an id: its own policy governs the history from now on."""
    if state.orphaned_histories.pop(job_id, None) is not None:
        mark = state.history[job_id]
        state.history[job_id] = msgspec.structs.replace(mark, policy=None, recheck_len=0)


def sweep_histories(state: State) -> None:
    """At most once per HISTORY_SWEEP_US of replicated time, prune every history whose age limit
    has come due: jobs that stopped recording runs, and deleted jobs' histories, age out too."""
    if state.now_us < state.history_sweep_us:
        return
    state.history_sweep_us = state.now_us + HISTORY_SWEEP_US
    due = [
        job_id
        for job_id, mark in state.history.items()
        if job_id in state.orphaned_histories or (mark.recheck_us and mark.recheck_us <= state.now_us)
    ]
    for job_id in sorted(due):
        prune_history(state, job_id)


def horizon_us(state: State, job_id: str) -> int:
    """The newest pruned scheduled instant of a job (0: nothing pruned)."""
    mark = state.history.get(job_id)
    return mark.horizon_us if mark is not None else 0
