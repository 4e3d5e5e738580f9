"""Faults of the leader: killed mid-enqueue, killed while leasing, isolated, paused, killed repeatedly."""

from __future__ import annotations

import signal
import time

from scheduler.localcluster import wait_until
from tests.chaos.clients import RawWorker, TriggerWriter
from tests.chaos.harness import Scene, now_us, say
from tests.chaos.jobs import apply_specs, every, manual, run_count
from tests.chaos.observe import finale

HERD = 1000


def _kill_just_after_a_second_boundary(scene: Scene, node_id: str) -> None:
    # The trigger loop claims a second's keys right at the boundary: a kill a few ms later
    # lands while that batch is proposed or replicating.
    now = time.time()
    time.sleep(1 - (now - int(now)) + scene.rng.uniform(0.002, 0.03))
    scene.cluster.kill(node_id, signal.SIGKILL)


def kill_leader_enqueue(scene: Scene, options):
    """(1) Kill the leader after part of a 1,000-key enqueue was acknowledged: batches (1,000
    every-second jobs, one entry per second) and single claims (1,000 manual triggers, one
    entry each, retried with their request ids)."""
    cluster, recorder = scene.cluster, scene.recorder
    cluster.start()
    first = cluster.wait_for_leader()
    herd = [every(f"herd-{i:04d}") for i in range(HERD)]
    keep = [manual("manual")]  # kept at the end: deleting it would rewrite its runs' reasons
    ack_us = apply_specs(scene, herd + keep)
    wait_until(lambda: run_count(scene, first) >= 2 * HERD, 30, "two seconds of claims")
    writer = TriggerWriter(cluster.addresses, recorder, "manual", prefix=f"t{options.seed}-", count=1000)
    scene.threads.append(writer)
    writer.start()
    share = scene.rng.uniform(0.2, 0.6)
    wait_until(lambda: writer.acked >= share * writer.count, 60, f"{share:.0%} of the triggers acknowledged")
    acked_before = writer.acked
    _kill_just_after_a_second_boundary(scene, first)
    say(f"killed leader {first} after {acked_before} triggers were acknowledged")
    second = cluster.wait_for_leader(exclude=(first,))
    baseline = run_count(scene, second)
    say(f"new leader {second}")
    wait_until(lambda: writer.acked + writer.unknown >= writer.count, 90, "every trigger answered or given up")
    wait_until(lambda: run_count(scene, second) >= baseline + 2 * HERD, 30, "claims under the new leader")
    recorder.expect("acknowledged on both sides of the kill", 0 < acked_before < writer.acked,
                    f"{acked_before} before, {writer.acked} in all")
    recorder.expect("every trigger acknowledged", writer.unknown == 0, f"{writer.unknown} left unknown")
    cluster.start(first)  # back as a follower; it catches up
    cluster.wait_caught_up(first)
    return finale(scene, {spec.id: 1 for spec in herd}, ack_us, keep_specs=keep)
