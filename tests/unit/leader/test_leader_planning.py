"""Pure leader helpers: which slots are due (and how each is accounted), which leases are overdue.

`plan_due_slots` and `reaper.overdue` read replicated records and the leader's clock
reading and return what to propose; these tests call them directly at exact instants.
"""

from __future__ import annotations

import random

import pytest

from scheduler.core.commands import LeaseRef, SlotClaim
from scheduler.core.model import MISSED, QUEUED, SECOND_US, SKIPPED, Job, MisfirePolicy
from scheduler.core.results import LeaseStillLive, RunClaimed
from scheduler.leader.planner import plan_due_slots, slot_outcome
from scheduler.leader.reaper import MAX_SLEEP_US, overdue
from scheduler.planning import format_us
from scheduler.planning.jobs import first_due_after, next_slot_after, schedule_for
from scheduler.planning.schedule import Schedule
from tests.fakes import T0_US, Core, FakeClock, claim, expiry, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US
GRACE = 25 * SECOND_US
EVERY_10S = "*/10 * * * * *"


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def make_job(
    next_due_us: int = slot(1),
    policy: str = "fire_late",
    grace_us: int = GRACE,
    max_catch_up: int = 10,
    schedule: str = EVERY_10S,
    version: int = 3,
    **fields,
) -> Job:
    job_spec = spec("a", schedule, misfire=MisfirePolicy(policy, grace_us, max_catch_up), **fields)
    return Job.of(job_spec, version=version, author="t", updated_us=T0_US, cursor_us=T0_US, next_due_us=next_due_us)


def chained(job: Job, claims: list[SlotClaim]) -> Job:
    """The job record after these claims committed: the cursor and next due they carried."""
    last = claims[-1]
    return Job.of(
        job.spec,
        version=job.version,
        author=job.author,
        updated_us=job.updated_us,
        cursor_us=last.scheduled_us,
        next_due_us=last.next_due_us,
    )


# -- plan_due_slots: chaining ----------------------------------------------------------


def test_nothing_is_due_one_microsecond_before_the_next_slot() -> None:
    assert plan_due_slots(make_job(), slot(1) - 1, 100) == []


def test_the_next_slot_is_due_exactly_at_its_instant() -> None:
    # Not spread (no herd window): the run becomes due at its nominal instant.
    assert plan_due_slots(make_job(), slot(1), 100) == [SlotClaim("a", slot(1), slot(2), 3, QUEUED, "", slot(1))]


def test_due_slots_chain_next_due_exactly() -> None:
    claims = plan_due_slots(make_job(grace_us=3600 * SECOND_US), slot(5) + 9 * SECOND_US, 100)
    assert [c.scheduled_us for c in claims] == [slot(k) for k in range(1, 6)]
    assert [c.next_due_us for c in claims] == [slot(k) for k in range(2, 7)]
    assert all(c.spec_version == 3 and c.status == QUEUED and c.reason == "" for c in claims)
    # Each claim names the slot after it; the next claim starts there.
    assert all(a.next_due_us == b.scheduled_us for a, b in zip(claims, claims[1:]))


def test_max_slots_caps_a_pass_and_the_next_pass_resumes_exactly() -> None:
    now = slot(7)
    whole = plan_due_slots(make_job(grace_us=10 * TEN_S), now, 100)
    first = plan_due_slots(make_job(grace_us=10 * TEN_S), now, 3)
    assert first == whole[:3]
    second = plan_due_slots(chained(make_job(grace_us=10 * TEN_S), first), now, 3)
    third = plan_due_slots(chained(make_job(grace_us=10 * TEN_S), second), now, 3)
    assert first + second + third == whole and len(third) == 1
    assert plan_due_slots(chained(make_job(), third), now, 3) == []


@pytest.mark.parametrize(("next_due_us", "max_slots"), [(0, 100), (slot(1), 0)])
def test_nothing_is_planned_without_a_next_slot_or_room(next_due_us: int, max_slots: int) -> None:
    assert plan_due_slots(make_job(next_due_us=next_due_us), slot(9), max_slots) == []


