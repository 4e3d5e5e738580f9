"""Bugs planted in the core, to show the simulation finds them: each is a context manager
that patches one core function the way a plausible regression would break it."""

from __future__ import annotations

import contextlib
import importlib
from unittest import mock

import msgspec

from scheduler.core import claims, deadlines, dependencies, execution, retry
from scheduler.core.alerts import note_failure
from scheduler.core.commands import LeaseRef
from scheduler.core.model import FailureStreak


@contextlib.contextmanager
def completions_ignore_the_token():
    """CompleteRuns accepts a completion whatever token it carries (the holder's check forgotten)."""
    original = execution._complete_one

    def planted(state, item):
        run = state.get_run(item.lease.job_id, item.lease.scheduled_us)
        if run is not None:
            item = msgspec.structs.replace(item, lease=LeaseRef(run.job_id, run.scheduled_us, run.fencing_token))
        return original(state, item)

    with mock.patch.object(execution, "_complete_one", planted):
        yield


@contextlib.contextmanager
def grants_ignore_a_live_lease():
    """GrantLeases grants a run that is already leased (as if it were still queued)."""
    original = execution._grant_one

    def planted(state, ref, cmd, index, *rest):
        run = state.get_run(ref.job_id, ref.scheduled_us)
        if run is not None and run.status == "leased":
            state.set_status(run, "queued")
        return original(state, ref, cmd, index, *rest)

    with mock.patch.object(execution, "_grant_one", planted):
        yield


@contextlib.contextmanager
def expiries_trust_the_proposer():
    """ExpireLeases ends a lease when asked, without judging expiry in replicated time."""
    original = execution._expire_one

    def planted(state, expiry):
        run = state.get_run(expiry.lease.job_id, expiry.lease.scheduled_us)
        if run is not None and run.status == "leased" and run.fencing_token == expiry.lease.fencing_token:
            saved = run.lease_expires_us, run.deadline_us
            run.lease_expires_us = run.deadline_us = min(run.lease_expires_us, state.now_us)
            event = original(state, expiry)
            if run.attempts and run.attempts[-1].outcome == "":  # not ended after all: put it back
                run.lease_expires_us, run.deadline_us = saved
            return event
        return original(state, expiry)

    with mock.patch.object(execution, "_expire_one", planted):
        yield


@contextlib.contextmanager
def grants_ignore_the_budget():
    """GrantLeases never finds a dependency budget full."""
    with mock.patch.object(execution, "_resource_without_room", lambda state, uses: ""):
        yield


@contextlib.contextmanager
def children_run_after_a_failed_parent():
    """A child's slot is queued once its parents' runs ended, whether or not they succeeded."""
    original = dependencies.parent_decision

    def planted(parent_runs):
        decision = original(parent_runs)
        return ("queued", "") if decision is not None else None

    with mock.patch.object(dependencies, "parent_decision", planted):
        yield


@contextlib.contextmanager
def children_wait_for_a_failed_parent_forever():
    """A parent's failure decides nothing: the child's slot is never claimed (it vanishes)."""
    original = dependencies.parent_decision

    def planted(parent_runs):
        decision = original(parent_runs)
        return None if decision is not None and decision[0] == "skipped" else decision

    with mock.patch.object(dependencies, "parent_decision", planted):
        yield


@contextlib.contextmanager
def deadline_alerts_for_runs_that_succeeded():
    """The deadline check forgets that a succeeded run met its deadline (only cancelled ones are spared)."""
    with mock.patch.object(deadlines, "SUCCEEDED", "no status is this"):
        yield


@contextlib.contextmanager
def deadlines_never_checked():
    """Replicated time moves, and the heap of deadlines is never looked at."""
    with mock.patch.object(importlib.import_module("scheduler.core.apply"), "check_deadlines", lambda state: None):
        yield


@contextlib.contextmanager
def deadlines_count_from_the_nominal_slot():
    """A deadline counts from the slot, not from its release (the slot plus its spread)."""
    original = claims.watch_deadline

    def planted(state, job, scheduled_us, owed_us):
        original(state, job, scheduled_us, scheduled_us)

    with mock.patch.object(claims, "watch_deadline", planted):
        yield


@contextlib.contextmanager
def cancelled_runs_accept_their_lease():
    """A cancelled run's lease is not fenced: the holder's heartbeats and late completion count."""
    original = execution._current_lease

    def planted(state, lease):
        run = state.get_run(lease.job_id, lease.scheduled_us)
        if run is not None and run.status == "cancelled" and run.fencing_token == lease.fencing_token:
            return run, None
        return original(state, lease)

    with mock.patch.object(execution, "_current_lease", planted):
        yield


@contextlib.contextmanager
def final_failures_are_retried():
    """`final` and `retry.final_exit_codes` are forgotten: a final failure is retried by policy."""
    original = execution._complete_one

    def planted(state, item):
        return original(state, msgspec.structs.replace(item, final=msgspec.UNSET, exit_code=0))

    with mock.patch.object(execution, "_complete_one", planted):
        yield


@contextlib.contextmanager
def pause_one_failure_late():
    """A failing streak's first run is not counted: `pause_after_failures: N` pauses at N + 1."""

    def planted(state, job_id, scheduled_us):
        fresh = state.failure_streaks is msgspec.UNSET or job_id not in state.failure_streaks
        note_failure(state, job_id, scheduled_us)
        if fresh and state.failure_streaks is not msgspec.UNSET and job_id in state.failure_streaks:
            state.failure_streaks[job_id] = FailureStreak(scheduled_us, 0)

    with mock.patch.object(retry, "note_failure", planted):
        yield


@contextlib.contextmanager
def runs_own_overlap_ignored_at_grant():
    """A trigger's or backfill's own overlap is kept on the run but the grant reads the job's."""
    with mock.patch.object(execution, "run_overlap", lambda run, spec: spec.overlap):
        yield


PLANTED = {
    "completions_ignore_the_token": completions_ignore_the_token,
    "grants_ignore_a_live_lease": grants_ignore_a_live_lease,
    "expiries_trust_the_proposer": expiries_trust_the_proposer,
    "grants_ignore_the_budget": grants_ignore_the_budget,
    "children_run_after_a_failed_parent": children_run_after_a_failed_parent,
    "children_wait_for_a_failed_parent_forever": children_wait_for_a_failed_parent_forever,
    "deadline_alerts_for_runs_that_succeeded": deadline_alerts_for_runs_that_succeeded,
    "deadlines_never_checked": deadlines_never_checked,
    "deadlines_count_from_the_nominal_slot": deadlines_count_from_the_nominal_slot,
    "cancelled_runs_accept_their_lease": cancelled_runs_accept_their_lease,
    "final_failures_are_retried": final_failures_are_retried,
    "pause_one_failure_late": pause_one_failure_late,
    "runs_own_overlap_ignored_at_grant": runs_own_overlap_ignored_at_grant,
}
