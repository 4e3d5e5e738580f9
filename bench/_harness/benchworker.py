"""A worker process for the benchmarks: the SDK's `worker.Worker` with bench handlers, counting.

    python -m bench._harness.benchworker --cluster A,B,C --worker-id w1 --concurrency 64 \
        --targets bench.noop --stats out/w1.json --max-life 300

Handlers: `bench.noop` returns at once; `bench.sleep` waits `payload.sleep_s` (cooperatively);
`bench.hold` waits `payload.hold_s` or until cancelled (a long-running run that is heartbeated).
It records, with wall-clock times, each handler start, each Complete the cluster answered OK, and
each Heartbeat answer (leases extended), by wrapping the SDK's calls (on its session, or unary),
and each Lease call, or, on a session, each push of grants (from the oldest credit it used). The
stats file is rewritten every second and at exit. It stops by itself after --max-life seconds; SIGTERM drains.
Logging is at WARNING (the SDK logs every completion at INFO).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from pathlib import Path

from worker import Worker
from worker.api.v1 import worker_pb2


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.handler_starts: list[float] = []
        self.completes_ok: list[float] = []
        self.completes_other = 0
        self.complete_errors = 0
        self.heartbeats: list[tuple[float, float, int, int]] = []  # sent, answered, ok, total
        self.heartbeat_errors = 0
        self.leases: list[tuple[float, float, int, int]] = []  # Lease call sent, answered, asked, granted
        self.written = dict.fromkeys(APPENDED, 0)  # of each list, the entries already dumped

    def dump(self, path: Path, extra: dict) -> None:
        """Append what is new since the last dump, as one JSON line (`read_stats` merges them).
        Rewriting every list each second cost a 512-slot worker a share of a core that grew with
        each repetition, taken from the cluster it measures."""
        with self.lock:
            record = {name: getattr(self, name)[self.written[name] :] for name in APPENDED}
            self.written = {name: len(getattr(self, name)) for name in APPENDED}
            record.update(
                completes_other=self.completes_other,
                complete_errors=self.complete_errors,
                heartbeat_errors=self.heartbeat_errors,
                **extra,
            )
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


# The lists a dump appends to; every other key is the latest value.
APPENDED = ("handler_starts", "completes_ok", "heartbeats", "leases")


def read_stats(path: Path) -> dict:
    """One worker's stats so far: its dumps merged (a last line still being written is left for
    the next read)."""
    merged: dict = {name: [] for name in APPENDED}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # still being written (or cut short by the worker's death)
            continue
        for key, value in record.items():
            if key in APPENDED:
                merged[key].extend(value)
            else:
                merged[key] = value
    return merged


def noop_in_process(ctx) -> None:
    """bench.noop under process isolation: a module-level function a handler process imports."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--targets", default="bench.noop")
    parser.add_argument("--stats", required=True)
    parser.add_argument("--max-life", type=float, default=600.0)
    parser.add_argument("--lease-wait", type=float, default=2.0)
    parser.add_argument(
        "--transport", default="unary", help="unary (the worker's default), or stream (a session when offered)"
    )
    parser.add_argument(
        "--isolation", default="thread", help="thread, or process: bench.noop runs in handler processes"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stats = Stats()
    stats_path = Path(args.stats)

    def noop(ctx) -> None:
        with stats.lock:
            stats.handler_starts.append(time.time())

    def sleep(ctx) -> None:
        with stats.lock:
            stats.handler_starts.append(time.time())
        ctx.cancelled.wait(float((ctx.payload or {}).get("sleep_s", 0.1)))

    def hold(ctx) -> None:
        with stats.lock:
            stats.handler_starts.append(time.time())
        ctx.cancelled.wait(float((ctx.payload or {}).get("hold_s", 60.0)))

    handlers = {"bench.noop": noop, "bench.sleep": sleep, "bench.hold": hold}
    targets = [t for t in args.targets.split(",") if t]
    worker = Worker(
        args.cluster,
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        lease_wait_s=args.lease_wait,
        drain_timeout_s=5.0,
        complete_retry_s=30.0,
        isolation=args.isolation,
        stream=args.transport == "stream",
    )
    for target in targets:
        if target == "bench.noop" and args.isolation == "process":
            worker.add_handler(target, noop_in_process)  # counted by its completions only
        else:
            worker.add_handler(target, handlers[target], isolation="thread")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def pushed(oldest_credit_at: float, now: float, credits: int, granted: int) -> None:
        with stats.lock:
            stats.leases.append((oldest_credit_at, now, credits, granted))

    worker._on_session_grants = pushed
    worker.start()

    client = worker._calls  # the SDK's heartbeats and completions (on its session, or unary)
    real_complete, real_complete_many, real_heartbeat = client.complete, client.complete_many, client.heartbeat

    def counted(call, results_of):
        """Wrap a completion call: count its errors, and each answer OK or not as it arrives."""

        def wrapped(request=None, /, **kwargs):
            try:
                response = call(request, **kwargs)
            except Exception:
                with stats.lock:
                    stats.complete_errors += 1
                raise
            now = time.time()
            with stats.lock:
                for result in results_of(response):
                    if result.outcome == worker_pb2.OK:
                        stats.completes_ok.append(now)
                    else:
                        stats.completes_other += 1
            return response

        return wrapped

    complete = counted(real_complete, lambda response: [response])
    complete_many = counted(real_complete_many, lambda response: response.results)

    def heartbeat(request=None, /, **kwargs):
        sent = time.time()
        try:
            response = real_heartbeat(request, **kwargs)
        except Exception:
            with stats.lock:
                stats.heartbeat_errors += 1
            raise
        ok = sum(1 for r in response.results if r.outcome == worker_pb2.OK)
        with stats.lock:
            stats.heartbeats.append((sent, time.time(), ok, len(response.results)))
        return response

    client.complete, client.complete_many, client.heartbeat = complete, complete_many, heartbeat
    lease_client = worker._lease_client  # the SDK's client for Lease calls
    real_lease = lease_client.lease

    def lease(request=None, /, **kwargs):
        sent = time.time()
        response = real_lease(request, **kwargs)
        with stats.lock:
            stats.leases.append((sent, time.time(), request.max_runs, len(response.leases)))
        return response

    lease_client.lease = lease
    Path(str(stats_path.with_suffix("")) + ".started").write_text(str(time.time()))
    extra = {"worker_id": args.worker_id, "concurrency": args.concurrency}
    stop_at = time.monotonic() + args.max_life
    try:
        while not stop.wait(1.0) and time.monotonic() < stop_at:
            stats.dump(stats_path, {**extra, "active": worker.active_runs})
    finally:
        worker.stop(timeout_s=5.0)
        stats.dump(stats_path, {**extra, "active": worker.active_runs, "stopped_at": time.time()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
