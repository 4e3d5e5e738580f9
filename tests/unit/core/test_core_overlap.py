"""Overlap policies: what a job's new slot does while an earlier run of the job is live.

forbid skips the new slot (with a reason), replace cancels the live run (fencing its
lease), queue claims the new run but leases one run of the job at a time, allow runs both.
The policy is decided when the slot is claimed (and, for queue, again when leasing).
"""

from __future__ import annotations

import pytest

from scheduler.core.model import CANCELLED, LEASED, QUEUED, SECOND_US, SKIPPED, SUCCEEDED, RetryPolicy
from scheduler.core.results import (
    LeaseFenced,
    LeaseGranted,
    LeaseNotGranted,
    RunClaimed,
    RunRetryScheduled,
    RunSucceeded,
)
from tests.fakes import T0_US, Core, FakeClock, claim, completion, expiry, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US
TTL = 30 * SECOND_US
RETRY = RetryPolicy(max_attempts=3, backoff_initial_us=TEN_S)


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def job_core(overlap: str) -> Core:
    """Epoch 1; job `a` with the given overlap policy, its next slot is slot(1)."""
    core = Core(FakeClock())
    core.lead()
    core.apply_jobs((upsert(spec("a", overlap=overlap, retry=RETRY), next_due_us=slot(1)),))
    return core


def claim_slot(core: Core, k: int, version: int = 1) -> RunClaimed:
    result = core.claim_runs(claim("a", slot(k), slot(k + 1), spec_version=version), issued_at_us=slot(k))
    assert result.accepted and len(result.events) == 1
    return result.events[0]


def lease_slot(core: Core, k: int, at_us: int | None = None):
    at = slot(k) + 1 if at_us is None else at_us
    event = core.grant(run_ref("a", slot(k)), issued_at_us=max(at, core.state.now_us)).events[0]
    assert type(event) is LeaseGranted, event
    return lease_ref("a", slot(k), event.fencing_token)


def status(core: Core, k: int) -> str:
    return core.state.get_run("a", slot(k)).status


# -- forbid ------------------------------------------------------------------------------


def test_forbid_skips_the_slot_with_a_reason_while_a_run_is_leased() -> None:
    core = job_core("forbid")
    claim_slot(core, 1)
    lease_slot(core, 1)
    event = claim_slot(core, 2)
    assert event == RunClaimed("a", slot(2), SKIPPED, core.index)
    skipped = core.state.get_run("a", slot(2))
    assert skipped.reason == f"overlap forbid: run a@{slot(1)} still live"
    assert skipped.attempts == () and skipped.fencing_token == 0
    # The slot is accounted for: the cursor moves on, only the first run stays live.
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us, job.last_status) == (slot(2), slot(3), SKIPPED)
    assert core.state.live_runs == {"a": [slot(1)]}
    assert core.grant(run_ref("a", slot(2))).events == (LeaseNotGranted("a", slot(2), "not_queued"),)


def test_forbid_also_skips_while_the_earlier_run_is_only_queued() -> None:
    core = job_core("forbid")
    claim_slot(core, 1)
    assert claim_slot(core, 2).status == SKIPPED


def test_forbid_also_skips_while_the_earlier_run_waits_for_a_retry() -> None:
    core = job_core("forbid")
    claim_slot(core, 1)
    lease = lease_slot(core, 1)
    assert type(core.complete(completion(lease, "failure")).events[0]) is RunRetryScheduled
    assert status(core, 1) == QUEUED
    assert claim_slot(core, 2).status == SKIPPED


def test_forbid_skips_a_later_slot_in_the_same_batch() -> None:
    core = job_core("forbid")
    result = core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(2), slot(3)), issued_at_us=slot(2))
    assert [(e.scheduled_us, e.status) for e in result.events] == [(slot(1), QUEUED), (slot(2), SKIPPED)]


def test_forbid_queues_again_once_the_earlier_run_has_ended() -> None:
    core = job_core("forbid")
    claim_slot(core, 1)
    lease = lease_slot(core, 1)
    assert claim_slot(core, 2).status == SKIPPED
    core.complete(completion(lease, "success"), issued_at_us=slot(2) + 5)
    assert claim_slot(core, 3) == RunClaimed("a", slot(3), QUEUED, core.index)
    assert core.state.live_runs == {"a": [slot(3)]}


