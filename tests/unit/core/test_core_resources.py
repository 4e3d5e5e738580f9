"""Dependency budgets: a run is leased only while every resource it uses has room."""

from __future__ import annotations

from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs, TriggerRun
from scheduler.core.model import SECOND_US, Resource
from scheduler.leader.dispatch import PRIORITY_STEP_US, _Entry
from tests.fakes import T0_US, Core, FakeClock, completion, expiry, lease_ref, run_ref, spec, upsert

DB = Resource("db", max_concurrent=2, max_starts_per_s=3)


def core_with_jobs(count: int, resource: Resource = DB) -> Core:
    core = Core(FakeClock())
    core.lead()
    jobs = tuple(upsert(spec(f"j{i}", uses=(resource.name,))) for i in range(count))
    result = core.apply(ApplyJobs(core.state.now_us, "alice", "", jobs, (), (resource,)))
    assert result.accepted, result
    return core


def trigger_all(core: Core, count: int) -> list[int]:
    instants = []
    for i in range(count):
        result = core.apply(TriggerRun(core.clock.tick(), f"j{i}", "alice", f"t{i}"))
        instants.append(result.events[0].scheduled_us)
    return instants


def test_a_job_cannot_use_an_undeclared_resource():
    core = Core(FakeClock())
    core.lead()
    result = core.apply(ApplyJobs(core.state.now_us, "alice", "", (upsert(spec("a", uses=("nope",))),)))
    assert result.rejection.code == "invalid" and "undeclared" in result.rejection.message


def test_a_rejection_names_the_first_failing_job_in_state_order():
    # The upsert of existing job j0 comes after a new job in the command; the rejection still
    # names j0, the job the full check meets first (replicas must agree on every message).
    core = core_with_jobs(1)
    both = (upsert(spec("new", uses=("nope",))), upsert(spec("j0", uses=("nope",)), expected_version=1))
    result = core.apply(ApplyJobs(core.state.now_us, "alice", "", both))
    assert (
        result.rejection.code == "invalid" and "job 'j0' uses undeclared resources ['nope']" in result.rejection.message
    )


def test_jobs_without_resources_apply_beside_jobs_that_use_them():
    core = core_with_jobs(2)
    result = core.apply(
        ApplyJobs(core.state.now_us, "alice", "", (upsert(spec("plain")), upsert(spec("db2", uses=("db",)))))
    )
    assert result.accepted and {"j0", "j1", "plain", "db2"} <= set(core.state.jobs)


def test_a_resource_in_use_cannot_be_removed():
    core = core_with_jobs(1)
    result = core.apply(ApplyJobs(core.state.now_us, "alice", "", (), (), (), ("db",)))
    assert result.rejection.code == "invalid"
    assert "db" in core.state.resources


def test_concurrency_budget_holds_and_frees_on_completion():
    core = core_with_jobs(3)
    instants = trigger_all(core, 3)
    core.advance(core.clock.tick())
    result = core.grant(*(run_ref(f"j{i}", instants[i]) for i in range(3)))
    granted = [e for e in result.events if isinstance(e, ev.LeaseGranted)]
    refused = [e for e in result.events if isinstance(e, ev.LeaseNotGranted)]
    assert len(granted) == 2 and [e.reason for e in refused] == ["resource_busy:db"]
    assert core.state.resource_leased["db"] == 2
    first = granted[0]
    core.complete(completion(lease_ref(first.job_id, first.scheduled_us, first.fencing_token)))
    assert core.state.resource_leased["db"] == 1
    again = core.grant(run_ref("j2", instants[2]))
    assert isinstance(again.events[0], ev.LeaseGranted)
    assert core.state.resource_leased["db"] == 2


def test_start_rate_budget_counts_starts_within_one_second():
    resource = Resource("api", max_concurrent=0, max_starts_per_s=2)
    core = core_with_jobs(3, resource)
    instants = trigger_all(core, 3)
    at = core.clock.tick()
    core.advance(at)
    result = core.grant(*(run_ref(f"j{i}", instants[i]) for i in range(3)), issued_at_us=at)
    assert [type(e).__name__ for e in result.events] == ["LeaseGranted", "LeaseGranted", "LeaseNotGranted"]
    assert result.events[2].reason == "resource_rate:api"
    # The window is the last second, (now - 1 s, now]: those starts leave it exactly 1 s later.
    assert isinstance(
        core.grant(run_ref("j2", instants[2]), issued_at_us=at + SECOND_US - 1).events[0], ev.LeaseNotGranted
    )
    assert isinstance(core.grant(run_ref("j2", instants[2]), issued_at_us=at + SECOND_US).events[0], ev.LeaseGranted)


def test_an_expired_lease_returns_its_budget():
    core = core_with_jobs(1)
    (instant,) = trigger_all(core, 1)
    granted = core.grant(run_ref("j0", instant), lease_ttl_us=SECOND_US).events[0]
    assert core.state.resource_leased["db"] == 1
    core.expire(expiry(lease_ref("j0", instant, granted.fencing_token)), issued_at_us=granted.lease_expires_us)
    assert core.state.resource_leased["db"] == 0


def test_priority_is_a_head_start_and_waiting_ages_a_low_priority_run():
    urgent_later = _Entry(
        ready_us=T0_US + 10 * SECOND_US, priority=1, arrival=2, target="t", job_id="u", scheduled_us=0
    )
    plain_earlier = _Entry(ready_us=T0_US, priority=0, arrival=1, target="t", job_id="p", scheduled_us=0)
    assert urgent_later.rank_us < plain_earlier.rank_us  # 10 s later, but one priority point ahead
    plain_much_earlier = _Entry(
        ready_us=T0_US - PRIORITY_STEP_US - 1, priority=0, arrival=0, target="t", job_id="o", scheduled_us=0
    )
    assert plain_much_earlier.rank_us < urgent_later.rank_us  # waited long enough: it is not starved
