"""Power loss: a majority of nodes, then every node, lose power under load. Each loses what it
had not synced (tests/chaos/powercut.py), sometimes with the next record torn; the nodes come
back and the cluster heals. Every acknowledged write must survive, no run key fire twice.

The same scenario with syncing off (`power_loss_unsynced`) must fail: it shows the checker
finds lost acknowledged writes when the journal does not hold them."""

from __future__ import annotations

import time

import grpc

from tests.chaos.clients import ApplyWriter
from tests.chaos.harness import CHAOS_SETTINGS, Scene, say
from tests.chaos.jobs import apply_specs, every, manual
from tests.chaos.observe import finale, runs_on
from tests.chaos.powercut import MAX_TEAR_BYTES, NO_TEAR, Tear
from tests.chaos.scenarios.load import start_load

SINK_JOBS = 5
# Compactions every few seconds: cuts land before, during and after a dump is renamed in.
SETTINGS = {"raft": {**CHAOS_SETTINGS["raft"], "compaction_min_entries": 3000, "compaction_min_time_s": 4.0}}
UNSYNCED = {"raft": {**SETTINGS["raft"], "sync": False}}


def _at_a_claim(scene: Scene) -> None:
    # The trigger loop claims each second's keys at the boundary: cut while that batch is in flight.
    now = time.time()
    time.sleep(1 - (now - int(now)) + scene.rng.uniform(0.002, 0.03))


def _shown(files: dict) -> str:
    def one(name, fate):
        if fate.action != "truncate":
            return f"{name} {fate.action}"
        torn = f", +{fate.torn_bytes} torn" if fate.torn_bytes else ""
        return f"{name} cut to {fate.length_bytes} (-{fate.dropped_bytes}{torn})"

    return ", ".join(one(name, fate) for name, fate in sorted(files.items())) or "no files"


def _power_cut(scene: Scene, node_ids: list[str], label: str) -> None:
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    # What these nodes applied was committed: it must all be in the final state, at the same entries.
    for node_id in node_ids:
        try:
            recorder.interim[f"{node_id} before {label}"] = runs_on(scene, node_id)
        except grpc.RpcError as error:
            say(f"{label}: could not read {node_id}'s runs ({error.code().name}); cutting it unread")
    tears = {
        n: Tear(rng.randint(1, MAX_TEAR_BYTES), zeros=rng.random() < 0.5) if rng.random() < 0.5 else NO_TEAR
        for n in node_ids
    }
    _at_a_claim(scene)
    fates = cluster.power_cut(node_ids, tears)
    for node_id, files in sorted(fates.items()):
        tear = tears[node_id]
        torn = f"tear {tear.kept_bytes} bytes{', zero-filled' if tear.zeros else ''}" if tear.kept_bytes else "no tear"
        torn = torn if cluster.synced else "syncing off"
        say(f"{label}: {node_id} lost power ({torn}): {_shown(files)}")
        recorder.count("unsynced_bytes_dropped", sum(f.dropped_bytes for f in files.values()))
        recorder.count("torn_records_written", sum(1 for f in files.values() if f.torn_bytes))
    time.sleep(rng.uniform(0.2, 1.0))
    cluster.start()
    leader = cluster.wait_for_leader(timeout_s=30)
    for node_id in node_ids:
        cluster.wait_caught_up(node_id, timeout_s=30)
    say(f"{label}: restarted; leader {leader}, every node caught up")


def power_loss(scene: Scene, options):
    """Cut power to a majority (the leader and a follower, or both followers), then to every
    node, under every-second jobs, a worker writing the fenced sink, raw workers completing
    runs, and ApplyJobs and TriggerJob writes: acknowledged writes, claims and completions
    survive both cuts."""
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    cluster.record_disks()  # before the nodes first run: what an unsynced node comes back to
    cluster.start()
    cluster.wait_for_leader()
    sink_jobs = {f"quick-{i:02d}": 1 for i in range(SINK_JOBS)}
    apply_specs(scene, [every(job_id, target="chaos.write") for job_id in sink_jobs])
    load = start_load(scene, herd=30, raw_jobs=10, raw_workers=2, triggers=100_000)  # owes slots after both
    workers = scene.with_workers()
    workers.start("w1", concurrency=8)
    applier = ApplyWriter(
        cluster.addresses,
        recorder,
        f"w{options.seed}-",
        100_000,
        spec_for=lambda i: manual(f"written-{i:05d}"),
        threads=2,
        give_up_s=20,
    )
    scene.threads.append(applier)
    applier.start()
    acked = []
    time.sleep(rng.uniform(2.0, 4.0))
    leader = cluster.wait_for_leader()
    followers = [n for n in cluster.ids if n != leader]
    # Mostly the leader and a follower (the leader counts itself toward commits); else both followers.
    majority = [leader, rng.choice(followers)] if rng.random() < 2 / 3 else followers
    acked.append(applier.acked)
    _power_cut(scene, majority, "the majority cut")
    time.sleep(rng.uniform(2.0, 4.0))
    acked.append(applier.acked)
    _power_cut(scene, list(cluster.ids), "the full cut")
    time.sleep(2)
    applier.stop()
    applier.join(timeout=30)
    recorder.expect(
        "writes acknowledged before and between the cuts",
        0 < acked[0] < acked[1] < applier.acked,
        f"acknowledged before each cut: {acked}, in all {applier.acked}",
    )
    # Without syncing the state is gone and the jobs with it: waiting long for progress shows nothing more.
    return finale(
        scene,
        {**sink_jobs, **load.firing},
        load.ack_us,
        keep_specs=load.keep + applier.specs,
        sink_jobs=frozenset(sink_jobs),
        progress_timeout_s=30.0 if cluster.synced else 10.0,
    )