def test_chaining_follows_the_dst_rule_of_the_zone() -> None:
    # 02:30 New York: the 2024-03-10 slot falls in the spring-forward gap and fires at 03:00 EDT.
    # 07:30Z (EST), 07:30Z (EST), 07:00Z (03:00 EDT, the gap's end), 06:30Z (EDT), 06:30Z (EDT).
    fires = [1_709_883_000, 1_709_969_400, 1_710_054_000, 1_710_138_600, 1_710_225_000]
    fires_us = [f * SECOND_US for f in fires]
    job = make_job(
        next_due_us=fires_us[0], schedule="30 2 * * *", timezone="America/New_York", grace_us=7 * 86_400 * SECOND_US
    )
    claims = plan_due_slots(job, fires_us[3], 100)
    assert [(c.scheduled_us, c.next_due_us) for c in claims] == list(zip(fires_us[:4], fires_us[1:]))
    assert first_due_after(job.spec, fires_us[0] - 1) == fires_us[0]
    assert schedule_for(job.spec) is schedule_for(make_job(schedule="30 2 * * *", timezone="America/New_York").spec)


# -- plan_due_slots: misfire policies at the grace boundary ------------------------------


@pytest.mark.parametrize("policy", ["fire_late", "skip", "catch_up"])
def test_a_slot_exactly_at_the_grace_is_on_time(policy: str) -> None:
    claims = plan_due_slots(make_job(policy=policy), slot(1) + GRACE, 100)
    assert [(c.scheduled_us, c.status, c.reason) for c in claims] == [(slot(k), QUEUED, "") for k in (1, 2, 3)]


@pytest.mark.parametrize(
    ("policy", "status", "reason_end"),
    [
        (
            "fire_late",
            MISSED,
            f"; the scheduler was not firing between {format_us(T0_US)} and {format_us(slot(1) + GRACE + 1)}",
        ),
        ("skip", SKIPPED, "; policy skip"),
        ("catch_up", QUEUED, ""),
    ],
)
def test_one_microsecond_past_the_grace_applies_the_policy(policy: str, status: str, reason_end: str) -> None:
    claims = plan_due_slots(make_job(policy=policy), slot(1) + GRACE + 1, 100)
    assert [(c.scheduled_us, c.status) for c in claims] == [(slot(1), status), (slot(2), QUEUED), (slot(3), QUEUED)]
    assert claims[0].reason.endswith(reason_end)
    if status != QUEUED:
        assert claims[0].reason.startswith("found 25") and "beyond the 25s grace" in claims[0].reason


@pytest.mark.parametrize(
    ("policy", "status", "reason"),
    [
        ("fire_late", MISSED, "found 30s late, beyond the 25s grace; the scheduler was not firing between {outage}"),
        ("skip", SKIPPED, "found 30s late, beyond the 25s grace; policy skip"),
        ("catch_up", QUEUED, ""),
    ],
)
def test_late_slot_reasons(policy: str, status: str, reason: str) -> None:
    job = make_job(policy=policy)
    now = slot(1) + 30 * SECOND_US
    expected = reason.format(outage=f"{format_us(T0_US)} and {format_us(now)}")  # the outage: cursor to now
    assert slot_outcome(job, schedule_for(job.spec), slot(1), now) == (status, expected)


def test_a_catch_up_slot_older_than_the_cap_is_missed_with_its_reason() -> None:
    job = make_job(policy="catch_up", max_catch_up=2)
    schedule = schedule_for(job.spec)
    # At slot(4) + 30 s, slots 1..4 are late: 2 and 3 follow slot(1), 4 is the most recent.
    now = slot(4) + 30 * SECOND_US
    assert slot_outcome(job, schedule, slot(1), now) == (
        MISSED,
        "found 60s late, beyond the 25s grace; older than the 2 most recent late slots caught up",
    )
    assert slot_outcome(job, schedule, slot(2), now)[0] == MISSED
    assert slot_outcome(job, schedule, slot(3), now) == (QUEUED, "")
    assert slot_outcome(job, schedule, slot(4), now) == (QUEUED, "")


