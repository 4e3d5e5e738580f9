"""Handlers run by the worker processes of the integration tests, and the fenced sink they write to.

The sink stands for any downstream store that fences by token: it remembers the highest
token seen per run key and refuses a write carrying a lower one. It lives in files under
RAFTCRON_TEST_SINK so the test process and every worker process share it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path


class FencedSink:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _journal(self):
        return open(self.root / "journal.jsonl", "a+")

    def write(self, run_key: str, token: int, worker: str) -> bool:
        """Accept the write unless a higher token was already seen for this run key."""
        with self._journal() as journal:
            fcntl.flock(journal, fcntl.LOCK_EX)
            journal.seek(0)
            highest = max((e["token"] for e in map(json.loads, journal) if e["key"] == run_key and e["ok"]), default=0)
            accepted = token >= highest
            journal.write(json.dumps({"key": run_key, "token": token, "worker": worker, "ok": accepted}) + "\n")
            return accepted

    def mark(self, name: str, record: dict) -> None:
        with open(self.root / f"{name}.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")

    def read(self, name: str = "journal") -> list[dict]:
        path = self.root / f"{name}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _sink() -> FencedSink:
    return FencedSink(os.environ["RAFTCRON_TEST_SINK"])


def slow_sink_job(ctx) -> None:
    """Announce the start, work for `payload.work_s` ignoring cancellation, then write to the sink."""
    sink = _sink()
    sink.mark("started", {"key": ctx.run_key, "token": ctx.fencing_token, "worker": ctx.worker_id, "pid": os.getpid()})
    time.sleep((ctx.payload or {}).get("work_s", 0))
    sink.write(ctx.run_key, ctx.fencing_token, ctx.worker_id)


def quick_sink_job(ctx) -> None:
    _sink().write(ctx.run_key, ctx.fencing_token, ctx.worker_id)


def hang_job(ctx) -> None:
    """Ignores heartbeat results and cancellation: only the cluster's max runtime ends it."""
    _sink().mark("started", {"key": ctx.run_key, "token": ctx.fencing_token, "worker": ctx.worker_id})
    time.sleep(3600)
