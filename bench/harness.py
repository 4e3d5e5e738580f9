"""Cluster-side helpers shared by the benchmarks that start real nodes and workers.

- `bench_cluster(...)`: a started LocalCluster with a leader, in a context manager that always
  stops it and then checks it (replica digests compared before the stop, node logs scanned for
  CRITICAL and pysyncobj's "truncating already-applied" line after it).
- `apply_specs`, `list_runs`: chunked ApplyJobs and paginated ListRuns.
- `StatusPoller`: a thread polling one node's Status at a fixed period, remembering when each
  answer was sent and received, so "when was index I applied on the leader" can be read back.
- `WorkerFleet`: worker processes (`python -m bench.benchworker`) started and always stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

import scheduler
from bench.common import (
    code_revision,
    load_average,
    machine_info,
    raft_sync_mode,
    scan_logs,
    tick_stalls,
    with_raft_sync_mode,
)
from scheduler.core.model import JobSpec, Resource
from scheduler.local import LocalCluster
from scheduler.replication.offline import common_digests
from scheduler.rpc.convert import resource_to_pb, spec_to_pb, timestamp_us

ROOT = Path(__file__).resolve().parents[1]
JOBS_PER_APPLY = 2_000  # an ApplyJobs entry is ~410 B per job; entries are capped at 1 MiB


def finish_in_process(name: str, report: dict) -> int:
    """`finish` for a benchmark without a cluster: write the JSON, list the failed checks; 1 if any."""
    from bench.common import write_json

    path = write_json(f"{name}.json", report)
    log(f"wrote {path}")
    for problem in report["problems"]:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if report["problems"] else 0


def finish(name: str, report: dict, root, interrupted: bool, keep: bool) -> int:
    """Write the JSON, list the failed checks, keep the run's data when something went wrong
    (or when asked to), and give the exit status: 130 interrupted, 1 failed, 0 clean."""
    from bench.common import write_json

    path = write_json(f"{name}.json", report)
    log(f"wrote {path}")
    problems = report["problems"]
    if problems:
        print("\nFAILED checks:", *(f"  - {p}" for p in problems), sep="\n", file=sys.stderr)
    if problems or interrupted or keep:
        log(f"data directories and logs kept under {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 130 if interrupted else (1 if problems else 0)


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def code_info() -> dict:
    return code_revision(scheduler.__file__)


def bench_parser(name: str, doc: str, port_base: int | None = None, keep: bool = True,
                 quick_help: str | None = None) -> argparse.ArgumentParser:
    """The options every benchmark shares: --quick, and for those that start clusters --port-base
    (and --keep); each benchmark adds its own after."""
    parser = argparse.ArgumentParser(prog=f"python -m bench {name}", description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help or "smoke mode: smaller and fewer repetitions")
    if port_base is not None:
        parser.add_argument("--port-base", type=int, default=port_base,
                            help=f"first loopback port base (default {port_base})")
    if keep:
        parser.add_argument("--keep", action="store_true", help="keep the data directories (kept anyway on failure)")
    return parser


def new_report(name: str, quick: bool, **fields) -> dict:
    """The JSON report every benchmark starts from: what ran, where, on which code; then its own fields."""
    return {
        "benchmark": name,
        "mode": "quick" if quick else "full",
        "command": f"python -m bench {name}" + (" --quick" if quick else ""),
        "machine": machine_info(),
        "code": code_info(),
        "problems": [],
        **fields,
    }


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


def apply_specs(client, specs: list[JobSpec], resources: list[Resource] = ()) -> float:
    """Apply in chunks (resources with the first); the seconds it took. A chunk caught by a
    leader change (a fresh cluster's first elections can race) is retried with its request id."""
    start = time.monotonic()
    run_tag = f"{os.getpid()}-{time.time_ns()}"
    for first in range(0, max(1, len(specs)), JOBS_PER_APPLY):
        chunk = specs[first : first + JOBS_PER_APPLY]
        extra = {"resources": [resource_to_pb(r) for r in resources]} if resources and first == 0 else {}
        request_id = f"bench-apply-{run_tag}-{first}"
        for attempt in range(1, APPLY_ATTEMPTS + 1):
            try:
                response = client.apply_jobs(jobs=[spec_to_pb(s) for s in chunk], author="bench",
                                             request_id=request_id, **extra)
                break
            except grpc.RpcError as exc:
                if exc.code() not in APPLY_RETRY_CODES or attempt == APPLY_ATTEMPTS:
                    raise
                log(f"apply: {exc.code().name} ({exc.details()}); retrying with the same request id")
                time.sleep(0.5 * attempt)
        if response.errors:
            raise RuntimeError(f"apply rejected: {list(response.errors)[:3]}")
    return time.monotonic() - start


def list_runs(client, since: datetime | None = None, until: datetime | None = None, page_size: int = 1000,
              job_id: str = "") -> list:
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


# -- status polling -------------------------------------------------------------------------------
class StatusPoller:
    """Polls one node's Status every `period_s` in a thread; keeps (sent, received, status) samples."""

    def __init__(self, cluster: LocalCluster, node_id: str, period_s: float = 0.005, max_s: float = 900.0) -> None:
        self.node_id = node_id
        self._client = cluster.client(node_id, timeout_s=2.0)
        self._address = cluster.member(node_id).grpc_address
        self._period_s = period_s
        self._max_s = max_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.samples: list[tuple[float, float, object]] = []
        self.errors = 0
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"poll-{node_id}")

    def start(self) -> StatusPoller:
        self._thread.start()
        return self

    def _loop(self) -> None:
        stop_at = time.monotonic() + self._max_s
        while not self._stop.is_set() and time.monotonic() < stop_at:
            sent = time.time()
            try:
                status = self._client.status(address=self._address)
            except grpc.RpcError:
                self.errors += 1
                self._stop.wait(0.05)
                continue
            except ValueError:  # closed
                return
            with self._lock:
                self.samples.append((sent, time.time(), status))
            left = self._period_s - (time.time() - sent)
            if left > 0:
                self._stop.wait(left)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._client.close()

    def snapshot(self) -> list[tuple[float, float, object]]:
        with self._lock:
            return list(self.samples)

    def time_when(self, predicate) -> float | None:
        """Estimated wall time at which `predicate(status)` first held: the midpoint between the
        last poll sent that did not see it and the answer of the first that did."""
        previous_sent = None
        for sent, received, status in self.snapshot():
            if predicate(status):
                return received if previous_sent is None else (previous_sent + received) / 2
            previous_sent = sent
        return None

    def applied_times(self) -> list[tuple[float, int]]:
        """(estimated time, applied_index) steps, for `time_of_index`."""
        steps, previous_sent, last = [], None, -1
        for sent, received, status in self.snapshot():
            if status.applied_index > last:
                when = received if previous_sent is None else (previous_sent + received) / 2
                steps.append((when, status.applied_index))
                last = status.applied_index
            previous_sent = sent
        return steps

    def max_gap_s(self, start: float, end: float) -> float:
        """The longest interval between two answers received within [start, end]."""
        times = [r for _, r, _ in self.snapshot() if start <= r <= end]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def index_times(steps: list[tuple[float, int]]):
    """A function: log index -> estimated time the polled node had applied it (None if never)."""
    import bisect

    indexes = [i for _, i in steps]

    def when(index: int) -> float | None:
        pos = bisect.bisect_left(indexes, index)
        return steps[pos][0] if pos < len(steps) else None

    return when