def test_catch_up_fires_the_most_recent_late_slots_up_to_the_cap_and_records_older_ones_missed() -> None:
    claims = plan_due_slots(make_job(policy="catch_up", max_catch_up=2), slot(10), 100)
    statuses = [(k, c.status) for k, c in zip(range(1, 11), claims)]
    # slots 1..7 are 90..30 s late (beyond the 25 s grace); 8..10 are within it.
    missed, fired = [(k, MISSED) for k in range(1, 6)], [(6, QUEUED), (7, QUEUED)]
    assert statuses == missed + fired + [(k, QUEUED) for k in (8, 9, 10)]
    assert [c.reason for c in claims[:5]] == [
        f"found {late}s late, beyond the 25s grace; older than the 2 most recent late slots caught up"
        for late in (90, 80, 70, 60, 50)
    ]
    assert all(c.reason == "" for c in claims if c.status == QUEUED)


def test_a_slot_exactly_at_the_grace_is_not_one_of_the_late_slots_caught_up() -> None:
    # At slot(7) + 25 s, slot(7) is on time (exactly at the grace): the late slots are 1..6.
    claims = plan_due_slots(make_job(policy="catch_up", max_catch_up=1), slot(7) + GRACE, 100)
    assert [c.status for c in claims] == [MISSED] * 5 + [QUEUED, QUEUED, QUEUED, QUEUED]
    assert [c.scheduled_us for c in claims] == [slot(k) for k in range(1, 10)]


def test_catch_up_with_a_cap_of_zero_fires_no_late_slot() -> None:
    claims = plan_due_slots(make_job(policy="catch_up", max_catch_up=0), slot(4), 100)
    assert [c.status for c in claims] == [MISSED, QUEUED, QUEUED, QUEUED]


def test_with_zero_grace_only_the_slot_at_now_is_on_time() -> None:
    claims = plan_due_slots(make_job(policy="skip", grace_us=0), slot(3), 100)
    assert [c.status for c in claims] == [SKIPPED, SKIPPED, QUEUED]


def test_the_catch_up_cap_holds_across_passes_of_one_outage() -> None:
    # An outage longer than one pass plans (max_slots): the passes together decide as one pass.
    now = slot(20)
    job = make_job(policy="catch_up", max_catch_up=2)
    planned: list[SlotClaim] = []
    while True:
        claims = plan_due_slots(job, now, 3)
        if not claims:
            break
        planned += claims
        job = chained(job, claims)
    assert planned == plan_due_slots(make_job(policy="catch_up", max_catch_up=2), now, 100)
    fired_late = [c.scheduled_us for c in planned if c.status == QUEUED and now - c.scheduled_us > GRACE]
    # slots 1..17 are late (slot 18 is 20 s old): the two most recent of them fire.
    assert fired_late == [slot(16), slot(17)]
    assert [c.status for c in planned[:15]] == [MISSED] * 15


def test_planned_claims_are_accepted_by_the_core_and_nothing_is_planned_twice() -> None:
    core = Core(FakeClock())
    core.lead()
    core.apply_jobs((upsert(spec("a", misfire=MisfirePolicy("catch_up", GRACE, 2)), next_due_us=slot(1)),))
    now = slot(10)
    claims = plan_due_slots(core.state.jobs["a"], now, 100)
    result = core.claim_runs(*claims, issued_at_us=now)
    assert result.events == tuple(RunClaimed("a", c.scheduled_us, c.status, core.index) for c in claims)
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(10), slot(11))
    assert plan_due_slots(job, now, 100) == []
    assert [r.status for r in core.state.runs["a"]] == [c.status for c in claims]