# -- replace -----------------------------------------------------------------------------


def test_replace_cancels_the_live_run_and_fences_its_lease() -> None:
    core = job_core("replace")
    claim_slot(core, 1)
    lease = lease_slot(core, 1)
    event = claim_slot(core, 2)
    assert event == RunClaimed("a", slot(2), QUEUED, core.index)
    replaced = core.state.get_run("a", slot(1))
    assert (replaced.status, replaced.reason) == (CANCELLED, f"replaced by the run of {slot(2)}")
    assert (replaced.finished_us, replaced.lease_expires_us) == (slot(2), 0)
    assert core.state.live_runs == {"a": [slot(2)]}
    assert core.state.jobs["a"].last_status == QUEUED
    # The old holder's heartbeat, completion and expiry all answer "cancelled".
    fenced = LeaseFenced("a", slot(1), lease.fencing_token, "cancelled")
    assert core.extend(lease, issued_at_us=slot(2) + 1).events == (fenced,)
    assert core.complete(completion(lease, "success"), issued_at_us=slot(2) + 2).events == (fenced,)
    assert core.expire(expiry(lease), issued_at_us=slot(2) + 2 * TTL).events == (fenced,)
    assert status(core, 1) == CANCELLED
    # The new run is leased normally, with a larger token.
    new = lease_slot(core, 2, slot(2) + 2 * TTL)
    assert new.fencing_token > lease.fencing_token and status(core, 2) == LEASED


def test_replace_cancels_a_queued_run_that_never_started() -> None:
    core = job_core("replace")
    claim_slot(core, 1)
    claim_slot(core, 2)
    assert (status(core, 1), status(core, 2)) == (CANCELLED, QUEUED)
    assert core.grant(run_ref("a", slot(1))).events == (LeaseNotGranted("a", slot(1), "not_queued"),)


def test_replace_within_one_batch_leaves_only_the_last_slot_live() -> None:
    core = job_core("replace")
    result = core.claim_runs(*(claim("a", slot(k), slot(k + 1)) for k in (1, 2, 3)), issued_at_us=slot(3))
    assert [e.status for e in result.events] == [QUEUED, QUEUED, QUEUED]
    assert [status(core, k) for k in (1, 2, 3)] == [CANCELLED, CANCELLED, QUEUED]
    assert core.state.live_runs == {"a": [slot(3)]}


# -- queue -------------------------------------------------------------------------------


def test_queue_claims_the_next_run_but_leases_it_only_after_the_first_ends() -> None:
    core = job_core("queue")
    claim_slot(core, 1)
    first = lease_slot(core, 1)
    assert claim_slot(core, 2) == RunClaimed("a", slot(2), QUEUED, core.index)
    waiting = core.grant(run_ref("a", slot(2)), issued_at_us=slot(2) + 1)
    assert waiting.events == (LeaseNotGranted("a", slot(2), "overlap_queue"),)
    second = core.state.get_run("a", slot(2))
    assert (second.status, second.attempt, second.attempts) == (QUEUED, 0, ())
    done = core.complete(completion(first, "success"), issued_at_us=slot(2) + 2)
    assert done.events == (RunSucceeded("a", slot(1), 1),)
    granted = core.grant(run_ref("a", slot(2)), issued_at_us=slot(2) + 3)
    at = slot(2) + 3
    assert granted.events == (LeaseGranted("a", slot(2), core.index, 1, at + TTL, at + 3600 * SECOND_US),)


def test_queue_grants_one_run_per_job_in_one_batch() -> None:
    core = job_core("queue")
    core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(2), slot(3)), issued_at_us=slot(2))
    result = core.grant(run_ref("a", slot(1)), run_ref("a", slot(2)), issued_at_us=slot(2) + 1)
    assert type(result.events[0]) is LeaseGranted
    assert result.events[1] == LeaseNotGranted("a", slot(2), "overlap_queue")
    assert (status(core, 1), status(core, 2)) == (LEASED, QUEUED)


