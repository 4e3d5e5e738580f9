"""A report job: one output file per slot, written atomically, refusing stale writers.

Two protections, for two different failures:

- The output path is keyed by the run key, and the file is written to a temporary name and
  renamed into place. A retried attempt of the same slot rewrites the same file, and a reader
  sees either the old complete file or the new complete one, never half a report.
- A stale attempt (its lease was lost while it kept running: a long GC pause, a partition)
  may still be writing after a newer attempt started. Before renaming, the handler checks its
  fencing token against the highest token recorded for that output, under a file lock, and
  refuses to write if a newer attempt has been there. Tokens only grow, so "newer" is ">".

Run it to see a stale writer refused:

    python examples/report_job.py

Serve it from a worker (target `reports.build`, payload {"report": ..., "out_dir": ...}):

    raftcron worker --handlers examples.report_job:HANDLERS
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from pathlib import Path

from worker import RunContext

DEFAULT_OUT_DIR = "reports-out"


class StaleAttempt(Exception):
    """A newer attempt of this run already wrote (or is writing) the output."""


def output_path(out_dir: Path, run_key: str) -> Path:
    """One file per run key; characters unsafe in file names become '_'."""
    return out_dir / (re.sub(r"[^A-Za-z0-9._-]", "_", run_key) + ".json")


def write_fenced(path: Path, data: bytes, fencing_token: int) -> None:
    """Atomically replace `path` with `data`, unless a higher token than ours wrote it first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token_file = path.with_name(path.name + ".token")
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one writer at a time checks and writes
        seen = int(token_file.read_text()) if token_file.exists() else 0
        if fencing_token < seen:
            raise StaleAttempt(f"token {fencing_token} is older than {seen}: not writing {path.name}")
        # Record our token before the output: if we die between the two, an older attempt is
        # still refused, and a newer one (higher token) still passes.
        _atomic_write(token_file, str(fencing_token).encode())
        _atomic_write(path, data)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def build_report(ctx: RunContext) -> None:
    payload = ctx.payload or {}
    report = {
        "report": payload.get("report", "sales"),
        "slot": ctx.scheduled_at.isoformat(),
        "attempt": ctx.attempt,
        "fencing_token": ctx.fencing_token,
        "rows": [],  # the actual work goes here; check ctx.cancelled between steps
    }
    if ctx.is_cancelled():
        return  # the outcome is decided by the cancellation, nothing written
    path = output_path(Path(payload.get("out_dir", DEFAULT_OUT_DIR)), ctx.run_key)
    write_fenced(path, json.dumps(report, indent=2).encode(), ctx.fencing_token)


HANDLERS = {"reports.build": build_report}


if __name__ == "__main__":
    import logging
    from datetime import datetime, timezone

    from worker.testing import run_handler

    logging.getLogger("raftcron").setLevel(logging.ERROR)  # the failed attempt is expected here
    JOB_ID = "reports.nightly-sales"

    out_dir = tempfile.mkdtemp(prefix="reports-")
    payload = {"report": "sales", "out_dir": out_dir}
    slot = datetime(2026, 1, 1, 5, 15, tzinfo=timezone.utc)
    newer = run_handler(build_report, payload, job_id=JOB_ID, scheduled_at=slot, attempt=2, fencing_token=9)
    stale = run_handler(build_report, payload, job_id=JOB_ID, scheduled_at=slot, attempt=1, fencing_token=5)
    print(f"attempt 2 (token 9): {newer.kind}")
    print(f"attempt 1 (token 5), arriving late: {stale.kind}: {stale.error}")
    for name in sorted(os.listdir(out_dir)):
        print(f"  {out_dir}/{name}")
