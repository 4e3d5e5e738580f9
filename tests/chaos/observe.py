"""Reading replicas for the checker: runs, jobs and digests per node, and the scenario's finale
(heal everything, wait for progress, stop the load, let the replicas converge, read them)."""

from __future__ import annotations

import time

import grpc

from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, timestamp_us
from tests.chaos.checker import Attempt, History, RunObs
from tests.chaos.harness import Scene, say
from tests.chaos.jobs import replicated_now_us
from worker.api.v1 import jobs_pb2, runs_pb2

SECOND_US = 1_000_000
MANUAL_PREFIX = "triggered by "


def run_obs(run) -> RunObs:
    attempts = tuple(
        Attempt(a.fencing_token, a.outcome, timestamp_us(a.started_at), timestamp_us(a.finished_at), a.worker_id)
        for a in run.attempts
    )
    request = run.reason[len(MANUAL_PREFIX) :] if run.kind == "manual" and run.reason.startswith(MANUAL_PREFIX) else ""
    return RunObs(
        run.job_id,
        timestamp_us(run.scheduled_at),
        STATUS_FROM_PB.get(run.status, str(run.status)),
        run.claim_index,
        run.kind,
        run.reason,
        run.fencing_token,
        attempts,
        request,
    )


def runs_on(scene: Scene, node_id: str, timeout_s: float = 30.0) -> list[RunObs]:
    """Every retained run in `node_id`'s local state (not forwarded: what that replica applied)."""
    runs, token = [], ""
    with scene.cluster.client(node_id, timeout_s=timeout_s) as client:
        for _ in range(10_000):
            page = client.list_runs(runs_pb2.ListRunsRequest(page_size=1000, page_token=token))
            runs += [run_obs(r) for r in page.runs]
            token = page.next_page_token
            if not token:
                break
    return runs


def jobs_on(scene: Scene, node_id: str, linearizable: bool = False) -> dict[str, tuple[int, int]]:
    """job_id -> (version, cursor_us) in `node_id`'s state."""
    jobs, token = {}, ""
    with scene.cluster.client(node_id, timeout_s=30) as client:
        for _ in range(10_000):
            page = client.list_jobs(
                jobs_pb2.ListJobsRequest(page_size=1000, page_token=token, linearizable=linearizable)
            )
            jobs.update({j.spec.id: (j.version, timestamp_us(j.cursor)) for j in page.jobs})
            token = page.next_page_token
            if not token:
                return jobs
    return jobs


def slots(every_s: int, after_us: int, until_us: int) -> list[int]:
    """Instants of a `*/every_s * * * * *` schedule in (after_us, until_us]."""
    step = every_s * SECOND_US
    first = (after_us // step + 1) * step
    return list(range(first, until_us + 1, step))


def heal(scene: Scene) -> str:
    """Lift every fault: flush the firewall, resume paused nodes, start dead ones; the leader."""
    if scene._firewall is not None:
        scene.firewall.heal()
    for node_id in list(scene.cluster.paused):
        scene.cluster.resume(node_id)
    scene.cluster.start()
    return scene.cluster.wait_for_leader(30)


def wait_progress(scene: Scene, job_ids: list[str], until_us: int, timeout_s: float = 30.0) -> bool:
    """Until every job's cursor reached `until_us` (the cluster accounts for slots again)."""

    def reached():
        leader = scene.cluster.leader()
        if leader is None:
            return False
        try:
            jobs = jobs_on(scene, leader, linearizable=True)
        except grpc.RpcError:
            return False
        behind = [j for j in job_ids if jobs.get(j, (0, 0))[1] < until_us]
        return not behind

    try:
        wait_until(reached, timeout_s, "every job's cursor to pass the heal instant", interval_s=0.5)
        return True
    except TimeoutError:
        return False


def converged_digests(scene: Scene, timeout_s: float = 30.0) -> dict[str, tuple[int, str]]:
    """(applied index, digest) of every node, read until all agree (the leader's clock ticks keep
    appending entries, so one reading may catch a replica an entry behind); the last reading."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = scene.cluster.lc.digests()
        if len(seen) == len(scene.cluster.ids) and len(set(seen.values())) == 1:
            return seen
        if time.monotonic() > deadline:
            say(f"replicas did not converge: {seen}")
            return seen
        time.sleep(0.1)


def finale(
    scene: Scene,
    firing: dict[str, int],
    ack_us: int,
    keep_specs=(),
    sink_jobs=frozenset(),
    progress_timeout_s: float = 30.0,
) -> History:
    """Heal, check progress, stop the load, delete the firing jobs, converge, read every replica.

    `firing` maps each scheduled job to its period in seconds; its slots after `ack_us` (the
    replicated time when the jobs were acknowledged) up to the progress instant (replicated
    time after the heal, less a second) must all be accounted for.
    """
    recorder = scene.recorder
    leader = heal(scene)
    say(f"healed; leader {leader}")
    until_us = replicated_now_us(scene) - SECOND_US
    progressed = wait_progress(scene, sorted(firing), until_us, progress_timeout_s)
    recorder.expect("progress after heal", progressed, "every job's cursor passed the heal instant")
    scene.stop_clients()
    if scene.workers is not None:
        scene.workers.stop_all()
    for attempt in range(10):
        try:
            # Only jobs the cluster still holds: applying a lost one again would hide its loss.
            held = jobs_on(scene, scene.cluster.wait_for_leader(10), linearizable=True)
            kept = [spec for spec in keep_specs if spec.id in held]
            with scene.cluster.client(timeout_s=10) as client:
                client.apply_jobs(jobs=kept, prune=True, author="chaos", request_id=f"finale-{ack_us}")
            break
        except (grpc.RpcError, TimeoutError) as error:
            say(f"prune failed ({error.code().name if isinstance(error, grpc.RpcError) else error}); retrying")
            time.sleep(1)
    digests = converged_digests(scene)
    replicas = {nid: runs_on(scene, nid) for nid in scene.cluster.ids}
    jobs = {nid: {job_id: v for job_id, (v, _) in jobs_on(scene, nid).items()} for nid in scene.cluster.ids}
    say(f"read {sum(map(len, replicas.values()))} runs from {len(replicas)} replicas")
    return History(
        replicas=replicas,
        jobs=jobs,
        digests=digests,
        expected_replicas=tuple(scene.cluster.ids),
        interim=recorder.interim,
        due={job_id: slots(every_s, ack_us, until_us) for job_id, every_s in firing.items()},
        grants=recorder.grants,
        answers=recorder.answers,
        sink=recorder.sink,
        sink_jobs=frozenset(sink_jobs),
        acked=recorder.acked,
        log_alerts=scene.cluster.log_alerts(),
        expectations=recorder.expectations,
        resources=scene.resources.stop(),
    )
