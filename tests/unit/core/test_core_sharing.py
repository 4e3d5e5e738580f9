"""Equal values of many jobs are shared, not copied, and sharing changes no value or digest."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from scheduler.core import CodecError, sharing, state_digest
from scheduler.core.codec import decode_command, decode_snapshot, encode_command, encode_snapshot
from scheduler.core.commands import ApplyJobs, ClaimRuns
from scheduler.core.model import QUEUED, HistoryPolicy, RetryPolicy
from tests.fakes import T0_US, Core, claim, spec, upsert

TEN_S = 10_000_000
GOLDEN_V1 = Path(__file__).parent / "golden" / "snapshot_v1.txt"


def _core_with_jobs(n: int) -> Core:
    core = Core()
    core.lead()
    specs = [
        spec(
            f"job-{i}",
            target="reports.build",
            owner="finance",
            timezone="Europe/Paris",
            retry=RetryPolicy(max_attempts=5),
            history=HistoryPolicy(keep_runs=10),
        )
        for i in range(n)
    ]
    command = ApplyJobs(
        issued_at_us=core.state.now_us,
        author="alice",
        request_id="",
        upserts=tuple(upsert(s, next_due_us=T0_US + TEN_S) for s in specs),
    )
    # As a follower gets it: decoded from the log entry, every value a fresh object.
    assert core.apply(decode_command(encode_command(command))).accepted
    return core


def test_jobs_applied_from_the_log_share_their_policies_and_repeated_strings() -> None:
    jobs = list(_core_with_jobs(3).state.jobs.values())
    first, *others = [job.spec for job in jobs]
    for other in others:
        assert other.retry is first.retry and other.history is first.history and other.misfire is first.misfire
        assert other.owner is first.owner and other.timezone is first.timezone and other.schedule is first.schedule
        assert other.id is not first.id


def test_runs_hold_their_jobs_id_and_the_status_constant() -> None:
    core = _core_with_jobs(1)
    core.clock.set(T0_US + TEN_S)
    entry = ClaimRuns(
        issued_at_us=T0_US + TEN_S,
        epoch=core.state.epoch,
        monotonic_us=T0_US + TEN_S,
        claims=(claim("job-0", T0_US + TEN_S, T0_US + 2 * TEN_S),),
    )
    assert core.apply(decode_command(encode_command(entry))).accepted  # fresh strings, as a follower decodes them
    run = core.state.runs["job-0"][0]
    assert run.job_id is core.state.jobs["job-0"].id
    assert run.status is QUEUED


def test_a_decoded_snapshot_is_shared_too_and_its_digest_unchanged() -> None:
    core = _core_with_jobs(3)
    core.claim_runs(claim("job-1", T0_US + TEN_S, T0_US + 2 * TEN_S))
    restored = decode_snapshot(encode_snapshot(core.state))
    specs = [job.spec for job in restored.jobs.values()]
    assert specs[0].retry is specs[1].retry is specs[2].retry
    assert restored.runs["job-1"][0].job_id is restored.jobs["job-1"].id
    assert next(key for key in restored.runs if key == "job-1") is restored.jobs["job-1"].id
    assert state_digest(restored) == state_digest(core.state)
    bodies = {id(job.body) for job in restored.jobs.values()}
    assert len(bodies) == 1


def test_jobs_whose_specs_differ_only_by_id_share_one_body() -> None:
    core = _core_with_jobs(3)
    other = spec(
        "job-other",
        owner="finance",
        timezone="Europe/Paris",
        target="reports.other",
        retry=RetryPolicy(max_attempts=5),
        history=HistoryPolicy(keep_runs=10),
    )
    command = ApplyJobs(
        issued_at_us=core.state.now_us,
        author="alice",
        request_id="",
        upserts=(upsert(other, next_due_us=T0_US + TEN_S),),
    )
    assert core.apply(decode_command(encode_command(command))).accepted
    jobs = core.state.jobs
    assert jobs["job-0"].body is jobs["job-1"].body is jobs["job-2"].body
    assert jobs["job-other"].body is not jobs["job-0"].body
    assert jobs["job-other"].body.retry is jobs["job-0"].body.retry  # its values are still shared
    assert jobs["job-0"].body.id == ""
    # The full spec is the one applied, id included; the dict key, the job and its spec hold one id.
    assert jobs["job-other"].spec == other
    key = next(job_id for job_id in jobs if job_id == "job-1")
    assert key is jobs["job-1"].id is jobs["job-1"].spec.id


def test_changing_one_jobs_spec_leaves_the_jobs_that_shared_its_body_alone() -> None:
    core = _core_with_jobs(2)
    before = core.state.jobs["job-1"].spec
    changed = msgspec.structs.replace(core.state.jobs["job-0"].spec, target="reports.moved")
    command = ApplyJobs(
        issued_at_us=core.state.now_us,
        author="alice",
        request_id="",
        upserts=(upsert(changed, expected_version=1, next_due_us=T0_US + TEN_S),),
    )
    assert core.apply(command).accepted
    assert core.state.jobs["job-0"].spec == changed
    assert core.state.jobs["job-1"].spec == before
    assert core.state.jobs["job-0"].body is not core.state.jobs["job-1"].body


def test_a_format_1_snapshot_restores_to_shared_bodies() -> None:
    """Format 1 kept the whole spec, id included, inside each job."""
    data = bytes.fromhex("".join(line for line in GOLDEN_V1.read_text().splitlines() if line and line[0] != "#"))
    restored = decode_snapshot(data)
    for job_id, job in restored.jobs.items():
        assert job.id is job_id and job.body.id == "" and job.spec.id == job_id


def test_jobs_due_at_one_instant_hold_one_int_after_applying_and_after_a_restore() -> None:
    core = _core_with_jobs(3)
    jobs = list(core.state.jobs.values())
    assert jobs[0].next_due_us is jobs[1].next_due_us is jobs[2].next_due_us
    slot_us, next_us = T0_US + TEN_S, T0_US + 2 * TEN_S
    core.clock.set(slot_us)
    entry = ClaimRuns(
        issued_at_us=slot_us,
        epoch=core.state.epoch,
        monotonic_us=slot_us,
        claims=tuple(claim(f"job-{i}", slot_us, next_us) for i in range(3)),
    )
    assert core.apply(decode_command(encode_command(entry))).accepted
    jobs = list(core.state.jobs.values())
    assert jobs[0].next_due_us == next_us and jobs[0].next_due_us is jobs[1].next_due_us is jobs[2].next_due_us
    restored = list(decode_snapshot(encode_snapshot(core.state)).jobs.values())
    assert restored[0].cursor_us is restored[1].cursor_us and restored[0].next_due_us is restored[2].next_due_us


def test_a_snapshot_whose_job_record_is_malformed_is_refused_whole() -> None:
    core = _core_with_jobs(2)
    data = encode_snapshot(core.state)
    # Each job's version (an int) becomes a string: the jobs are decoded one by one, still refused.
    version = msgspec.msgpack.encode("version") + msgspec.msgpack.encode(1)
    assert data.count(version) == 2
    broken = data.replace(version, msgspec.msgpack.encode("version") + msgspec.msgpack.encode("x"))
    with pytest.raises(CodecError, match="undecodable snapshot"):
        decode_snapshot(broken)


def test_the_jobs_of_one_apply_share_their_change_and_the_jobs_fired_together_their_last_run() -> None:
    core = _core_with_jobs(3)
    jobs = list(core.state.jobs.values())
    assert jobs[0].change is jobs[1].change is jobs[2].change
    assert jobs[0].author == "alice" and jobs[0].updated_us == core.state.now_us
    slot_us = T0_US + TEN_S
    core.clock.set(slot_us)
    entry = ClaimRuns(
        issued_at_us=slot_us,
        epoch=core.state.epoch,
        monotonic_us=slot_us,
        claims=tuple(claim(f"job-{i}", slot_us, slot_us + TEN_S) for i in range(3)),
    )
    assert core.apply(decode_command(encode_command(entry))).accepted
    jobs = list(core.state.jobs.values())
    assert jobs[0].last is jobs[1].last is jobs[2].last
    assert (jobs[0].last_status, jobs[0].last_scheduled_us) == (QUEUED, slot_us)
    restored = list(decode_snapshot(encode_snapshot(core.state)).jobs.values())
    assert restored[0].last is restored[1].last and restored[0].change is restored[2].change


@pytest.mark.parametrize(
    ("limit", "field", "shared"),
    [
        ("MAX_SHARED_RECENT", "target", lambda job: job.body),
        ("MAX_SHARED_PER_FIELD", "owner", lambda job: job.body.owner),
    ],
    ids=["bodies", "field values"],
)
def test_values_first_seen_after_a_table_filled_are_still_shared(monkeypatch, limit, field, shared) -> None:
    """A full table starts over; it never stops sharing the values that come next."""
    monkeypatch.setattr(sharing, limit, 2)
    core = Core()
    core.lead()
    specs = [spec(f"old-{i}", **{field: f"old-{field}-{i}"}) for i in range(3)]
    specs += [spec(f"new-{i}", **{field: f"{field}-first-seen-after-the-table-filled"}) for i in range(2)]
    command = ApplyJobs(
        issued_at_us=core.state.now_us,
        author="alice",
        request_id="",
        upserts=tuple(upsert(s, next_due_us=T0_US + TEN_S) for s in specs),
    )
    assert core.apply(decode_command(encode_command(command))).accepted
    assert shared(core.state.jobs["new-0"]) is shared(core.state.jobs["new-1"])
    assert core.state.jobs["old-2"].spec == specs[2]