# -- the cluster ----------------------------------------------------------------------------------
def _node_samples(cluster: LocalCluster, node_id: str):
    """Every sample of one node's /metrics (the cluster started with `metrics`), from one scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(cluster.member(node_id).metrics_url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        yield from family.samples


def node_counters(cluster: LocalCluster, node_id: str, names: tuple[str, ...]) -> dict[str, float]:
    """Counters of one node's /metrics, as "name{label=value,...}"."""
    found = {}
    for sample in _node_samples(cluster, node_id):
        if sample.name.removesuffix("_total") in names and sample.name.endswith("_total"):
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name.removesuffix('_total')}{{{labels}}}"] = sample.value
    return found


def node_histograms(cluster: LocalCluster, node_id: str, name: str, by_label: str) -> dict[str, dict[float, float]]:
    """The histograms `name` of one node's /metrics, by their `by_label` value: upper bound ->
    cumulative count."""
    found: dict[str, dict[float, float]] = {}
    for sample in _node_samples(cluster, node_id):
        if sample.name == f"{name}_bucket":
            found.setdefault(sample.labels.get(by_label, ""), {})[float(sample.labels["le"])] = sample.value
    return found


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile `q` of the observations between two scrapes."""
    bounds = sorted(after)
    if not bounds:
        return None
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0)
    if total <= 0:
        return None
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= q * total:
            return bound
    return bounds[-1]


@contextlib.contextmanager
def bench_cluster(root: Path, port_base: int, overrides: dict | None = None, out: dict | None = None,
                  name: str = "cluster", check: bool = True, metrics: bool = False):
    """Start a 3-node LocalCluster, yield it; compare digests (when `check`), stop, scan logs.

    Problems are appended to out["problems"]; the digest goes to out["digest"].
    """
    out = out if out is not None else {}
    out.setdefault("problems", [])
    out["raft_sync"] = raft_sync_mode()
    cluster = LocalCluster(root / f"{name}-{port_base}", nodes=3, port_base=port_base,
                           overrides=with_raft_sync_mode(overrides),
                           metrics=metrics)
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
            _compare_offline(cluster, out, name)
        if check and not converged_checked:
            out.setdefault("notes", []).append(f"{name}: digests not compared (the run ended early)")
        logs = [m.log_path for m in cluster.members]
        bad = scan_logs(logs)
        out["bad_log_lines"] = bad
        out["tick_stalls"] = tick_stalls(logs)
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
        out["data_dir"] = str(cluster.data_dir)


def _compare_offline(cluster: LocalCluster, out: dict, name: str) -> None:
    raft_dirs = {m.node_id: m.config_path.parent / "raft" for m in cluster.members}
    try:
        index, digests = common_digests(raft_dirs)
    except (OSError, ValueError) as exc:
        out["problems"].append(f"{name}: live digests never agreed ({out.get('live_digests')}) and the "
                               f"stopped nodes could not be compared: {exc}")
        return
    out["offline_digest_index"] = index
    if len(set(digests.values())) == 1:
        out["digest"] = next(iter(digests.values()))
        log(f"{name}: live digests kept moving; the stopped replicas agree at index {index}: {out['digest'][:16]}...")
    else:
        out["problems"].append(f"{name}: replica digests differ at index {index}: {digests}")


# -- workers --------------------------------------------------------------------------------------
class WorkerFleet:
    """Worker processes running bench.benchworker; always stop() them (a finally block)."""

    def __init__(self, cluster: LocalCluster, out_dir: Path, name: str = "w") -> None:
        self.cluster = cluster
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.processes: list[tuple[str, subprocess.Popen]] = []

    def start(self, count: int, concurrency: int, targets: str = "bench.noop", max_life_s: float = 600.0,
              lease_wait_s: float = 2.0, cluster_arg: str | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        for i in range(count):
            worker_id = f"{self.name}{len(self.processes) + 1}"
            log_file = open(self.out_dir / f"{worker_id}.log", "ab")
            try:
                process = subprocess.Popen(
                    [sys.executable, "-m", "bench.benchworker", "--cluster", cluster_arg or self.cluster.cluster_arg,
                     "--worker-id", worker_id, "--concurrency", str(concurrency), "--targets", targets,
                     "--stats", str(self.out_dir / f"{worker_id}.json"), "--max-life", str(max_life_s),
                     "--lease-wait", str(lease_wait_s)],
                    env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, cwd=str(ROOT),
                )
            finally:
                log_file.close()
            self.processes.append((worker_id, process))

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Wait until every worker wrote its 'started' marker (imports done, leasing)."""
        deadline = time.monotonic() + timeout_s
        for worker_id, process in self.processes:
            marker = self.out_dir / f"{worker_id}.started"
            while not marker.exists():
                if process.poll() is not None:
                    raise RuntimeError(f"worker {worker_id} exited ({process.returncode}); see {self.out_dir}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {worker_id} not started after {timeout_s}s")
                time.sleep(0.05)

    def stop(self, drain_s: float = 15.0) -> None:
        """SIGTERM (the SDK drains), then SIGKILL what is left."""
        for _, process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + drain_s
        for _, process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)

    def stats(self) -> list[dict]:
        found = []
        for worker_id, _ in self.processes:
            path = self.out_dir / f"{worker_id}.json"
            if path.exists():
                with contextlib.suppress(ValueError):
                    found.append(json.loads(path.read_text()))
        return found

    def completed(self, stats: list[dict] | None = None) -> int:
        """Outcomes the workers got answered OK so far (from `stats`, default read afresh)."""
        return sum(len(worker["completes_ok"]) for worker in (self.stats() if stats is None else stats))

    def log_problems(self) -> list[str]:
        return scan_logs([self.out_dir / f"{w}.log" for w, _ in self.processes], markers=("Traceback", "CRITICAL"))


def per_second(times: list[float], origin: float) -> dict[int, int]:
    """Counts per whole second since `origin`."""
    counts: Counter = Counter(int((t - origin) // 1) for t in times)
    return dict(sorted(counts.items()))


def max_in_window(times: list[float], window_s: float = 1.0) -> int:
    """The most events within any half-open window of `window_s` (sliding, at every event)."""
    ordered = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(ordered):
        while ordered[lo] <= t - window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def max_concurrent(intervals: list[tuple[float, float]]) -> int:
    """The most intervals [start, end) open at once (an end before a start at the same instant)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def load_note() -> list[float] | None:
    return load_average()
