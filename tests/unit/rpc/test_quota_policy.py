"""Quotas per owner and write rates: the pure policy, the buckets on a fake clock, and the
admission a servicer runs, with principals bound as the interceptor binds them."""

from __future__ import annotations

import math

import grpc
import pytest

from scheduler.core.commands import ApplyJobs, JobUpsert
from scheduler.core.model import QUEUED, Run
from scheduler.rpc.quotas import (
    RETRY_AFTER_KEY,
    Admission,
    Buckets,
    OwnerUsage,
    QuotaAsk,
    QuotaLimits,
    TokenBucket,
    apply_job_deltas,
    owner_usage,
    quota_problems,
)
from scheduler.security.interceptor import _CALLER
from scheduler.security.principals import ADMIN, SUBMITTER, Principal
from tests.fakes import Core, ImmediateRaftLog, spec, upsert

LIMITS = QuotaLimits(
    max_jobs_per_owner=10,
    max_live_runs_per_owner=5,
    max_backfill_runs_per_call=3,
    max_backfill_runs_per_window=6,
    max_triggers_per_window=2,
    window_s=60.0,
    writes_per_s=1.0,
    write_burst=2,
)


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self) -> None:
        self.trailing: tuple = ()

    def set_trailing_metadata(self, metadata) -> None:
        self.trailing = tuple(metadata)

    def abort(self, code, details):
        raise Aborted(code, details)


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
def as_submitter():
    token = _CALLER.set(Principal("finance-ci", SUBMITTER, owners=("finance",)))
    yield
    _CALLER.reset(token)


# -- the policy -----------------------------------------------------------------------------
def test_jobs_past_the_quota_are_refused_with_the_counts():
    (problem,) = quota_problems(OwnerUsage(jobs=10), QuotaAsk("finance", new_jobs=1), LIMITS)
    assert problem == "owner 'finance' has 10 jobs and this adds 1; the limit is 10"
    assert quota_problems(OwnerUsage(jobs=9), QuotaAsk("finance", new_jobs=1), LIMITS) == []


def test_a_write_that_does_not_grow_a_count_passes_even_over_the_limit():
    assert quota_problems(OwnerUsage(jobs=50, live_runs=50), QuotaAsk("finance", new_jobs=0), LIMITS) == []
    assert quota_problems(OwnerUsage(jobs=50), QuotaAsk("finance", new_jobs=-3), LIMITS) == []


def test_live_runs_and_backfill_size():
    problems = quota_problems(OwnerUsage(live_runs=4), QuotaAsk("finance", new_live_runs=4, backfill_runs=4), LIMITS)
    assert any("limit per call is 3" in p for p in problems)
    assert any("4 queued or leased runs and this adds 4; the limit is 5" in p for p in problems)


def test_an_owner_override_replaces_the_default_for_that_owner_only():
    limits = QuotaLimits(max_jobs_per_owner=10, owners={"big": {"max_jobs_per_owner": 1000}})
    assert quota_problems(OwnerUsage(jobs=500), QuotaAsk("big", new_jobs=1), limits) == []
    assert quota_problems(OwnerUsage(jobs=500), QuotaAsk("small", new_jobs=1), limits)


def test_a_principal_override_sets_its_write_rate(as_submitter):
    limits = QuotaLimits(write_burst=1, principals={"finance-ci": {"write_burst": 3}})
    admission = Admission(ImmediateRaftLog().read, limits, clock_s=FakeClock())
    for _ in range(3):
        admission.admit_write(FakeContext())
    with pytest.raises(Aborted, match="bursts of 3"):
        admission.admit_write(FakeContext())
    assert limits.for_principal("someone-else").write_burst == 1


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="writes_per_s"):
        QuotaLimits(writes_per_s=0)
    with pytest.raises(ValueError, match="owners.x"):
        QuotaLimits(owners={"x": {"writes_per_s": 5}})
    with pytest.raises(ValueError, match="principals.ci"):
        QuotaLimits(principals={"ci": {"max_jobs_per_owner": 5}})
    with pytest.raises(ValueError, match="writes_per_s"):
        QuotaLimits(principals={"ci": {"writes_per_s": -1}})


