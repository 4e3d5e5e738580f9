"""The load most scenarios run under: every-second jobs, raw workers leasing some of them,
and a trigger writer making single-entry client writes with request ids."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tests.chaos.clients import RawWorker, TriggerWriter
from tests.chaos.harness import Scene
from tests.chaos.jobs import apply_specs, every, manual


@dataclass
class Load:
    firing: dict[str, int]  # job id -> period in seconds
    keep: list  # specs left in place at the end (manual jobs keep their runs' reasons)
    ack_us: int
    workers: list[RawWorker] = field(default_factory=list)
    writers: list[TriggerWriter] = field(default_factory=list)


def start_load(
    scene: Scene,
    herd: int = 100,
    raw_jobs: int = 10,
    raw_workers: int = 2,
    period_s: int = 1,
    triggers: int = 0,
    worker_addresses=None,
    writer_addresses=None,
) -> Load:
    """`herd` jobs nobody leases, `raw_jobs` leased by `raw_workers`, `triggers` manual runs."""
    firing = {f"herd-{i:04d}": period_s for i in range(herd)}
    firing.update({f"raw-{i:03d}": period_s for i in range(raw_jobs)})
    specs = [every(job_id, period_s, target="raw" if job_id.startswith("raw") else "noop") for job_id in firing]
    keep = [manual("manual")]
    load = Load(firing, keep, apply_specs(scene, specs + keep))
    for k in range(raw_workers):
        worker = RawWorker(
            worker_addresses or scene.cluster.addresses, f"raw{k}", scene.recorder, random.Random(scene.rng.random())
        )
        load.workers.append(worker)
    if triggers:
        writer = TriggerWriter(
            writer_addresses or scene.cluster.addresses,
            scene.recorder,
            "manual",
            prefix=f"t{scene.rng.randrange(1 << 30)}-",
            count=triggers,
            threads=2,
            give_up_s=20,
        )
        load.writers.append(writer)
    for thread in load.workers + load.writers:
        scene.threads.append(thread)
        thread.start()
    return load
