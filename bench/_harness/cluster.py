"""Talking to a cluster of real nodes in a benchmark.

- `bench_cluster(...)`: a started LocalCluster with a leader, in a context manager that always
  stops it and then checks it (replica digests compared before the stop, node logs scanned for
  CRITICAL and pysyncobj's "truncating already-applied" line after it); `check_node_logs` is
  that scan alone, for a benchmark that runs its own LocalCluster (claims).
- `apply_specs`, `list_runs`: chunked ApplyJobs and paginated ListRuns, and the timestamps and
  schedules they take.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from bench._harness.common import raft_sync_mode, scan_logs, tick_stalls, with_raft_sync_mode
from bench._harness.report import log
from scheduler.core.model import JobSpec, Resource
from scheduler.local import LocalCluster
from scheduler.replication.offline import common_digests
from scheduler.rpc.convert import resource_to_pb, spec_to_pb, timestamp_us

JOBS_PER_APPLY = 2_000  # an ApplyJobs entry is ~410 B per job; entries are capped at 1 MiB


def ts(value: datetime | float) -> Timestamp:
    out = Timestamp()
    if isinstance(value, datetime):
        out.FromDatetime(value)
    else:
        out.FromNanoseconds(int(value * 1e9))
    return out


def ts_s(t: Timestamp) -> float:
    """A protobuf Timestamp as float seconds since the epoch (0.0 when unset)."""
    return timestamp_us(t) / 1e6


def yearly_schedule(at: datetime) -> str:
    """A 6-field schedule (seconds first) that fires once a year, at `at` (UTC)."""
    return f"{at.second} {at.minute} {at.hour} {at.day} {at.month} *"


def instant_ahead(seconds: float) -> datetime:
    """A whole UTC second at least `seconds` from now."""
    return datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=int(seconds) + 1)


# Answers that say "the outcome is unknown or the leader changed: retry with the same request id".
APPLY_RETRY_CODES = (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
APPLY_ATTEMPTS = 5


def apply_specs(client, specs: list[JobSpec], resources: list[Resource] = (), callers: int = 1) -> float:
    """Apply in chunks (resources with the first); the seconds it took. A chunk caught by a
    leader change (a fresh cluster's first elections can race) is retried with its request id.

    `callers` chunks are in flight at once, as several clients of one platform would send them:
    one caller waits a commit per chunk and leaves the leader's second core idle."""
    start = time.monotonic()
    run_tag = f"{os.getpid()}-{time.time_ns()}"

    def send(first: int) -> None:
        chunk = specs[first : first + JOBS_PER_APPLY]
        extra = {"resources": [resource_to_pb(r) for r in resources]} if resources and first == 0 else {}
        request_id = f"bench-apply-{run_tag}-{first}"
        for attempt in range(1, APPLY_ATTEMPTS + 1):
            try:
                response = client.apply_jobs(
                    jobs=[spec_to_pb(s) for s in chunk], author="bench", request_id=request_id, **extra
                )
                break
            except grpc.RpcError as exc:
                # A fresh cluster refuses newer job syntax until its leader has raised the log format.
                raising = exc.code() == grpc.StatusCode.FAILED_PRECONDITION and "reads this yet" in (
                    exc.details() or ""
                )
                if (exc.code() not in APPLY_RETRY_CODES and not raising) or attempt == APPLY_ATTEMPTS:
                    raise
                log(f"apply: {exc.code().name} ({exc.details()}); retrying with the same request id")
                time.sleep(0.5 * attempt)
        if response.errors:
            raise RuntimeError(f"apply rejected: {list(response.errors)[:3]}")

    firsts = list(range(0, max(1, len(specs)), JOBS_PER_APPLY))
    if resources and firsts:
        send(firsts.pop(0))  # the resources exist before any job that uses them
    if callers <= 1:
        for first in firsts:
            send(first)
    else:
        with ThreadPoolExecutor(max_workers=callers, thread_name_prefix="apply") as pool:
            for future in [pool.submit(send, first) for first in firsts]:
                future.result()
    return time.monotonic() - start


def list_runs(
    client, since: datetime | None = None, until: datetime | None = None, page_size: int = 1000, job_id: str = ""
) -> list:
    fields: dict = {"page_size": page_size}
    if since is not None:
        fields["since"] = ts(since)
    if until is not None:
        fields["until"] = ts(until)
    if job_id:
        fields["job_id"] = job_id
    runs, token = [], ""
    for _ in range(100_000):
        page = client.list_runs(page_token=token, **fields)
        runs.extend(page.runs)
        token = page.next_page_token
        if not token:
            break
    return runs


@contextlib.contextmanager
def bench_cluster(
    root: Path,
    port_base: int,
    overrides: dict | None = None,
    out: dict | None = None,
    name: str = "cluster",
    check: bool = True,
    metrics: bool = False,
):
    """Start a 3-node LocalCluster, yield it; compare digests (when `check`), stop, scan logs.

    Problems are appended to out["problems"]; the digest goes to out["digest"].
    """
    out = out if out is not None else {}
    out.setdefault("problems", [])
    out["raft_sync"] = raft_sync_mode()
    cluster = LocalCluster(
        root / f"{name}-{port_base}",
        nodes=3,
        port_base=port_base,
        overrides=with_raft_sync_mode(overrides),
        metrics=metrics,
    )
    converged_checked = False
    try:
        cluster.start()
        out["leader_at_start"] = cluster.wait_for_leader(60)
        yield cluster
        if check:
            converged_checked = True
            try:
                out["digest"] = cluster.wait_converged(timeout_s=60.0)
                log(f"{name}: replicas converged to digest {out['digest'][:16]}...")
            except TimeoutError:
                # A large state that keeps moving (time ticks, jobs firing every second) never
                # sits at one index on every node while each digest takes seconds: compare the
                # stopped nodes' directories at an index they all hold instead (below).
                out["digest"] = None
                out["live_digests"] = cluster.digests()
    finally:
        cluster.stop()
        if check and converged_checked and out.get("digest") is None:
            compare_offline(cluster, out, name)
        if check and not converged_checked:
            out.setdefault("notes", []).append(f"{name}: digests not compared (the run ended early)")
        logs = [m.log_path for m in cluster.members]
        out["tick_stalls"] = tick_stalls(logs)
        check_node_logs(logs, out, name)
        out["data_dir"] = str(cluster.data_dir)


def check_node_logs(logs: list[Path], out: dict, name: str) -> None:
    """A bad line in any node log is a problem (out["problems"]); warnings and errors are counted."""
    bad = scan_logs(logs)
    out["bad_log_lines"] = bad
    if bad:
        out["problems"].append(f"{name}: node logs contain {len(bad)} bad line(s): " + " | ".join(bad[:3]))
    warnings: Counter = Counter()
    for path in logs:
        if path.exists():
            for text in path.read_text(errors="replace").splitlines():
                if " WARNING " in text or " ERROR " in text:
                    warnings[text.split(": ", 1)[-1][:100]] += 1
    out["warnings"] = dict(warnings.most_common(10))
    out["warning_count"] = sum(warnings.values())


def compare_offline(cluster: LocalCluster, out: dict, name: str) -> None:
    """The stopped replicas' digests at an index they all hold, for a state that kept moving while
    they ran (time ticks, queued runs): out["digest"], or a problem when they differ."""
    raft_dirs = {m.node_id: m.config_path.parent / "raft" for m in cluster.members}
    try:
        index, digests = common_digests(raft_dirs)
    except (OSError, ValueError) as exc:
        out["problems"].append(
            f"{name}: live digests never agreed ({out.get('live_digests')}) and the "
            f"stopped nodes could not be compared: {exc}"
        )
        return
    out["offline_digest_index"] = index
    if len(set(digests.values())) == 1:
        out["digest"] = next(iter(digests.values()))
        log(f"{name}: live digests kept moving; the stopped replicas agree at index {index}: {out['digest'][:16]}...")
    else:
        out["problems"].append(f"{name}: replica digests differ at index {index}: {digests}")
