"""RaftLog on a real 3-node pysyncobj cluster on loopback, in one process.

Checks that every replica applies the same entries at the same Raft indices (the
fencing-token source), ends byte-for-byte equal, and that a follower restarted
from a compacted log (dump file + journal) comes back equal and keeps in step.
Waits poll a condition against a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import base64
import logging
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

import pytest

from scheduler.core.commands import ApplyJobs, ClaimLeadership, ClaimRuns, JobUpsert, ReadBarrier, SlotClaim
from scheduler.core.model import SECOND_US
from scheduler.core.results import JobAdded, LeadershipClaimed, Result, RunClaimed
from scheduler.replication import NotLeader, RaftLog, RaftSettings, RaftTuning
from scheduler.replication.raftlog import MAX_ENTRY_BYTES
from tests.fakes import T0_US, FakeClock, spec
from tests.integration.conftest import free_ports

pytestmark = pytest.mark.integration

T = TypeVar("T")
TEN_S = 10 * SECOND_US
TIMEOUT_S = 10.0
JOBS = [f"job-{n:03d}" for n in range(50)]
SLOTS_PER_BATCH = 20  # 50 jobs x 20 consecutive slots = 1000 claims per entry


def slot(k: int) -> int:
    return T0_US + k * TEN_S


# -- helpers -----------------------------------------------------------------------------


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = TIMEOUT_S, interval_s: float = 0.01) -> T:
    """Poll `condition` until it returns something truthy; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def settings_for(address: str, addresses: list[str], data_dir: Path, **overrides) -> RaftSettings:
    return RaftSettings(
        self_address=address,
        partner_addresses=tuple(a for a in addresses if a != address),
        data_dir=data_dir,
        password=None,  # loopback-only test cluster
        tuning=RaftTuning(connection_retry_s=0.2, **overrides),
    )


def stop(node: RaftLog) -> None:
    """close(), then wait until pysyncobj's tick thread is really gone (close() does not wait)."""
    node.close()
    syncobj = node._syncobj
    if syncobj is not None:
        wait_until(lambda: not syncobj.tick_thread_alive(), "the tick thread to stop")


def leader_of(nodes: list[RaftLog]) -> RaftLog:
    """The node that leads and that every other node names as leader."""

    def agreed() -> RaftLog | None:
        leaders = [node for node in nodes if node.is_leader()]
        if len(leaders) != 1:
            return None
        address = leaders[0].settings.self_address
        if all(node.leader_address() == address for node in nodes):
            return leaders[0]
        return None

    return wait_until(agreed, "one leader that every node agrees on")


