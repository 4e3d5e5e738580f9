"""Network faults between nodes, by iptables inside the namespace: a one-way cut, a bridge
(two nodes cut from each other, both reaching the third) and lossy links.

Raft here runs over one TCP connection per pair of nodes, so dropping one direction also
starves the other of ACKs: a one-way cut degrades into a cut of that pair's connection,
noticed later than a clean cut (retransmissions until the connection times out).
"""

from __future__ import annotations

import itertools
import time

from tests.chaos.harness import Scene, say
from tests.chaos.observe import finale, runs_on
from tests.chaos.scenarios.load import start_load


def partitions(scene: Scene, options):
    """(11) One-way and partial partitions, then a flaky network dropping a share of packets."""
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    firewall = scene.firewall
    time.sleep(2)

    leader = cluster.wait_for_leader()
    followers = [n for n in cluster.ids if n != leader]
    for follower in followers:
        firewall.drop(leader, follower)
    say(f"one-way: {leader}'s packets to {followers} dropped")
    time.sleep(rng.uniform(3, 5))
    firewall.heal()
    after_one_way = cluster.wait_for_leader(timeout_s=20)
    say(f"healed; leader {after_one_way}")
    time.sleep(2)

    a, b = rng.sample(cluster.ids, 2)
    firewall.cut(a, b)
    say(f"bridge: {a} and {b} cut from each other, both reach the third")
    time.sleep(rng.uniform(4, 6))
    bridged = cluster.leader()
    firewall.heal()
    say(f"healed; leader during the bridge: {bridged}")
    time.sleep(2)

    loss = rng.uniform(0.15, 0.3)
    for x, y in itertools.combinations(cluster.ids, 2):
        firewall.cut(x, y, probability=loss)
    say(f"lossy: every node-to-node link drops {loss:.0%} of packets")
    time.sleep(rng.uniform(5, 7))
    firewall.heal()
    recorder.expect("a leader after each heal", after_one_way is not None, "")
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def lossy_links(scene: Scene, options, seconds: float = 8.0, loss: float = 0.3):
    """A flaky network only: every node-to-node link drops `loss` of its packets for a while."""
    cluster = scene.cluster
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    time.sleep(2)
    for x, y in itertools.combinations(cluster.ids, 2):
        scene.firewall.cut(x, y, probability=loss)
    say(f"lossy: every node-to-node link drops {loss:.0%} of packets for {seconds:.0f}s")
    time.sleep(seconds)
    scene.firewall.heal()
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def lossy_phases(scene: Scene, options, phases: int = 6):
    """Six spells of 35 % packet loss on every link. Before the follower kept entries it already
    held (scheduler/replication/follower_append.py), pipelined appends answered "reset" made a
    follower truncate applied entries here (pysyncobj's CRITICAL line) within a few spells."""
    cluster = scene.cluster
    cluster.start()
    cluster.wait_for_leader()
    load = start_load(scene, herd=100, raw_jobs=10, raw_workers=2, triggers=100_000)
    time.sleep(1)
    for phase in range(phases):
        for x, y in itertools.combinations(cluster.ids, 2):
            scene.firewall.cut(x, y, probability=0.35)
        say(f"lossy spell {phase + 1} of {phases}")
        time.sleep(5)
        scene.firewall.heal()
        time.sleep(1)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)


def minority_partition(scene: Scene, options):
    """Five nodes: the leader and one follower are cut off from the other three. The minority's
    leader steps down; the majority elects a leader and goes on; after the heal every replica
    holds the majority's history (equal digests, no truncated applied entry)."""
    cluster, recorder, rng = scene.cluster, scene.recorder, scene.rng
    cluster.start()
    old = cluster.wait_for_leader()
    load = start_load(scene, herd=50, raw_jobs=10, raw_workers=2, triggers=100_000)
    time.sleep(2)
    minority = [old, rng.choice([n for n in cluster.ids if n != old])]
    majority = [n for n in cluster.ids if n not in minority]
    for a in minority:
        for b in majority:
            scene.firewall.cut(a, b)
    say(f"partitioned {minority} | {majority}")
    new = cluster.wait_for_leader(timeout_s=15, exclude=tuple(minority))
    time.sleep(3)
    roles = {n: cluster.status(n).role for n in minority}
    recorder.interim.update({n: runs_on(scene, n) for n in minority})
    recorder.expect("the majority elected its own leader", new in majority, new)
    # Nothing the minority applies can be its own: it may still apply entries the majority acked
    # before the cut (a starved node learns their commit late, measured here), and anything it
    # committed on its own would be truncated at the heal, which the finale's replica digests and
    # its CRITICAL-line check catch.
    recorder.expect("the cut-off leader stepped down", roles[old] != "leader", str(roles))
    scene.firewall.heal()
    say("healed")
    time.sleep(2)
    return finale(scene, load.firing, load.ack_us, keep_specs=load.keep)
