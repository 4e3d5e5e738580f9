"""A trigger's or backfill's own payload and overlap policy, and `forbid` honoured when a run is
granted (log format 3), so a backfilled run never overlaps a running one."""

from __future__ import annotations

import pytest

from scheduler.core.commands import BackfillRuns, SetClusterVersion, TriggerRun
from scheduler.core.log_format import required_log_format
from scheduler.core.model import MISSED, QUEUED, SECOND_US, run_overlap, run_payload_json
from scheduler.core.results import LeaseGranted, LeaseNotGranted
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def _core(cluster_version: int = 3, overlap: str = "forbid") -> Core:
    core = Core(FakeClock())
    core.lead()
    if cluster_version > 1:
        assert core.apply(SetClusterVersion(core.clock.tick(), cluster_version, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a", overlap=overlap, payload_json='{"day":"monday"}'), next_due_us=slot(1)),))
    return core


def _trigger(core: Core, **overrides):
    return core.apply(TriggerRun(core.clock.tick(), "a", "alice", "", **overrides))


def test_a_trigger_carries_its_own_payload_and_a_plain_one_the_jobs() -> None:
    core = _core()
    own = _trigger(core, payload_json='{"day":"tuesday"}', overlap="allow")
    plain = _trigger(core, overlap="allow")
    job = core.state.jobs["a"].spec
    runs = [core.state.get_run("a", e.scheduled_us) for e in (*own.events, *plain.events)]
    assert [run_payload_json(r, job) for r in runs] == ['{"day":"tuesday"}', '{"day":"monday"}']


def test_a_trigger_may_allow_an_overlap_its_job_forbids_and_not_the_reverse_unasked() -> None:
    core = _core(overlap="forbid")
    assert _trigger(core).accepted
    refused = _trigger(core)
    assert refused.rejection.code == "overlap_forbid"
    allowed = _trigger(core, overlap="allow")
    assert allowed.accepted and len(core.state.live_runs["a"]) == 2
    assert _trigger(core, overlap="sometimes").rejection.code == "invalid"


def _leased_slot_and_backfilled_run(core: Core):
    """Slot 1 claimed and leased; slot 2 recorded missed, then backfilled while slot 1 runs."""
    assert core.claim_runs(claim("a", slot(1), slot(2))).accepted
    assert core.grant(run_ref("a", slot(1))).accepted
    running = lease_ref("a", slot(1), core.index)
    assert core.claim_runs(claim("a", slot(2), slot(3), status=MISSED, reason="down")).accepted
    backfill = BackfillRuns(core.clock.tick(), "a", "bob", "", (slot(2),), 0)
    assert core.apply(backfill).events[0].status == QUEUED
    return running


def test_forbid_holds_a_backfilled_run_until_the_running_one_ends() -> None:
    core = _core(overlap="forbid")
    running = _leased_slot_and_backfilled_run(core)
    held = core.grant(run_ref("a", slot(2)))
    assert held.events == (LeaseNotGranted("a", slot(2), "overlap_forbid"),)
    core.complete(completion(running))
    assert isinstance(core.grant(run_ref("a", slot(2))).events[0], LeaseGranted)


def test_before_the_format_a_backfilled_run_overlapped_as_older_nodes_let_it() -> None:
    core = _core(cluster_version=2, overlap="forbid")
    _leased_slot_and_backfilled_run(core)
    assert isinstance(core.grant(run_ref("a", slot(2))).events[0], LeaseGranted)


def test_a_backfill_may_say_allow_but_not_replace() -> None:
    core = _core(overlap="forbid")
    _leased_slot_and_backfilled_run(core)
    run = core.state.get_run("a", slot(2))
    assert run_overlap(run, core.state.jobs["a"].spec) == "forbid"
    replace = core.apply(BackfillRuns(core.clock.tick(), "a", "bob", "", (slot(2),), 0, overlap="replace"))
    assert replace.rejection.code == "invalid"


@pytest.mark.parametrize(
    ("command", "needed"),
    [
        (TriggerRun(1, "a", "alice", "r"), 1),
        (TriggerRun(1, "a", "alice", "r", payload_json="{}"), 3),
        (TriggerRun(1, "a", "alice", "r", overlap="allow"), 3),
        (BackfillRuns(1, "a", "bob", "r", (1,), 0), 1),
        (BackfillRuns(1, "a", "bob", "r", (1,), 0, overlap="queue"), 3),
    ],
)
def test_only_an_override_needs_log_format_3(command, needed: int) -> None:
    assert required_log_format(command) == needed
