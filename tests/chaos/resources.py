"""Samples every node's memory and Raft journal while a scenario runs: "memory and log bounded".

A sampler thread reads, once a second, each live node process's resident set (VmRSS) and the
size of its Raft journal file (raft.wal). It holds exactly the entries since the last compaction
and is replaced by a smaller file at each one: a cluster that never compacted would show it
growing without end.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from scheduler.local import rss_kib

# (seconds since the sampler started, resident KiB, journal bytes)
Sample = tuple[float, int, int]


def journal_bytes(node_dir: Path) -> int:
    try:
        return (node_dir / "raft" / "raft.wal").stat().st_size
    except OSError:
        return 0


class ResourceSampler:
    def __init__(self, local_cluster, period_s: float = 1.0) -> None:
        self._cluster = local_cluster
        self._period_s = period_s
        self._stop = threading.Event()
        self._started = time.monotonic()
        self.samples: dict[str, list[Sample]] = {}
        self._thread = threading.Thread(target=self._run, name="resource-sampler", daemon=True)

    def start(self) -> ResourceSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, list[Sample]]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples

    def sample_once(self) -> None:
        at_s = time.monotonic() - self._started
        for member in self._cluster.members:
            process = member.process
            if process is None or process.poll() is not None:
                continue
            rss = rss_kib(process.pid)
            if rss is not None:
                node_dir = self._cluster.data_dir / member.node_id
                self.samples.setdefault(member.node_id, []).append((at_s, rss, journal_bytes(node_dir)))

    def _run(self) -> None:
        while not self._stop.wait(self._period_s):
            self.sample_once()
