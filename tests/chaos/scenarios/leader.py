"""Faults of the leader: killed mid-enqueue, killed while leasing, isolated, paused, killed repeatedly."""

from __future__ import annotations

import random
import signal
import time

from scheduler.local import wait_until
from tests.chaos.clients import RawWorker, TriggerWriter
from tests.chaos.harness import Scene, now_us, say
from tests.chaos.jobs import apply_specs, every, manual, run_count
from tests.chaos.observe import finale, runs_on
from tests.chaos.scenarios.load import start_load

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
    recorder.expect(
        "acknowledged on both sides of the kill",
        0 < acked_before < writer.acked,
        f"{acked_before} before, {writer.acked} in all",
    )
    recorder.expect("every trigger acknowledged", writer.unknown == 0, f"{writer.unknown} left unknown")
    cluster.start(first)  # back as a follower; it catches up
    cluster.wait_caught_up(first)
    return finale(scene, {spec.id: 1 for spec in herd}, ack_us, keep_specs=keep)


def kill_leader_leasing(scene: Scene, options):
    """(2) Kill the leader while 1,000 runs due at the same second are being leased."""
    cluster, recorder = scene.cluster, scene.recorder
    cluster.start()
    first = cluster.wait_for_leader()
    load = start_load(scene, herd=0, raw_jobs=HERD, raw_workers=4, period_s=4)
    for worker in load.workers:
        worker.max_held = 150
    wait_until(lambda: recorder.stats.get("grants", 0) >= HERD, 30, "a first herd leased")
    # The next herd: due at the next multiple of 4 s; kill while its leases are being granted.
    now = time.time()
    time.sleep(4 - now % 4 + scene.rng.uniform(0.02, 0.25))
    before = recorder.stats.get("grants", 0)
    cluster.kill(first)
    say(f"killed leader {first} with {before} grants observed")
    second = cluster.wait_for_leader(exclude=(first,))
    say(f"new leader {second}")
    wait_until(lambda: recorder.stats.get("grants", 0) >= before + HERD, 30, "another herd leased")
    recorder.expect(
        "leases granted across the kill",
        recorder.stats["grants"] > before,
        f"{before} grants before the kill, {recorder.stats['grants']} in all",
    )
    cluster.start(first)
    cluster.wait_caught_up(first)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def _watch_isolated(scene: Scene, node_id: str, seconds: float) -> tuple[int, int, list]:
    """Poll the isolated node: (applied index at the start, at the end, its runs at the end)."""
    cluster = scene.cluster
    first = cluster.status(node_id).applied_index
    last, roles = first, []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        status = cluster.status(node_id)
        if status is not None:
            last = status.applied_index
            roles.append(status.role)
        time.sleep(0.3)
    return first, last, roles


def isolate_leader(scene: Scene, options):
    """(3) Cut the leader off from the other nodes for longer than an election. Clients that
    can reach only it keep calling it. Whatever it applied must survive; it commits nothing
    alone; the majority elects a new leader and goes on."""
    cluster, recorder = scene.cluster, scene.recorder
    cluster.start()
    old = cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    alone = start_load_on(scene, old)
    time.sleep(3)
    others = [n for n in cluster.ids if n != old]
    scene.firewall.isolate(old, others)
    say(f"isolated leader {old} from {others}")
    acked_at_cut = alone.acked
    first, last, roles = _watch_isolated(scene, old, 2.0)
    new = cluster.wait_for_leader(timeout_s=10, exclude=(old,))
    say(f"majority elected {new}")
    acked_at_election, elected_us = alone.acked, now_us()
    _, last, more_roles = _watch_isolated(scene, old, 3.0)
    recorder.interim[old] = runs_on(scene, old)  # all it applied: it must survive the heal
    acked_alone = alone.acked - acked_at_cut
    recorder.expect("a new leader on the majority side", new != old, new)
    recorder.expect(
        "nothing acknowledged through the isolated side once the majority moved on",
        alone.acked == acked_at_election,
        f"{alone.acked - acked_at_election} writes",
    )
    late_grants = [g for g in recorder.grants if g.worker == f"only-{old}" and g.at_us > elected_us]
    recorder.expect(
        "no lease granted by the isolated side once the majority moved on",
        not late_grants,
        f"{len(late_grants)} grants",
    )
    recorder.expect("the isolated leader stepped down", (roles + more_roles)[-1] != "leader", str(roles[-3:]))
    say(f"isolated node applied {first} -> {last}; writes acked through it while isolated: {acked_alone}")
    scene.firewall.heal()
    say("healed")
    time.sleep(2)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def start_load_on(scene: Scene, node_id: str) -> TriggerWriter:
    """A raw worker and a trigger writer that can reach `node_id` only."""
    address = [scene.cluster.address(node_id)]
    worker = RawWorker(address, f"only-{node_id}", scene.recorder, random.Random(scene.rng.random()))
    writer = TriggerWriter(
        address, scene.recorder, "manual", prefix=f"only-{node_id}-", count=100_000, threads=1, give_up_s=3
    )
    for thread in (worker, writer):
        scene.threads.append(thread)
        thread.start()
    return writer


def pause_leader(scene: Scene, options):
    """(5) SIGSTOP the leader for a few seconds, then SIGCONT: it wakes up believing it leads."""
    cluster, recorder = scene.cluster, scene.recorder
    cluster.start()
    old = cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    time.sleep(3)
    cluster.pause(old)
    paused_s = scene.rng.uniform(3, 5)
    say(f"paused leader {old} for {paused_s:.1f}s")
    new = cluster.wait_for_leader(timeout_s=10)
    time.sleep(max(0.0, paused_s - 1))
    cluster.resume(old)
    say(f"resumed {old}; leader meanwhile {new}")
    recorder.expect("a new leader while the old one was paused", new != old, new)
    time.sleep(3)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def kill_leader_repeatedly(scene: Scene, options, seconds: float = 28.0):
    """(10) Kill the leader every few seconds while jobs fire every second; restart it soon after."""
    cluster, recorder = scene.cluster, scene.recorder
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=200, raw_jobs=20, raw_workers=3, triggers=100_000)
    stop = time.monotonic() + seconds
    kills = 0
    while time.monotonic() < stop:
        time.sleep(scene.rng.uniform(2.0, 4.0))
        leader = cluster.wait_for_leader(timeout_s=20)
        cluster.kill(leader)
        kills += 1
        say(f"killed leader {leader} (kill {kills})")
        time.sleep(scene.rng.uniform(0.3, 2.0))
        cluster.start(leader)
    recorder.expect("several leaders killed", kills >= 5, f"{kills} kills")
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)