def test_queue_is_per_job() -> None:
    core = job_core("queue")
    core.apply_jobs((upsert(spec("b", overlap="queue"), next_due_us=slot(1)),))
    core.claim_runs(claim("a", slot(1), slot(2)), claim("b", slot(1), slot(2)), issued_at_us=slot(1))
    result = core.grant(run_ref("a", slot(1)), run_ref("b", slot(1)), issued_at_us=slot(1) + 1)
    assert [type(e) for e in result.events] == [LeaseGranted, LeaseGranted]


def test_queue_limits_concurrency_not_order() -> None:
    """Documents today's rule: while the first run waits for its retry (queued, not leased), the
    second run may be leased; the first then waits for it. One lease per job at a time holds."""
    core = job_core("queue")
    claim_slot(core, 1)
    first = lease_slot(core, 1)
    claim_slot(core, 2)
    retry = core.expire(expiry(first), issued_at_us=slot(1) + 1 + TTL).events[0]
    assert type(retry) is RunRetryScheduled
    assert type(core.grant(run_ref("a", slot(2)), issued_at_us=slot(1) + 2 + TTL).events[0]) is LeaseGranted
    late = core.grant(run_ref("a", slot(1)), issued_at_us=retry.not_before_us)
    assert late.events == (LeaseNotGranted("a", slot(1), "overlap_queue"),)
    assert sum(run.status == LEASED for run in core.state.runs["a"]) == 1


def test_queue_releases_the_next_run_when_the_first_is_cancelled_by_expiry_exhaustion() -> None:
    core = Core(FakeClock())
    core.lead()
    core.apply_jobs((upsert(spec("a", overlap="queue", retry=RetryPolicy(max_attempts=1)), next_due_us=slot(1)),))
    claim_slot(core, 1)
    first = lease_slot(core, 1)
    claim_slot(core, 2)
    core.expire(expiry(first, "timed_out"), issued_at_us=slot(1) + 1 + 3600 * SECOND_US)
    assert status(core, 1) == "timed_out"
    assert type(core.grant(run_ref("a", slot(2))).events[0]) is LeaseGranted


# -- allow -------------------------------------------------------------------------------


def test_allow_runs_overlapping_slots_concurrently_with_distinct_tokens() -> None:
    core = job_core("allow")
    claim_slot(core, 1)
    first = lease_slot(core, 1)
    assert claim_slot(core, 2).status == QUEUED
    second = lease_slot(core, 2)
    assert (status(core, 1), status(core, 2)) == (LEASED, LEASED)
    assert second.fencing_token > first.fencing_token
    assert core.state.live_runs == {"a": [slot(1), slot(2)]}
    assert core.complete(completion(second, "success")).events == (RunSucceeded("a", slot(2), 1),)
    assert (status(core, 1), status(core, 2)) == (LEASED, SUCCEEDED)


# -- the policy in force is the one at claim time ----------------------------------------


@pytest.mark.parametrize(
    ("old_policy", "new_policy", "expected_new", "expected_old"),
    [
        ("allow", "forbid", SKIPPED, LEASED),
        ("forbid", "allow", QUEUED, LEASED),
        ("allow", "queue", QUEUED, LEASED),
        ("allow", "replace", QUEUED, CANCELLED),
    ],
)
def test_changing_the_policy_applies_to_the_next_claim(
    old_policy: str, new_policy: str, expected_new: str, expected_old: str
) -> None:
    core = job_core(old_policy)
    claim_slot(core, 1)
    lease_slot(core, 1)
    changed = core.apply_jobs(
        (upsert(spec("a", overlap=new_policy, retry=RETRY), expected_version=1),), issued_at_us=slot(1) + 2
    )
    assert changed.accepted and core.state.jobs["a"].version == 2
    # Changing the policy alone touches no live run ...
    assert status(core, 1) == LEASED
    # ... the next claim is decided by the policy now in force.
    assert claim_slot(core, 2, version=2).status == expected_new
    assert status(core, 1) == expected_old


def test_a_paused_job_skips_before_any_overlap_policy() -> None:
    core = job_core("replace")
    claim_slot(core, 1)
    lease_slot(core, 1)
    core.pause("a")
    event = claim_slot(core, 2)
    assert event.status == SKIPPED and core.state.get_run("a", slot(2)).reason == "paused"
    # Pausing does not replace (cancel) the run already leased.
    assert status(core, 1) == LEASED