# -- plan_due_slots: a herd shares its schedule's answers --------------------------------


def test_a_herd_computes_its_schedules_next_slot_once_and_plans_it_for_every_job(monkeypatch) -> None:
    """1,000 jobs due at one instant on one schedule: one next-slot computation, not 1,000."""
    computed: list[int] = []
    real_next_fire = Schedule.next_fire

    def counting_next_fire(self, after_us):
        computed.append(after_us)
        return real_next_fire(self, after_us)

    monkeypatch.setattr(Schedule, "next_fire", counting_next_fire)
    next_slot_after.cache_clear()
    herd = [
        Job.of(
            spec(f"herd-{i:04d}", "0 0 * * *"),
            version=1,
            author="t",
            updated_us=T0_US,
            cursor_us=T0_US,
            next_due_us=slot(1),
        )
        for i in range(1000)
    ]
    claims = [c for job in herd for c in plan_due_slots(job, slot(1), 10)]
    expected_next_us = real_next_fire(schedule_for(herd[0].spec), slot(1)).at_us
    assert [c.job_id for c in claims] == [job.id for job in herd]
    assert {c.next_due_us for c in claims} == {expected_next_us}
    assert computed == [slot(1)]


def test_the_shared_next_slot_differs_by_schedule_and_instant() -> None:
    daily, hourly = schedule_for(spec("d", "0 0 * * *")), schedule_for(spec("h", "0 * * * *"))
    for schedule in (daily, hourly):
        for after_us in (slot(1), slot(1) + 3600 * SECOND_US, slot(1) + 86400 * SECOND_US):
            fire = schedule.next_fire(after_us)
            assert next_slot_after(schedule, after_us) == (fire.at_us if fire else 0)
    assert next_slot_after(daily, slot(1)) != next_slot_after(hourly, slot(1))


# -- reaper.overdue --------------------------------------------------------------------

G = slot(1) + 1  # when the leases below are granted
A_TTL, B_TTL = 30 * SECOND_US, 60 * SECOND_US
A_TIMEOUT, B_TIMEOUT = 120 * SECOND_US, 45 * SECOND_US


@pytest.fixture
def leased() -> tuple[Core, dict[str, LeaseRef]]:
    """a: lease until G+30s, deadline G+120s; b: lease until G+60s, deadline G+45s; c: queued."""
    core = Core(FakeClock())
    core.lead()
    core.apply_jobs(
        (
            upsert(spec("a", timeout_us=A_TIMEOUT), next_due_us=slot(1)),
            upsert(spec("b", timeout_us=B_TIMEOUT), next_due_us=slot(1)),
            upsert(spec("c"), next_due_us=slot(1)),
        )
    )
    core.claim_runs(*(claim(job, slot(1), slot(2)) for job in "abc"), issued_at_us=slot(1))
    leases = {}
    for job, ttl in (("a", A_TTL), ("b", B_TTL)):
        event = core.grant(run_ref(job, slot(1)), lease_ttl_us=ttl, issued_at_us=G).events[0]
        leases[job] = lease_ref(job, slot(1), event.fencing_token)
    return core, leases


def _due(expiries) -> list[tuple[str, int, str]]:
    return sorted((e.lease.job_id, e.lease.fencing_token, e.reason) for e in expiries)


def test_nothing_is_overdue_right_after_the_grant_and_the_reaper_sleeps_at_most_max_sleep(leased) -> None:
    core, _ = leased
    assert overdue(core.state, G) == ([], G + MAX_SLEEP_US)


def test_a_lease_is_overdue_exactly_at_its_expiry(leased) -> None:
    core, leases = leased
    a = leases["a"]
    assert overdue(core.state, G + A_TTL - 1) == ([], G + A_TTL)
    expiries, next_due = overdue(core.state, G + A_TTL)
    assert _due(expiries) == [("a", a.fencing_token, "lease_expired")]
    assert expiries[0].lease == a
    assert next_due == G + A_TTL + MAX_SLEEP_US  # b's deadline (G+45s) is further than one sleep


