"""The durable journal in real 3-node clusters: acknowledged writes are synced on a majority
first (seen through the sync trace), a follower with a torn tail restarts and catches up, one
with a corrupted record in the middle of its journal refuses to start, saying where, and one
whose data directory holds pysyncobj's own journal converts it and rejoins."""

from __future__ import annotations

import signal
import struct
from pathlib import Path

import pytest
from pysyncobj.journal import FileJournal

from scheduler.core.model import JobSpec
from scheduler.local import LocalCluster, wait_until
from scheduler.replication.journal import (
    EXIT_JOURNAL_CORRUPT,
    HEADER_BYTES,
    JOURNAL_NAME,
    LEGACY_JOURNAL_NAME,
    RECORD_HEADER_BYTES,
    TRACE_ENV,
    DurableJournal,
    read_entries,
    record_ends,
)
from scheduler.rpc.convert import spec_to_pb
from tests.integration.conftest import assert_clean_logs

pytestmark = pytest.mark.integration


def journal_of(cluster: LocalCluster, node_id: str) -> Path:
    return cluster.member(node_id).config_path.parent / "raft" / JOURNAL_NAME


def write(cluster: LocalCluster, i: int) -> int:
    """One acknowledged write; its Raft index."""
    spec = JobSpec(id=f"durable-{i:04d}", schedule="0 0 1 1 *", target_kind="handler", target="noop", jitter="pinned")
    with cluster.client(timeout_s=20) as client:
        response = client.apply_jobs(jobs=[spec_to_pb(spec)], author="test")
    assert response.applied_index > 0
    return response.applied_index


def a_follower(cluster: LocalCluster, leader: str) -> str:
    return next(m.node_id for m in cluster.members if m.node_id != leader)


def stopped_after_writes(cluster: LocalCluster, count: int) -> tuple[str, str]:
    """Start, write, stop one follower cleanly (SIGTERM): (leader, follower)."""
    cluster.start()
    leader = cluster.wait_for_leader()
    for i in range(count):
        write(cluster, i)
    follower = a_follower(cluster, leader)
    wait_until(
        lambda: (s := cluster.status(follower)) and s.applied_index >= cluster.status(leader).commit_index,
        30,
        "the follower to apply every write",
    )
    cluster.kill(follower, signal.SIGTERM)
    return leader, follower


def test_acknowledged_writes_were_synced_on_a_majority(make_cluster, monkeypatch, tmp_path):
    cluster = make_cluster(3)
    traces = {m.node_id: tmp_path / f"{m.node_id}.trace" for m in cluster.members}
    for member in cluster.members:  # one trace file per node: set for each start
        monkeypatch.setenv(TRACE_ENV, str(traces[member.node_id]))
        cluster.start(member.node_id)
    monkeypatch.delenv(TRACE_ENV)
    cluster.wait_for_leader()

    def traced() -> dict[str, tuple[int, int]]:
        return {node: struct.unpack("<QQ", path.read_bytes()) for node, path in traces.items()}

    acknowledged = []
    for i in range(40):
        index = write(cluster, i)
        acknowledged.append((index, traced()))  # read right after the answer arrived
    files = {node: journal_of(cluster, node) for node in traces}
    inodes = {node: path.stat().st_ino for node, path in files.items()}
    ends = {node: record_ends(str(path)) for node, path in files.items()}
    for index, seen in acknowledged:
        covered = [
            node
            for node, (inode, length) in seen.items()
            if inode == inodes[node] and index in ends[node] and length >= ends[node][index]
        ]
        assert len(covered) >= 2, f"entry {index} acknowledged while synced only on {covered}: {seen}"
    assert all(length > HEADER_BYTES for _inode, length in traced().values())
    assert_clean_logs(cluster)


def test_a_follower_whose_journal_tail_is_torn_restarts_and_catches_up(make_cluster):
    cluster = make_cluster(3)
    leader, follower = stopped_after_writes(cluster, 20)
    path = journal_of(cluster, follower)
    size = path.stat().st_size
    ends = record_ends(str(path))
    last_start = ends[max(ends) - 1]
    path.write_bytes(path.read_bytes()[:-7])
    cluster.start(follower)
    for i in range(20, 30):
        write(cluster, i)
    cluster.wait_converged(timeout_s=60)
    assert cluster.member(follower).alive() and set(cluster.digests()) == {m.node_id for m in cluster.members}
    text = cluster.member(follower).log_path.read_text()
    assert f"raft journal {path}: torn tail at offset {last_start}" in text
    assert f"dropped {size - 7 - last_start} bytes" in text
    assert "Traceback" not in text and "EOFError" not in text
    assert_clean_logs(cluster)


def test_a_follower_whose_journal_is_corrupt_in_the_middle_refuses_to_start(make_cluster):
    cluster = make_cluster(3)
    leader, follower = stopped_after_writes(cluster, 20)
    path = journal_of(cluster, follower)
    ends = record_ends(str(path))
    middle = sorted(ends)[len(ends) // 2]
    offset = ends[middle - 1]  # where the record of `middle` starts
    data = bytearray(path.read_bytes())
    data[offset + RECORD_HEADER_BYTES + 1] ^= 0x20
    path.write_bytes(bytes(data))
    cluster.start(follower)
    process = cluster.member(follower).process
    wait_until(lambda: process.poll() is not None, 60, "the corrupt follower to exit")
    assert process.returncode == EXIT_JOURNAL_CORRUPT
    text = cluster.member(follower).log_path.read_text()
    assert "refusing to start" in text and str(path) in text and f"offset {offset}" in text, text[-2000:]
    assert "Traceback" not in text
    assert path.read_bytes() == bytes(data)  # left as found, for whoever investigates
    write(cluster, 99)  # the other two go on


def test_a_node_upgraded_from_pysyncobjs_journal_converts_it_and_rejoins(make_cluster):
    cluster = make_cluster(3)
    leader, follower = stopped_after_writes(cluster, 15)
    raft_dir = journal_of(cluster, follower).parent
    # What an older raftcron left: pysyncobj's own journal and meta, no raft.wal.
    entries = read_entries(str(raft_dir / JOURNAL_NAME))
    meta = DurableJournal(str(raft_dir / JOURNAL_NAME), on_fatal=pytest.fail)
    term, voted, commit = meta.getCurrentTerm(), meta.getVotedForNodeId(), meta.getRaftCommitIndex()
    meta._destroy()
    legacy = FileJournal(str(raft_dir / LEGACY_JOURNAL_NAME))
    for entry in entries:
        legacy.add(*entry)
    legacy.setCurrentTerm(term, voted)
    legacy.setRaftCommitIndex(commit)
    legacy.onOneSecondTimer()
    legacy._destroy()
    for name in (JOURNAL_NAME, JOURNAL_NAME + ".meta"):
        (raft_dir / name).unlink()
    cluster.start(follower)
    for i in range(15, 20):
        write(cluster, i)
    cluster.wait_converged(timeout_s=60)
    assert cluster.member(follower).alive() and set(cluster.digests()) == {m.node_id for m in cluster.members}
    assert "converted pysyncobj's journal" in cluster.member(follower).log_path.read_text()
    assert not (raft_dir / LEGACY_JOURNAL_NAME).exists()
    assert [e[1:] for e in read_entries(str(raft_dir / JOURNAL_NAME))[: len(entries)]] == [e[1:] for e in entries]
    assert_clean_logs(cluster)
