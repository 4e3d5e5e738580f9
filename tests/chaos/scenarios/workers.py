"""Faults of SDK worker processes, with handlers writing to the fenced sink: a worker paused
for twice its lease, a worker cut off by the network, a worker killed mid-run, a handler hung
past its maximum runtime, and a rolling restart of every node while workers keep working."""

from __future__ import annotations

import json
import signal
import time

import grpc

from scheduler.core.model import RetryPolicy
from scheduler.local import wait_until
from tests.chaos.harness import CHAOS_SETTINGS, Scene, now_us, say
from tests.chaos.jobs import apply_specs, every, manual
from tests.chaos.observe import finale, run_obs
from worker.api.v1 import runs_pb2

TTL_S = CHAOS_SETTINGS["lease_ttl_s"]


def _runs(scene: Scene, job_id: str) -> list:
    try:
        with scene.cluster.client(timeout_s=5) as client:
            page = client.list_runs(runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, linearizable=True))
        return [run_obs(r) for r in page.runs]
    except grpc.RpcError:
        return []


def _trigger(scene: Scene, job_id: str, count: int) -> None:
    with scene.cluster.client(timeout_s=10) as client:
        for i in range(count):
            client.trigger_job(job_id=job_id, author=f"{job_id}-{i}", request_id=f"{job_id}-{i}-{scene.rng.random()}")


def _handlers_started(workers, worker_id: str, job_id: str) -> int:
    """Attempts of `job_id` whose handler `worker_id` started (workerproc logs each one)."""
    return workers.procs[worker_id].log_path.read_text(errors="replace").count(f"handler started: {job_id}@")


def _all(scene: Scene, job_id: str, count: int, predicate) -> bool:
    runs = _runs(scene, job_id)
    return len(runs) >= count and all(predicate(run) for run in runs)


def _setup(scene: Scene, quick_jobs: int, extra: list) -> tuple[dict, list, int]:
    """Every-second jobs whose handler writes the sink at once, and `extra` manual jobs."""
    firing = {f"quick-{i:02d}": 1 for i in range(quick_jobs)}
    specs = [every(job_id, target="chaos.write") for job_id in firing]
    return firing, extra, apply_specs(scene, specs + extra)


def _slow(job_id: str, sleep_s: float = 1.5):
    return manual(job_id, target="chaos.write", payload_json=json.dumps({"sleep_s": sleep_s}))


def _stale_writes_refused(scene: Scene, worker_id: str, job_id: str) -> int:
    return sum(1 for w in scene.recorder.sink if w.worker == worker_id and w.job_id == job_id and not w.accepted)


def pause_worker(scene: Scene, options):
    """(4) SIGSTOP a worker for twice its lease, then SIGCONT: its attempts were expired and
    leased again; when it wakes, the sink refuses its stale writes and the cluster its outcomes."""
    cluster, recorder, workers = scene.cluster, scene.recorder, scene.with_workers()
    cluster.start()
    cluster.wait_for_leader()
    firing, keep, ack_us = _setup(scene, 10, [_slow("slow")])
    workers.start("w1", concurrency=10)
    time.sleep(1.5)
    _trigger(scene, "slow", 5)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "leased"), 15, "w1 to lease the slow runs")
    # Leased in the cluster is not yet running on w1: the last grants may still be on their way.
    wait_until(lambda: _handlers_started(workers, "w1", "slow") >= 5, 15, "w1 to start the slow handlers")
    workers.signal("w1", signal.SIGSTOP)
    stopped = time.monotonic()
    say("paused w1 holding 5 slow runs")
    workers.start("w2", concurrency=10)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "succeeded"), 20, "w2 to finish the slow runs")
    time.sleep(max(0.0, stopped + 2 * TTL_S - time.monotonic()))
    workers.signal("w1", signal.SIGCONT)
    say("resumed w1")
    wait_until(lambda: _stale_writes_refused(scene, "w1", "slow") >= 5, 10, "w1's stale writes to reach the sink")
    runs = _runs(scene, "slow")
    recorder.expect("the sink refused every stale write", _stale_writes_refused(scene, "w1", "slow") == 5, "")
    recorder.expect(
        "each slow run succeeded on w2 after w1's attempt ended",
        all(r.attempts[0].worker == "w1" and r.attempts[-1].worker == "w2" for r in runs),
        str([(a.worker, a.outcome) for r in runs for a in r.attempts]),
    )
    time.sleep(2)
    return finale(scene, firing, ack_us, keep_specs=keep, sink_jobs=set(firing) | {"slow"})