# -- buckets ----------------------------------------------------------------------------------
def test_a_bucket_refills_at_its_rate_and_says_when_to_retry():
    bucket = TokenBucket(capacity=2, rate_per_s=0.5, now_s=0.0)
    assert bucket.take(1, 0.0) == 0.0 and bucket.take(1, 0.0) == 0.0
    assert bucket.take(1, 0.0) == pytest.approx(2.0)
    assert bucket.take(1, 1.0) == pytest.approx(1.0)  # refused: nothing taken
    assert bucket.take(1, 2.0) == 0.0
    assert bucket.take(3, 100.0) == math.inf  # never fits


def test_a_clock_going_backwards_refills_nothing():
    bucket = TokenBucket(capacity=1, rate_per_s=1.0, now_s=10.0)
    assert bucket.take(1, 10.0) == 0.0
    assert bucket.take(1, 5.0) > 0


def test_buckets_are_per_key():
    clock = FakeClock()
    buckets = Buckets(clock)
    assert buckets.take(("w", "a"), 1, 1, 1.0) == 0.0
    assert buckets.take(("w", "a"), 1, 1, 1.0) > 0
    assert buckets.take(("w", "b"), 1, 1, 1.0) == 0.0


# -- usage in replicated state ------------------------------------------------------------------
def _state_with_jobs():
    core = Core()
    core.lead()
    core.apply_jobs(
        (upsert(spec("f1", owner="finance")), upsert(spec("f2", owner="finance")), upsert(spec("o1", owner="ops")))
    )
    core.state.add_run(Run(job_id="f1", scheduled_us=1, status=QUEUED))
    core.state.add_run(Run(job_id="f1", scheduled_us=2, status=QUEUED))
    return core.state


def test_owner_usage_counts_jobs_and_live_runs(monkeypatch):
    monkeypatch.setattr("scheduler.rpc.quotas.USAGE_CHUNK", 1)  # every chunk boundary
    raftlog = ImmediateRaftLog(_state_with_jobs())
    usage = owner_usage(raftlog.read, ("finance", "ops", "nobody"))
    assert usage == {"finance": OwnerUsage(2, 2), "ops": OwnerUsage(1, 0), "nobody": OwnerUsage(0, 0)}


def test_apply_deltas_count_new_jobs_moves_and_removals():
    state = _state_with_jobs()
    command = ApplyJobs(
        0, "a", "r", (JobUpsert(spec("f1", owner="ops"), 1, 0), JobUpsert(spec("n", owner="finance"), 0, 0)), ("o1",)
    )
    assert apply_job_deltas(state, command) == {"finance": 0, "ops": 0}


# -- admission ------------------------------------------------------------------------------------
def test_a_submitter_past_its_job_quota_is_refused(as_submitter):
    admission = Admission(ImmediateRaftLog(_state_with_jobs()).read, QuotaLimits(max_jobs_per_owner=3))
    command = ApplyJobs(
        0, "a", "r", (JobUpsert(spec("n1", owner="finance"), 0, 0), JobUpsert(spec("n2", owner="finance"), 0, 0))
    )
    with pytest.raises(Aborted) as aborted:
        admission.check_apply(FakeContext(), command)
    assert aborted.value.args == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "quota exceeded: owner 'finance' has 2 jobs and this adds 2; the limit is 3",
    )
    admission.check_apply(FakeContext(), ApplyJobs(0, "a", "r", command.upserts[:1]))


