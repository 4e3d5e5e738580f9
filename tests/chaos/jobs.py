"""Job specs the scenarios apply: every-N-seconds jobs (pinned, so run keys are the slots)
and manual-only jobs whose schedule never fires during a test."""

from __future__ import annotations

import time

import grpc

from scheduler.core.model import JobSpec, RetryPolicy
from scheduler.rpc.convert import spec_to_pb, timestamp_us
from tests.chaos.harness import Scene, now_us

QUICK_RETRY = RetryPolicy(max_attempts=5, backoff_initial_us=200_000, backoff_max_us=1_000_000)


def every(job_id: str, seconds: int = 1, target: str = "noop", **fields):
    schedule = "* * * * * *" if seconds == 1 else f"*/{seconds} * * * * *"
    fields.setdefault("retry", QUICK_RETRY)
    return spec_to_pb(
        JobSpec(id=job_id, schedule=schedule, target_kind="handler", target=target, jitter="pinned", **fields)
    )


def manual(job_id: str, target: str = "noop", **fields):
    fields.setdefault("retry", QUICK_RETRY)
    return spec_to_pb(
        JobSpec(id=job_id, schedule="0 0 1 1 *", target_kind="handler", target=target, jitter="pinned", **fields)
    )


def apply_specs(scene: Scene, specs: list, chunk: int = 1000) -> int:
    """Apply `specs` (retrying through failovers); replicated time after the last acknowledgement.

    Slots are owed from replicated time, which follows the leader's clock: with a skewed
    leader it is not the observer's wall clock."""
    with scene.cluster.client(timeout_s=20) as client:
        for start in range(0, len(specs), chunk):
            request_id = f"setup-{start}-{now_us()}"
            for attempt in range(20):
                try:
                    client.apply_jobs(jobs=specs[start : start + chunk], author="chaos", request_id=request_id)
                    break
                except grpc.RpcError:
                    if attempt == 19:
                        raise
                    time.sleep(0.5)
    return replicated_now_us(scene)


def replicated_now_us(scene: Scene) -> int:
    """The leader's replicated time (the observer's clock if no leader answers)."""
    leader = scene.cluster.leader()
    status = scene.cluster.status(leader) if leader else None
    return timestamp_us(status.replicated_time) if status is not None else now_us()


def run_count(scene: Scene, node_id: str) -> int:
    status = scene.cluster.status(node_id)
    return status.run_count if status else -1