def cut_worker(scene: Scene, options):
    """(4b) Cut a worker off from every node for twice its lease: the same fencing, by network."""
    cluster, recorder, workers = scene.cluster, scene.recorder, scene.with_workers()
    cluster.start()
    cluster.wait_for_leader()
    firing, keep, ack_us = _setup(scene, 10, [_slow("slow", sleep_s=3 * TTL_S)])
    workers.start("w1", concurrency=10)
    time.sleep(1.5)
    _trigger(scene, "slow", 5)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "leased"), 15, "w1 to lease the slow runs")
    wait_until(lambda: _handlers_started(workers, "w1", "slow") >= 5, 15, "w1 to start the slow handlers")
    for node_id in cluster.ids:
        scene.firewall.cut("w1", node_id)
    say("cut w1 off from every node")
    workers.start("w2", concurrency=10)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "succeeded"), 20, "w2 to finish the slow runs")
    wait_until(lambda: _stale_writes_refused(scene, "w1", "slow") >= 5, 15, "w1's stale writes to reach the sink")
    scene.firewall.heal()
    recorder.expect("the sink refused every stale write", _stale_writes_refused(scene, "w1", "slow") == 5, "")
    time.sleep(2)
    return finale(scene, firing, ack_us, keep_specs=keep, sink_jobs=set(firing) | {"slow"})


def kill_worker(scene: Scene, options):
    """(6) SIGKILL a worker mid-run: its runs are leased again and succeed elsewhere. A handler
    that hangs ignoring cancellation is ended at the job's maximum runtime."""
    cluster, recorder, workers = scene.cluster, scene.recorder, scene.with_workers()
    cluster.start()
    cluster.wait_for_leader()
    hung = manual(
        "hung",
        target="chaos.hang",
        timeout_us=2_000_000,
        retry=RetryPolicy(max_attempts=1),
        payload_json=json.dumps({"hang_s": 8}),
    )
    firing, keep, ack_us = _setup(scene, 10, [_slow("slow"), hung])
    workers.start("w1", concurrency=10)
    time.sleep(1.5)
    _trigger(scene, "slow", 5)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "leased"), 15, "w1 to lease the slow runs")
    workers.procs["w1"].process.kill()
    say("killed w1 mid-run")
    workers.start("w2", concurrency=10)
    wait_until(lambda: _all(scene, "slow", 5, lambda r: r.status == "succeeded"), 20, "w2 to finish the slow runs")
    _trigger(scene, "hung", 1)
    wait_until(
        lambda: _all(scene, "hung", 1, lambda r: r.status not in ("queued", "leased")), 15, "the hung run to end"
    )
    (run,) = _runs(scene, "hung")
    attempt = run.attempts[-1]
    held_s = (attempt.finished_us - attempt.started_us) / 1e6
    recorder.expect(
        "the hung run timed out at its maximum runtime",
        run.status == "timed_out" and held_s < 2 + 1.5,
        f"{run.status} after {held_s:.1f}s",
    )
    return finale(scene, firing, ack_us, keep_specs=keep, sink_jobs=set(firing) | {"slow"})


def rolling_restart(scene: Scene, options):
    """(12) Restart every node in turn (SIGTERM, start, catch up) while two workers keep
    running every-second jobs; every success left its effect in the sink."""
    cluster, workers = scene.cluster, scene.with_workers()
    cluster.start()
    cluster.wait_for_leader()
    firing, keep, ack_us = _setup(scene, 20, [])
    workers.start("w1", concurrency=8)
    workers.start("w2", concurrency=8)
    time.sleep(3)
    leader = cluster.wait_for_leader()
    order = [n for n in scene.rng.sample(cluster.ids, len(cluster.ids)) if n != leader] + [leader]
    for node_id in order:
        cluster.kill(node_id, signal.SIGTERM)
        say(f"stopped {node_id}")
        time.sleep(scene.rng.uniform(0.2, 1.0))
        cluster.start(node_id)
        cluster.wait_caught_up(node_id)
        say(f"{node_id} back and caught up")
        time.sleep(1)
    time.sleep(2)
    settled_us = now_us() - 5_000_000  # runs due before this had time to run before the finale
    history = finale(scene, firing, ack_us, keep_specs=keep, sink_jobs=set(firing))
    runs = next(iter(history.replicas.values()))
    settled = [r for r in runs if r.job_id in firing and r.scheduled_us < settled_us]
    done = sum(1 for r in settled if r.status == "succeeded")
    history.expectations.append(
        (
            "workers kept working",
            len(settled) > 100 and done >= 0.9 * len(settled),
            f"{done} of {len(settled)} runs succeeded",
        )
    )
    return history
