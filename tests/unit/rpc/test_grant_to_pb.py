"""What a worker receives for one granted run: the fields the leader sets in place must read
as the Timestamp and Duration messages they stand for, present or absent as before."""

from __future__ import annotations

import pytest

from scheduler.core.model import Run
from scheduler.core.results import LeaseGranted
from scheduler.leader.dispatch import Granted
from scheduler.planning.timeconv import format_us
from scheduler.rpc.workers import WorkerServicer
from tests.fakes import spec
from worker._leases import grant_lease_ttl_s, lease_from_grant

SLOT_US = 1_796_000_000_123_456  # a slot with microseconds: nanos must carry them


def granted(scheduled_us: int, deadline_us: int, lease_ttl_us: int, payload_json: str = "") -> Granted:
    run = Run(job_id="pay", scheduled_us=scheduled_us, status="leased", lease_ttl_us=lease_ttl_us)
    event = LeaseGranted("pay", scheduled_us, 41, 2, scheduled_us + lease_ttl_us, deadline_us)
    return Granted(run, spec("pay", target="billing.run", payload_json=payload_json), event)


def test_a_grant_carries_its_instants_to_the_microsecond() -> None:
    (grant,) = WorkerServicer.grants_to_pb([granted(SLOT_US, SLOT_US + 3_600_000_000, 1_500_001, '{"a": 1}')]).leases
    assert (grant.scheduled_at.seconds, grant.scheduled_at.nanos) == (1_796_000_000, 123_456_000)
    assert (grant.deadline.seconds, grant.deadline.nanos) == (1_796_003_600, 123_456_000)
    assert (grant.lease_ttl.seconds, grant.lease_ttl.nanos) == (1, 500_001_000)
    assert grant.run_key == f"pay@{format_us(SLOT_US)}" and grant.run_key.endswith(".123456Z")
    assert (grant.fencing_token, grant.attempt, grant.target.handler, grant.payload_json) == (
        41,
        2,
        "billing.run",
        '{"a": 1}',
    )
    lease, bad_payload = lease_from_grant(grant, "w1")  # and the worker reads it back
    assert not bad_payload and lease.ctx.payload == {"a": 1} and lease.lease_ttl_s == pytest.approx(1.500001)
    assert lease.key == ("pay", 1_796_000_000, 123_456_000, 41)


def test_no_deadline_stays_unset_and_a_zero_ttl_is_still_sent() -> None:
    (grant,) = WorkerServicer.grants_to_pb([granted(SLOT_US, 0, 0)]).leases
    assert grant.HasField("scheduled_at") and not grant.HasField("deadline")
    # Present at zero, as before: the worker then falls back to its default TTL, and says so.
    assert grant.HasField("lease_ttl") and grant_lease_ttl_s(grant) == 30.0


def test_instants_before_the_epoch_keep_floor_division() -> None:
    (grant,) = WorkerServicer.grants_to_pb([granted(-1, -1, 30_000_000)]).leases
    assert (grant.scheduled_at.seconds, grant.scheduled_at.nanos) == (-1, 999_999_000)
