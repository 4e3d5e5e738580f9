"""A full disk: each node's Raft directory is a small tmpfs, mounted in the scenario's private
mount namespace (it vanishes with it). Fill it on a follower, then on the leader; free it;
restart the node; the cluster must recover and the replicas agree.

A node whose journal write or sync fails stops at once (it must not acknowledge what is not
on disk): each episode expects the filled node to exit with the journal's I/O status and its
CRITICAL line, the cluster to go on without it (the leader's full disk is a failover), and the
node to rejoin once space is freed. That one expected line is moved out of the node's log
(kept in `node.log.disk-full`) so the run's clean-logs check judges every other line."""

from __future__ import annotations

import subprocess
import time

from scheduler.local import wait_until
from scheduler.replication.journal import EXIT_JOURNAL_IO
from tests.chaos.harness import Scene, say
from tests.chaos.observe import finale
from tests.chaos.scenarios.load import start_load

TMPFS_SIZE = "8m"
LEFT_FREE_KB = 32
# The journal's last words on a full disk (journal.py, DurableJournal._fail).
STOP_LINE = ("CRITICAL", "No space left on device", "this node stops: it must not acknowledge what is not on disk")


def _raft_dir(scene: Scene, node_id: str):
    return scene.cluster.lc.member(node_id).config_path.parent / "raft"


def _mount_small_disks(scene: Scene) -> None:
    for node_id in scene.cluster.ids:
        path = _raft_dir(scene, node_id)
        path.mkdir(mode=0o700, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", "tmpfs", str(path)],
            check=True,
            capture_output=True,
            timeout=10,
        )


def _fill(scene: Scene, node_id: str) -> None:
    """Leave only a few KB free on the node's Raft disk."""
    path = _raft_dir(scene, node_id)
    filler = path / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, timeout=30)  # ENOSPC
    subprocess.run(["truncate", "-s", f"-{LEFT_FREE_KB}K", str(filler)], check=True, capture_output=True, timeout=10)


def _free(scene: Scene, node_id: str) -> None:
    (_raft_dir(scene, node_id) / "filler").unlink(missing_ok=True)


def _leader(scene: Scene, exclude=()) -> str:
    return wait_until(lambda: scene.cluster.leader(exclude=tuple(exclude)), 30, "a leader", interval_s=0.2)


def _set_aside_stop_line(scene: Scene, node_id: str) -> bool:
    """Whether the node's log holds the journal's stop line; it moves to node.log.disk-full."""
    log_path = scene.cluster.lc.member(node_id).log_path
    text = log_path.read_text(errors="replace")
    lines = text.splitlines(keepends=True)
    expected = [line for line in lines if all(part in line for part in STOP_LINE)]
    log_path.with_name("node.log.disk-full").write_text(text)
    log_path.write_text("".join(line for line in lines if line not in expected))
    return bool(expected)


def _episode(scene: Scene, node_id: str, role: str) -> None:
    cluster, recorder = scene.cluster, scene.recorder
    before = cluster.status(_leader(scene)).applied_index
    _fill(scene, node_id)
    say(f"{role} {node_id}: disk full")
    try:  # the load appends every second: the few KB left go within seconds
        wait_until(lambda: not cluster.alive(node_id), 60, f"{node_id} to stop on its full disk", interval_s=0.2)
    except TimeoutError:
        pass
    alive = cluster.alive(node_id)
    exit_code = None if alive else cluster.lc.member(node_id).process.returncode
    recorder.expect(
        f"the {role} stops when its journal cannot be written",
        exit_code == EXIT_JOURNAL_IO,
        f"alive={alive} exit={exit_code}",
    )
    if not alive:
        recorder.expect(f"the {role} said why it stopped", _set_aside_stop_line(scene, node_id), node_id)
    other = _leader(scene, exclude=(node_id,))

    def applied() -> int:
        status = cluster.status(other)
        return status.applied_index if status is not None else 0

    try:
        wait_until(lambda: applied() > before, 30, "the cluster to apply more", interval_s=0.2)
    except TimeoutError:
        pass
    say(
        f"{role} {node_id} alive={alive} exit={exit_code}; cluster applied {before} -> {applied()} under leader {other}"
    )
    recorder.expect(f"the cluster goes on while the {role}'s disk is full", applied() > before, f"leader {other}")
    _free(scene, node_id)
    if not alive:
        cluster.start(node_id)
    cluster.wait_caught_up(node_id, timeout_s=30)
    say(f"{role} {node_id}: space freed, restarted, caught up")


def disk_full(scene: Scene, options):
    """(8) Disk full on a follower, then on the leader; space freed; the cluster recovers."""
    cluster = scene.cluster
    _mount_small_disks(scene)
    cluster.start()
    leader = _leader(scene)
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    time.sleep(2)
    follower = scene.rng.choice([n for n in cluster.ids if n != leader])
    _episode(scene, follower, "follower")
    time.sleep(2)
    _episode(scene, _leader(scene), "leader")
    time.sleep(2)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)