def test_the_write_rate_refuses_with_a_retry_hint(as_submitter):
    clock = FakeClock()
    admission = Admission(ImmediateRaftLog().read, LIMITS, clock_s=clock)
    admission.admit_write(FakeContext())
    admission.admit_write(FakeContext())
    context = FakeContext()
    with pytest.raises(Aborted) as aborted:
        admission.admit_write(context)
    assert aborted.value.args[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "principal 'finance-ci' is over its write rate" in aborted.value.args[1]
    assert dict(context.trailing)[RETRY_AFTER_KEY] == "1.000"
    clock.now_s += 1.0
    admission.admit_write(FakeContext())


def test_backfill_per_call_and_per_window(as_submitter):
    clock = FakeClock()
    admission = Admission(ImmediateRaftLog(_state_with_jobs()).read, LIMITS, clock_s=clock)
    assert admission.backfill_cap("finance", 10_000) == 4  # one more than the quota shows the excess
    with pytest.raises(Aborted, match="limit per call is 3"):
        admission.check_backfill(FakeContext(), "ops", 4)
    admission.check_backfill(FakeContext(), "ops", 3)
    admission.check_backfill(FakeContext(), "ops", 3)
    with pytest.raises(Aborted, match="the limit is 6 per 60 s"):
        admission.check_backfill(FakeContext(), "ops", 1)


def test_triggers_count_live_runs_and_a_window(as_submitter):
    clock = FakeClock()
    state = _state_with_jobs()
    admission = Admission(ImmediateRaftLog(state).read, LIMITS, clock_s=clock)
    admission.check_trigger(FakeContext(), "o1")
    admission.check_trigger(FakeContext(), "o1")
    with pytest.raises(Aborted, match="owner 'ops' asked for 1 triggers; the limit is 2 per 60 s"):
        admission.check_trigger(FakeContext(), "o1")
    admission.check_trigger(FakeContext(), "no-such-job")  # left to the core
    for i in range(3):
        state.add_run(Run(job_id="f2", scheduled_us=10 + i, status=QUEUED))
    with pytest.raises(Aborted, match="owner 'finance' has 5 queued or leased runs"):
        admission.check_trigger(FakeContext(), "f2")


def test_admins_are_rate_limited_but_not_held_to_quotas():
    token = _CALLER.set(Principal("root", ADMIN))
    try:
        admission = Admission(
            ImmediateRaftLog(_state_with_jobs()).read, QuotaLimits(max_jobs_per_owner=0, write_burst=1)
        )
        admission.check_apply(FakeContext(), ApplyJobs(0, "a", "r", (JobUpsert(spec("n", owner="finance"), 0, 0),)))
        admission.admit_write(FakeContext())
        with pytest.raises(Aborted, match="rate limited"):
            admission.admit_write(FakeContext())
    finally:
        _CALLER.reset(token)


def test_without_authentication_nothing_is_limited():
    admission = Admission(ImmediateRaftLog(_state_with_jobs()).read, QuotaLimits(max_jobs_per_owner=0, write_burst=0))
    for _ in range(5):
        admission.admit_write(FakeContext())
    admission.check_apply(FakeContext(), ApplyJobs(0, "a", "r", (JobUpsert(spec("n", owner="finance"), 0, 0),)))
    admission.check_backfill(FakeContext(), "finance", 10_000)


# -- node config ------------------------------------------------------------------------------------
def _load(tmp_path, quotas_yaml: str):
    import argparse

    from scheduler.config import add_node_flags, load_node_config

    path = tmp_path / "node.yaml"
    path.write_text(f"node_id: n1\ndata_dir: {tmp_path}/d\npeers: ['n1=127.0.0.1:7101/127.0.0.1:7201']\n{quotas_yaml}")
    parser = argparse.ArgumentParser()
    add_node_flags(parser)
    return load_node_config(parser.parse_args(["--config", str(path)]), {})


def test_quotas_come_from_the_node_config(tmp_path):
    config = _load(
        tmp_path,
        "quotas: {max_jobs_per_owner: 50, writes_per_s: 5, owners: {big: {max_jobs_per_owner: 500}},"
        " principals: {ci: {writes_per_s: 50}}}\n",
    )
    assert config.quotas.max_jobs_per_owner == 50 and config.quotas.writes_per_s == 5
    assert config.quotas.for_principal("ci").writes_per_s == 50
    assert config.quotas.for_owner("big").max_jobs_per_owner == 500
    assert _load(tmp_path, "").quotas == QuotaLimits()


def test_unknown_or_bad_quota_settings_stop_the_node(tmp_path):
    from scheduler.config import ConfigError

    with pytest.raises(ConfigError, match="quotas takes"):
        _load(tmp_path, "quotas: {max_jobs: 5}\n")
    with pytest.raises(ConfigError, match="max_jobs_per_owner"):
        _load(tmp_path, "quotas: {max_jobs_per_owner: -1}\n")
