"""Equal values of many jobs are shared, not copied, and sharing changes no value or digest."""

from __future__ import annotations

from scheduler.core import state_digest
from scheduler.core.codec import decode_command, decode_snapshot, encode_command, encode_snapshot
from scheduler.core.commands import ApplyJobs, ClaimRuns
from scheduler.core.model import QUEUED, HistoryPolicy, RetryPolicy
from tests.fakes import T0_US, Core, claim, spec, upsert

TEN_S = 10_000_000


def _core_with_jobs(n: int) -> Core:
    core = Core()
    core.lead()
    specs = [spec(f"job-{i}", owner="finance", timezone="Europe/Paris", retry=RetryPolicy(max_attempts=5),
                  history=HistoryPolicy(keep_runs=10)) for i in range(n)]
    command = ApplyJobs(issued_at_us=core.state.now_us, author="alice", request_id="",
                        upserts=tuple(upsert(s, next_due_us=T0_US + TEN_S) for s in specs))
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
    entry = ClaimRuns(issued_at_us=T0_US + TEN_S, epoch=core.state.epoch, monotonic_us=T0_US + TEN_S,
                      claims=(claim("job-0", T0_US + TEN_S, T0_US + 2 * TEN_S),))
    assert core.apply(decode_command(encode_command(entry))).accepted  # fresh strings, as a follower decodes them
    run = core.state.runs["job-0"][0]
    assert run.job_id is core.state.jobs["job-0"].spec.id
    assert run.status is QUEUED


def test_a_decoded_snapshot_is_shared_too_and_its_digest_unchanged() -> None:
    core = _core_with_jobs(3)
    core.claim_runs(claim("job-1", T0_US + TEN_S, T0_US + 2 * TEN_S))
    restored = decode_snapshot(encode_snapshot(core.state))
    specs = [job.spec for job in restored.jobs.values()]
    assert specs[0].retry is specs[1].retry is specs[2].retry
    assert restored.runs["job-1"][0].job_id is restored.jobs["job-1"].spec.id
    assert state_digest(restored) == state_digest(core.state)
