"""CancelRun: one queued or leased run ends `cancelled`; its lease is fenced; nothing else moves."""

from __future__ import annotations

import pytest

from scheduler.core.commands import CancelRun, SetClusterVersion
from scheduler.core.log_format import required_log_format
from scheduler.core.model import CANCELLED, QUEUED, SECOND_US
from scheduler.core.results import LeaseFenced, LeaseNotGranted, RunEnded
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


@pytest.fixture
def core() -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a", overlap="allow"), next_due_us=slot(1)),))
    assert core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(2), slot(3))).accepted
    return core


def _cancel(core: Core, scheduled_us: int, request_id: str = "", reason: str = "bad input"):
    return core.apply(CancelRun(core.clock.tick(), "a", scheduled_us, "alice", reason, request_id))


def test_a_queued_run_is_cancelled_and_never_leased(core: Core) -> None:
    result = _cancel(core, slot(1))
    assert result.accepted
    (ended,) = result.events
    assert ended == RunEnded("a", slot(1), CANCELLED, "cancelled by alice: bad input")
    assert core.grant(run_ref("a", slot(1))).events[0] == LeaseNotGranted("a", slot(1), "not_queued")
    assert core.state.get_run("a", slot(2)).status == QUEUED  # the other run is untouched
    assert slot(1) not in core.state.live_runs.get("a", [])


def test_a_leased_run_is_cancelled_and_its_worker_is_fenced(core: Core) -> None:
    assert core.grant(run_ref("a", slot(1))).accepted
    lease = lease_ref("a", slot(1), core.index)
    assert _cancel(core, slot(1), reason="").events[0].reason == "cancelled by alice"
    assert core.extend(lease).events == (LeaseFenced("a", slot(1), lease.fencing_token, "cancelled"),)
    late = core.complete(completion(lease))  # the handler finished anyway: its outcome is discarded
    assert late.events == (LeaseFenced("a", slot(1), lease.fencing_token, "cancelled"),)
    assert core.state.get_run("a", slot(1)).status == CANCELLED
    assert core.state.leased_runs.get("a") in (None, [])


def test_an_ended_or_unknown_run_cannot_be_cancelled(core: Core) -> None:
    assert _cancel(core, slot(1)).accepted
    again = _cancel(core, slot(1))
    assert again.rejection.code == "run_not_live" and "already ended cancelled" in again.rejection.message
    missing = _cancel(core, slot(7))
    assert missing.rejection.code == "not_found" and f"a@{slot(7)}" in missing.rejection.message


def test_a_retried_cancel_returns_the_first_result(core: Core) -> None:
    first = _cancel(core, slot(1), request_id="r1")
    assert _cancel(core, slot(1), request_id="r1") == first


def test_cancel_run_needs_log_format_3() -> None:
    assert required_log_format(CancelRun(1, "a", 2, "alice", "", "r")) == 3