def test_a_deadline_is_overdue_exactly_at_its_instant_though_the_lease_is_live(leased) -> None:
    core, leases = leased
    expiries, next_due = overdue(core.state, G + B_TIMEOUT - 1)
    assert _due(expiries) == [("a", leases["a"].fencing_token, "lease_expired")]
    assert next_due == G + B_TIMEOUT
    expiries, _ = overdue(core.state, G + B_TIMEOUT)
    assert _due(expiries) == [
        ("a", leases["a"].fencing_token, "lease_expired"),
        ("b", leases["b"].fencing_token, "timed_out"),
    ]


def test_a_passed_deadline_wins_over_a_passed_lease(leased) -> None:
    core, leases = leased
    expiries, _ = overdue(core.state, G + A_TIMEOUT)
    assert _due(expiries) == [
        ("a", leases["a"].fencing_token, "timed_out"),
        ("b", leases["b"].fencing_token, "timed_out"),
    ]


def test_heartbeats_move_the_lease_but_not_the_deadline(leased) -> None:
    core, leases = leased
    a = leases["a"]
    core.extend(a, issued_at_us=G + A_TIMEOUT - 10 * SECOND_US)  # lease now well past the deadline
    core.expire(expiry(leases["b"], "timed_out"), issued_at_us=G + A_TIMEOUT - 10 * SECOND_US)
    assert overdue(core.state, G + A_TIMEOUT - 1) == ([], G + A_TIMEOUT)
    expiries, _ = overdue(core.state, G + A_TIMEOUT)
    assert _due(expiries) == [("a", a.fencing_token, "timed_out")]


def test_queued_and_ended_runs_are_never_overdue(leased) -> None:
    core, leases = leased
    core.apply_jobs(removals=("a", "b"), issued_at_us=G + 1)
    assert overdue(core.state, G + 10 * A_TIMEOUT) == ([], G + 10 * A_TIMEOUT + MAX_SLEEP_US)
    assert core.state.live_runs == {"c": [slot(1)]}


def test_the_next_due_instant_is_the_earliest_live_lease_or_deadline(leased) -> None:
    core, _ = leased
    for now, expected in [
        (G + A_TTL - MAX_SLEEP_US, G + A_TTL),
        (G + A_TTL - MAX_SLEEP_US - 1, G + A_TTL - 1),
        (G + B_TIMEOUT - 1, G + B_TIMEOUT),
    ]:
        assert overdue(core.state, now)[1] == expected


def test_overdue_expiries_carry_a_jitter_draw_in_range(leased) -> None:
    core, _ = leased
    random.seed(7)
    expiries, _ = overdue(core.state, G + A_TIMEOUT)
    assert expiries and all(0 <= e.jitter_ppm < 1_000_000 for e in expiries)


@pytest.mark.parametrize("offset_us", [-1, 0, 1])
@pytest.mark.parametrize("instant", ["a_lease", "b_deadline", "a_deadline"])
def test_the_core_agrees_with_the_reaper_at_every_boundary(leased, instant: str, offset_us: int) -> None:
    core, leases = leased
    now = {"a_lease": G + A_TTL, "b_deadline": G + B_TIMEOUT, "a_deadline": G + A_TIMEOUT}[instant] + offset_us
    expiries, _ = overdue(core.state, now)
    chosen = {e.lease.job_id for e in expiries}
    result = core.expire(*expiries, issued_at_us=now)
    assert result.accepted
    assert not any(isinstance(e, LeaseStillLive) for e in result.events)
    # What the reaper did not choose, the core would refuse as still live.
    for job in sorted(set(leases) - chosen):
        for reason in ("lease_expired", "timed_out"):
            assert core.expire(expiry(leases[job], reason), issued_at_us=now).events == (
                LeaseStillLive(job, slot(1), leases[job].fencing_token),
            )