def submit(nodes: list[RaftLog], command, via: RaftLog | None = None) -> Result:
    """Propose on `via` (default: the leader); a refusal before append (retry-safe) is retried."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        node = via or leader_of(nodes)
        try:
            return node.propose(command).result(timeout=TIMEOUT_S)
        except NotLeader:
            if time.monotonic() >= deadline:
                raise


def claims_batch(batch: int, version: int = 1) -> tuple[SlotClaim, ...]:
    first = 1 + batch * SLOTS_PER_BATCH
    return tuple(
        SlotClaim(job_id, slot(k), slot(k + 1), version)
        for job_id in JOBS
        for k in range(first, first + SLOTS_PER_BATCH)
    )


def claim_after_the_slots(epoch: int, claims: tuple[SlotClaim, ...]) -> ClaimRuns:
    """Slots are claimable once replicated time (the leader's clock) has passed them."""
    late_us = slot(10 * SLOTS_PER_BATCH)
    return ClaimRuns(issued_at_us=late_us, epoch=epoch, claims=claims, monotonic_us=late_us)


def snapshot_facts(node: RaftLog) -> tuple[int, dict[tuple[str, int], int]]:
    with node.read() as state:
        claim_indices = {
            (job_id, run.scheduled_us): run.claim_index for job_id, runs in state.runs.items() for run in runs
        }
        return state.applied_index, claim_indices


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_critical_logs() -> Iterator[Records]:
    """pysyncobj logs CRITICAL on e.g. truncating already-applied entries: that fails the test."""
    handler = Records()
    loggers = [logging.getLogger("pysyncobj"), logging.getLogger("raftcron")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    critical = [f"{r.name}: {r.getMessage()}" for r in handler.records if r.levelno >= logging.CRITICAL]
    assert critical == [], critical


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[RaftLog]]:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    nodes = [RaftLog(settings_for(a, addresses, tmp_path / f"node{i}")) for i, a in enumerate(addresses)]
    started: list[RaftLog] = []
    try:
        for node in nodes:
            node.start()
            started.append(node)
        yield nodes  # the test may replace a node in this list; teardown closes what is there
    finally:
        for node in {id(n): n for n in started + nodes}.values():
            node.close()


@pytest.fixture
def single_node(tmp_path: Path) -> Iterator[RaftLog]:
    """A one-node cluster: leads on its own, enough for adapter behaviour that needs no peers."""
    address = f"127.0.0.1:{free_ports(1)[0]}"
    node = RaftLog(
        settings_for(address, [address], tmp_path / "solo", election_timeout_min_s=0.1, election_timeout_max_s=0.2)
    )
    node.start()
    try:
        wait_until(node.is_leader, "the single node to lead")
        yield node
    finally:
        node.close()


# -- the cluster test --------------------------------------------------------------------


def test_replicas_agree_on_indices_and_state_across_compaction_and_restart(cluster: list[RaftLog]) -> None:
    nodes = cluster
    clock = FakeClock()
    leader = leader_of(nodes)
    followers = [node for node in nodes if node is not leader]

    # Leadership epoch and jobs.
    opened_at_us = clock.tick()
    result = submit(
        nodes, ClaimLeadership(issued_at_us=opened_at_us, node_id=leader.settings.self_address, term=leader.term)
    )
    assert result.accepted, result
    (claimed,) = result.events
    assert isinstance(claimed, LeadershipClaimed) and claimed.epoch == 1
    epoch = claimed.epoch
    jobs = ApplyJobs(
        issued_at_us=opened_at_us,  # stamped with replicated time, as the API does
        author="test",
        request_id="jobs-1",
        upserts=tuple(JobUpsert(spec(job_id), 0, slot(1)) for job_id in JOBS),
    )
    result = submit(nodes, jobs)
    assert result.events == tuple(JobAdded(job_id, 1) for job_id in JOBS)

    # Several 1000-claim entries from the leader, kept in flight together, then one via a follower.
    expected: dict[tuple[str, int], int] = {}
    indices: list[int] = []

    def record(result: Result, batch: int) -> None:
        assert result.accepted, result
        assert len(result.events) == len(JOBS) * SLOTS_PER_BATCH
        assert all(isinstance(e, RunClaimed) and e.claim_index == result.index for e in result.events), batch
        indices.append(result.index)
        for event in result.events:
            expected[(event.job_id, event.scheduled_us)] = result.index

    futures: list[Future[Result]] = [
        leader.propose(claim_after_the_slots(epoch, claims_batch(batch))) for batch in range(4)
    ]
    for batch, future in enumerate(futures):
        record(future.result(timeout=TIMEOUT_S), batch)
    record(submit(nodes, claim_after_the_slots(epoch, claims_batch(4)), via=followers[0]), 4)
    assert indices == sorted(indices) and len(set(indices)) == len(indices)

    def assert_replicas_agree(last_index: int) -> str:
        for node in nodes:
            assert node.wait_applied(last_index, TIMEOUT_S), node.settings.self_address
        facts = [snapshot_facts(node) for node in nodes]
        applied = {applied_index for applied_index, _ in facts}
        assert applied == {last_index}, applied
        for _, claim_indices in facts:
            assert claim_indices == expected
        digests = {node.digest() for node in nodes}
        assert len(digests) == 1, digests
        return digests.pop()

    digest = assert_replicas_agree(indices[-1])

    # Compact one follower's log to a dump file, append one more entry, then restart it.
    follower = followers[1]
    data_dir = follower.settings.data_dir
    follower.force_compaction()
    wait_until((data_dir / "raft.dump").is_file, "the dump file")
    wait_until(lambda: follower.raft_status()["log_len"] <= 3, "the journal to be compacted")
    record(submit(nodes, claim_after_the_slots(epoch, claims_batch(5))), 5)
    digest = assert_replicas_agree(indices[-1])

    stop(follower)
    restarted = RaftLog(follower.settings)
    nodes[nodes.index(follower)] = restarted
    restarted.start()
    assert restarted.wait_applied(indices[-1], TIMEOUT_S)
    assert snapshot_facts(restarted) == (indices[-1], expected)
    assert restarted.digest() == digest

    # The cluster keeps going with the restarted node in step.
    record(submit(nodes, claim_after_the_slots(epoch, claims_batch(6))), 6)
    barrier = submit(nodes, ReadBarrier(issued_at_us=clock.tick()), via=restarted)
    assert barrier.accepted and barrier.index > indices[-1]
    indices.append(barrier.index)
    assert_replicas_agree(barrier.index)
    assert len(expected) == 7 * len(JOBS) * SLOTS_PER_BATCH


def test_propose_refuses_an_entry_above_the_size_cap(single_node: RaftLog) -> None:
    # Random text: large commands are stored compressed, and this one stays large.
    payload = base64.b64encode(random.Random(0).randbytes(2 * MAX_ENTRY_BYTES)).decode()
    huge = ApplyJobs(
        issued_at_us=T0_US,
        author="test",
        request_id="too-big",
        upserts=(JobUpsert(spec("big", payload_json=payload), 0, 0),),
    )
    with pytest.raises(ValueError, match="bytes"):
        single_node.propose(huge)
    # Nothing was appended: the next entry is still applied normally.
    result = single_node.propose(ReadBarrier(issued_at_us=T0_US)).result(timeout=TIMEOUT_S)
    assert result.accepted
    with single_node.read() as state:
        assert "big" not in state.jobs


# -- adapter bugs ------------------------------------------------------------------------


def test_a_raising_apply_listener_does_not_lose_the_proposers_result(single_node: RaftLog) -> None:
    calls: list[Result] = []

    def flaky_listener(command, result: Result, state) -> None:
        calls.append(result)
        if len(calls) == 1:
            raise RuntimeError("listener bug")

    single_node.add_apply_listener(flaky_listener)
    future = single_node.propose(ClaimLeadership(issued_at_us=T0_US, node_id="solo", term=single_node.term))
    # Either the future resolves, or the entry was re-applied (after which it never will).
    wait_until(lambda: future.done() or len(calls) >= 2, "the proposal to resolve or be re-applied")
    assert future.done() and future.result().accepted
    assert [result.index for result in calls] == [future.result().index]


def test_close_has_stopped_the_node_when_it_returns(single_node: RaftLog) -> None:
    single_node.close()
    assert not single_node._syncobj.tick_thread_alive()


# -- links between followers ---------------------------------------------------------------
# pysyncobj drops a link that has read nothing for 3.5 s, and notices only when it next sends on
# it: followers send each other nothing until the leader dies, so without keepalives both
# candidates' first vote requests were dropped and every such failover took two elections.
IDLE_LINK_TIMEOUT_S = 3.5


def _term(node: RaftLog) -> int:
    return node.raft_status()["raft_term"]


def test_a_leader_dying_after_an_idle_spell_is_replaced_in_one_election(tmp_path: Path) -> None:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    tuning = {"election_timeout_min_s": 0.5, "election_timeout_max_s": 2.5}  # rarely two timers at once
    nodes = [RaftLog(settings_for(a, addresses, tmp_path / f"node{i}", **tuning)) for i, a in enumerate(addresses)]
    terms_seen = []
    try:
        for node in nodes:
            node.start()
        for attempt in range(2):  # two candidates timing out together also costs a second election
            leader = leader_of(nodes)
            term = _term(leader)
            # The followers' link idles past pysyncobj's timeout (a condition on elapsed time, by design).
            time.sleep(IDLE_LINK_TIMEOUT_S + 1.0)
            leader.close()
            survivors = [n for n in nodes if n is not leader]
            new_leader = wait_until(lambda: next((n for n in survivors if n.is_leader()), None), "a new leader")
            terms_seen.append((term, _term(new_leader)))
            if _term(new_leader) == term + 1:
                return
            index = nodes.index(leader)
            nodes[index] = RaftLog(settings_for(addresses[index], addresses, tmp_path / f"node{index}", **tuning))
            nodes[index].start()
        raise AssertionError(f"every failover took more than one election: (old term, new term) {terms_seen}")
    finally:
        for node in nodes:
            node.close()


def test_a_follower_whose_tick_thread_stalled_reads_the_leader_before_electing(cluster: list[RaftLog]) -> None:
    """A follower's tick thread that does not run for longer than the election timeout (a starved
    process: other threads, a compaction child, a busy host) finds the leader's appends waiting
    when it runs again; it reads them before judging the leader silent, and deposes nobody."""
    leader = leader_of(cluster)
    follower = next(node for node in cluster if node is not leader)
    term = _term(leader)
    stall_s = RaftTuning().election_timeout_max_s + 1.0
    poller = follower._syncobj._poller
    real_poll = poller.poll
    armed, stalled = [True], []

    def poll_then_stall(timeout):
        real_poll(timeout)
        if armed and timeout:  # the end-of-tick poll: the thread then stalls between two ticks
            armed.clear()
            time.sleep(stall_s)  # the fault injected: this thread does not run meanwhile
            stalled.append(True)

    poller.poll = poll_then_stall
    try:
        wait_until(lambda: stalled, "the follower's stall to end", timeout_s=stall_s + TIMEOUT_S)
        # Proposed after the stall: once the follower applied it, it has ticked again.
        index = submit(cluster, ReadBarrier(issued_at_us=T0_US)).index
        wait_until(lambda: follower.applied_index >= index, "the follower to apply after its stall")
    finally:
        poller.poll = real_poll
    assert [_term(node) for node in cluster] == [term] * 3
    assert leader.is_leader()
