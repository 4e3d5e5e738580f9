"""Stopped nodes compared from their Raft directories (dump + journal replayed through the core)
give the digests the live nodes reported at the same index, compacted node included."""

from __future__ import annotations

from scheduler.core.commands import ApplyJobs, ClaimLeadership, JobUpsert
from scheduler.replication import RaftLog
from scheduler.replication.offline import common_digests, inspect
from tests.fakes import FakeClock, spec
from tests.integration.test_raftlog import (  # noqa: F401 (cluster is a fixture)
    JOBS,
    TIMEOUT_S,
    claim_after_the_slots,
    claims_batch,
    cluster,
    leader_of,
    slot,
    stop,
    submit,
    wait_until,
)


def test_offline_digests_at_the_common_index_equal_the_live_ones(cluster: list[RaftLog]) -> None:  # noqa: F811
    nodes = cluster
    clock = FakeClock()
    leader = leader_of(nodes)
    epoch = submit(nodes, ClaimLeadership(clock.tick(), leader.settings.self_address, leader.term)).events[0].epoch
    submit(nodes, ApplyJobs(clock.tick(), "test", "jobs", tuple(JobUpsert(spec(j), 0, slot(1)) for j in JOBS)))
    submit(nodes, claim_after_the_slots(epoch, claims_batch(0)))
    compacted = next(node for node in nodes if node is not leader)
    compacted.force_compaction()
    wait_until((compacted.settings.data_dir / "raft.dump").is_file, "the dump file")
    last = submit(nodes, claim_after_the_slots(epoch, claims_batch(1))).index
    for node in nodes:
        assert node.wait_applied(last, TIMEOUT_S)
    live = {node.digest() for node in nodes}
    assert len(live) == 1
    for node in nodes:
        stop(node)

    raft_dirs = {node.settings.self_address: node.settings.data_dir for node in nodes}
    assert inspect(compacted.settings.data_dir).dump_index > 0
    index, digests = common_digests(raft_dirs)
    assert index >= last
    assert set(digests.values()) == live
