"""Bugs planted in the core, to show the simulation finds them: each is a context manager
that patches one core function the way a plausible regression would break it."""

from __future__ import annotations

import contextlib
import importlib
from unittest import mock

import msgspec

from scheduler.core import claims, deadlines, dependencies, execution
from scheduler.core.commands import LeaseRef


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
}
